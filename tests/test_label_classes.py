"""Byte classes (label_classes) against the bytes: the partition, and OpenFst's DFAs through it."""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

import numpy as np
import pynini
from hypothesis import given, settings
from hypothesis import strategies as st

from tokfst_cli.automata import label_classes
from tokfst_cli.automata.arrays import fst_arrays, fst_from
from tokfst_cli.schema import automata, strings
from tokfst_cli.schema.compile import compile_schema
from tokfst_cli.text.regex import compile_regex

ATOMS = ["a", "b", "[a-f]", "[^a]", "[a-z0-9]", r"\.", '[^"\\\\]', "é", "[^b-y]", "x"]
SCHEMAS = Path(__file__).parent / "data" / "schemas"


@st.composite
def regexes(draw) -> str:
    """Alternations of concatenations of quantified atoms, some classes wide (whole UTF-8 ranges)."""
    def term() -> str:
        return "".join(draw(st.sampled_from(ATOMS)) + draw(st.sampled_from(["", "*", "?", "{1,2}"]))
                       for _ in range(draw(st.integers(1, 3))))
    return "|".join(term() for _ in range(draw(st.integers(1, 3))))


def destinations(a) -> dict[int, dict[int, frozenset]]:
    """byte -> state -> the set of its destinations there."""
    out: dict[int, dict[int, set]] = defaultdict(lambda: defaultdict(set))
    for s, label, d in zip(a.src.tolist(), a.ilabel.tolist(), a.nextstate.tolist()):
        out[label][s].add(d)
    return {b: {s: frozenset(v) for s, v in m.items()} for b, m in out.items()}


@given(st.lists(regexes(), min_size=1, max_size=3))
@settings(max_examples=60, deadline=None)
def test_classes_are_the_coarsest_equivalence(patterns):
    pieces = [fst_arrays(compile_regex(p).fst) for p in patterns]
    classes = label_classes.of(pieces)
    maps = [destinations(a) for a in pieces]
    for b in range(1, 257):
        for c in (b + 1, b + 17, 256):
            if c > 256 or c == b:
                continue
            same = all(m.get(b, {}) == m.get(c, {}) for m in maps)
            assert same == (classes.rep[b] == classes.rep[c]), (patterns, b, c)
    assert classes.count == len(set(classes.rep[1:].tolist()))
    assert all(classes.rep[b] <= b for b in range(257))


@given(st.lists(regexes(), min_size=1, max_size=3))
@settings(max_examples=30, deadline=None)
def test_colliding_signatures_are_caught(patterns):
    """Signatures that all collide (a hash of constant value): the classes are the same."""
    pieces = [fst_arrays(compile_regex(p).fst) for p in patterns]
    want = label_classes.of(pieces)
    mix = label_classes._mix
    try:
        label_classes._mix = lambda x: np.zeros(len(x), np.uint64)
        got = label_classes.of(pieces)
    finally:
        label_classes._mix = mix
    assert got.count == want.count and (got.rep == want.rep).all()


@given(st.lists(regexes(), min_size=2, max_size=3))
@settings(max_examples=60, deadline=None)
def test_minimal_dfa_through_classes_equals_the_bytes(patterns):
    fsts = [compile_regex(p).fst.set_input_symbols(None).set_output_symbols(None) for p in patterns]
    union = pynini.union(*fsts).rmepsilon()
    direct = pynini.determinize(union).minimize()
    classes = label_classes.of([fst_arrays(f) for f in fsts])
    compressed = pynini.union(*(label_classes.compress(fst_arrays(f), classes) for f in fsts)).rmepsilon()
    assert compressed.num_states() == union.num_states()
    via = fst_from(label_classes.expand(fst_arrays(pynini.determinize(compressed).minimize()), classes))
    assert via.num_states() == direct.num_states()
    assert sum(via.num_arcs(s) for s in via.states()) == sum(direct.num_arcs(s) for s in direct.states())
    assert pynini.equivalent(direct, via.arcsort("ilabel")) and via.verify()


