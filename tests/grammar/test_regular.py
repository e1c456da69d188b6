"""Grammars whose recursion is left- or right-linear, compiled to byte DFAs: against Lark's own Earley
parser (``lexer="dynamic_complete"``: every way of spelling the terminals, the reading tokfst takes),
on the texts the automaton walks, on texts derived from the grammar, and on edits of both."""

from __future__ import annotations

import random

import lark
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tokfst_cli.errors import InputError
from tokfst_cli.grammar.ir import Alt, Chars, Grammar, Ref, Regex, Repeat, Seq, Text
from tokfst_cli.grammar.load import compile_grammar, read
from tokfst_cli.grammar.pushdown import Pushdown
from tokfst_cli.grammar.regular import compile_grammar as compile_ir
from tokfst_cli.text.regex import compile_regex

from ..helpers import accepts, sample_paths

# Our own grammars (Lark syntax): each regular, some left- and some right-recursive.
GRAMMARS = {
    "csv": r'''
start: header row+
header: "name,qty\n"
row: NAME "," QTY "\n"
NAME: /[a-z]{1,6}/
QTY: "0" | /[1-9][0-9]{0,2}/
''',
    "sum": r'''
start: expr
expr: expr "+" term | expr "-" term | term
term: NUMBER | NAME
NUMBER: /[0-9]{1,3}/
NAME: /[a-z]{1,4}/
''',
    "list": r'''
start: "[" items? "]"
items: item ("," items)?
item: /[0-9]+/ | "true" | "false"
''',
    "config": r'''
start: (pair "\n")* pair
pair: KEY " = " value
value: /[0-9]+/ | "\"" /[a-z ]{1,8}/? "\"" | "on" | "off"
KEY: /[a-z][a-z_]{0,7}/
''',
    "select": r'''
start: "SELECT " cols " FROM " NAME (" WHERE " cond)?
cols: "*" | NAME (", " NAME)*
cond: NAME OP VALUE (" AND " cond)?
OP: "=" | "<" | ">" | "<>"
VALUE: /[0-9]{1,4}/ | "'" /[a-z]{1,6}/ "'"
NAME: /[a-z_]{1,8}/
''',
    "chat": r'''
start: turn* assistant
turn: user | assistant
user: "User: " LINE
assistant: "Assistant: " LINE
LINE: /[^\n]{1,20}\n/
''',
    "words": r'''
start: WORD (" " WORD)*
WORD: /[a-z]+/
%ignore " "
''',
}


def oracle(text: str) -> lark.Lark:
    return lark.Lark(text, parser="earley", lexer="dynamic_complete", start="start")


def parses(parser: lark.Lark, s: str) -> bool:
    try:
        parser.parse(s)
        return True
    except lark.exceptions.LarkError:
        return False


@pytest.fixture(scope="module", params=sorted(GRAMMARS))
def case(request):
    text = GRAMMARS[request.param]
    return request.param, compile_grammar(text, "lark", source=request.param).fst, oracle(text)


def _decode(labels: list[int]) -> str | None:
    try:
        return bytes(label - 1 for label in labels).decode("utf-8")
    except UnicodeDecodeError:
        return None


def test_texts_of_the_automaton_parse(case):
    name, fst, parser = case
    texts = [_decode(p) for p in sample_paths(fst, 60, seed=1, stop=0.15, max_len=120)]
    assert texts and all(t is not None and parses(parser, t) for t in texts), name


