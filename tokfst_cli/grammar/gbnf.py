"""llama.cpp's GBNF read into the grammar IR (:mod:`.ir`), with GBNF's own syntax written as a Lark grammar.

``name ::= alternatives`` rules (``root`` is the start), ``"..."`` literals, ``[...]`` / ``[^...]``
classes, ``.``, ``( )``, ``|`` (an alternative may be empty), postfix ``* + ?`` and ``{m}``,
``{m,}``, ``{m,n}``, ``{,n}``, ``#`` comments. Newlines are whitespace: a rule runs until the next
``NAME ::=``. Everything else is refused by name (:class:`~tokfst_cli.errors.InputError`, one line,
with the line and column): syntax errors, undefined or twice-defined rules, no ``root``, bad
escapes, backwards ranges and repetitions, and llama.cpp's token references (``<name>``, ``<[id]>``).
"""

from __future__ import annotations

import functools
import re

import lark

from tokfst_cli.automata.utf8 import MAX_CODE_POINT, ranges_of_ranges, remove_surrogates
from tokfst_cli.errors import InputError
from tokfst_cli.grammar.ir import EMPTY, Chars, Expr, Grammar, Ref, Repeat, Text, alt, seq

ANY = tuple(remove_surrogates([(0, MAX_CODE_POINT)]))  # '.': every code point UTF-8 can spell

# GBNF's syntax. A rule head ``NAME ::=`` is one token, tried before NAME (priority 2), so that
# LALR(1) sees where a rule ends without a rule separator.
GBNF_SYNTAX = r"""
start: rule*
rule: RULE_START alternatives
alternatives: sequence ("|" sequence)*
sequence: item*
item: primary (STAR | PLUS | QMARK | REPEAT)*
?primary: STRING -> literal
    | CLASS -> char_class
    | DOT -> any
    | NAME -> ref
    | "(" alternatives ")"
    | TOKEN_REF -> token_ref

RULE_START.2: /[a-zA-Z0-9_-]+[ \t\r\n]*::=/
NAME: /[a-zA-Z0-9_-]+/
STRING: /"(?:[^"\\]|\\[\s\S])*"/
CLASS: /\[(?:[^\]\\]|\\[\s\S])*\]/
TOKEN_REF: /!?<[^>\n]*>/
REPEAT: /\{[^}\n]*\}/
DOT: "."
STAR: "*"
PLUS: "+"
QMARK: "?"
COMMENT: /#[^\n]*/
%ignore COMMENT
%ignore /\s+/
"""

ESCAPES = {"n": "\n", "r": "\r", "t": "\t", "\\": "\\", '"': '"', "'": "'", "[": "[", "]": "]", "-": "-"}
HEX = {"x": 2, "u": 4, "U": 8}
ESCAPE_FIX = r"""write one of \n \r \t \\ \" \' \[ \] \- \xHH \uHHHH \UHHHHHHHH"""
REPEAT_FORMS = re.compile(r"\{\s*(\d+)\s*\}|\{\s*(\d*)\s*,\s*(\d*)\s*\}")


@functools.cache
def _parser() -> lark.Lark:
    """The GBNF parser, built once."""
    return lark.Lark(GBNF_SYNTAX, parser="lalr", start="start")


class _Where:
    """Positions in the grammar's text, for one-line errors."""

    def __init__(self, source: str):
        self.source = source

    def error(self, tok: lark.Token, offset: int, what: str, fix: str) -> InputError:
        """An error at character ``offset`` of token ``tok``."""
        before = tok.value[:offset]
        line = tok.line + before.count("\n")
        column = offset - before.rfind("\n") if "\n" in before else tok.column + offset
        return InputError(f"grammar {self.source} line {line} column {column}: {what}", fix)


