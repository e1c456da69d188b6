"""JSON Schema ``pattern``: ECMA-262 regular expressions in Python ``re`` syntax (draft 2020-12 Sec. 6.4).

A schema's pattern is ECMA-262 (Unicode mode) and *unanchored*: a string is valid when the
pattern matches somewhere in it. :func:`search_regex` rewrites it as a Python regex whose
full match is exactly that search, for ``tokfst_cli.text.regex.compile_regex`` (stage A's
compiler) and for Python's ``re`` alike:

* each top-level alternative keeps its own anchors: ``^`` at its start / ``$`` at its end
  drop the padding ``(?:[^\\n]|\\n)*`` on that side (a group around the whole pattern, as in
  ``(^x$)``, is looked through); an anchor anywhere else is refused;
* the classes whose meaning differs are spelled out: ``\\d`` = [0-9], ``\\w`` =
  [A-Za-z0-9_], ``\\s`` = ECMA's WhiteSpace and LineTerminator set, ``.`` = any character but
  a line terminator (\\n, \\r, U+2028, U+2029), ``[^]`` = any character; ``\\p{...}``
  (Unicode properties, with the ``regex`` package's tables), ``\\u{...}``, ``\\cX``,
  surrogate pairs ``\\uD83D\\uDE00`` and ``\\0`` are translated;
* a ``{`` that does not start a quantifier is a literal (as in ECMA), lazy quantifiers match
  the same strings, named groups become plain groups;
* refused, by name: backreferences, lookaround, word boundaries ``\\b``/``\\B``, lone
  surrogates and the empty class ``[]``.
"""

from __future__ import annotations

import re
from functools import lru_cache

import numpy as np

from tokfst_cli.automata import utf8
from tokfst_cli.errors import InputError
from tokfst_cli.text import anchors

Ranges = list[tuple[int, int]]

ANY = r"(?:[^\n]|\n)"  # every character: cheap for interegular (a negated class), and for re
_WS: Ranges = utf8.ranges_of_ranges([(0x09, 0x0D), (0x20, 0x20), (0xA0, 0xA0), (0x1680, 0x1680), (0x2000, 0x200A),
                                     (0x2028, 0x2029), (0x202F, 0x202F), (0x205F, 0x205F), (0x3000, 0x3000),
                                     (0xFEFF, 0xFEFF)])
_SHORTHAND: dict[str, Ranges] = {"d": [(0x30, 0x39)], "w": [(0x30, 0x39), (0x41, 0x5A), (0x5F, 0x5F), (0x61, 0x7A)],
                                 "s": _WS}
_LINE_TERMINATORS: Ranges = [(0x0A, 0x0A), (0x0D, 0x0D), (0x2028, 0x2029)]
_CONTROL = {"n": 0x0A, "r": 0x0D, "t": 0x09, "f": 0x0C, "v": 0x0B}
_SPECIAL = set(".^$*+?{}[]\\|()")
_QUANTIFIER = re.compile(r"\{(\d+)(,(\d*))?\}")


def _refuse(pattern: str, what: str) -> InputError:
    return InputError(f"pattern {pattern!r} uses {what}, which has no regular translation here",
                      "rewrite the pattern without it", hint="schema-pattern", pattern=pattern)


def _esc(cp: int) -> str:
    return f"\\u{cp:04x}" if cp < 0x10000 else f"\\U{cp:08x}"


def _class(ranges: Ranges, negated: bool = False) -> str:
    body = "".join(_esc(lo) if lo == hi else f"{_esc(lo)}-{_esc(hi)}" for lo, hi in ranges)
    return f"[{'^' if negated else ''}{body}]"


def _size(ranges: Ranges) -> int:
    return sum(hi - lo + 1 for lo, hi in ranges)


def _intersect(a: Ranges, b: Ranges) -> Ranges:
    return [(max(lo, c), min(hi, d)) for lo, hi in a for c, d in b if max(lo, c) <= min(hi, d)]


def _minus(a: Ranges, b: Ranges) -> Ranges:
    return _intersect(a, utf8.complement(b)) if b else a


@lru_cache(maxsize=None)
def _property(name: str) -> tuple[tuple[int, int], ...]:
    """The code points of a Unicode property (``\\p{Letter}``, ``\\p{Script=Greek}``), from ``regex``."""
    import regex  # deferred: the regex package's Unicode tables (start-up)

    try:
        prop = regex.compile(r"\p{" + name + "}+")
    except regex.error:
        raise InputError(f"unknown Unicode property \\p{{{name}}} in a pattern", "use a Unicode property name",
                         hint="schema-pattern") from None
    text = _all_characters()
    return tuple((m.start(), m.end() - 1) for m in prop.finditer(text))


