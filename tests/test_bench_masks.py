"""``tokfst bench masks`` (Performance): masks along HF's tokenization at fresh states, tokfst vs peers.

No timing is asserted: the mode's rows and fields end to end, the sample strings, that tokfst's
masks allow HF's tokenization of strings of the language (hypothesis), and that the agreement and
walk logic report a disagreement, a token outside the mask and a missing peer instead of crashing.
"""

from __future__ import annotations

import importlib.util
import json
import re

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tokfst_cli.bench import engines, masks
from tokfst_cli.bench.common import Results
from tokfst_cli.decoding.matcher import pack
from tokfst_cli.text import catalogue
from tokfst_cli.tokenizer.model import from_vocab

from .runner import run

CITIES, DATE, EMAIL = (catalogue.FOUNDATION[k] for k in ("cities", "date", "email"))
WORDS4 = catalogue.MAXMATCH["words4"]
TOKFST = engines.TOKFST


def installed(engine: str) -> bool:
    module = {engines.OUTLINES: "outlines_core", engines.LLGUIDANCE: "llguidance", engines.XGRAMMAR: "xgrammar"}
    return importlib.util.find_spec(module[engine]) is not None


def excluded_of(model) -> np.ndarray:
    return ~np.array([bool(s) for s in model.surfaces])


# ---- samples ------------------------------------------------------------------------------------
def test_samples_are_strings_of_their_regexes():
    known = catalogue.catalogue()
    assert set(masks.SAMPLES) <= set(known) and set(masks.default_regexes()) <= set(masks.SAMPLES)
    for name, text in masks.SAMPLES.items():
        assert re.fullmatch(known[name], text), name
        assert masks.sample_text(known[name]) == text


@given(words=st.lists(st.text("abcé", min_size=1, max_size=4), min_size=1, max_size=4),
       tail=st.sampled_from(["", "[0-9]{1,3}", "( [a-z]+)?", "x*", "(-[a-z]{2,3})+"]))
@settings(max_examples=40, deadline=None)
def test_generated_samples_are_fixed_strings_of_the_language(words, tail):
    pattern = "(" + "|".join(re.escape(w) for w in words) + ")" + tail
    text = masks.sample_text(pattern)
    assert re.fullmatch(pattern, text) and text == masks.generate(pattern)


# ---- tokfst follows HF's tokenization -------------------------------------------------------------
@pytest.fixture(scope="module")
def compiled(tokenizer):
    model = tokenizer("gpt2")
    idx, fac = engines.TokfstIndex(model, tokenizer.lexicon("gpt2")), engines.TokfstFactorized(model)
    return model, {p: [(e, e.compile(p)) for e in (idx, fac)] for p in (DATE, EMAIL, WORDS4)}


@given(data=st.data())
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_tokfst_masks_allow_hfs_tokenization(tokenizer, compiled, data):
    model, by_pattern = compiled
    pattern = data.draw(st.sampled_from(sorted(by_pattern)))
    alphabet = st.sampled_from("abcdefghijklmnopqrstuvwxyz0123456789.@-_ ")
    text = data.draw(st.from_regex(pattern, fullmatch=True, alphabet=alphabet))
    walk = tokenizer.hf("gpt2").encode(text, add_special_tokens=False).ids
    excluded, recorded = excluded_of(model), []
    for engine, c in by_pattern[pattern]:
        r = masks.run_walk(engine.session(c), walk, excluded)
        assert r.stop is None and r.accepting, (engine.name, text)
        assert len(r.masks) == len(walk) + 1 and all(r.masks[i][t] for i, t in enumerate(walk))
        assert len(r.mask_ns) == len(walk) + 1 and len(r.accept_ns) == len(walk)
        recorded.append(r.masks)
    index, factorized = recorded
    assert masks.compare_masks(index, factorized, subset=True).holds  # canonical within agnostic


# ---- agreement ----------------------------------------------------------------------------------
def test_compare_masks_flags_a_real_disagreement():
    a = [np.array([1, 1, 0, 1], bool), np.array([0, 1, 1, 0], bool), np.array([1, 0, 0, 0], bool)]
    assert masks.compare_masks(a, [m.copy() for m in a]) == masks.Agreement(3, 0)
    b = [a[0].copy(), np.array([0, 1, 0, 1], bool), np.array([0, 0, 0, 0], bool)]  # step 2: -2 +3; step 3: -0
    got = masks.compare_masks(a, b)
    assert (got.holds, got.compared, got.differing, got.first, got.only_ref, got.only_other) == (False, 3, 2, 2, 1, 1)
    assert got.example == 3  # the id only in the other mask
    assert "not = index at 2/3 steps; first at step 2: 1 only in the index, 1 only in peer" in \
        masks.describe(got, False, "peer")
    narrower = [a[0], np.array([0, 1, 0, 0], bool), a[2]]
    assert masks.compare_masks(a, narrower, subset=True).holds and not masks.compare_masks(a, narrower).holds
    assert not masks.compare_masks(a, b, subset=True).holds  # b has id 3 at step 2, outside a
    assert masks.compare_masks(a, b[:1]).compared == 1  # a walk stopped early: its steps only


