"""``const`` and ``enum``: the texts of given JSON values at a position (draft 2020-12 Sec. 6.1.2-3).

A value has one text here up to its numbers: strings in their canonical spelling
(:func:`.strings.quote`), numbers in the compilation's spellings
(:func:`.numbers.value_spellings`: the shortest one, or with trailing zeros and ``-0``), object
keys in the position's order (every key of a constant is a named key of its position, see
:mod:`.context`), the separators of the whitespace policy. So ``const`` is exact, and complements of it too. With
``any_order`` an object constant is the object schema of exactly its members, so its keys come
in every order (as the objects of ``properties`` do there).
"""

from __future__ import annotations

import pynini

from tokfst_cli.schema import numbers, strings
from tokfst_cli.schema.automata import Lang, lit
from tokfst_cli.schema.context import Position


def json_type(value) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    raise TypeError(f"not a JSON value: {value!r}")


def text(c, value, depth: int, pos: Position) -> pynini.Fst | None:
    """The texts of ``value`` at ``pos`` (None: nested deeper than ``depth`` allows)."""
    kind = json_type(value)
    if kind == "null":
        return lit("null")
    if kind == "boolean":
        return lit("true" if value else "false")
    if kind == "number":
        return numbers.value_spellings(c.budget, value, c.numbers)
    if kind == "string":
        return lit(strings.quote(value))
    inner = c.inner(depth, pos)
    if inner is None:
        return None
    if kind == "array":
        parts = [text(c, v, inner, pos.item(i)) for i, v in enumerate(value)]
        return _join(c, "[", [p for p in parts], "]")
    if c.any_order:  # every order of its keys: the objects with exactly its members
        return c.value([c.members_of(value)], depth, pos)
    order = {k: i for i, k in enumerate(pos.names)}
    keys = sorted(value, key=lambda k: order.get(k, len(order)))
    parts = []
    for k in keys:
        v = text(c, value[k], inner, pos.child(k))
        parts.append(None if v is None else pynini.concat(pynini.concat(lit(strings.quote(k)), c.policy.colon), v))
    return _join(c, "{", parts, "}")


def _join(c, open_: str, parts: list[pynini.Fst | None], close: str) -> pynini.Fst | None:
    if any(p is None for p in parts):
        return None
    f = c.policy.open(open_).copy()
    for i, p in enumerate(parts):
        if i:
            f.concat(c.policy.comma)
        f.concat(p)
    return f.concat(c.policy.close(close))


def language(c, values: list, depth: int, pos: Position) -> Lang:
    """The texts of any of ``values``, by JSON type."""
    by_type: dict[str, list[pynini.Fst]] = {}
    for v in values:
        f = text(c, v, depth, pos)
        if f is not None:
            by_type.setdefault(json_type(v), []).append(f)
    out = {}
    for t, fs in by_type.items():
        f = c.budget.union(fs, "the values of enum") if len(fs) > 1 else c.budget.dfa(fs[0].copy(), "a const value")
        if f is not None:
            out[t] = f
    return out
