"""Syntactic sugar (Koo et al. 2024 Sec. 2.5.2, Table 1): groups compiled to their small automata directly.

Each is a named group of a regex (``groups.py`` finds it); its body is read here:

``(?P<SUBSTRING_OF>text)``
    any non-empty substring of the literal text (whole characters; ``\\`` escapes the next
    character). The factor automaton: every character boundary of the text's chain is entered
    from a new start and final, determinized: at most 2n - 1 states, where the regex
    alternation of all substrings has n^2 / 2 of them.
``(?P<DELIMITED_LIST>(ITEM)(SEP){m,n})``
    m..n ITEMs separated by SEPs (default 1 or more; m = 0 allows nothing at all).
``(?P<DELIMITED_SUBSEQUENCE_OF>(A)(B)...(SEP){m,n})``
    the items in their order, any non-empty selection of them (m..n of them), joined by SEP:
    a chain with skip arcs, one copy of each item per count, not 2^items alternatives.
``(?P<TEXT_UNTIL>stop|stop2)``
    any text that ends with a stop phrase and has none before: (Σ* U) − (Σ* U Σ+) over
    valid UTF-8.

ITEM, SEP and the items are regexes (compiled by the ``compile`` callback); the result is a
byte acceptor (labels byte + 1), determinized by the caller.
"""

from __future__ import annotations

import re
from typing import Callable

import pynini

from tokfst_cli.automata import utf8
from tokfst_cli.automata.fsts import ranges_acceptor, text_acceptor
from tokfst_cli.errors import InputError

NAMES = ("SUBSTRING_OF", "DELIMITED_LIST", "DELIMITED_SUBSEQUENCE_OF", "TEXT_UNTIL")
SYNTAX = {
    "SUBSTRING_OF": "(?P<SUBSTRING_OF>text)",
    "DELIMITED_LIST": "(?P<DELIMITED_LIST>(ITEM)(SEP)) or (?P<DELIMITED_LIST>(ITEM)(SEP){m,n})",
    "DELIMITED_SUBSEQUENCE_OF": "(?P<DELIMITED_SUBSEQUENCE_OF>(A)(B)...(SEP)), optionally {m,n} after the groups",
    "TEXT_UNTIL": "(?P<TEXT_UNTIL>stop) or (?P<TEXT_UNTIL>stop1|stop2)",
}
_BOUND = re.compile(r"\{(\d+)(?:(,)(\d*))?\}\Z")
Compile = Callable[[str], pynini.Fst]


def _bad(name: str, why: str) -> InputError:
    return InputError(f"group {name}: {why}", f"write {SYNTAX[name]}")


def unescape(text: str) -> str:
    """A backslash makes the next character literal."""
    return re.sub(r"\\(.)", r"\1", text, flags=re.DOTALL)


def _split_alternatives(body: str) -> list[str]:
    """The body split at unescaped ``|``, each part unescaped."""
    parts, cur, i = [], [], 0
    while i < len(body):
        if body[i] == "\\" and i + 1 < len(body):
            cur.append(body[i + 1])
            i += 2
            continue
        if body[i] == "|":
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(body[i])
        i += 1
    return parts + ["".join(cur)]


def _parts(name: str, body: str) -> tuple[list[str], int, int | None]:
    """The parenthesized groups of a body, then its bound {m,n} (default 1, unbounded)."""
    pass

    parts, i = [], 0
    while i < len(body) and body[i] == "(":
        end = close(body, i + 1)
        if end < 0:
            raise _bad(name, "a group is not closed")
        parts.append(body[i + 1:end])
        i = end + 1
    rest = body[i:]
    m = _BOUND.match(rest) if rest else None
    if rest and m is None:
        raise _bad(name, f"unexpected {rest!r} after the groups")
    if m is None:
        return parts, 1, None
    lo = int(m.group(1))
    hi = lo if m.group(2) is None else (int(m.group(3)) if m.group(3) else None)
    if hi is not None and hi < lo:
        raise _bad(name, f"bound {{{lo},{hi}}} has max below min")
    return parts, lo, hi


def substring_of(text: str) -> pynini.Fst:
    """Non-empty substrings of ``text`` in whole characters (the factor automaton)."""
    f = text_acceptor(text)
    one = pynini.Weight.one(f.weight_type())
    boundaries, at = [0], 0
    for c in text:
        at += len(c.encode("utf-8"))
        boundaries.append(at)
    start = f.add_state()
    for q in boundaries:
        f.add_arc(start, pynini.Arc(0, 0, one, q))
        f.set_final(q)
    f.set_start(start)
    f = pynini.determinize(f.rmepsilon()).minimize()
    return pynini.difference(f, pynini.accep("")).connect()


