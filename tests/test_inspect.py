"""``tokfst inspect`` (tokfst_cli.analysis.inspection; Pitfalls 2025 Sec. 3.3.1 Table 2): skip
rates recomputed by a slow walk through the decoders' masks, the agnostic automaton with
preprocessing against a brute-force segmenter over HF's pre-tokens, the structure against the
index's stats, and the command line's outputs and errors."""

from __future__ import annotations

import json
import re
from itertools import product

import numpy as np
import pytest

from tokfst_cli import pipeline
from tokfst_cli.analysis import inspection
from tokfst_cli.constraint import FstDecoder
from tokfst_cli.decoding.index import build_index
from tokfst_cli.errors import InputError
from tokfst_cli.text import catalogue
from tokfst_cli.tokenizer.model import bytes_to_unicode

from .helpers import enumerate_paths, segmentations
from .runner import run

CITIES = r"(Cologne|Berlin|Bonn|Munich) [0-9]{1,2}( (km|mi))?"


def slow_skips(decoder, ids: list[int]) -> tuple[int, int]:
    """(steps, skippable steps) of one sequence, mask by mask."""
    s, skippable = decoder.initial(), 0
    for t in [*ids, None]:
        options = int(decoder.mask(s).sum()) + bool(decoder.is_final(s))
        skippable += options == 1
        if t is not None:
            s = decoder.advance(s, t)
    assert decoder.is_final(s)
    return len(ids) + 1, skippable


@pytest.mark.parametrize("name", ["gpt2", "llama2"])
def test_skip_rates_equal_a_slow_walk(tokenizer, name):
    model, hf = tokenizer(name), tokenizer.hf(name)
    got = inspection.inspect_regex(model, CITIES, samples=150, seed=4)
    assert len(got.texts) == 150 and all(re.fullmatch(CITIES, t) for t in got.texts)
    assert got.strings == 4 * 110 * 3 and got.max_len == len("Cologne 99 km")
    assert inspection.inspect_regex(model, CITIES, samples=150, seed=4).texts == got.texts  # seeded
    steps = 0
    for name_, fst in got.automata.items():
        d = FstDecoder(fst, model.vocab_size)
        walked = [slow_skips(d, hf.encode(t, add_special_tokens=False).ids) for t in got.texts]
        steps = sum(w[0] for w in walked)
        assert got.skippable[name_] == sum(w[1] for w in walked), name_
        assert got.skip_rate(name_) == sum(w[1] for w in walked) / steps
    assert got.steps == steps
    agnostic, canonical = (FstDecoder(got.automata[k], model.vocab_size) for k in ("agnostic", "canonical"))
    a0 = np.flatnonzero(agnostic.mask(agnostic.initial()))
    c0 = np.flatnonzero(canonical.mask(canonical.initial()))
    assert got.first == (len(a0), len(set(a0) - set(c0))) and got.first[1] > 0
    assert got.skip_rate("canonical") > got.skip_rate("agnostic")


def test_a_factorized_canonical_automaton_is_walked_through_its_masks(tokenizer):
    model = tokenizer("gpt2")
    materialized = inspection.inspect_regex(model, CITIES, samples=40, seed=7)
    lazy = inspection.inspect_regex(model, CITIES, samples=40, seed=7, limits=pipeline.Limits(max_arcs=1))
    assert lazy.structures["canonical"] == {"form": "factorized"} and lazy.texts == materialized.texts
    assert lazy.skippable == materialized.skippable and lazy.first == materialized.first


def model_texts(model, hf, text: str) -> list[bytes]:
    """HF's normalizer and pre-tokenizer on text: the pre-tokens as the model's bytes."""
    normalized = hf.normalizer.normalize_str(text) if hf.normalizer else text
    pieces = [p for p, _ in hf.pre_tokenizer.pre_tokenize_str(normalized)] if hf.pre_tokenizer else [normalized]
    if model.style == "byte-level":
        u2b = {u: b for b, u in bytes_to_unicode().items()}
        return [bytes(u2b[c] for c in p) for p in pieces]
    return [p.encode("utf-8") for p in pieces]


@pytest.mark.parametrize("name", ["gpt2", "llama2"])
def test_agnostic_automaton_holds_every_tokenization_of_the_pretokens(tokenizer, name):
    """Brute force: every segmentation of every pre-token (model text: Llama-2's leading ▁, GPT-2's
    Ġ words) of every string of the regex, concatenated."""
    model, hf = tokenizer(name), tokenizer.hf(name)
    pattern = "(ab|b a?) ?c"
    texts = ["".join(w) for k in range(7) for w in product("abc ", repeat=k) if re.fullmatch(pattern, "".join(w))]
    index: dict[bytes, list[int]] = {}
    for tid, text in model.model_items():
        index.setdefault(text, []).append(tid)
    expected = set()
    for t in texts:
        per_piece = [segmentations(p, index) for p in model_texts(model, hf, t)]
        expected |= {sum(parts, ()) for parts in product(*per_piece)}
    fst = inspection.agnostic_preprocessed(model, pipeline.accept(pattern))
    assert {tuple(x - 1 for x in p) for p in enumerate_paths(fst)} == expected
    assert {tuple(hf.encode(t, add_special_tokens=False).ids) for t in texts} <= expected


