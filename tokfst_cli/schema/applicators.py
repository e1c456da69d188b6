"""anyOf, oneOf, not, if/then/else, dependentSchemas: Boolean operations on per-type languages (draft 2020-12 Sec. 10.2).

A schema's language at a position is split by JSON type (:mod:`.automata`). A part the
schema's own keywords leave unconstrained is :data:`TOP`, "every text of that type here",
and is built only when an operation needs its automaton (a difference from it, or the
final value): ``{"type": "object", "oneOf": [...]}``, the usual tagged union, then never
builds the object universe it would only intersect away.

``anyOf`` is a union; ``oneOf`` keeps, branch after branch, "valid under exactly one so far"
and "under two or more so far"; ``not`` is a difference; ``if``/``then``/``else`` is
(L & I & T) | ((L - I) & E); ``dependentSchemas`` k -> S is ``if`` "an object with k" ``then`` S.
"""

from __future__ import annotations

import pynini

from .automata import TYPES, Lang
from .context import Position


class _Top:
    """Every text of one type at the position (see the module docstring)."""

    def __repr__(self) -> str:
        return "TOP"


TOP = _Top()


class Algebra:
    """Union, intersection and difference of per-type languages at one (depth, position), with TOP."""

    def __init__(self, c, depth: int, pos: Position):
        self.c, self.depth, self.pos = c, depth, pos

    def built(self, kind: str, f) -> pynini.Fst | None:
        return self.c.universe(kind, self.depth, self.pos) if f is TOP else f

    def concrete(self, lang: Lang) -> Lang:
        return {t: f for t, f in ((t, self.built(t, f)) for t, f in lang.items()) if f is not None}

    def meet(self, a: Lang, b: Lang, what: str) -> Lang:
        out = {}
        for t in TYPES:
            if t in a and t in b:
                f = b[t] if a[t] is TOP else a[t] if b[t] is TOP else self.c.budget.intersect(a[t], b[t], what)
                if f is not None:
                    out[t] = f
        return out

    def join(self, langs: list[Lang], what: str) -> Lang:
        out = {}
        for t in TYPES:
            parts = [g[t] for g in langs if t in g]
            if any(p is TOP for p in parts):
                out[t] = TOP
            elif (f := self.c.budget.union(parts, what)) is not None:
                out[t] = f
        return out

    def minus(self, a: Lang, b: Lang, what: str) -> Lang:
        out = {}
        for t, f in a.items():
            if t not in b:
                out[t] = f
            elif b[t] is not TOP and (g := self.c.budget.difference(self.built(t, f), b[t], what)) is not None:
                out[t] = g
        return out


def apply(c, node: dict, lang: Lang, depth: int, pos: Position, handled: set[tuple[int, str]] = frozenset()) -> Lang:
    """``lang`` restricted by the applicators of ``node``. Those ``handled`` were decided for
    objects on the member words (:mod:`.presence`): here they act on the other types only."""
    def run(keyword: str, op) -> None:
        nonlocal lang
        if (id(node), keyword) not in handled:
            lang = op(lang, lambda s: c.lang(c.flatten([s]), depth, pos))
        elif set(lang) - {"object"}:
            rest = op({t: f for t, f in lang.items() if t != "object"},
                      lambda s: c.lang(c.flatten([s]), depth, pos, objects=False))
            lang = {t: f for t, f in ({**rest, "object": lang.get("object")}).items() if f is not None}

    alg = Algebra(c, depth, pos)
    if "anyOf" in node:
        run("anyOf", lambda lang, branch: alg.meet(lang, alg.join([branch(s) for s in node["anyOf"]], "anyOf"), "anyOf"))
    if "oneOf" in node:
        run("oneOf", lambda lang, branch: _one_of(alg, lang, [branch(s) for s in node["oneOf"]]))
    if "not" in node:
        run("not", lambda lang, branch: alg.minus(lang, branch(node["not"]), "not"))
    if "if" in node and ("then" in node or "else" in node):
        run("if", lambda lang, branch: _if(alg, lang, branch(node["if"]),
                                           branch(node["then"]) if "then" in node else None,
                                           branch(node["else"]) if "else" in node else None))
    for keyword in ("dependentSchemas", "dependencies"):  # objects only
        if (id(node), keyword) in handled:
            continue
        for name, sub in (node.get(keyword) or {}).items():
            if isinstance(sub, (dict, bool)) and "object" in lang:
                has = c.synthesized.setdefault(name, {"type": "object", "required": [name]})
                lang = _if(alg, lang, c.lang((has,), depth, pos), c.lang(c.flatten([sub]), depth, pos), None)
    return lang


def _one_of(alg: Algebra, lang: Lang, branches: list[Lang]) -> Lang:
    """Valid under exactly one branch: "exactly one so far" and "two or more so far", branch by
    branch. Where "one" and the branch share no value (the type parts whose meet is empty, the
    common case of branches told apart by type or by a constant), the differences are the
    operands themselves and are not computed."""
    one: Lang = {}
    more: Lang = {}
    for branch in branches:
        b = alg.meet(lang, branch, "oneOf")
        both = alg.meet(one, b, "oneOf")
        more = alg.join([more, both], "oneOf")
        one = alg.join([alg.minus(one, _overlap(b, both), "oneOf"),
                        alg.minus(alg.minus(b, _overlap(one, both), "oneOf"), more, "oneOf")], "oneOf")
    return one


def _overlap(lang: Lang, both: Lang) -> Lang:
    """The parts of ``lang`` of the types where the meet ``both`` is not empty."""
    return {t: f for t, f in lang.items() if t in both}


def _if(alg: Algebra, lang: Lang, cond: Lang, then: Lang | None, otherwise: Lang | None) -> Lang:
    yes = alg.meet(lang, cond, "if")
    no = alg.minus(lang, cond, "if")
    if then is not None:
        yes = alg.meet(yes, then, "then")
    if otherwise is not None:
        no = alg.meet(no, otherwise, "else")
    return alg.join([yes, no], "if")
