"""Objects: properties in the stable order, other keys after them (draft 2020-12 Sec. 10.3.2, 6.5).

The members of an object at a :class:`~.context.Position` are symbols (:mod:`.sequences`):
one per named key of the position, in its order, each at most once (``required``: exactly
once), then the other keys in any order and any number. Other keys fall into classes by the
``patternProperties`` they match (the decoded key strings outside the named ones, split by
each pattern), each class one symbol, so every schema at the position sees the same
classes. A member is ``"key"``, the colon and the value's language; the value's schemas
are every ``properties[key]`` and matching ``patternProperties`` of the conjunction, or its
``additionalProperties``.

``minProperties``/``maxProperties``/``dependentRequired`` and presence-only applicators are
constraints on the words (:mod:`.presence`); ``propertyNames`` restricts each key. Other keys may repeat (``{"x":1,"x":2}``
when x is not named): telling every key apart needs one state per set of keys, which no
finite automaton has for unbounded keys. With ``any_order`` the named keys may come in any
order, interleaved with the others: one state per set of named keys written, estimated
before building (2^n).
"""

from __future__ import annotations

import pynini

from ..errors import LimitError
from . import presence, sequences as seq, strings
from .automata import lit
from .context import Position, class_schemas, value_schemas

MAX_PATTERN_CLASSES = 64


def key_classes(c, pos: Position) -> list[tuple[frozenset[str], pynini.Fst]]:
    """(matched patterns, texts of the keys in that class) for the keys outside ``pos.names``."""
    if "classes" not in pos.cache:
        names = [lit(k) for k in pos.names]
        rest = c.budget.difference(strings.any_string(), c.budget.union(names, "the named keys"), "other keys")
        classes = [(frozenset(), rest)] if rest is not None else []
        for pattern in pos.patterns:
            p = c.pattern(pattern)
            split = []
            for matched, keys in classes:
                inside = c.budget.intersect(keys, p, "a patternProperties key class")
                outside = c.budget.difference(keys, p, "a patternProperties key class")
                split += [(matched | {pattern}, inside)] if inside is not None else []
                split += [(matched, outside)] if outside is not None else []
            classes = split
            if len(classes) > MAX_PATTERN_CLASSES:
                c.refuse("patternProperties", f"patternProperties splitting keys into more than "
                                              f"{MAX_PATTERN_CLASSES} classes (by the patterns they match)")
                classes = [(frozenset(), rest)] if rest is not None else []
                break
        pos.cache["classes"] = [(m, strings.text(c.budget, keys)) for m, keys in classes]
    return pos.cache["classes"]


def object_part(c, conj: tuple[dict, ...], depth: int, pos: Position,
                formulas: list[presence.Formula] = ()) -> pynini.Fst | None:
    """The object texts of the conjunction ``conj`` at ``pos`` (``depth``: what its values have left),
    with the presence-only applicators ``formulas`` (:func:`.presence.split`)."""
    budget = c.budget
    required = {k for x in conj for k in x.get("required", ()) if isinstance(k, str)}
    names_pn = [x["propertyNames"] for x in conj if "propertyNames" in x]
    key_filter = c.string_texts(names_pn) if names_pn else None
    members: dict[int, pynini.Fst] = {}
    chain = pynini.accep("")
    present: dict[str, int] = {}
    for i, name in enumerate(pos.names):
        key = lit(strings.quote(name))
        if key_filter is not None and budget.intersect(key, key_filter, "propertyNames") is None:
            value = None
        else:
            value = c.value([s for x in conj for s in value_schemas(x, name)], depth, pos.child_key(name))
        if value is None:
            if name in required:
                return None
            continue
        members[i] = pynini.concat(pynini.concat(key, c.policy.colon), value)
        present[name] = seq.label(i)
    others = []
    for j, (matched, keys) in enumerate(key_classes(c, pos)):
        keys = keys if key_filter is None else budget.intersect(keys, key_filter, "propertyNames")
        value = None if keys is None else c.value([s for x in conj for s in class_schemas(x, matched)],
                                                  depth, pos.child_class(matched))
        if value is not None:
            symbol = len(pos.names) + j
            members[symbol] = pynini.concat(pynini.concat(keys, c.policy.colon), value)
            others.append(seq.label(symbol))
    named = list(present.values())
    if c.any_order:
        optional = sum(1 for n in present if n not in required)
        if 2 ** optional > budget.max_states:
            raise LimitError(f"the orders of {len(named)} properties (any_order)", "max_states", budget.max_states,
                             2 ** optional, remedy="simplify", at_least=True)
        words = seq.star(named + others)
        for name, lab in present.items():
            rest = [x for x in named + others if x != lab]
            words = seq.both(words, seq.at_most_once([lab], rest, exactly=name in required))
    else:
        for name, lab in present.items():
            sym = seq.symbols([lab])
            chain.concat(sym if name in required else seq.optional(sym))
        words = pynini.concat(chain, seq.star(others))
    alphabet = named + others
    words = seq.both(words, presence.node_words(c, conj, present, alphabet, required=False))
    if formulas:
        words = seq.both(words, presence.formula_words(c, formulas, present, alphabet))
    spelled = seq.separated(budget, words, "the members of an object")
    if spelled is None:
        return None
    return seq.spell(budget, spelled, members.__getitem__, c.policy.comma, c.policy.open("{"), c.policy.close("}"),
                     "an object")
