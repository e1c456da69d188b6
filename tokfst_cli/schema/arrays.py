"""Arrays: positional items, then the rest, with counts, contains and uniqueItems (draft 2020-12 Sec. 10.3.1).

The items of an array at a :class:`~.context.Position` are symbols (:mod:`.sequences`): one
per prefix position (``prefixItems``, or a draft-7 ``items`` array, or a constant array's
length), then one for every later item. An array is a prefix of ``p0 p1 ... T*``;
``minItems``/``maxItems`` count symbols. ``contains`` splits each symbol in two (the item
matches the subschema or not) and counts the matching ones between ``minContains`` and
``maxContains``. ``uniqueItems`` is regular only when every item comes from a small finite
set of values (at most :data:`MAX_UNIQUE_VALUES`): then each value is a symbol, used at most
once (one state per set of values used, estimated first); otherwise it is refused.
"""

from __future__ import annotations

import json
from decimal import Decimal

import pynini

from tokfst_cli.errors import LimitError
from tokfst_cli.schema import numbers
from tokfst_cli.schema import sequences as seq
from tokfst_cli.schema.context import Position, item_schemas

MAX_UNIQUE_VALUES = 16
MAX_CONTAINS = 3


def _bound(c, conj, key: str, pick) -> int | None:
    values = [int(x[key]) for x in conj if key in x]
    return c.count(key, pick(values), pick is min) if values else None


def _texts(c, f: pynini.Fst, limit: int) -> list[str] | None:
    """The texts of a finite language with at most ``limit`` of them, else None (a call of a
    recursive value, with a stack, counts as infinitely many)."""
    f = c.budget.expand(f)
    if f.properties(pynini.ACYCLIC, True) != pynini.ACYCLIC or any(a.ilabel > 256 for q in f.states()
                                                                   for a in f.arcs(q)):
        return None
    zero = pynini.Weight.zero(f.weight_type())
    out: list[str] = []
    todo = [(f.start(), b"")]
    while todo:
        q, prefix = todo.pop()
        if f.final(q) != zero:
            out.append(prefix.decode("utf-8"))
            if len(out) > limit:
                return None
        todo += [(a.nextstate, prefix + bytes([a.ilabel - 1])) for a in f.arcs(q)]
    return out


def _value_key(v):
    """JSON equality (1 == 1.0, true != 1, objects unordered) as a hashable key."""
    if isinstance(v, bool) or v is None:
        return ("literal", v)
    if isinstance(v, (int, float)):
        return ("number", Decimal(repr(v)) if isinstance(v, float) else Decimal(v))
    if isinstance(v, str):
        return ("string", v)
    if isinstance(v, list):
        return ("array", tuple(_value_key(x) for x in v))
    return ("object", frozenset((k, _value_key(x)) for k, x in v.items()))


def array_part(c, conj: tuple[dict, ...], depth: int, pos: Position) -> pynini.Fst | None:
    """The array texts of the conjunction ``conj`` at ``pos`` (``depth``: what its items have left)."""
    budget = c.budget
    items = [c.value([s for x in conj for s in item_schemas(x, i)], depth, pos.item(i))
             for i in range(pos.prefix + 1)]
    contains = [x for x in conj if "contains" in x]
    unique = any(x.get("uniqueItems") is True for x in conj)
    lo, hi = _bound(c, conj, "minItems", max) or 0, _bound(c, conj, "maxItems", min)
    if hi is not None and hi < lo:
        return None
    if unique and (hi is None or hi > 1):
        if contains:
            c.refuse("uniqueItems", "uniqueItems together with contains")
        else:
            return _unique(c, items, lo, hi, pos)
    if len(contains) > MAX_CONTAINS:
        c.refuse("contains", f"more than {MAX_CONTAINS} contains keywords on one array")
        contains = contains[:MAX_CONTAINS]
    members: dict[int, pynini.Fst] = {}
    symbols: list[list[int]] = []  # per position, its labels
    marked: list[set[int]] = [set() for _ in contains]  # per contains keyword, the labels matching it
    for i, item in enumerate(items):
        labels = []
        if item is not None:
            tests = [c.value([x["contains"]], depth, pos.item(i)) for x in contains]
            for mask in range(2 ** len(contains)):
                f = item
                for j, test in enumerate(tests):
                    f = (budget.intersect(f, test, "contains") if mask >> j & 1
                         else budget.difference(f, test, "contains"))
                if f is not None:
                    sym = len(members)
                    members[sym] = budget.deferred(f)
                    labels.append(seq.label(sym))
                    for j in range(len(contains)):
                        if mask >> j & 1:
                            marked[j].add(seq.label(sym))
        symbols.append(labels)
    return _spell(c, _words(c, symbols, lo, hi, contains, marked), members)


