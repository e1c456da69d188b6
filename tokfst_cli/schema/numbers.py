"""JSON numbers: their spellings, exact ranges and ``multipleOf`` as digit automata.

The constraints are built on one text per number, its shortest spelling: plain decimal
notation (no exponent), no leading zeros, no trailing zeros in the fraction, no fraction
when the value is integral, and ``0`` for zero (never ``-0``):
``-?(0|[1-9][0-9]*)(\\.[0-9]*[1-9])?``. With one text per value, integer-ness (``type:
integer`` accepts 1.0 since it is written ``1``), ranges and ``multipleOf`` are exact.

Ranges: the shortest magnitudes above a decimal bound c = I.F are a regex built from the
digits of I and F (:func:`_above`); "below" is the complement among magnitudes, and a
negative number is "-" and a magnitude compared with -c. ``multipleOf`` m = a / 10^s:
x is a multiple iff x * 10^s is an integer divisible by a, read digit by digit with the
remainder mod a as state (a * (s + 2) states, refused past ``max_states``).

Spellings (:data:`SPELLINGS`): "shortest" keeps those texts alone (one per value: what a
generator needs). "any" (the default) accepts every JSON spelling of the same values
(:func:`respelled`), as a validator does: trailing fractional zeros (``2.50``, ``5.0``,
``5.000``, for ``type: integer`` too: JSON Schema's integer is any number with a zero
fraction) and ``-0`` (``-0.0``) for zero, everywhere: they keep the value, so every constraint
stays exact, and so do its complements under ``not``. Exponents (``1e3``, ``2.5E-1``) only
where no number of the document is constrained by more than its sign (:func:`exponents_exact`):
the numbers above a bound other than 0 are not a regular language once written with exponents
(``1`` followed by k zeros and an exponent of k or more digits' value), nor are integers or
multiples, nor the spellings of a constant (``1e3``, ``10e2``, ``10000e-1``, ...). As each
part of a schema is the set of spellings of its values, the Boolean operations stay exact
only if every part spells alike: so one number with a bound, ``multipleOf``, ``type:
integer``, a numeric ``const``/``enum`` or ``uniqueItems`` anywhere in the document keeps
exponents out of all of them (plain spellings, trailing zeros and ``-0`` still accepted).
"""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation

import numpy as np
import pynini

from tokfst_cli.automata.arrays import fst_from_arrays
from tokfst_cli.errors import InputError, InternalError, LimitError
from tokfst_cli.schema.automata import Budget, lit, regex
from tokfst_cli.schema.refs import Schema

MAGNITUDE = r"(?:0|[1-9][0-9]*)(?:\.[0-9]*[1-9])?"
NUMBER = r"0|-?[1-9][0-9]*(?:\.[0-9]*[1-9])?|-?0\.[0-9]*[1-9]"
INTEGER = r"0|-?[1-9][0-9]*"
_FRACTION = r"(?:\.[0-9]*[1-9])?"
SPELLINGS = ("any", "shortest")  # the option; compiled as "shortest", "plain" (no exponents) or "any"
_EXPONENT = r"[eE][+-]?[0-9]+"
_ZERO = r"-?0(?:\.0+)?"  # every plain spelling of zero
_NONZERO = r"(?:[1-9][0-9]*(?:\.[0-9]+)?|0\.[0-9]*[1-9][0-9]*)"  # every plain spelling of a positive number
_BOUNDS = ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum")
_FIXED: dict[tuple[str, int], pynini.Fst | None] = {}  # the automata of this module's fixed regexes


def fixed(pattern: str, budget: Budget) -> pynini.Fst | None:
    """:func:`.automata.regex` of one of this module's fixed patterns, compiled once (a copy)."""
    key = (pattern, budget.max_states)
    if key not in _FIXED:
        _FIXED[key] = regex(pattern, budget)
    f = _FIXED[key]
    return None if f is None else f.copy()


def decimal(value, keyword: str = "number") -> Decimal:
    """A JSON number (int, float, Decimal) as an exact Decimal (floats by their shortest repr)."""
    if isinstance(value, bool) or not isinstance(value, (int, float, Decimal)):
        raise InputError(f"{keyword} must be a number, not {value!r}", f"give {keyword} a number",
                         hint="schema-value", keyword=keyword)
    try:
        d = Decimal(repr(value)) if isinstance(value, float) else Decimal(value)
    except InvalidOperation:
        d = Decimal("nan")
    if not d.is_finite():
        raise InputError(f"{keyword} {value!r} is not a finite number", f"give {keyword} a finite number",
                         hint="schema-value", keyword=keyword)
    return d


