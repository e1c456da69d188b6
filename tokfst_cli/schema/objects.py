"""Objects: properties in the stable order, other keys after them (draft 2020-12 Sec. 10.3.2, 6.5).

The members of an object at a :class:`~.context.Position` are symbols (:mod:`.sequences`):
one per named key of the position, in its order, each at most once (``required``: exactly
once), then the other keys in any order and any number. Other keys fall into classes by the
``patternProperties`` they match (the decoded key strings outside the named ones, split by
each pattern), each class one symbol, so every schema at the position sees the same
classes. A member is ``"key"``, the colon and the value's language; the value's schemas
are every ``properties[key]`` and matching ``patternProperties`` of the conjunction, or its
``additionalProperties``.

``minProperties``/``maxProperties``/``dependentRequired`` and member-wise applicators are
constraints on the words (:mod:`.presence`; a key's symbol is split by the applicators' value
tests, one symbol per class of values); ``propertyNames`` restricts each key. Other keys may repeat (``{"x":1,"x":2}``
when x is not named): telling every key apart needs one state per set of keys, which no
finite automaton has for unbounded keys. With ``any_order`` the named keys may come in any
order, interleaved with the others: one state per set of named keys written, estimated
before building (2^n).
"""

from __future__ import annotations

import pynini

from tokfst_cli.errors import LimitError, TokfstError
from tokfst_cli.schema import presence, strings
from tokfst_cli.schema import sequences as seq
from tokfst_cli.schema.automata import body, lit
from tokfst_cli.schema.context import Position, class_schemas, value_schemas

MAX_PATTERN_CLASSES = 64


def key_classes(c, pos: Position) -> list[tuple[frozenset[str], pynini.Fst]]:
    """(matched patterns, texts of the keys in that class) for the keys outside ``pos.names``;
    built once per set of names and list of patterns (positions often share them, through a
    ``$ref``)."""
    if "classes" not in pos.cache and not pos.names and not pos.patterns:
        pos.cache["classes"] = [(frozenset(), strings.quoted(body()))]  # any key: a placeholder body
    shared = ("key classes", frozenset(pos.names), tuple(pos.patterns))
    if "classes" not in pos.cache and shared in c.cache:
        pos.cache["classes"] = c.cache[shared]
    if "classes" not in pos.cache and not pos.patterns:  # spelling is one-to-one: the spellings of
        spelled = [lit(strings.quote(k)[1:-1]) for k in pos.names]  # other keys are all spellings but the names'
        rest = c.budget.difference(strings.any_body(), c.budget.union(spelled, "the named keys"), "other keys")
        pos.cache["classes"] = c.cache[shared] = [] if rest is None else [
            (frozenset(), strings.quoted(c.budget.placeholder(rest)))]
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
        pos.cache["classes"] = c.cache[shared] = [
            (m, strings.quoted(c.budget.placeholder(strings.spelled(c.budget, keys))))
            for m, keys in classes]  # each key body one arc (automata.py)
    return pos.cache["classes"]


MAX_SPLITS = 64  # value classes of one key (Boolean combinations of the subschemas' value tests)


class ManyClasses(TokfstError):
    """A key's values would split into more than :data:`MAX_SPLITS` classes: the caller takes the
    Boolean operations on automata instead (:meth:`.compile.Compiler._lang`)."""


def _split(c, what: str, value: pynini.Fst,
           tests: list[pynini.Fst | None | bool]) -> list[tuple[frozenset[int], pynini.Fst]]:
    """``value`` cut by each test (True: every value passes; None: none does) into the nonempty
    classes, each with the tests it passes. Memoized on the automata (``c.splits`` holds them, so
    their ids stay theirs): keys whose values share one definition split once."""
    key = (id(value), *(t if t is True or t is None else id(t) for t in tests))
    got = c.splits.get(key)
    if got is not None and got[0] is value and all(a is b for a, b in zip(got[1], tests)):
        return got[2]
    classes = _cut(c, what, value, tests)
    c.splits[key] = (value, list(tests), classes)
    return classes


