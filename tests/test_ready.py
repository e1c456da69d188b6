"""Regex -> ready constraint in bulk (performance): the index export, ``constraint.load``
and the FstDecoder read an automaton's arcs as numpy arrays; they must answer exactly as the
per-arc code they replace.

The oracle is that per-arc code, written here with pynini's arc iterator: per state its arcs
sorted by (token, next state), masks numbered by first use (coalescence, the structured-generation practical). The
structure check of a loaded index, vectorized, is compared with the element-by-element check
it replaced, on damaged documents.
"""

from __future__ import annotations

import json

import numpy as np
import pynini
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tokfst_cli import constraint, pipeline
from tokfst_cli.automata.arrays import fst_arrays, fst_from_arrays
from tokfst_cli.decoding.index import build_index, checksum, decimal
from tokfst_cli.errors import DisallowedTokenError

from .conftest import real
from .helpers import SIX_REGEXES

CASES = [(name, regex) for name in ("gpt2", "llama2")
         for regex in (SIX_REGEXES["date"], SIX_REGEXES["cities"], SIX_REGEXES["json"], SIX_REGEXES["decimal"],
                       "[a-z]{1,3}( [0-9])?")]
SLOW = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def per_arc(fst: pynini.Fst) -> tuple[list[int], list[list[int]], list[dict]]:
    """(finals, masks, states) of the index, arc by arc (the export before bulk reading)."""
    zero = pynini.Weight.zero(fst.weight_type())
    ids: dict[tuple[int, ...], int] = {}
    masks, states, finals = [], [], []
    for s in fst.states():
        pairs = sorted((a.ilabel - 1, a.nextstate) for a in fst.arcs(s))
        key = tuple(t for t, _ in pairs)
        if key not in ids:
            ids[key] = len(masks)
            masks.append(list(key))
        states.append({"mask": ids[key], "next": [n for _, n in pairs]})
        if fst.final(s) != zero:
            finals.append(s)
    return finals, masks, states


def assert_export(fst: pynini.Fst, model, pattern: str) -> dict:
    index = build_index(fst, model, pattern)
    finals, masks, states = per_arc(fst)
    assert (index["initial"], index["finals"], index["masks"], index["states"]) == (fst.start(), finals, masks, states)
    assert index["sha256"] == checksum(index)  # the arrays' checksum is the canonical JSON's
    stats = index["stats"]
    assert stats["arcs"] == sum(len(s["next"]) for s in states) and stats["masks"] == len(masks)
    sizes = np.bincount([s["mask"] for s in states], minlength=len(masks))
    assert stats["states_in_shared_masks"] == int(sizes[sizes > 1].sum()) and stats["states"] == len(states)
    assert stats["single_token_states"] == sum(len(s["next"]) == 1 for s in states)
    assert stats["final_only_states"] == sum(not s["next"] for s in states)
    return index


def assert_decoders(fst: pynini.Fst, index: dict, vocab: int) -> None:
    """FstDecoder and the loaded IndexDecoder answer as the per-arc oracle at every reachable state."""
    zero = pynini.Weight.zero(fst.weight_type())
    decs = [constraint.FstDecoder(fst, vocab), constraint._index(json.dumps(index).encode(), "x.json")]
    assert all(d.initial() == fst.start() for d in decs)
    seen, todo = {fst.start()}, [fst.start()]
    while todo:
        s = todo.pop()
        arcs = dict((a.ilabel - 1, a.nextstate) for a in fst.arcs(s))
        want = np.zeros(vocab, bool)
        want[list(arcs)] = True
        for d in decs:
            assert (d.mask(s) == want).all() and d.is_final(s) == (fst.final(s) != zero)
            assert all(d.advance(s, t) == n for t, n in arcs.items())
            outside = int(np.flatnonzero(~want)[0]) if not want.all() else None
            if outside is not None:
                with pytest.raises(DisallowedTokenError):
                    d.advance(s, outside)
        for n in arcs.values():
            if n not in seen:
                seen.add(n)
                todo.append(n)


@pytest.mark.parametrize("name,pattern", CASES)
def test_bulk_export_and_decoders_equal_the_per_arc_ones(name, pattern):
    model, lex = real(name)[:2]
    fst = pipeline.build(model, pattern, lexicon=lex).fst
    assert_decoders(fst, assert_export(fst, model, pattern), model.vocab_size)