def show(s: str) -> str:
    """``s`` on one line: unprintable characters as Python escapes, backslashes as they are."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in s)


def _decode(tok: lark.Token, body: str, start: int, where: _Where, kind: str) -> list[tuple[int, bool]]:
    """The code points of a literal's or class's body (at ``start`` in the token), each with
    whether it was written as a bare character (a bare '-' in a class makes a range)."""
    out: list[tuple[int, bool]] = []
    i = 0
    while i < len(body):
        c = body[i]
        if c != "\\":
            out.append((ord(c), True))
            i += 1
            continue
        e = body[i + 1]
        if e in ESCAPES:
            out.append((ord(ESCAPES[e]), False))
            i += 2
            continue
        digits = body[i + 2:i + 2 + HEX.get(e, 0)]
        if e not in HEX or len(digits) != HEX[e] or not all(d in "0123456789abcdefABCDEF" for d in digits):
            shown = body[i:i + 2 + HEX.get(e, 0)]
            raise where.error(tok, start + i, f"invalid escape '{show(shown)}' in {kind}", ESCAPE_FIX)
        cp = int(digits, 16)
        if cp > 0x10FFFF or 0xD800 <= cp <= 0xDFFF:
            raise where.error(tok, start + i, f"escape '{body[i:i + 2 + HEX[e]]}' in {kind} is not a code point "
                              "UTF-8 can spell", "write a code point up to U+10FFFF outside U+D800..U+DFFF")
        out.append((cp, False))
        i += 2 + HEX[e]
    return out


def merge(ranges: list[tuple[int, int]]) -> tuple[tuple[int, int], ...]:
    """Ranges sorted, overlapping and adjacent ones merged (``utf8.ranges_of_ranges``)."""
    return tuple(ranges_of_ranges(ranges))


class _ToIR(lark.Transformer):
    """GBNF parse tree -> (rule name, line, expression) triples."""

    def __init__(self, where: _Where):
        super().__init__()
        self.where = where

    def start(self, rules: list) -> list:
        return rules

    def rule(self, items: list) -> tuple[str, int, Expr]:
        head, body = items
        return head.value.rstrip()[:-3].rstrip(), head.line, body

    def alternatives(self, items: list[Expr]) -> Expr:
        return alt(items)

    def sequence(self, items: list[Expr]) -> Expr:
        return seq(items) if items else EMPTY

    def item(self, items: list) -> Expr:
        x = items[0]
        for op in items[1:]:
            x = self._repeat(x, op)
        return x

    def _repeat(self, x: Expr, op: lark.Token) -> Expr:
        if op.type == "STAR":
            return Repeat(x, 0, None)
        if op.type == "PLUS":
            return Repeat(x, 1, None)
        if op.type == "QMARK":
            return Repeat(x, 0, 1)
        m = REPEAT_FORMS.fullmatch(op.value)
        if m is None:
            raise self.where.error(op, 0, f"invalid repetition {op.value}", "write {m}, {m,}, {m,n} or {,n}")
        if m.group(1) is not None:
            return Repeat(x, int(m.group(1)), int(m.group(1)))
        lo = int(m.group(2)) if m.group(2) else 0
        hi = int(m.group(3)) if m.group(3) else None
        if hi is not None and lo > hi:
            raise self.where.error(op, 0, f"repetition {op.value} has its minimum {lo} above its maximum {hi}",
                                   "write {m,n} with m <= n")
        return Repeat(x, lo, hi)

    def literal(self, items: list) -> Expr:
        tok = items[0]
        return Text("".join(chr(cp) for cp, _ in _decode(tok, tok.value[1:-1], 1, self.where, "a string literal")))

    def char_class(self, items: list) -> Expr:
        tok = items[0]
        negated = tok.value.startswith("[^")
        start = 2 if negated else 1
        chars = _decode(tok, tok.value[start:-1], start, self.where, "a character class")
        ranges, i = [], 0
        while i < len(chars):
            lo = chars[i][0]
            if i + 2 < len(chars) and chars[i + 1] == (ord("-"), True):
                hi = chars[i + 2][0]
                if lo > hi:
                    raise self.where.error(tok, 0, f"character class '{show(tok.value)}' has the range "
                                           f"'{show(chr(lo))}-{show(chr(hi))}' running backwards",
                                           "write the range low to high")
                ranges.append((lo, hi))
                i += 3
            else:
                ranges.append((lo, lo))
                i += 1
        return Chars(merge(ranges), negated)

    def any(self, items: list) -> Expr:
        return Chars(ANY)

    def ref(self, items: list) -> Expr:
        return Ref(items[0].value, items[0].line)

    def token_ref(self, items: list) -> Expr:
        raise self.where.error(items[0], 0, f"token references are not supported ({show(items[0].value)})",
                               "spell the token's text as a string literal")


def _syntax_error(e: lark.exceptions.UnexpectedInput, source: str) -> InputError:
    """lark's parse error as one line."""
    where = f"grammar {source} line {e.line} column {e.column}"
    fix = "write rules as NAME ::= alternatives"
    if isinstance(e, lark.exceptions.UnexpectedCharacters):
        char = e.char
        if char == '"':
            return InputError(f"{where}: unterminated string literal", 'close it with "')
        if char == "[":
            return InputError(f"{where}: unterminated character class", "close it with ]")
        if char in "{<":
            return InputError(f"{where}: unterminated '{char}'", "close it on the same line")
        return InputError(f"{where}: unexpected character '{show(char)}'", fix)
    if isinstance(e, lark.exceptions.UnexpectedToken):
        tok = e.token
        if tok.type == "$END":
            return InputError(f"grammar {source}: the text ends inside a group (a '(' is not closed)",
                              "close it with )")
        if tok.type == "NAME" and "RULE_START" in e.expected:
            return InputError(f"{where}: '{tok.value}' is not followed by ::=", fix)
        return InputError(f"{where}: unexpected '{show(tok.value)}'", fix)
    return InputError(f"{where}: unexpected input", fix)


def read_gbnf(text: str, source: str = "<grammar>") -> Grammar:
    """The grammar IR of a GBNF text; ``source`` names it in errors."""
    where = _Where(source)
    try:
        tree = _parser().parse(text)
    except lark.exceptions.UnexpectedInput as e:
        raise _syntax_error(e, source) from None
    try:
        triples = _ToIR(where).transform(tree)
    except lark.exceptions.VisitError as e:
        raise e.orig_exc from None
    g = Grammar({}, "root", source)
    for name, line, body in triples:
        if name in g.rules:
            raise InputError(f"grammar {source} line {line}: rule '{name}' is defined twice "
                             f"(first at line {g.lines[name]})", "merge the definitions into one rule with |")
        g.rules[name], g.lines[name] = body, line
    if "root" not in g.rules:
        raise InputError(f"grammar {source} has no rule 'root'", "name the start rule root")
    for name in g.rules:
        for r in g.refs(name):
            if r.name not in g.rules:
                raise InputError(f"grammar {source}: rule '{r.name}' used at line {r.line} is not defined",
                                 f"define the rule ({r.name} ::= ...) or correct the name")
    return g
