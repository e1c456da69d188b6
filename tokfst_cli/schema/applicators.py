"""anyOf, oneOf, not, if/then/else, dependentSchemas: Boolean operations on per-type languages
(draft 2020-12 Sec. 10.2).

A schema's language at a position is split by JSON type (:mod:`.automata`). A part the
schema's own keywords leave unconstrained is :data:`TOP`, "every text of that type here",
and is built only when an operation needs its automaton (a difference from it, or the
final value): ``{"type": "object", "oneOf": [...]}``, the usual tagged union, then never
builds the object universe it would only intersect away.

``anyOf`` is a union; ``oneOf`` keeps, branch after branch, "valid under exactly one so far"
and "under two or more so far" (object parts told apart by a tag are not intersected: see
:func:`tagged`); ``not`` is a difference; ``if``/``then``/``else`` is
(L & I & T) | ((L - I) & E); ``dependentSchemas`` k -> S is ``if`` "an object with k" ``then`` S.
"""

from __future__ import annotations

import json
from typing import NamedTuple

import pynini

from tokfst_cli.schema import ecma, numbers, strings
from tokfst_cli.schema.automata import TYPES, Lang
from tokfst_cli.schema.context import Position, value_schemas
from tokfst_cli.schema.refs import ACTIVE


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

    def every(self, kind: str, f) -> bool:
        """Is ``f`` every text of its type here: TOP, or TOP built (a branch ``{"type": "object"}``)?"""
        return f is TOP or self.c.is_universe(f, kind, self.depth, self.pos)

    def meet(self, a: Lang, b: Lang, what: str) -> Lang:
        out = {}
        for t in TYPES:
            if t in a and t in b:
                f = (b[t] if self.every(t, a[t]) else a[t] if self.every(t, b[t])
                     else self.c.budget.intersect(a[t], b[t], what))
                if f is not None:
                    out[t] = f
        return out

    def join(self, langs: list[Lang], what: str) -> Lang:
        out = {}
        for t in TYPES:
            parts = [g[t] for g in langs if t in g]
            if any(self.every(t, p) for p in parts):
                out[t] = next(p for p in parts if self.every(t, p))
            elif (f := self.c.budget.union(parts, what)) is not None:
                out[t] = f
        return out

    def minus(self, a: Lang, b: Lang, what: str) -> Lang:
        out = {}
        for t, f in a.items():
            if t not in b:
                out[t] = f
            elif not self.every(t, b[t]) and (g := self.c.budget.difference(self.built(t, f), b[t], what)) is not None:
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
        run("anyOf", lambda lang, branch: alg.meet(lang, alg.join([branch(s) for s in node["anyOf"]], "anyOf"),
                                                   "anyOf"))
    if "oneOf" in node:
        run("oneOf", lambda lang, branch: _one_of(alg, lang, [branch(s) for s in node["oneOf"]],
                                                  tagged(c, node["oneOf"], pos)))
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


def _one_of(alg: Algebra, lang: Lang, branches: list[Lang], apart: list[list[bool]]) -> Lang:
    """Valid under exactly one branch: "exactly one so far" and "two or more so far", branch by
    branch. Where "one" and the branch share no value (the type parts whose meet is empty, the
    common case of branches told apart by type or by a constant), the differences are the
    operands themselves and are not computed. ``apart[i][j]``: the objects of branches i and j
    are known to be disjoint (:func:`tagged`); objects then go branch by branch (:func:`_objects`)."""
    bs = [alg.meet(lang, branch, "oneOf") for branch in branches]
    objects = any(map(any, apart))
    one: Lang = {}
    more: Lang = {}
    for b in bs:
        b = {t: f for t, f in b.items() if not (objects and t == "object")}
        both = alg.meet(one, b, "oneOf")
        more = alg.join([more, both], "oneOf")
        one = alg.join([alg.minus(one, _overlap(b, both), "oneOf"),
                        alg.minus(alg.minus(b, _overlap(one, both), "oneOf"), more, "oneOf")], "oneOf")
    return {**one, **_objects(alg, [{"object": b["object"]} if "object" in b else {} for b in bs], apart)} \
        if objects else one


def _objects(alg: Algebra, parts: list[Lang], apart: list[list[bool]]) -> Lang:
    """The objects valid under exactly one branch, each branch keeping its own part valid under it
    alone so far: branch i meets only the earlier parts it is not apart from, so when every pair
    is apart this is their union."""
    alone: dict[int, Lang] = {}  # branch -> its objects valid under no other branch so far
    more: Lang = {}  # valid under two or more so far
    for i, b in enumerate(parts):
        if not b:
            continue
        mine, before = b, more
        for j in [j for j in alone if not apart[i][j]]:
            both = alg.meet(alone[j], b, "oneOf")
            if both:
                more = alg.join([more, both], "oneOf")
                mine = alg.minus(mine, alone[j], "oneOf")
                alone[j] = alg.minus(alone[j], b, "oneOf")
        alone[i] = alg.minus(mine, before, "oneOf") if before else mine
    return alg.join(list(alone.values()), "oneOf")