def test_pokedex_on_llama2(tokenizer):
    """Seed 001 App. C's object: every encode accepted by both automata; the canonical structure is the
    index's stats; canonicity raises the skip rate (Table 2: 24.5% -> 77.9% on Llama-2-7B's outputs)."""
    model = tokenizer("llama2")
    got = inspection.inspect_regex(model, catalogue.POKEDEX, samples=200, seed=1)
    stats = build_index(got.automata["canonical"], model, catalogue.POKEDEX)["stats"]
    assert {k: got.structures["canonical"][k] for k in stats} == stats
    assert all(ids[0] == model.token_id("▁{") or model.tokens[ids[0]].startswith("▁") for ids in got.ids)
    assert got.skip_rate("canonical") > 0.5 > got.skip_rate("agnostic")


def test_a_rejected_sequence_is_an_internal_error(tokenizer):
    model = tokenizer("gpt2")
    fst = pipeline.build(model, "(Bonn|Berlin)", canonical=True).fst
    walk = inspection._Walk(inspection._sorted(fst))
    bonn = tokenizer.hf("gpt2").encode("Bonn").ids
    assert walk.skips([bonn], "canonical") == len(bonn)  # one choice at the start, then forced
    for bad in ([*bonn, bonn[0]], bonn[:1], [model.vocab_size + 5]):
        with pytest.raises(inspection.Rejected):
            walk.skips([bonn, bad], "canonical")


# ---- the command line ------------------------------------------------------------------------------
def test_cli_inspect_regex(tokenizer, tmp_path):
    r = run("inspect", "gpt2", "-e", CITIES, "--samples", "60", "--seed", "2", "--json")
    assert r.rc == 0 and r.err == b""
    obj = json.loads(r.stdout)
    assert set(obj) == {"regex", "max_len", "strings", "samples", "steps", "automata", "first_tokens"}
    assert set(obj["automata"]) == {"agnostic", "canonical"} and obj["samples"] == 60
    lib = inspection.inspect_regex(tokenizer("gpt2"), CITIES, samples=60, seed=2).to_json()
    assert obj == json.loads(json.dumps(lib))
    for k in ("states", "arcs", "finals", "masks", "states_in_shared_masks", "single_token_states",
              "final_only_states", "skippable_steps", "skip_rate"):
        assert all(k in a for a in obj["automata"].values())
    out = tmp_path / "report.txt"  # with a regex, the positional argument is OUT
    r = run("inspect", "gpt2", "-e", CITIES, "--samples", "60", "--seed", "2", out)
    text = out.read_text()
    assert r.rc == 0 and r.out == b"" and "skip rate" in text and "non-canonical first tokens" in text
    rate = {k: f"{v['skip_rate']:.1%}" for k, v in obj["automata"].items()}
    assert re.search(rf"skip rate\s+{re.escape(rate['agnostic'])}\s+{re.escape(rate['canonical'])}", text)


def test_cli_inspect_artifact(tokenizer, tmp_path):
    index = pipeline.build(tokenizer("gpt2"), CITIES, canonical=True).index()
    path = tmp_path / "cities.json"
    path.write_text(json.dumps(index))
    r = run("inspect", "gpt2", path, "--json")
    obj = json.loads(r.stdout)["automata"]["artifact"]
    assert r.rc == 0 and {k: obj[k] for k in index["stats"]} == index["stats"]
    assert obj["finals"] == len(index["finals"])


def test_cli_inspect_errors(tmp_path):
    r = run("inspect", "gpt2", "-e", "[a-z]+ [0-9]")  # infinite: --max-len needed
    assert r.rc == 2 and len(r.err_lines) == 1 and "infinite" in r.stderr and "--max-len" in r.stderr
    r = run("inspect", "gpt2", "-e", "[a-z]+ [0-9]", "--max-len", "8", "--samples", "30", "--json")
    assert r.rc == 0 and json.loads(r.stdout)["max_len"] == 8
    from .conftest import TOKENIZERS

    for args in (("inspect", TOKENIZERS["bert"], "-e", "ab"),  # WordPiece: no S_M
                 ("inspect", "gpt2", tmp_path / "a.json", tmp_path / "out", "-e", "ab"),  # both
                 ("inspect", "gpt2"),  # neither
                 ("inspect", "gpt2", tmp_path / "missing.json")):
        r = run(*args)
        assert r.rc == 2 and len(r.err_lines) == 1 and "Traceback" not in r.stderr, (args, r.stderr)


def test_text_filters_restrict_both_automata_and_the_samples(tokenizer):
    """inspection with --ascii's filter equals inspection of the hand-written ASCII regex."""
    from tokfst_cli.filters.compose import Filters

    model = tokenizer("gpt2")
    filtered = inspection.inspect_regex(model, "[a-cé]{1,2}( [a-cé])?", 200, 3, filters=Filters(ascii=True))
    plain = inspection.inspect_regex(model, "[a-c]{1,2}( [a-c])?", 200, 3)
    assert filtered.strings == plain.strings
    assert filtered.structures == plain.structures
    assert all(re.fullmatch("[a-c]{1,2}( [a-c])?", t) for t in filtered.texts)


def test_token_filters_are_refused_by_name(tokenizer):
    from tokfst_cli.filters.compose import Filters

    with pytest.raises(InputError, match="fuse_spaces"):
        inspection.inspect_regex(tokenizer("gpt2"), "[a-c]{1,2}", 10, filters=Filters(fuse_spaces=True))