def canonical(value) -> str:
    """The canonical text of a number (see the module docstring)."""
    d = decimal(value)
    if d == d.to_integral_value():
        return str(int(d))
    return format(d.normalize(), "f")


# ---- ranges ------------------------------------------------------------------------------------
def _group(r: str) -> str:
    return f"(?:{r})"


def _same_length(lo: str, hi: str) -> str:
    """Digit strings of one length from ``lo`` to ``hi`` (inclusive, leading zeros allowed)."""
    if lo == hi:
        return lo
    if len(lo) == 1:
        return f"[{lo}-{hi}]"
    if lo[0] == hi[0]:
        return lo[0] + _group(_same_length(lo[1:], hi[1:]))
    n = len(lo) - 1
    parts, first, last = [], int(lo[0]), int(hi[0])
    if lo[1:] != "0" * n:
        parts.append(lo[0] + _group(_same_length(lo[1:], "9" * n)))
        first += 1
    tail = None
    if hi[1:] != "9" * n:
        tail = hi[0] + _group(_same_length("0" * n, hi[1:]))
        last -= 1
    if first <= last:
        parts.append(f"[{first}-{last}][0-9]{{{n}}}")
    if tail:
        parts.append(tail)
    return "|".join(parts)


def naturals(lo: int, hi: int | None = None) -> str:
    """A regex for the canonical naturals (no leading zeros) from ``lo`` to ``hi`` (None: no bound)."""
    parts = []
    if lo <= 0:
        parts.append("0")
        lo = 1
    if hi is not None and hi < lo:
        return "|".join(parts)
    top = len(str(hi)) if hi is not None else len(str(lo))
    for width in range(len(str(lo)), top + 1):
        a = lo if width == len(str(lo)) else 10 ** (width - 1)
        b = hi if hi is not None and width == top else 10 ** width - 1
        parts.append(_same_length(str(a), str(b)))
    if hi is None:
        parts.append(f"[1-9][0-9]{{{top},}}")
    return "|".join(_group(p) for p in parts)


def _digits(c: Decimal) -> tuple[str, str]:
    """A nonnegative decimal's integer digits and fraction digits (without trailing zeros)."""
    text = format(c.normalize(), "f") if c != 0 else "0"
    whole, _, frac = text.partition(".")
    return whole, frac.rstrip("0")


def _above(c: Decimal, inclusive: bool) -> str:
    """Canonical magnitudes m > c (>= c with ``inclusive``), for c >= 0."""
    whole, frac = _digits(c)
    parts = [_group(naturals(int(whole) + 1)) + _FRACTION]
    alts = [frac[:i] + f"[{int(d) + 1}-9]" + "(?:[0-9]*[1-9])?" for i, d in enumerate(frac) if d != "9"]
    alts.append(frac + "[0-9]*[1-9]")
    parts.append(whole + r"\." + _group("|".join(alts)))
    if inclusive:
        parts.append(whole + (rf"\.{frac}" if frac else ""))
    return "|".join(_group(p) for p in parts)


class Ranges:
    """Canonical magnitudes compared with a bound, built once per bound."""

    def __init__(self, budget: Budget):
        self.budget = budget
        self.magnitudes = fixed(MAGNITUDE, budget)

    def compare(self, op: str, c: Decimal) -> pynini.Fst | None:
        """Magnitudes m with ``m op c`` (op one of > >= < <=)."""
        if op in ("<", "<="):
            return self.budget.difference(self.magnitudes, self.compare(">=" if op == "<" else ">", c),
                                          "a number range")
        if c < 0 or (c == 0 and op == ">="):
            return self.magnitudes
        return regex(_above(c, op == ">="), self.budget)

    def numbers(self, lower: tuple[Decimal, bool] | None, upper: tuple[Decimal, bool] | None) -> pynini.Fst | None:
        """Canonical numbers within the bounds ((value, exclusive) or None)."""
        flip = {">": "<", ">=": "<=", "<": ">", "<=": ">="}
        pos, neg = self.magnitudes, self.compare(">", Decimal(0))
        if lower is not None:
            op = ">" if lower[1] else ">="
            pos = self.budget.intersect(pos, self.compare(op, lower[0]), "a number range")
            neg = self.budget.intersect(neg, self.compare(flip[op], -lower[0]), "a number range")
        if upper is not None:
            op = "<" if upper[1] else "<="
            pos = self.budget.intersect(pos, self.compare(op, upper[0]), "a number range")
            neg = self.budget.intersect(neg, self.compare(flip[op], -upper[0]), "a number range")
        neg = None if neg is None else pynini.concat(lit("-"), neg)
        return self.budget.union([pos, neg], "a number range")