def tagged(c, schemas: list, pos: Position) -> list[list[bool]]:
    """Per branch i of a oneOf at ``pos``, per earlier branch j: are their objects disjoint?

    True when one of them requires a key the other lacks (``not`` ``{"required": [k]}`` or an
    ``anyOf`` of such, ``additionalProperties: false`` without k), or some key is required by
    both and fixed by both to constants (``const``/``enum``: a tagged union's ``"type":
    {"const": ...}``) none of which are equal. Exact: an object valid under both would have and
    lack the key, or (a key named at the position is written at most once in every object
    compiled there, in one spelling: :mod:`.objects`) have one value equal to a constant of each.
    """
    key = ("tagged", id(schemas), pos.key)  # asked by .presence, then by apply: decided once
    if key in c.cache:
        return c.cache[key]
    marks = [_marks(c, s, pos) for s in schemas]

    def apart(x: _Marks, y: _Marks) -> bool:
        return (any(map(y.lacks, x.has)) or any(map(x.lacks, y.has))
                or any(k in y.tags and not x.tags[k] & y.tags[k] for k in x.tags))

    c.cache[key] = got = [[apart(m, n) for n in marks[:i]] for i, m in enumerate(marks)]
    return got


class _Marks(NamedTuple):
    """What every object valid under a schema has: keys it has (``has``), keys it lacks (``lacking``,
    and those no ``closed`` node allows: :meth:`lacks`), keys named at the position with their
    possible constants (``tags``, :func:`_same_value` keys)."""

    has: set[str]
    lacking: set[str]
    tags: dict[str, set[str]]
    closed: list[dict]  # nodes with additionalProperties false
    groups: list[list["_Marks"]]  # anyOf/oneOf: the marks of each branch

    def lacks(self, key: str) -> bool:
        return key in self.lacking or any(
            key not in (n.get("properties") or {})
            and not any(ecma.search(p, key) for p in (n.get("patternProperties") or {})) for n in self.closed
        ) or any(all(m.lacks(key) for m in each) for each in self.groups)


def _marks(c, schema, pos: Position, seen: frozenset[int] = frozenset()) -> _Marks:
    """:class:`_Marks` of ``schema``, through ``anyOf``/``oneOf`` too (what every branch has)."""
    conj = c.flatten([schema]) or ()
    out = _Marks({k for x in conj for k in x.get("required", ()) if isinstance(k, str)}, set(), {},
                 [n for n in conj if n.get("additionalProperties") is False], [])

    def narrow(name: str, keys: set[str]) -> None:
        out.tags[name] = out.tags[name] & keys if name in out.tags else keys

    for name in out.has & set(pos.names):
        for node in c.flatten([s for n in conj for s in value_schemas(n, name)]) or ():
            allowed = [node["const"]] if "const" in node else node.get("enum")
            if isinstance(allowed, list):
                narrow(name, {_same_value(v) for v in allowed})
    for node in conj:
        if "not" in node:
            out.lacking.update(_sufficient(c, node["not"]))
        for keyword in ("anyOf", "oneOf"):
            branches = node.get(keyword)
            if isinstance(branches, list) and branches and id(node) not in seen:
                each = [_marks(c, b, pos, seen | {id(node)}) for b in branches]
                out.has.update(set.intersection(*(m.has for m in each)))
                out.groups.append(each)
                for name in set.intersection(*(set(m.tags) for m in each)):
                    narrow(name, set().union(*(m.tags[name] for m in each)))
    return out


def _sufficient(c, schema, seen: frozenset[int] = frozenset()) -> set[str]:
    """Keys whose presence alone makes an object valid under ``schema``: ``{"required": [k]}``,
    and the union of those of an ``anyOf``'s branches."""
    conj = c.flatten([schema])
    if not conj or len(conj) != 1 or id(conj[0]) in seen:
        return set()
    node, = conj
    asked = set(node) & ACTIVE
    if asked == {"required"} and isinstance(node["required"], list) and len(node["required"]) == 1:
        return {k for k in node["required"] if isinstance(k, str)}
    if asked == {"anyOf"} and isinstance(node["anyOf"], list):
        return set().union(*(_sufficient(c, b, seen | {id(node)}) for b in node["anyOf"]))
    return set()


def _same_value(v) -> str:
    """The canonical JSON text of a constant: equal for values JSON Schema calls equal (``1`` and
    ``1.0``: :func:`.numbers.canonical`; key order), different otherwise (``true`` and ``1``)."""
    if isinstance(v, dict):
        return "{" + ",".join(f"{strings.quote(k)}:{_same_value(v[k])}" for k in sorted(v)) + "}"
    if isinstance(v, list):
        return "[" + ",".join(map(_same_value, v)) + "]"
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return numbers.canonical(v)
    return strings.quote(v) if isinstance(v, str) else json.dumps(v)


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
