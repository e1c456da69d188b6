"""Context-free grammars as tokfst reads them: rules of expressions over text (Koo et al. 2024 Sec. 3).

Both readers (:mod:`.gbnf`, :mod:`.lark_reader`) produce a :class:`Grammar`: named rules, each one
expression built from

    Text(s)            the literal string s
    Chars(ranges, neg) one code point of (or, negated, outside) the inclusive code point ranges
    Regex(p)           a string of the Python regex p (a Lark terminal)
    Ref(name)          the language of another rule
    Seq(items)         concatenation (Seq(()) is the empty string)
    Alt(items)         union
    Repeat(x, lo, hi)  lo to hi copies of x (hi None: unbounded)

The language of a grammar is the set of texts its start rule derives, with every terminal
spelled out: no lexer sits between the text and the rules (a scannerless reading, as
xgrammar's and llama.cpp's engines have it; Lark's Earley parser with ``lexer="dynamic_complete"``).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Text:
    text: str


@dataclass(frozen=True)
class Chars:
    ranges: tuple[tuple[int, int], ...]
    negated: bool = False


@dataclass(frozen=True)
class Regex:
    pattern: str


@dataclass(frozen=True)
class Ref:
    name: str
    line: int = 0  # where the reference stands in the grammar's text (0: unknown)


@dataclass(frozen=True)
class Seq:
    items: tuple[Expr, ...]


@dataclass(frozen=True)
class Alt:
    items: tuple[Expr, ...]


@dataclass(frozen=True)
class Repeat:
    item: Expr
    lo: int
    hi: int | None


Expr = Text | Chars | Regex | Ref | Seq | Alt | Repeat
EMPTY = Seq(())


@dataclass
class Grammar:
    """Rules by name (in the order the source defines them), the start rule, and where it came from."""

    rules: dict[str, Expr]
    start: str
    source: str = "<grammar>"
    lines: dict[str, int] = field(default_factory=dict)  # rule -> the line defining it

    def refs(self, name: str) -> Iterator[Ref]:
        """The references in rule ``name``'s expression."""
        return (x for x in walk(self.rules[name]) if isinstance(x, Ref))


def walk(x: Expr) -> Iterator[Expr]:
    """``x`` and every expression inside it, depth first."""
    yield x
    if isinstance(x, (Seq, Alt)):
        for item in x.items:
            yield from walk(item)
    elif isinstance(x, Repeat):
        yield from walk(x.item)


def seq(items: list[Expr]) -> Expr:
    """A concatenation, flattened (one item stands for itself)."""
    flat: list[Expr] = []
    for x in items:
        flat += x.items if isinstance(x, Seq) else [x]
    return flat[0] if len(flat) == 1 else Seq(tuple(flat))


def alt(items: list[Expr]) -> Expr:
    """A union (one item stands for itself)."""
    return items[0] if len(items) == 1 else Alt(tuple(items))