def _cut(c, what: str, value: pynini.Fst,
         tests: list[pynini.Fst | None | bool]) -> list[tuple[frozenset[int], pynini.Fst]]:
    classes = [(frozenset(i for i, t in enumerate(tests) if t is True), value)]
    met: list[tuple[pynini.Fst, list[int]]] = []  # the tests met so far, each with its indices
    for i, t in enumerate(tests):
        if t is True or t is None:
            continue
        seen = next((indices for u, indices in met if _same(u, t)), None)
        if seen is not None:
            seen.append(i)
            classes = [(m | {i}, f) if seen[0] in m else (m, f) for m, f in classes]
            continue
        met.append((t, [i]))
        if 2 * len(classes) > MAX_SPLITS:
            raise ManyClasses(what)
        split = []
        for passed, f in classes:
            inside = c.budget.intersect(f, t, what)
            outside = c.budget.difference(f, t, what)
            split += [(passed | {i}, inside)] if inside is not None else []
            split += [(passed, outside)] if outside is not None else []
        classes = split
    return classes


def _same(u: pynini.Fst, t: pynini.Fst) -> bool:
    """One automaton, or two equal arc for arc: over the same placeholders, one language
    (branches that repeat a subschema, as separate JSON objects, split a value once)."""
    return u is t or (u.num_states() == t.num_states() and pynini.equal(u, t))


def object_part(c, conj: tuple[dict, ...], depth: int, pos: Position,
                formulas: list[presence.Formula] = ()) -> pynini.Fst | None:
    """The object texts of the conjunction ``conj`` at ``pos`` (``depth``: what its values have left),
    with the member-wise applicators ``formulas`` (:func:`.presence.split`)."""
    budget = c.budget
    required = {k for x in conj for k in x.get("required", ()) if isinstance(k, str)}
    names_pn = [x["propertyNames"] for x in conj if "propertyNames" in x]
    key_filter = c.string_texts(names_pn) if names_pn else None
    branches = presence.branches(formulas)
    members: dict[int, pynini.Fst] = {}
    allowed: dict[tuple[int, ...], list[int]] = {tuple(id(n) for n in b): [] for b in branches}

    def symbols(key: pynini.Fst, seeds, child: Position, what: str) -> list[int]:
        """The member symbols of one key (or key class): its value split by the branches' tests."""
        value = c.value(seeds(conj), depth, child)
        if value is None:
            return []
        tests = []
        for b in branches:
            own = seeds(b)
            tests.append(True if c.flatten(own) == () else c.value(own, depth, child))
        labels = []
        for passed, part in _split(c, what, value, tests):
            symbol = len(members)
            members[symbol] = pynini.concat(pynini.concat(key, c.policy.colon), budget.deferred(part))
            labels.append(seq.label(symbol))
            for i in passed:
                allowed[tuple(id(n) for n in branches[i])].append(labels[-1])
        return labels

    present: dict[str, list[int]] = {}
    for name in pos.names:
        key = lit(strings.quote(name))
        if key_filter is not None and budget.intersect(key, key_filter, "propertyNames") is None:
            labels = []
        else:
            labels = symbols(key, lambda x: [s for n in x for s in value_schemas(n, name)], pos.child_key(name),
                             f"property {name!r}")
        if not labels:
            if name in required:
                return None
            continue
        present[name] = labels
    others: list[int] = []
    for matched, keys in key_classes(c, pos):
        keys = keys if key_filter is None else budget.intersect(keys, key_filter, "propertyNames")
        if keys is not None:
            others += symbols(keys, lambda x, m=matched: [s for n in x for s in class_schemas(n, m)],
                              pos.child_class(matched), "other properties")
    named = [x for ls in present.values() for x in ls]
    if c.any_order:
        if 2 ** len(present) > budget.max_states:  # a state per set of named keys written, required ones too
            raise LimitError(f"the orders of {len(present)} properties (any_order)", "max_states", budget.max_states,
                             2 ** len(present), remedy="simplify", at_least=True)
        words = seq.star(named + others)
        for name, labels in present.items():
            rest = [x for x in named + others if x not in labels]
            words = seq.both(words, seq.at_most_once(labels, rest, exactly=name in required))
    else:
        chain = pynini.accep("")
        for name, labels in present.items():
            sym = seq.symbols(labels)
            chain.concat(sym if name in required else seq.optional(sym))
        words = pynini.concat(chain, seq.star(others))
    alphabet = named + others
    words = presence.node_words(c, conj, present, alphabet, words, required=False)
    if formulas:
        words = presence.formula_words(c, formulas, present, alphabet, allowed, words)
    spelled = seq.separated(budget, words, "the members of an object")
    if spelled is None:
        return None
    return seq.spell(budget, spelled, members.__getitem__, c.policy.comma, c.policy.open("{"), c.policy.close("}"),
                     "an object")
