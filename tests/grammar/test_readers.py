"""The GBNF and Lark readers: exact IR for small grammars of our own, one-line refusals with their
line and column, and GBNF texts rendered from random IR reading back as the same IR."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tokfst_cli.automata.utf8 import ranges_of_ranges
from tokfst_cli.errors import InputError
from tokfst_cli.grammar.gbnf import ANY, read_gbnf
from tokfst_cli.grammar.ir import EMPTY, Alt, Chars, Expr, Regex, Repeat, Seq, Text, alt, seq
from tokfst_cli.grammar.ir import Ref as R
from tokfst_cli.grammar.lark_reader import IGNORE, IGNORE_START, braces, read_lark


def root(body: str) -> Expr:
    """The root rule of ``root ::= body`` (references to x, y and z defined)."""
    return read_gbnf(f'root ::= {body}\nx ::= "x"\ny ::= "y"\nz ::= "z"\n').rules["root"]


# ---- GBNF: every construct --------------------------------------------------------------------

@pytest.mark.parametrize("body, want", [
    ('"ab"', Text("ab")),
    ('""', Text("")),
    ('"a" "b"', Seq((Text("a"), Text("b")))),
    ('"a"|"b" | ', Alt((Text("a"), Text("b"), EMPTY))),
    ('| "a"', Alt((EMPTY, Text("a")))),
    ("x", R("x", 1)),
    ("x y-z", None),  # 'y-z' is one name: undefined (checked below)
    ("(x y) z", Seq((R("x", 1), R("y", 1), R("z", 1)))),
    ("(x | y) z", Seq((Alt((R("x", 1), R("y", 1))), R("z", 1)))),
    ("()", EMPTY),
    ("( x )", R("x", 1)),
    ("x*", Repeat(R("x", 1), 0, None)),
    ("x+", Repeat(R("x", 1), 1, None)),
    ("x?", Repeat(R("x", 1), 0, 1)),
    ("x{3}", Repeat(R("x", 1), 3, 3)),
    ("x{2,}", Repeat(R("x", 1), 2, None)),
    ("x{2,5}", Repeat(R("x", 1), 2, 5)),
    ("x{ 0 , 5 }", Repeat(R("x", 1), 0, 5)),
    ("x{,4}", Repeat(R("x", 1), 0, 4)),
    ("x{,}", Repeat(R("x", 1), 0, None)),
    ("x{0}", Repeat(R("x", 1), 0, 0)),
    ("x*?", Repeat(Repeat(R("x", 1), 0, None), 0, 1)),
    ('("a" y)+', Repeat(Seq((Text("a"), R("y", 1))), 1, None)),
    (".", Chars(ANY)),
    ("[abc]", Chars(((97, 99),))),
    ("[a-z0-9_]", Chars(((48, 57), (95, 95), (97, 122)))),
    ("[a-fc-k]", Chars(((97, 107),))),
    ("[^\\n\"]", Chars(((10, 10), (34, 34)), True)),
    ("[a-]", Chars(((45, 45), (97, 97)))),
    ("[-a]", Chars(((45, 45), (97, 97)))),
    ("[a\\-z]", Chars(((45, 45), (97, 97), (122, 122)))),
    ("[\\x00-\\x1F\\u00e9]", Chars(((0, 31), (0xE9, 0xE9)))),
    ("[^]", Chars((), True)),
    ("[a^]", Chars(((94, 94), (97, 97)))),
    ("[[]", Chars(((91, 91),))),
    ('"a" # a comment\n  "b" # another', Seq((Text("a"), Text("b")))),
    ('"#" "[" "]" "|"', Seq((Text("#"), Text("["), Text("]"), Text("|")))),
])
def test_every_construct_reads_to_its_ir(body, want):
    if want is None:
        with pytest.raises(InputError, match="rule 'y-z' used at line 1 is not defined"):
            root(body)
    else:
        assert root(body) == want


@pytest.mark.parametrize("escape, char", [
    ("\\n", "\n"), ("\\r", "\r"), ("\\t", "\t"), ("\\\\", "\\"), ('\\"', '"'), ("\\'", "'"), ("\\[", "["),
    ("\\]", "]"), ("\\-", "-"), ("\\x41", "A"), ("\\xe9", "é"), ("\\u20AC", "€"), ("\\U0001F600", "😀"),
    ("\\U0010FFFF", "\U0010ffff"),
])
def test_every_escape_in_strings_and_classes(escape, char):
    assert root(f'"<{escape}>"') == Text(f"<{char}>")
    assert root(f"[{escape}]") == Chars(((ord(char), ord(char)),))


def test_rules_lines_references_and_order():
    g = read_gbnf('# header\n\nroot ::= item\n  ("," item)*\nitem ::=\n  [0-9]+ | "-" item\n', "n.gbnf")
    assert list(g.rules) == ["root", "item"] and g.start == "root" and g.source == "n.gbnf"
    assert g.lines == {"root": 3, "item": 5}
    assert [r.line for r in g.refs("root")] == [3, 4] and [r.line for r in g.refs("item")] == [6]


# ---- GBNF: grammars of our own ----------------------------------------------------------------

JSONISH = r'''
root   ::= value
value  ::= object | array | string | number | "true" | "false" | "null"
object ::= "{" ws ( member ( "," ws member )* )? "}"
member ::= string ws ":" ws value ws
array  ::= "[" ws ( value ws ( "," ws value ws )* )? "]"
string ::= "\"" ( [^"\\\x00-\x1f] | "\\" ["\\/bfnrt] | "\\u" [0-9a-fA-F]{4} )* "\""
number ::= "-"? ( "0" | [1-9] [0-9]{0,15} ) ( "." [0-9]+ )?
ws     ::= [ \t\n]*
'''

ARITH = '''
root ::= expr
expr ::= term (("+" | "-") term)*
term ::= factor (("*" | "/") factor)*
factor ::= [0-9]+ | "(" expr ")" | "-" factor
'''

CSV = r'''
root ::= header ("\r"? "\n" row)* "\n"?
header ::= field ("," field){0,9}
row ::= field ("," field){0,9}
field ::= [^,"\r\n]* | "\"" ([^"] | "\"\"")* "\""
'''

CHAT = r'''
root ::= turn{1,4} assistant-open
turn ::= "<|user|>\n" line+ "<|end|>\n" assistant-open line+ "<|end|>\n"
assistant-open ::= "<|assistant|>\n"
line ::= [^<\n] [^\n]{0,80} "\n"
'''

SEXPR = '''
root ::= sexpr
sexpr ::= atom | "(" ws (sexpr (ws1 sexpr)*)? ws ")"
atom ::= [a-zA-Z_+*/<>=!?-] [a-zA-Z0-9_+*/<>=!?-]* | [0-9]+
ws ::= [ \\t\\n]*
ws1 ::= [ \\t\\n]+
'''


def test_a_json_like_grammar():
    g = read_gbnf(JSONISH, "json.gbnf")
    assert list(g.rules) == ["root", "value", "object", "member", "array", "string", "number", "ws"]
    assert g.rules["ws"] == Repeat(Chars(((9, 10), (32, 32))), 0, None)
    assert g.rules["number"] == Seq((
        Repeat(Text("-"), 0, 1),
        Alt((Text("0"), Seq((Chars(((49, 57),)), Repeat(Chars(((48, 57),)), 0, 15))))),
        Repeat(Seq((Text("."), Repeat(Chars(((48, 57),)), 1, None))), 0, 1)))
    string = g.rules["string"]
    assert string.items[0] == Text('"') and string.items[2] == Text('"')
    assert string.items[1].item.items[0] == Chars(((0, 31), (34, 34), (92, 92)), True)
    assert string.items[1].item.items[2] == Seq((Text("\\u"), Repeat(Chars(((48, 57), (65, 70), (97, 102))), 4, 4)))


def test_an_arithmetic_grammar():
    g = read_gbnf(ARITH)
    digits = Repeat(Chars(((48, 57),)), 1, None)
    assert g.rules["expr"] == Seq((R("term", 3), Repeat(Seq((Alt((Text("+"), Text("-"))), R("term", 3))), 0, None)))
    assert g.rules["factor"] == Alt((digits, Seq((Text("("), R("expr", 5), Text(")"))),
                                     Seq((Text("-"), R("factor", 5)))))


def test_a_csv_grammar():
    g = read_gbnf(CSV)
    assert g.rules["header"] == Seq((R("field", 3), Repeat(Seq((Text(","), R("field", 3))), 0, 9)))
    assert g.rules["field"] == Alt((
        Repeat(Chars(((10, 10), (13, 13), (34, 34), (44, 44)), True), 0, None),
        Seq((Text('"'), Repeat(Alt((Chars(((34, 34),), True), Text('""'))), 0, None), Text('"')))))


def test_a_chat_format():
    g = read_gbnf(CHAT)
    assert g.rules["root"] == Seq((Repeat(R("turn", 2), 1, 4), R("assistant-open", 2)))
    assert g.rules["assistant-open"] == Text("<|assistant|>\n")
    not_newline = Chars(((10, 10),), True)
    assert g.rules["line"] == Seq((Chars(((10, 10), (60, 60)), True), Repeat(not_newline, 0, 80), Text("\n")))


def test_s_expressions():
    g = read_gbnf(SEXPR)
    assert g.rules["sexpr"] == Alt((R("atom", 3), Seq((
        Text("("), R("ws", 3),
        Repeat(Seq((R("sexpr", 3), Repeat(Seq((R("ws1", 3), R("sexpr", 3))), 0, None))), 0, 1),
        R("ws", 3), Text(")")))))
    assert g.rules["ws1"] == Repeat(Chars(((9, 10), (32, 32))), 1, None)


# ---- GBNF: refusals ---------------------------------------------------------------------------

@pytest.mark.parametrize("text, message", [
    ('root = "a"\n', r"g\.gbnf line 1 column 1: 'root' is not followed by ::="),
    ('root ::= "a"\nrest = "b"\n', r"g\.gbnf line 2 column 6: unexpected character '='"),
    ('root ::= "a" @\n', r"g\.gbnf line 1 column 14: unexpected character '@'"),
    ('root ::= "a" )\n', r"g\.gbnf line 1 column 14: unexpected '\)'"),
    ('root ::= ("a"\n  "b"\n', r"g\.gbnf: the text ends inside a group"),
    ('root ::= "abc\n', r"g\.gbnf line 1 column 10: unterminated string literal"),
    ('root ::=\n  [abc\n', r"g\.gbnf line 2 column 3: unterminated character class"),
    ('root ::= item\n', r"g\.gbnf: rule 'item' used at line 1 is not defined"),
    ('item ::= "a"\n', r"g\.gbnf has no rule 'root'"),
    ("", r"g\.gbnf has no rule 'root'"),
    ('root ::= "a"\nx ::= "b"\nroot ::= "c"\n', r"g\.gbnf line 3: rule 'root' is defined twice \(first at line 1\)"),
    ('root ::= "a"{3,2}\n', r"g\.gbnf line 1 column 13: repetition \{3,2\} has its minimum 3 above its maximum 2"),
    ('root ::= "a"{x}\n', r"g\.gbnf line 1 column 13: invalid repetition \{x\}"),
    ('root ::= "a"{}\n', r"g\.gbnf line 1 column 13: invalid repetition \{\}"),
    ('root ::=\n "ok\\q"\n', r"g\.gbnf line 2 column 5: invalid escape '\\q' in a string literal"),
    ('root ::= "a\nb\\z"\n', r"g\.gbnf line 2 column 2: invalid escape '\\z'"),
    ('root ::= [\\x4]\n', r"g\.gbnf line 1 column 11: invalid escape '\\x4' in a character class"),
    ('root ::= "\\u12G4"\n', r"invalid escape '\\u12G4'"),
    ('root ::= "\\uD83D"\n', r"line 1 column 11: escape '\\uD83D' in a string literal is not a code point"),
    ('root ::= "\\U00110000"\n', r"escape '\\U00110000' .* is not a code point"),
    ('root ::= [z-a]\n', r"g\.gbnf line 1 column 10: character class '\[z-a\]' has the range 'z-a' running backwards"),
    ('root ::= "a" <[1234]>\n', r"g\.gbnf line 1 column 14: token references are not supported \(<\[1234\]>\)"),
    ('root ::= <think> "a"\n', r"line 1 column 10: token references are not supported \(<think>\)"),
    ('root ::= !<|end|>\n', r"line 1 column 10: token references are not supported \(!<\|end\|>\)"),
])
def test_gbnf_refusals_are_one_line_with_their_place(text, message):
    _refused(read_gbnf, text, "g.gbnf", message)


def _refused(read, text: str, source: str, message: str) -> None:
    """``read(text, source)`` raises a one-line InputError matching ``message``, with a fix, exit 2."""
    with pytest.raises(InputError) as e:
        read(text, source)
    assert re.search(message, str(e.value)), str(e.value)
    assert "\n" not in str(e.value) and e.value.fix and e.value.exit_code == 2


# ---- GBNF: random IR, rendered and read back --------------------------------------------------

def _char(c: str, special: str) -> str:
    if c in special:
        return "\\" + c
    if c == "\n":
        return "\\n"
    if c == "\t":
        return "\\t"
    if c == "\r":
        return "\\r"
    if 0x20 <= ord(c) < 0x7F and c not in "^":
        return c
    cp = ord(c)
    return f"\\x{cp:02x}" if cp < 0x100 else f"\\u{cp:04X}" if cp < 0x10000 else f"\\U{cp:08x}"


def render(x: Expr) -> str:
    """GBNF text of an expression (groups parenthesized)."""
    if isinstance(x, Text):
        return '"' + "".join(_char(c, '"\\') for c in x.text) + '"'
    if isinstance(x, Chars):
        one = [_char(chr(lo), "]\\-") + ("" if lo == hi else "-" + _char(chr(hi), "]\\-")) for lo, hi in x.ranges]
        return "[" + ("^" if x.negated else "") + "".join(one) + "]"
    if isinstance(x, R):
        return x.name
    if isinstance(x, Seq):
        return "(" + " ".join(render(i) for i in x.items) + ")"
    if isinstance(x, Alt):
        return "(" + " | ".join("" if i == EMPTY else render(i) for i in x.items) + ")"
    lo, hi = x.lo, x.hi
    op = {(0, None): "*", (1, None): "+", (0, 1): "?"}.get((lo, hi))
    if op is None:
        op = f"{{{lo}}}" if lo == hi else f"{{{lo},}}" if hi is None else f"{{,{hi}}}" if lo == 0 else f"{{{lo},{hi}}}"
    return render(x.item) + op


def _merge(ranges):
    return tuple(ranges_of_ranges(ranges))


def normal(x: Expr) -> Expr:
    if isinstance(x, Seq):
        return seq([normal(i) for i in x.items]) if x.items else EMPTY
    if isinstance(x, Alt):
        return alt([normal(i) for i in x.items])
    if isinstance(x, Repeat):
        return Repeat(normal(x.item), x.lo, x.hi)
    if isinstance(x, Chars):
        return Chars(_merge(x.ranges), x.negated)
    return x


CODE_POINTS = st.integers(0, 0x10FFFF).filter(lambda c: not 0xD800 <= c <= 0xDFFF)
LEAVES = st.one_of(
    st.text(st.characters(exclude_categories=("Cs",)), max_size=4).map(Text),
    st.builds(Chars, st.lists(st.tuples(CODE_POINTS, CODE_POINTS).map(lambda t: tuple(sorted(t))), max_size=3)
              .map(tuple), st.booleans()),
    st.sampled_from(["x", "y-1", "z_"]).map(lambda n: R(n, 1)),
)
BOUNDS = st.one_of(st.sampled_from([(0, None), (1, None), (0, 1)]),
                   st.tuples(st.integers(0, 4), st.integers(0, 4)).map(lambda t: tuple(sorted(t))),
                   st.tuples(st.integers(0, 4), st.none()))
EXPRS = st.recursive(LEAVES, lambda kids: st.one_of(
    st.lists(kids, max_size=4).map(lambda xs: Seq(tuple(xs))),
    st.lists(st.one_of(kids, st.just(EMPTY)), min_size=1, max_size=4).map(lambda xs: Alt(tuple(xs))),
    st.builds(lambda x, b: Repeat(x, *b), kids, BOUNDS)), max_leaves=10)


@settings(max_examples=300, deadline=None)
@given(EXPRS)
def test_rendered_gbnf_reads_back_as_the_same_ir(x):
    text = f'root ::= {render(x)}\nx ::= "1"\ny-1 ::= "2"\nz_ ::= "3" # done\n'
    assert read_gbnf(text).rules["root"] == normal(x), text


# ---- Lark -------------------------------------------------------------------------------------

def test_lark_rules_and_terminals():
    g = read_lark('start: pair ("," pair)*\npair: KEY "=" VALUE\nKEY: /[a-z]+/\nVALUE: "on" | "off"\n', "kv.lark")
    assert g.start == "start" and g.source == "kv.lark"
    assert g.rules == {
        "start": Alt((Seq((R("pair"), R("__start_star_0"))), R("pair"))),
        "pair": Seq((R("KEY"), R("EQUAL"), R("VALUE"))),
        "__start_star_0": Alt((Seq((R("COMMA"), R("pair"))), Seq((R("__start_star_0"), R("COMMA"), R("pair"))))),
        "KEY": Regex("[a-z]+"), "VALUE": Regex("(?:off|on)"), "COMMA": Text(","), "EQUAL": Text("="),
    }
    assert g.lines == {"start": 1, "pair": 2, "__start_star_0": 1, "KEY": 3, "VALUE": 4}


def test_lark_options_repeats_aliases_and_flags():
    g = read_lark('?start: item ~ 2..3 [TAIL] -> top\nitem: "ab"i | /x+/i | "\\n"\nTAIL: "."\n')
    assert g.rules["item"] == Alt((R("AB"), R("__ANON_0"), R("NEWLINE")))
    assert g.rules["AB"] == Regex("(?i:ab)") and g.rules["__ANON_0"] == Regex("(?i:x+)")
    assert g.rules["NEWLINE"] == Text("\n")
    bodies = g.rules["start"].items
    assert Seq((R("item"), R("item"))) in bodies and Seq((R("item"), R("item"), R("item"), R("TAIL"))) in bodies
    assert len(bodies) == 4


@pytest.mark.parametrize("text, want", [
    ('"a"{2,3} b{2}', '"a" ~ 2..3 b ~ 2'),
    ("(c d){,4} e{0,} f{1,} g{,}", "(c d) ~ 0..4 e* f+ g*"),
    ("e{3,}", "(e ~ 3 e*)"),
    ("(a\n  | b){2,}", "((a\n  | b) ~ 2 (a   | b)*)"),
    ('/x{2}/{1,2} "{1}"i{2}', '/x{2}/ ~ 1..2 "{1}"i ~ 2'),
    ('_sep{x, ","} g{} // c{2}', '_sep{x, ","} g{} // c{2}'),
    ("a {2}", "a {2}"),
])
def test_llguidance_repetitions_become_lark_ranges(text, want):
    assert braces(text) == want


def test_lark_repetitions_read():
    g = read_lark('start: item{2,} "!"{0,1}\nitem: "a"\n')
    assert g.rules["start"] == Alt((Seq((R("item"), R("item"), R("__start_star_0"))),
                                    Seq((R("item"), R("item"), R("__start_star_0"), R("BANG"))),
                                    Seq((R("item"), R("item"))), Seq((R("item"), R("item"), R("BANG")))))
    assert g.lines["__start_star_0"] == 1


def test_lark_ignore_wraps_every_terminal_and_the_end():
    g = read_lark('start: WORD ("," WORD)*\nWORD: /[a-z]+/\n%ignore " "\n%ignore /#[^\\n]*/\n')
    ign = Repeat(R(IGNORE), 0, None)
    assert g.start == IGNORE_START
    assert g.rules[IGNORE_START] == Seq((R("start"), ign))
    assert g.rules[IGNORE] == Alt((R("__IGNORE_0"), R("__IGNORE_1")))
    assert g.rules["__IGNORE_0"] == Text(" ") and g.rules["__IGNORE_1"] == Regex("#[^\n]*")
    assert g.rules["start"] == Alt((Seq((ign, R("WORD"), R("__start_star_0"))), Seq((ign, R("WORD")))))
    assert g.rules["__start_star_0"] == Alt((Seq((ign, R("COMMA"), ign, R("WORD"))),
                                             Seq((R("__start_star_0"), ign, R("COMMA"), ign, R("WORD")))))


def test_lark_import_common_and_import_paths(tmp_path):
    g = read_lark("start: NUMBER (WS NUMBER)*\n%import common.NUMBER\n%import common.WS\n")
    number = g.rules["NUMBER"]
    assert isinstance(number, Regex) and all(re.fullmatch(number.pattern, s) for s in ["12", "1.5", "2e-3", ".5"])
    assert not re.fullmatch(number.pattern, "1.2.3") and g.rules["WS"] == Regex("(?:[ \t\f\r\n])+")
    (tmp_path / "shapes.lark").write_text('SHAPE: "circle" | "square"\n')
    g = read_lark("start: SHAPE\n%import shapes.SHAPE\n", import_paths=[str(tmp_path)])
    assert g.rules["SHAPE"] == Regex("(?:circle|square)")


@pytest.mark.parametrize("text, message", [
    ('item: "a"\n', r"g\.lark has no rule 'start'"),
    ('start: A B\nA: "a"\n%declare B\n', r"g\.lark line 3: terminal B is declared but never defined \(used in rule st"),
    ('start: "a"\nfoo "b"\n', r"g\.lark line 2 column 5: unexpected '\"b\"' \(expected '\.' or ':' or '\{'\)"),
    ('start: ("a"\n', r"g\.lark line 1 column 12: unexpected end of line \(expected '\)'\)"),
    ('start: "a" @\n', r"g\.lark line 1 column 12: unexpected '@'"),
    ('start: "a\n', r"g\.lark line 1 column 8: a string is not closed on its line"),
    ('start: x\n\nx: y\n', r"g\.lark line 3: rule 'y' used but not defined \(in rule x\)"),
    ('start: "a"\nstart: "b"\n', r"g\.lark line 2: rule 'start' defined more than once"),
    ('start: /a.b/s\n', r"g\.lark: terminal __ANON_0 \(/a\.b/s\) uses the regex flag\(s\) s"),
    ('start: "a"~3..2\n', r"g\.lark: bad Range for Terminal\('A'\)"),
    ('start: X\n%import missing.X\n', r"g\.lark: %import cannot find missing\.lark"),
    ('start: X\n%import common.NO_SUCH\n', r"g\.lark line 1: rule 'X' used but not defined"),
    ('start: "a"\n%ignore FOO\n', r"g\.lark: terminals \{'FOO'\} were marked to ignore but were not defined"),
])
def test_lark_refusals_are_one_line(text, message):
    _refused(read_lark, text, "g.lark", message)


def test_lark_terminals_may_match_the_empty_string_and_bad_regexes_fail_at_compile():
    """The grammar loader builds no parser, so a zero-width terminal is read (its language holds
    the empty text); a regex that does not compile is refused when the grammar is compiled."""
    from tokfst_cli.grammar.load import compile_grammar

    fst = compile_grammar('start: "<" /a*/ ">"\n', "lark").fst
    assert fst.num_states() == 3
    with pytest.raises(InputError, match="invalid regex"):
        compile_grammar("start: /a(/\n", "lark", source="g.lark")