ATOMS = st.sampled_from(["a", "b", "ab", " ", "0", "[a-c]", "[0-9]", "x", "é", r"\.", "-", "[ab]+"])
REGEXES = st.recursive(ATOMS, lambda inner: st.one_of(
    st.tuples(inner, inner).map("".join),
    st.tuples(inner, inner).map(lambda t: f"({t[0]}|{t[1]})"),
    inner.map(lambda r: f"({r})?"),
    st.tuples(inner, st.integers(1, 3)).map(lambda t: f"({t[0]}){{1,{t[1]}}}"),
), max_leaves=6)


@SLOW
@given(pattern=REGEXES, name=st.sampled_from(["gpt2", "llama2"]))
def test_small_regexes_export_and_decode_as_per_arc(pattern, name):
    model, lex = real(name)[:2]
    fst = pipeline.build(model, pattern, lexicon=lex).fst
    assert_decoders(fst, assert_export(fst, model, pattern), model.vocab_size)


@settings(max_examples=100, deadline=None)
@given(data=st.data(), n=st.integers(1, 6))
def test_unsorted_and_nondeterministic_acceptors_export_as_per_arc(data, n):
    """Arcs in any order, repeated labels (a nondeterministic acceptor): sorted by (token, next)."""
    m = data.draw(st.integers(0, 30))
    src = np.array(data.draw(st.lists(st.integers(0, n - 1), min_size=m, max_size=m)), np.int64)
    lab = np.array(data.draw(st.lists(st.integers(1, 9), min_size=m, max_size=m)), np.int64)
    dst = np.array(data.draw(st.lists(st.integers(0, n - 1), min_size=m, max_size=m)), np.int64)
    finals = np.array(data.draw(st.lists(st.booleans(), min_size=n, max_size=n)), bool)
    order = np.random.default_rng(m).permutation(m)  # fst_from_arrays keeps the given order per state
    fst = fst_from_arrays(n, 0, finals, src[order], lab[order], lab[order] * 7, dst[order])
    a = fst_arrays(fst)
    want = [(s, arc.ilabel, arc.olabel, arc.nextstate) for s in fst.states() for arc in fst.arcs(s)]
    assert list(zip(a.src.tolist(), a.ilabel.tolist(), a.olabel.tolist(), a.nextstate.tolist())) == want
    assert a.final.tolist() == finals.tolist() and a.start == 0
    model = real("gpt2")[0]
    assert_export(fst, model, "x")


def test_a_hash_collision_falls_back_to_exact_grouping(monkeypatch):
    """Coalescence groups states by a 64-bit hash of their token sets, then compares every state with its
    group's first: with every hash equal, the export is still the per-arc one."""
    from tokfst_cli.decoding import index

    model, lex = real("gpt2")[:2]
    fst = pipeline.build(model, SIX_REGEXES["date"], lexicon=lex).fst
    assert sum(fst.num_arcs(s) for s in fst.states()) >= index.SMALL  # grouped by hash first
    monkeypatch.setattr(index, "_mix", lambda x: np.zeros(len(x), np.uint64))
    assert assert_export(fst, model, "x")["stats"]["masks"] > 1


@given(st.lists(st.integers(-10, 2 ** 62), max_size=600))
@settings(max_examples=80, deadline=None)
def test_decimal_is_json(values):
    text, at = decimal(np.array(values, np.int64))
    assert text == "".join("," + json.dumps(v) for v in values).encode()
    assert [text[a:b] for a, b in zip(at, at[1:])] == [b"," + json.dumps(v).encode() for v in values]


# --- the structure check, vectorized, against the element-by-element one ----------------------------

def element_problem(index: dict) -> str | None:
    """The element-by-element structure check (the loader's code before vectorization, kept for
    fields of unexpected types); the documents below have no checksum."""
    try:
        return constraint._element_problem(index)
    except (KeyError, TypeError, ValueError, IndexError):
        return "missing or mistyped fields"


def small_index() -> dict:
    model = real("gpt2")[0]
    doc = json.loads(json.dumps(pipeline.build(model, "(ab|c)x?[0-2]{1,2}").index()))
    del doc["sha256"]
    return doc


SMALL = small_index()
EDGES = sorted({-1, 0, len(SMALL["states"]) - 1, len(SMALL["states"]), len(SMALL["masks"]) - 1, len(SMALL["masks"]),
                SMALL["tokenizer"]["vocab_size"] - 1, SMALL["tokenizer"]["vocab_size"]})