def test_schemas_compile_the_same_with_and_without_classes(monkeypatch):
    """A string body meeting named keys (pre-commit-hooks) and if/then/else's intersections and
    differences (global.json): the same minimal DFA as over bytes."""
    for name in ("pre-commit-hooks", "global"):
        schema = json.loads((SCHEMAS / f"{name}.json").read_text())
        calls = []
        classed = automata.Budget._classed
        monkeypatch.setattr(automata.Budget, "_classed",
                            lambda self, arrays, uses: calls.append(r := classed(self, arrays, uses)) or r)
        with_classes = compile_schema(schema).automaton.fst
        assert any(r is not None for r in calls), name  # the classes were used
        monkeypatch.setattr(automata, "CLASSED_ARCS", 1 << 62)
        over_bytes = compile_schema(schema).automaton.fst
        monkeypatch.undo()
        assert with_classes.num_states() == over_bytes.num_states()
        arcs = [sum(f.num_arcs(s) for s in f.states()) for f in (with_classes, over_bytes)]
        assert arcs[0] == arcs[1]
        assert pynini.equivalent(with_classes.arcsort("ilabel"), over_bytes.arcsort("ilabel")), name


def same_tables(x, y) -> bool:
    return bool((x.delta == y.delta).all() and (x.label_class == y.label_class).all()
                and (x.final == y.final).all() and x.start == y.start)


@given(regexes())
@settings(max_examples=60, deadline=None)
def test_lazy_table_over_classes_equals_the_table_over_bytes(pattern):
    """byte_table.of_arrays of a DFA over representatives and its classes: the table of the same
    DFA over bytes (coarser classes of the classes, each byte by its representative)."""
    from tokfst_cli.promotion.byte_table import of_arrays

    a = fst_arrays(compile_regex(pattern).fst)
    classes = label_classes.of([a])
    compressed = label_classes.Classed(fst_arrays(label_classes.compress(a, classes)), classes)
    assert same_tables(of_arrays(compressed.arrays, pattern, classes=classes), of_arrays(a, pattern))
    assert len(compressed.expand().src) == len(a.src)


def test_lazy_table_from_the_compiled_classes_equals_the_table_from_the_fst():
    """compile_schema's DFA stays over byte classes; the lazy decoder's table is built on them
    without expanding the bytes, and equals the table of the automaton over bytes."""
    from tokfst_cli.promotion.byte_table import of_automaton

    for name in ("pre-commit-hooks", "jdt", "lerna"):
        automaton = compile_schema(json.loads((SCHEMAS / f"{name}.json").read_text())).automaton
        assert automaton.classed is not None, name
        known = of_automaton(automaton)
        assert automaton._fst is None, name  # not expanded for the table
        read = of_automaton(automaton.fst)
        assert same_tables(known, read), name
        assert automaton.fst.num_states() == len(automaton.classed.arrays.final)
        assert len(automaton.arrays.src) == sum(automaton.fst.num_arcs(s) for s in automaton.fst.states())


def test_an_operand_is_expanded_once_per_classes(monkeypatch):
    """An operation's operands are expanded over their classes once and reused when they recur
    with the same classes (oneOf meets a branch, then subtracts it): the second intersection
    expands nothing, and both equal the intersection of the expansions over bytes."""
    budget = automata.Budget(1 << 20, strings.any_body)
    x = automata.body() + automata.lit("a")  # the body of any string, then a
    y = automata.lit("b") + automata.body()
    expected = pynini.intersect(budget.expand(x).arcsort("olabel"), budget.expand(y).arcsort("ilabel"))
    calls = []
    replace = pynini.replace
    monkeypatch.setattr(pynini, "replace", lambda *a, **k: calls.append(1) or replace(*a, **k))
    first = budget.intersect(x, y, "first")
    assert len(calls) == 2  # both operands, over their classes
    second = budget.intersect(x, y, "second")
    assert len(calls) == 2 and first is not second
    for got in (first, second):
        assert pynini.equivalent(got.arcsort("ilabel"), pynini.determinize(expected.rmepsilon()).minimize())
    assert accepts_text(first, "ba") and not accepts_text(first, "b")


def accepts_text(fst: pynini.Fst, text: str) -> bool:
    from tokfst_cli.automata.fsts import text_acceptor

    return pynini.intersect(text_acceptor(text), fst.arcsort("ilabel")).num_states() > 0