def _derive(g: lark.Lark, rng: random.Random, depth: int = 0) -> str:
    """A random text of the Lark grammar, derived from its own compiled rules and terminals."""
    rules: dict[str, list] = {}
    for r in g.rules:
        rules.setdefault(r.origin.name, []).append(r.expansion)
    terms = {t.name: t.pattern for t in g.terminals}

    def term(name: str) -> str:
        p = terms[name]
        if p.type == "str":
            return p.value
        ba = compile_regex(p.value)
        path = sample_paths(ba.fst, 1, seed=rng.randrange(1 << 30), stop=0.3, max_len=30)[0]
        return _decode(path)

    def expand(sym: str, d: int) -> str:
        if sym in terms:
            return term(sym)
        options = rules[sym]
        if d > 12:  # prefer the shortest alternative deep down
            options = sorted(options, key=len)[:1]
        return "".join(expand(s.name, d + 1) for s in rng.choice(options))

    return expand("start", depth)


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**31))
def test_derived_texts_and_their_edits_agree_with_lark(seed):
    rng = random.Random(seed)
    name = rng.choice(sorted(GRAMMARS))
    text = GRAMMARS[name]
    parser = oracle(text)
    fst = compile_grammar(text, "lark", source=name).fst
    s = _derive(parser, rng)
    assert accepts(fst, [b + 1 for b in s.encode("utf-8")]), (name, s)
    for _ in range(5):  # an edit: lark and the automaton agree on it either way
        i = rng.randrange(len(s) + 1)
        t = s[:i] + rng.choice(["", "a", "1", ",", " ", "\n", "+", "["]) + s[i + rng.randrange(2):]
        assert accepts(fst, [b + 1 for b in t.encode("utf-8")]) == parses(parser, t), (name, t)


def test_right_and_left_linear_cycles_of_several_rules():
    g = Grammar({"root": Ref("a"),
                 "a": Alt((Seq((Text("x"), Ref("b"))), Text("!"))),
                 "b": Alt((Seq((Text("y"), Ref("a"))), Seq((Text("z"), Ref("b"))))),
                 }, "root")
    fst = compile_ir(g).fst
    for s, ok in [("!", True), ("xy!", True), ("xzzy!", True), ("xyxzy!", True), ("x!", False), ("xy", False)]:
        assert accepts(fst, [b + 1 for b in s.encode()]) == ok, s
    left = Grammar({"root": Ref("e"), "e": Alt((Seq((Ref("e"), Chars(((48, 57),)))), Seq((Ref("f"), Text(";"))))),
                    "f": Alt((Seq((Ref("e"), Text("-"))), Text("a")))}, "root")
    fst = compile_ir(left).fst
    for s, ok in [("a;", True), ("a;1", True), ("a;-;", True), ("a;12-;3", True), ("a", False), (";", False)]:
        assert accepts(fst, [b + 1 for b in s.encode()]) == ok, s


@pytest.mark.parametrize("gbnf, rules", [
    ('root ::= value\nvalue ::= "[" (value ("," value)*)? "]" | "1"\n', {"value", "root"}),
    ('root ::= e\ne ::= t ("+" t)*\nt ::= "(" e ")" | [0-9]\n', {"e", "t", "root"}),
    ('root ::= "a" root | root "b" | "c"\n', {"root"}),  # recursion at both ends
])
def test_self_embedding_needs_the_stack(gbnf, rules):
    """What no finite automaton spells becomes a PDT over the rules that need it (test_pushdown.py decodes them)."""
    p = compile_grammar(gbnf, "gbnf", source="g.gbnf")
    assert isinstance(p, Pushdown) and set(p.rules) == rules and p.source == "g.gbnf"


def test_unreachable_rules_are_not_compiled():
    """A self-embedding rule the start never reaches does not stop the grammar."""
    fst = compile_grammar('root ::= "ok"\nunused ::= "(" unused ")" | "x"\n', "gbnf").fst
    assert accepts(fst, [b + 1 for b in b"ok"]) and not accepts(fst, [b + 1 for b in b"x"])


def test_regex_terminals_and_negated_classes():
    g = Grammar({"root": Seq((Regex("[a-c]+"), Chars(((0x30, 0x39), (0x0A, 0x0A)), negated=True)))}, "root")
    fst = compile_ir(g).fst
    assert accepts(fst, [b + 1 for b in "abé".encode()]) and not accepts(fst, [b + 1 for b in b"ab5"])
    assert not accepts(fst, [b + 1 for b in b"ab\n"]) and accepts(fst, [b + 1 for b in b"c "])


def test_bounded_repetition_past_the_limit_is_refused_before_it_is_built():
    from tokfst_cli.errors import LimitError

    g = Grammar({"root": Repeat(Regex("[a-z]{1,40}x"), 0, 5000)}, "root")
    with pytest.raises(LimitError):
        compile_ir(g, max_states=10_000)


def test_read_dispatches_by_format():
    assert read('root ::= "a"\n', "gbnf").start == "root"
    assert read('start: "a"\n', "lark").start == "start"
    with pytest.raises(InputError, match="unknown grammar format"):
        read("x", "ebnf")