def delimited_list(item: pynini.Fst, sep: pynini.Fst, lo: int, hi: int | None) -> pynini.Fst:
    """ITEM (SEP ITEM){lo-1, hi-1}; lo = 0 adds the empty string."""
    if hi == 0:
        return pynini.accep("")
    tail = (sep + item).closure(max(lo - 1, 0), hi - 1 if hi is not None else 0) if hi != 1 else pynini.accep("")
    f = item + tail
    return f.union(pynini.accep("")) if lo == 0 else f


def delimited_subsequence(items: list[pynini.Fst], sep: pynini.Fst, lo: int, hi: int | None) -> pynini.Fst:
    """The items in order, lo..hi of them (at least one), joined by SEP: states (item, count)."""
    k = len(items)
    top = min(hi if hi is not None else k, k)
    f = pynini.Fst()
    one = pynini.Weight.one(f.weight_type())
    state = {(i, c): f.add_state() for i in range(k + 1) for c in range(top + 1)}
    f.set_start(state[(0, 0)])
    for c in range(max(lo, 1), top + 1):
        f.set_final(state[(k, c)])
    for i in range(k):
        for c in range(top + 1):
            f.add_arc(state[(i, c)], pynini.Arc(0, 0, one, state[(i + 1, c)]))  # skip item i
            if c < top:
                _insert(f, state[(i, c)], state[(i + 1, c + 1)], sep + items[i] if c else items[i])
    return f.connect()


def _insert(f: pynini.Fst, src: int, dst: int, sub: pynini.Fst) -> None:
    """A copy of ``sub`` between ``src`` and ``dst`` (epsilon arcs in and out)."""
    one = pynini.Weight.one(f.weight_type())
    zero = pynini.Weight.zero(sub.weight_type())
    offset = f.num_states()
    f.add_states(sub.num_states())
    f.add_arc(src, pynini.Arc(0, 0, one, offset + sub.start()))
    for s in sub.states():
        for a in sub.arcs(s):
            f.add_arc(offset + s, pynini.Arc(a.ilabel, a.olabel, one, offset + a.nextstate))
        if sub.final(s) != zero:
            f.add_arc(offset + s, pynini.Arc(0, 0, one, dst))


def text_until(stops: list[str]) -> pynini.Fst:
    """Text ending at the first occurrence of any stop: (Σ* U) − (Σ* U Σ+), Σ the UTF-8 characters."""
    sigma = ranges_acceptor(utf8.remove_surrogates([(0, utf8.MAX_CODE_POINT)]))
    anything = sigma.copy().closure()
    u = pynini.union(*(text_acceptor(s) for s in stops))
    ends = pynini.determinize((anything + u).rmepsilon()).minimize()
    earlier = pynini.determinize((anything + u + sigma.copy().closure(1)).rmepsilon()).minimize()
    return pynini.difference(ends, earlier).connect()


def build(name: str, body: str, compile: Compile) -> pynini.Fst:
    """The byte acceptor of the sugar group ``name`` with ``body`` (see the module docstring)."""
    if name == "SUBSTRING_OF":
        text = unescape(body)
        if not text:
            raise _bad(name, "the text is empty")
        return substring_of(text)
    if name == "TEXT_UNTIL":
        stops = _split_alternatives(body)
        if not all(stops):
            raise _bad(name, "a stop phrase is empty")
        return text_until(stops)
    if name in ("DELIMITED_LIST", "DELIMITED_SUBSEQUENCE_OF"):
        parts, lo, hi = _parts(name, body)
        if name == "DELIMITED_LIST":
            if len(parts) != 2:
                raise _bad(name, f"{len(parts)} groups, expected 2 (the item and the separator)")
            return delimited_list(compile(parts[0]), compile(parts[1]), lo, hi)
        if len(parts) < 2:
            raise _bad(name, "expected at least one item group and the separator group")
        if hi is not None and hi < 1:
            raise _bad(name, "a subsequence has at least one item")
        return delimited_subsequence([compile(p) for p in parts[:-1]], compile(parts[-1]), lo, hi)
    raise InputError(f"unknown group {name}", f"use one of: {', '.join(NAMES)}")


def close(pattern: str, i: int) -> int:
    """The index of the ``)`` closing the group whose body starts at ``i`` (escapes and
    character classes respected), or -1."""
    depth = 0
    while i < len(pattern):
        if pattern[i] == ")":
            if depth == 0:
                return i
            depth -= 1
        depth += pattern[i] == "("
        i = _atom(pattern, i)
    return -1


def _atom(pattern: str, i: int) -> int:
    """The index after the atom at ``i``: an escape, a whole character class ``[...]`` (``]``
    first, or after ``^``, is literal), or one character."""
    if pattern[i] == "\\":
        return i + 2
    if pattern[i] != "[":
        return i + 1
    j = i + 1 + (pattern[i + 1:i + 2] == "^")
    j += pattern[j:j + 1] == "]"
    while j < len(pattern) and pattern[j] != "]":
        j += 2 if pattern[j] == "\\" else 1
    return j + 1