VALUES = st.one_of(st.sampled_from(EDGES), st.integers(-2, 60), st.integers(2 ** 62, 2 ** 70), st.booleans(),
                   st.none(), st.floats(0, 5),
                   st.text(max_size=2), st.lists(st.integers(-1, 60), max_size=4),
                   st.dictionaries(st.text(max_size=1), st.integers(), max_size=1))


def paths(doc) -> list[tuple]:
    """Where a damage can go: every element of the lists a decoder reads, and the lists themselves."""
    out = [("initial",), ("finals",), ("masks",), ("states",)]
    out += [("finals", i) for i in range(len(doc["finals"]))]
    for i, m in enumerate(doc["masks"]):
        out += [("masks", i)] + [("masks", i, j) for j in range(len(m))]
    for i, s in enumerate(doc["states"]):
        out += [("states", i), ("states", i, "mask"), ("states", i, "next")]
        out += [("states", i, "next", j) for j in range(len(s["next"]))]
    return out


@settings(max_examples=300, deadline=None)
@given(data=st.data())
def test_damaged_index_is_refused_as_before(data):
    doc = json.loads(json.dumps(SMALL))
    where = data.draw(st.sampled_from(paths(doc)))
    parent = doc
    for key in where[:-1]:
        parent = parent[key]
    action = data.draw(st.sampled_from(["set", "append", "drop"]))
    target = parent[where[-1]]
    value = data.draw(VALUES)
    if action == "append" and isinstance(target, list):
        target.append(value)
    elif action == "drop" and isinstance(target, list) and target:
        target.pop(data.draw(st.integers(0, len(target) - 1)))
    else:
        parent[where[-1]] = value
    before, now = element_problem(doc), constraint.index_problem(doc)
    if before is not None:
        assert now == before
    elif now is not None:  # stricter only where true/false stands for an integer, or a string or object for a list
        assert now == "missing or mistyped fields"
        assert isinstance(value, bool) or (isinstance(target, list) and not isinstance(value, list))
    if now is None:
        assert_same_answers(doc)


def assert_same_answers(doc: dict) -> None:
    """An accepted (damaged or intact) document answers as its lists say, at every state, and
    every token and next state it names exists."""
    dec, n, vocab = constraint.IndexDecoder(doc), len(doc["states"]), doc["tokenizer"]["vocab_size"]
    assert 0 <= doc["initial"] < n and all(0 <= f < n for f in doc["finals"])
    for s, st_ in enumerate(doc["states"]):
        tokens = [int(t) for t in doc["masks"][st_["mask"]]]
        assert all(0 <= t < vocab for t in tokens) and all(0 <= int(x) < n for x in st_["next"])
        assert np.flatnonzero(dec.mask(s)).tolist() == sorted(set(tokens))
        assert [dec.advance(s, t) for t in tokens] == [int(n) for n in st_["next"]]
        assert dec.is_final(s) == (s in doc["finals"])


def test_bench_ready_table(tmp_path):
    """``tokfst bench ready`` on a tiny BPE: every tokfst cell ran, the by-step times add up, the
    loaded index and the in-memory decoder agree, peers ran or say why not."""
    from tokfst_cli.bench.ready import ready_table

    from .cli.test_battery import BASES

    path = tmp_path / "tiny.json"
    path.write_text(json.dumps(BASES["bpe"]))
    res = ready_table([("tiny", str(path), False)], {"ab": "(ab|c)+[0-9]", "date": SIX_REGEXES["date"]}, 3,
                      lambda _: None)
    main, stages, cold = res.tables
    assert [r["regex"] for r in main.rows] == ["ab", "date"] and len(stages.rows) == 2 and len(cold.rows) == 1
    assert res.checks and all(c["passed"] for c in res.checks)
    for row, by_step in zip(main.rows, stages.rows):
        assert row["index"]["status"] == row["memory"]["status"] == "ok" and row["states"] >= 2
        # skipped: a tokenizer lacking bytes
        assert row["lazy"]["status"] == row["lazyfile"]["status"] in ("ok", "skipped")
        if row["lazy"]["status"] == "ok":
            assert any("loaded lazy artifact" in c["name"] for c in res.checks)
        assert all(row[k]["status"] in ("ok", "skipped", "error") for k in ("xgrammar", "llguidance", "outlines"))
        steps = [sum(by_step[k]["runs_s"][i] for k in ("a", "s", "export", "write", "load", "mask")) for i in range(3)]
        assert steps == pytest.approx(by_step["total"]["runs_s"])
    assert cold.rows[0]["process"]["status"] == "ok"