def test_allowed_ids_unpacks_and_excludes():
    bits = np.zeros(70, bool)
    bits[[0, 31, 32, 65, 69]] = True
    words = pack(bits)
    excluded = np.zeros(80, bool)
    excluded[65] = True
    got = masks.allowed_ids(words, excluded)  # words cover 96 ids: cut to 80; 65 left out
    assert len(got) == 80 and list(np.flatnonzero(got)) == [0, 31, 32, 69]
    assert all(masks.allows(words, t) == bits[t] for t in range(70)) and not masks.allows(words, 500)
    assert len(masks.allowed_ids(words[:1], excluded)) == 80  # shorter words: padded


class Altered(engines.Engine):
    """The index engine under another name, its mask changed at one step (a peer that disagrees,
    or a decoder that misses the walk's token)."""

    def __init__(self, inner: engines.Engine, name: str, step: int, change):
        self.inner, self.name, self.step, self.change = inner, name, step, change
        self.canonical = name in TOKFST

    def compile(self, pattern: str):
        return self.inner.compile(pattern)

    def session(self, c) -> engines.Session:
        s, count = self.inner.session(c), [0]

        def fill():
            words = s.fill().copy()
            count[0] += 1
            if count[0] == self.step:
                self.change(words)
            return words

        return engines.Session(fill, s.accept, s.accepting)


class Refusing(engines.Engine):
    name = engines.LLGUIDANCE

    def compile(self, pattern: str):
        raise RuntimeError("this peer refuses the pattern\nsecond line")


def test_rows_report_disagreement_dead_end_refusal_and_missing_peer(tokenizer, monkeypatch):
    model = tokenizer("gpt2")
    hf = tokenizer.hf("gpt2")
    walk = hf.encode("Munich", add_special_tokens=False).ids
    index = engines.TokfstIndex(model, tokenizer.lexicon("gpt2"))

    def drop(token):
        def change(words: np.ndarray) -> None:
            words.view(np.uint32)[token >> 5] &= ~np.uint32(1 << (token & 31))

        return change

    monkeypatch.setattr(engines, "_module", lambda name: None)  # as if xgrammar were not installed
    missing = engines.XGrammar(model, tokenizer.path("gpt2"))
    assert missing.missing == engines.MISSING
    engs = [index, Altered(index, engines.FACTORIZED, 2, drop(walk[1])),  # misses HF's second token
            Altered(index, engines.OUTLINES, 3, drop(walk[2])), Refusing(), missing]
    res = Results()
    spell = masks.speller(model)
    walks = {"hf": walk, "surface": walk}
    rows = {r["engine"]: r for r in masks.measure_regex(engs, CITIES, walks, False, 3, excluded_of(model), spell, res,
                                                        "gpt2 cities")}
    assert rows[engines.INDEX]["walk"] == "complete" and rows[engines.INDEX]["steps"] == len(walk) + 1
    assert rows[engines.INDEX]["median"]["status"] == "ok" and len(rows[engines.INDEX]["median"]["runs_s"]) == 3
    dead = rows[engines.FACTORIZED]
    assert dead["walk"].startswith(f"stopped at step 2: token {walk[1]} ") and dead["steps"] == 2
    peer = rows[engines.OUTLINES]
    assert peer["walk"] == f"stopped at step 3: token {walk[2]} ({model.surfaces[walk[2]].decode()!r}) not in the mask"
    assert peer["agree"] is False and "not = index at 1/3 steps; first at step 3: 1 only in the index" in peer["detail"]
    assert rows[engines.LLGUIDANCE]["median"] == {"status": "error",
                                                  "error": "RuntimeError: this peer refuses the pattern"}
    assert rows[engines.LLGUIDANCE]["detail"] == "error: RuntimeError: this peer refuses the pattern"
    assert rows[engines.XGRAMMAR]["median"]["status"] == "skipped"
    assert rows[engines.XGRAMMAR]["detail"] == "not installed (pip install 'tokfst[bench]')"
    assert rows[engines.INDEX]["vs_outlines-core"] is not None and rows[engines.INDEX]["vs_xgrammar"] is None
    failed = {c["name"] for c in res.checks if c["passed"] is False}
    assert failed == {f"masks gpt2 cities {engines.FACTORIZED}: the walk is allowed to the end"}