# ---- multipleOf ----------------------------------------------------------------------------------
def multiples(budget: Budget, m: Decimal) -> pynini.Fst:
    """Texts -?D+(.D+)? whose value is a multiple of m > 0 (intersect with canonical numbers)."""
    sign, digits, exponent = m.normalize().as_tuple()
    a = int("".join(map(str, digits))) * (10 ** exponent if exponent > 0 else 1)
    s = -exponent if exponent < 0 else 0
    states = a * (s + 2) + 2
    if states > budget.max_states:
        raise LimitError(f"the digit automaton of multipleOf {m}", "max_states", budget.max_states, states,
                         remedy="simplify", at_least=True)
    # states: 0 start, 1 after "-", 2 + r: integer part with remainder r, 2 + a + r: after "." (no
    # fraction digit yet), 2 + a * (k + 1) + r: k fraction digits read (1 <= k <= s)
    start, minus = 0, 1

    def integer(r):
        return 2 + r

    def dot(r):
        return 2 + a + r

    def fraction(k, r):
        return 2 + a * (k + 1) + r

    src, lab, dst = [], [], []

    def add(sources, label: str, targets) -> None:
        sources = np.atleast_1d(sources)
        src.append(sources), lab.append(np.full(len(sources), ord(label) + 1)), dst.append(np.atleast_1d(targets))

    r = np.arange(a, dtype=np.int64)
    for d in range(10):
        digit = str(d)
        add([start, minus], digit, [integer(d % a)] * 2)
        add(integer(r), digit, integer((10 * r + d) % a))
        if s >= 1:
            add(dot(r), digit, fraction(1, (10 * r + d) % a))
        for k in range(1, s):
            add(fraction(k, r), digit, fraction(k + 1, (10 * r + d) % a))
    add(start, "-", minus)
    if s >= 1:
        add(integer(r), ".", dot(r))
    finals = np.zeros(states, bool)
    finals[integer(r)[(r * 10 ** s) % a == 0]] = True
    for k in range(1, s + 1):
        finals[fraction(k, r)[(r * 10 ** (s - k)) % a == 0]] = True
    src_a, lab_a, dst_a = (np.concatenate(v).astype(np.int64) for v in (src, lab, dst))
    return fst_from_arrays(states, start, finals, src_a, lab_a, lab_a, dst_a)


def number_language(budget: Budget, *, integer: bool, lower: tuple[Decimal, bool] | None,
                    upper: tuple[Decimal, bool] | None, multiple_of: list[Decimal],
                    spelling: str = "shortest") -> pynini.Fst | None:
    """The texts of the numbers with these constraints: their shortest spellings, or (``spelling``
    "plain" or "any") every spelling :func:`respelled` gives, "any" with exponents, which only
    sign bounds allow (the compiler asks for them only then: :func:`exponents_exact`)."""
    f = fixed(INTEGER if integer else NUMBER, budget)
    if lower is not None or upper is not None:
        f = budget.intersect(f, Ranges(budget).numbers(lower, upper), "a number range")
    for m in multiple_of:
        f = budget.intersect(f, multiples(budget, m), f"multipleOf {m}")
    if spelling == "shortest":
        return f
    if spelling != "any":
        return respelled(budget, f)
    if integer or multiple_of or any(b is not None and b[0] != 0 for b in (lower, upper)):
        raise InternalError("exponents asked for under a constraint other than a sign (see exponents_exact)")
    zero = (lower is None or not lower[1]) and (upper is None or not upper[1])
    signs = [_ZERO] * zero + [_NONZERO] * (upper is None) + ["-" + _NONZERO] * (lower is None)
    exponents = fixed(f"(?:{'|'.join(signs)}){_EXPONENT}", budget) if signs else None
    return respelled(budget, f, exponents)