@lru_cache(maxsize=1)
def _all_characters() -> str:
    """Every code point as one string (surrogates replaced by U+0000, which no property shares with them)."""
    points = np.arange(utf8.MAX_CODE_POINT + 1, dtype="<u4")
    points[utf8.SURROGATES[0]:utf8.SURROGATES[1] + 1] = 0
    return points.tobytes().decode("utf-32-le")


class _Scanner:
    """One pass over the pattern, writing Python syntax (see the module docstring)."""

    def __init__(self, pattern: str):
        self.p, self.i, self.depth = pattern, 0, 0

    def peek(self, k: int = 0) -> str:
        j = self.i + k
        return self.p[j] if j < len(self.p) else ""

    def error(self, what: str) -> InputError:
        return _refuse(self.p, what)

    def hex(self, n: int) -> int | None:
        s = self.p[self.i:self.i + n]
        if len(s) == n and all(c in "0123456789abcdefABCDEF" for c in s):
            self.i += n
            return int(s, 16)
        return None

    def code_unit_escape(self) -> int | None:
        """After ``\\u``: a code point (surrogate pairs joined), or None for an identity ``u``."""
        if self.peek() == "{":
            end = self.p.find("}", self.i)
            try:
                cp = int(self.p[self.i + 1:end], 16)
            except ValueError:
                raise self.error("an invalid \\u{...} escape") from None
            self.i = end + 1
            return cp
        cp = self.hex(4)
        if cp is None:
            return None
        if 0xD800 <= cp <= 0xDBFF and self.p.startswith("\\u", self.i):
            save = self.i
            self.i += 2
            low = self.hex(4)
            if low is not None and 0xDC00 <= low <= 0xDFFF:
                return 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00)
            self.i = save
        if 0xD800 <= cp <= 0xDFFF:
            raise self.error("a lone surrogate escape")
        return cp

    def escape(self, in_class: bool) -> tuple[str, object]:
        """After a backslash: ("cp", code point) or ("set", (ranges, negated))."""
        c = self.peek()
        self.i += 1
        if c == "":
            raise self.error("a trailing backslash")
        if c.lower() in _SHORTHAND:
            return "set", (_SHORTHAND[c.lower()], c.isupper())
        if c in "pP" and self.peek() == "{":
            end = self.p.find("}", self.i)
            name = self.p[self.i + 1:end]
            self.i = end + 1
            return "set", (list(_property(name)), c == "P")
        if c in _CONTROL:
            return "cp", _CONTROL[c]
        if c == "b" and in_class:
            return "cp", 0x08
        if c in "bB":
            raise self.error("a word boundary \\b or \\B")
        if c == "0" and not self.peek().isdigit():
            return "cp", 0
        if c.isdigit():
            raise self.error("a backreference")
        if c == "k" and self.peek() == "<":
            raise self.error("a named backreference")
        if c == "x":
            cp = self.hex(2)
            return "cp", ord("x") if cp is None else cp
        if c == "u":
            cp = self.code_unit_escape()
            return "cp", ord("u") if cp is None else cp
        if c == "c" and self.peek().isalpha():
            self.i += 1
            return "cp", ord(self.p[self.i - 1]) % 32
        return "cp", ord(c)  # identity escape

    def char_class(self) -> str:
        """After ``[``: the class as Python syntax."""
        negated = self.peek() == "^"
        self.i += negated
        positive: Ranges = []
        complements: list[Ranges] = []
        while True:
            c = self.peek()
            if c == "":
                raise self.error("an unterminated character class")
            self.i += 1
            if c == "]":
                break
            lo = self.class_atom(c, positive, complements)
            if lo is None:
                continue
            if self.peek() == "-" and self.peek(1) not in ("]", ""):
                self.i += 1
                c2 = self.peek()
                self.i += 1
                hi = self.class_atom(c2, positive, complements)
                if hi is None:  # [a-\d]: ECMA Annex B reads the "-" literally
                    positive += [(lo, lo), (0x2D, 0x2D)]
                    continue
                if hi < lo:
                    raise self.error("a character range out of order")
                positive.append((lo, hi))
            else:
                positive.append((lo, lo))
        pos = utf8.remove_surrogates(utf8.ranges_of_ranges(positive))
        if complements:  # P | ~A1 | ~A2 ... = ~((A1 & A2 ...) - P)
            common = complements[0]
            for other in complements[1:]:
                common = _intersect(common, other)
            rest = utf8.remove_surrogates(_minus(common, pos))
            return self.spell(rest, not negated)
        return self.spell(pos, negated)

    def spell(self, ranges: Ranges, negated: bool) -> str:
        """The class, listing the smaller side (the compiler expands a class character by character)."""
        other = utf8.complement(ranges)
        if _size(other) < _size(ranges):
            ranges, negated = other, not negated
        if not ranges:
            if negated:
                return ANY
            raise self.error("an empty character class")
        return _class(ranges, negated)

    def class_atom(self, c: str, positive: Ranges, complements: list[Ranges]) -> int | None:
        if c != "\\":
            return ord(c)
        kind, value = self.escape(in_class=True)
        if kind == "cp":
            return value
        ranges, neg = value
        (complements.append(list(ranges)) if neg else positive.extend(ranges))
        return None

    def atom_or_quantifier(self, out: list[str]) -> None:
        c = self.peek()
        self.i += 1
        if c == "\\":
            kind, value = self.escape(in_class=False)
            if kind == "cp":
                out.append(_class([(value, value)]))
            else:
                ranges, neg = value
                out.append(self.spell(ranges, neg))
        elif c == ".":
            out.append(_class(_LINE_TERMINATORS, negated=True))
        elif c == "[":
            if self.peek() == "]":
                raise self.error("an empty character class []")
            if self.peek() == "^" and self.peek(1) == "]":
                self.i += 2
                out.append(ANY)
            else:
                out.append(self.char_class())
        elif c == "(":
            if self.peek() == "?":
                if self.peek(1) == ":":
                    self.i += 2
                elif self.peek(1) == "<" and self.peek(2) not in ("=", "!"):
                    self.i = self.p.index(">", self.i) + 1  # a named group: captures do not matter here
                else:
                    raise self.error("lookaround")
            self.depth += 1
            out.append("(?:")
        elif c == ")":
            self.depth -= 1
            if self.depth < 0:
                raise InputError(f"pattern {self.p!r} has an unbalanced ')'", "fix the pattern", hint="schema-pattern")
            out.append(")")
        elif c in "*+?":
            out.append(c)
            self.lazy()
        elif c == "{":
            m = _QUANTIFIER.match(self.p, self.i - 1)
            if m:
                self.i = m.end()
                out.append(m.group(0))
                self.lazy()
            else:
                out.append(r"\{")
        elif c in "^$":
            raise self.error("an anchor inside the pattern (only ^ at the start and $ at the end of an alternative)")
        else:
            out.append("\\" + c if c in _SPECIAL else c)

    def lazy(self) -> None:
        if self.peek() == "?":  # a lazy quantifier matches the same strings
            self.i += 1

    def alternatives(self) -> list[tuple[bool, str, bool]]:
        """(anchored at the start, Python body, anchored at the end) per top-level alternative."""
        alts, out = [], []
        start = self.take("^")
        while self.i < len(self.p):
            c = self.peek()
            if c == "|" and self.depth == 0:
                self.i += 1
                alts.append((start, "".join(out), False))
                out, start = [], self.take("^")
            elif c == "|":
                self.i += 1
                out.append("|")
            elif c == "$" and self.depth == 0 and (self.i + 1 == len(self.p) or self.p[self.i + 1] == "|"):
                self.i += 1
                alts.append((start, "".join(out), True))
                out, start = None, None
                if self.i < len(self.p):
                    self.i += 1
                    out, start = [], self.take("^")
            else:
                self.atom_or_quantifier(out)
        if self.depth != 0:
            raise InputError(f"pattern {self.p!r} has an unbalanced '('", "fix the pattern", hint="schema-pattern")
        if out is not None:
            alts.append((start, "".join(out), False))
        return alts

    def take(self, c: str) -> bool:
        if self.peek() == c:
            self.i += 1
            return True
        return False


@lru_cache(maxsize=4096)
def search_regex(pattern: str) -> str:
    """A Python regex whose full match is the ECMA-262 search of ``pattern`` (see the module docstring)."""
    parts = []
    for alt in anchors.flat(pattern, named=True):  # (^a)|(^b): groups that are whole alternatives opened
        for anchored_start, body, anchored_end in _Scanner(alt).alternatives():
            parts.append(("" if anchored_start else ANY + "*") + f"(?:{body})" + ("" if anchored_end else ANY + "*"))
    return "|".join(parts) if len(parts) > 1 else parts[0]


@lru_cache(maxsize=4096)
def matcher(pattern: str) -> re.Pattern:
    """Python's ``re`` for the ECMA search of ``pattern`` (use ``.fullmatch``)."""
    return re.compile(search_regex(pattern))


def search(pattern: str, text: str) -> bool:
    """Does the ECMA-262 ``pattern`` match somewhere in ``text``?"""
    return matcher(pattern).fullmatch(text) is not None