# ---- the mode, end to end -----------------------------------------------------------------------
def test_bench_masks_end_to_end(tmp_path, tokenizer):
    out = tmp_path / "masks.json"
    r = run("bench", "masks", "--named", "cities", "-e", "[0-9]{2}", "--json", out)
    assert r.rc == 0, r.stderr
    doc = json.loads(out.read_text())
    (table,) = doc["tables"]
    assert table["id"] == "masks" and "tokfst canonical factorized" in r.stdout
    assert set(table["inputs"]["versions"]) == {"llguidance", "xgrammar", "torch", "transformers"}
    names = [engines.INDEX, engines.LAZY, engines.MATERIALIZED, engines.FACTORIZED, *engines.PEERS]
    assert [(row["regex"], row["engine"]) for row in table["rows"]] == [(x, n) for x in ("cities", "[0-9]{2}")
                                                                        for n in names]
    hf = tokenizer.hf("gpt2")
    for rname, text in table["inputs"]["samples"].items():
        pattern = table["inputs"]["regexes"][rname]
        assert re.fullmatch(pattern, text)
        ids = hf.encode(text, add_special_tokens=False).ids
        assert table["inputs"]["walks"]["gpt2"][rname] == {"hf": ids, "surface": ids}  # GPT-2's ids spell the text
    for row in table["rows"]:
        walk = table["inputs"]["walks"]["gpt2"][row["regex"]]["hf"]
        if row["engine"] in TOKFST or installed(row["engine"]):
            assert row["steps"] == len(walk) + 1 and row["walk"] == "complete", row
            med, p99 = row["median"], row["p99"]
            assert med["status"] == "ok" and len(med["runs_s"]) == 3 and p99["median_s"] >= med["median_s"] > 0
            assert row["accept"]["status"] == "ok"
            if row["engine"] != engines.INDEX:
                assert isinstance(row["agree"], bool) and row["detail"].split(" at ")[0] in ("⊆ index", "= index",
                                                                                             "not = index")
        else:
            assert row["median"]["status"] == "skipped" and row["detail"] == engines.MISSING
        if row["engine"] in TOKFST:
            assert row["agree"] in (None, True)  # canonical within agnostic, lazy equal to it
            if row["engine"] == engines.LAZY:
                assert row["detail"].startswith("= index at ")
            for peer in engines.PEERS:
                assert (row[f"vs_{peer}"] is not None) == installed(peer)
    assert doc["checks"] and all(c["passed"] for c in doc["checks"])


def test_surface_walk_where_hf_ids_do_not_spell_the_sample(tokenizer):
    """Llama-2's normalizer prefixes '▁': its ids spell ' 2024-05-17'; the engines that read
    surfaces follow a longest-match tokenization that spells the sample, without byte tokens."""
    llama, gpt2 = tokenizer("llama2"), tokenizer("gpt2")
    text = masks.SAMPLES["date"]
    ids = tokenizer.hf("llama2").encode(text, add_special_tokens=False).ids
    assert not masks.spells(llama, ids, text)
    assert masks.spells(gpt2, tokenizer.hf("gpt2").encode(text, add_special_tokens=False).ids, text)
    for model, sample in ((llama, text), (llama, masks.SAMPLES["accents"]), (gpt2, masks.SAMPLES["pokedex"])):
        walk = masks.longest_match(model, sample)
        assert masks.spells(model, walk, sample)
        assert not any(masks.BYTE_TOKEN.fullmatch(model.tokens[t]) for t in walk), sample
        for i, t in enumerate(walk):  # no longer token spells the text at any position
            rest = b"".join(model.surfaces[u] for u in walk[i:])
            assert all(not rest.startswith(s) or len(s) <= len(model.surfaces[t]) for _, s in model.lexicon_items())


def test_no_surface_walk_skips_the_engines_that_read_surfaces(tokenizer):
    small = from_vocab(["a", "b", "ab"])
    assert masks.longest_match(small, "abab") == [2, 2] and masks.longest_match(small, "abc") is None
    model = tokenizer("gpt2")
    walk = tokenizer.hf("gpt2").encode("Munich", add_special_tokens=False).ids
    index = engines.TokfstIndex(model, tokenizer.lexicon("gpt2"))
    res = Results()
    engs = [index, Altered(index, engines.FACTORIZED, 0, lambda words: None)]  # canonical: HF's walk
    rows = masks.measure_regex(engs, CITIES, {"hf": walk, "surface": None}, False, 3, excluded_of(model),
                               masks.speller(model), res, "gpt2 cities")
    assert rows[0]["median"]["status"] == "skipped" and rows[0]["steps"] == 0
    assert rows[0]["detail"] == "no tokenization of the sample over the token surfaces"
    assert rows[1]["walk"] == "complete" and rows[1]["steps"] == len(walk) + 1 and rows[1]["agree"] is None
    assert [c["passed"] for c in res.checks] == [True]