def _words(c, symbols: list[list[int]], lo: int, hi: int | None, contains, marked) -> pynini.Fst:
    """Prefixes of p0 p1 ... T*, counted, with the contains counts."""
    words = seq.star(symbols[-1])
    for labels in reversed(symbols[:-1]):
        words = seq.optional(pynini.concat(seq.symbols(labels), words)) if labels else pynini.accep("")
    alphabet = [x for labels in symbols for x in labels]
    if lo or hi is not None:
        words = seq.both(words, seq.count(alphabet, lo, hi))
    for x, mark in zip(contains, marked):
        least = c.count("minContains", int(x.get("minContains", 1)), False)
        most = c.count("maxContains", None if x.get("maxContains") is None else int(x["maxContains"]), True)
        if most is not None and most < least:
            return pynini.Fst()
        words = seq.both(words, seq.counted(sorted(mark), [a for a in alphabet if a not in mark], least, most))
    return words


def _spell(c, words: pynini.Fst, members: dict[int, pynini.Fst]) -> pynini.Fst | None:
    spelled = seq.separated(c.budget, words, "the items of an array")
    if spelled is None:
        return None
    return seq.spell(c.budget, spelled, members.__getitem__, c.policy.comma, c.policy.open("["), c.policy.close("]"),
                     "an array")


def _unique(c, items: list[pynini.Fst | None], lo: int, hi: int | None, pos: Position) -> pynini.Fst | None:
    """uniqueItems over small finite item languages: a symbol per (position, value)."""
    members: dict[int, pynini.Fst] = {}
    symbols: list[list[int]] = []
    by_value: dict[object, list[int]] = {}
    for item in items:
        labels = []
        if item is not None:
            texts = _texts(c, _shortest(c, item), MAX_UNIQUE_VALUES)
            if texts is None:
                c.refuse("uniqueItems", f"uniqueItems over items with more than {MAX_UNIQUE_VALUES} values")
                return _spell(c, _words(c, _plain(items, members, symbols), lo, hi, [], []), members)
            groups: dict[object, list[str]] = {}
            for t in texts:
                groups.setdefault(_value_key(json.loads(t)), []).append(t)
            for value, ts in groups.items():
                sym = len(members)
                members[sym] = pynini.union(*(numbers.respelled_text(c.budget, t, c.numbers) for t in ts))
                labels.append(seq.label(sym))
                by_value.setdefault(value, []).append(seq.label(sym))
        symbols.append(labels)
    what = f"uniqueItems over {len(by_value)} values"
    if 2 ** len(by_value) > c.budget.max_states:
        raise LimitError(what, "max_states", c.budget.max_states, 2 ** len(by_value), remedy="simplify",
                         at_least=True)
    words = c.budget.dfa(_words(c, symbols, lo, hi, [], []), what)
    alphabet = [x for labels in symbols for x in labels]
    for labels in by_value.values():  # each step a minimal DFA: a state per set of values used (and position)
        once = c.budget.dfa(seq.at_most_once(labels, [a for a in alphabet if a not in labels]), what)
        words = None if words is None else c.budget.dfa(seq.both(words, once), what)
    return None if words is None else _spell(c, words, members)


def _shortest(c, item: pynini.Fst) -> pynini.Fst:
    """The texts of ``item`` whose numbers are all spelled shortest: one per value (the others
    spell the same values: :func:`.numbers.respelled_text`)."""
    if c.numbers == "shortest":
        return item
    if "shortest texts" not in c.cache:
        c.cache["shortest texts"] = numbers.fixed(numbers.SHORTEST_TEXTS, c.budget)
    return c.budget.intersect(item, c.cache["shortest texts"], "uniqueItems") or pynini.Fst()


def _plain(items, members: dict, symbols: list) -> list[list[int]]:
    """One symbol per position (uniqueItems ignored leniently)."""
    members.clear()
    symbols.clear()
    for item in items:
        if item is None:
            symbols.append([])
        else:
            members[len(members)] = item
            symbols.append([seq.label(len(members) - 1)])
    return symbols