# ---- spellings -----------------------------------------------------------------------------------
def respelled(budget: Budget, f: pynini.Fst | None, exponents: pynini.Fst | None = None) -> pynini.Fst | None:
    """Every plain spelling of the numbers whose shortest spellings are ``f`` (module docstring):
    a fraction followed by ``0*``, an integer by ``(\\.0+)?``, and ``-0(\\.0+)?`` if zero is one;
    with ``exponents`` (the spellings with an exponent of the same numbers) added."""
    if f is None:
        return exponents
    what = "the spellings of a number"
    fractions = budget.intersect(f, fixed(r"-?[0-9]+\.[0-9]+", budget), what)
    integers = budget.difference(f, fractions, what)
    parts = [None if fractions is None else pynini.concat(fractions, fixed("0*", budget)),
             None if integers is None else pynini.concat(integers, fixed(r"(?:\.0+)?", budget)), exponents]
    if integers is not None and budget.intersect(integers, lit("0"), what) is not None:
        parts.append(fixed(r"-0(?:\.0+)?", budget))
    return budget.union([p for p in parts if p is not None], what)


def value_spellings(budget: Budget, value, spelling: str) -> pynini.Fst | None:
    """The spellings of one number (``const``, ``enum``): its shortest text, or :func:`respelled`
    of it (with ``-0e5``... for zero under "any"; other constants keep exponents out of the
    document: :func:`exponents_exact`)."""
    text = canonical(value)
    if spelling == "shortest":
        return lit(text)
    if spelling == "any" and text != "0":
        raise InternalError("exponents asked for with a numeric constant (see exponents_exact)")
    return respelled(budget, lit(text), fixed(_ZERO + _EXPONENT, budget) if spelling == "any" else None)


def exponents_exact(schema: Schema) -> bool:
    """Can every number of ``schema`` be written with an exponent, exactly (module docstring)?
    No if any object of the document (a ``$ref`` reaches subschemas anywhere, under unknown
    keywords too) has ``type: integer``, a bound other than 0, ``multipleOf``, ``uniqueItems``,
    or a number in a ``const`` or ``enum``: read as keywords wherever they stand, as a doubt
    only leaves exponents out."""
    todo, seen = [schema], set()
    while todo:
        node = todo.pop()
        if isinstance(node, list):
            todo += node
        if not isinstance(node, dict) or id(node) in seen:
            continue
        seen.add(id(node))
        kinds = node.get("type")
        if kinds == "integer" or (isinstance(kinds, list) and "integer" in kinds):
            return False
        if "multipleOf" in node or "uniqueItems" in node or any(
                node[k] != 0 for k in _BOUNDS if k in node and not isinstance(node[k], bool)):
            return False
        if any(_holds_number(node[k]) for k in ("const", "enum") if k in node):
            return False
        todo += node.values()
    return True


def _holds_number(value) -> bool:
    if isinstance(value, (list, dict)):
        return any(map(_holds_number, value.values() if isinstance(value, dict) else value))
    return isinstance(value, (int, float, Decimal)) and not isinstance(value, bool)


# the JSON texts whose numbers are all in their shortest spelling: strings, other characters
# (no digit or "-", which start numbers), and shortest numbers each followed by a delimiter or the end
_STRING = r'"(?:[^"\\]|\\[\s\S])*"'
SHORTEST_TEXTS = rf'(?:{_STRING}|[^"0-9\-]|(?:{NUMBER})[ \t\n\r,\]}}])*(?:{NUMBER})?'
_TOKENS = re.compile(rf'({_STRING})|(-?[0-9][0-9.]*)')


def respelled_text(budget: Budget, text: str, spelling: str) -> pynini.Fst | None:
    """Every spelling of a JSON text (its numbers shortest, as :data:`SHORTEST_TEXTS`): each
    number spelled by :func:`value_spellings`, the rest as written."""
    out, at = lit(""), 0
    for m in _TOKENS.finditer(text):
        if m.group(2) is not None:
            out = pynini.concat(pynini.concat(out, lit(text[at:m.start()])),
                                value_spellings(budget, Decimal(m.group(2)), spelling))
            at = m.end()
    return budget.dfa(pynini.concat(out, lit(text[at:])), "the spellings of a value")
