"""One decoder protocol for every artifact kind (tokfst_cli.constraint), fed by tokfst_cli.pipeline.

Every form of the same constraint answers the same walk: the .fst, the JSON index and the
factorized forms (BPE and WordPiece, co-reachable: issue #12) give equal masks and finality at
every visited state; a disallowed token raises DisallowedTokenError in all.
"""

from __future__ import annotations

import json
import random

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tokfst_cli import constraint, pipeline
from tokfst_cli.automata.fst_io import fst_bytes
from tokfst_cli.decoding.matcher import pack
from tokfst_cli.errors import DisallowedTokenError, InputError, LimitError
from tokfst_cli.filters.compose import Filters

from .conftest import real
from .helpers import SIX_REGEXES, sample_paths

CASES = [("gpt2", "date"), ("gpt2", "cities"), ("llama2", "json"), ("bert", "date"), ("bert", "cities")]


def forms(name: str, pattern: str, tmp_path) -> dict[str, constraint.Decoder]:
    """Every artifact of one canonical constraint, written and loaded back through constraint.load."""
    model = real(name)[0]
    mat = pipeline.build(model, pattern, canonical=True)
    fac = pipeline.build(model, pattern, canonical=True, limits=pipeline.Limits(max_arcs=1))
    assert mat.materialized and not fac.materialized and isinstance(fac.overflow, LimitError)
    paths = {"fst": tmp_path / "c.fst", "index": tmp_path / "c.json", "factorized": tmp_path / "c.tfz"}
    paths["fst"].write_bytes(fst_bytes(mat.fst))
    paths["index"].write_text(json.dumps(mat.index()))
    paths["factorized"].write_bytes(fac.to_bytes())
    out = {k: constraint.load(str(p), model) for k, p in paths.items()}
    out["in-memory"] = mat.decoder()
    out["lazy"] = fac.decoder()
    return model, mat.fst, out


@pytest.mark.parametrize("name,regex", CASES)
def test_every_form_answers_the_same_walks(name, regex, tmp_path):
    model, fst, decoders = forms(name, SIX_REGEXES[regex], tmp_path)
    assert type(decoders["fst"]) is constraint.FstDecoder and type(decoders["index"]) is constraint.IndexDecoder
    assert all(isinstance(d, constraint.Decoder) for d in decoders.values())
    for path in sample_paths(fst, 40, seed=7):
        states = {k: d.initial() for k, d in decoders.items()}
        for label in path + [None]:
            masks = {k: decoders[k].mask(s) for k, s in states.items()}
            assert all(m.dtype == bool and m.shape == (model.vocab_size,) for m in masks.values())
            exact = masks["fst"]
            assert (masks["index"] == exact).all() and (masks["in-memory"] == exact).all()
            assert (masks["factorized"] == exact).all() and (masks["lazy"] == exact).all()
            finals = {k: decoders[k].is_final(s) for k, s in states.items()}
            if label is None:
                assert all(finals.values()), finals
                break
            assert len(set(finals.values())) == 1, finals
            states = {k: decoders[k].advance(s, label - 1) for k, s in states.items()}


@pytest.mark.parametrize("name,regex", [("gpt2", "date"), ("llama2", "json")])
def test_bitmasks_made_at_load_and_on_first_use_agree(name, regex, monkeypatch):
    """A row's packed mask is the same made at load (a list of row views) or on first use (past
    BITMASK_BUDGET; the tables then memoryviews, past LIST_MAX), and it is pack(mask) at every
    state; advance goes to the same state on allowed tokens and refuses the others."""
    model = real(name)[0]
    result = pipeline.build(model, SIX_REGEXES[regex], canonical=True)
    index = result.index()
    eager = [constraint.IndexDecoder(index), result.decoder()]
    monkeypatch.setattr(constraint, "BITMASK_BUDGET", 0)
    monkeypatch.setattr(constraint, "LIST_MAX", 0)
    lazy = [constraint.IndexDecoder(index), result.decoder()]
    assert all(d._views is not None for d in eager) and all(d._views is None for d in lazy)
    assert isinstance(eager[0]._rows, list) and isinstance(lazy[0]._rows, memoryview)
    for state in range(result.fst.num_states()):
        mask = eager[1].mask(state)
        want = pack(mask)
        for d in eager + lazy:
            got = d.bitmask(state)
            assert got.dtype == np.int32 and not got.flags.writeable and (got == want).all()
        assert len({d.is_final(state) for d in eager + lazy}) == 1
        allowed, refused = np.flatnonzero(mask), np.flatnonzero(~mask)
        for token in allowed[::max(1, len(allowed) // 40)].tolist():
            assert len({d.advance(state, token) for d in eager + lazy}) == 1
        for token in [-1, model.vocab_size, *refused[::max(1, len(refused) // 20)].tolist()]:
            for d in eager + lazy:
                with pytest.raises(DisallowedTokenError):
                    d.advance(state, token)


@pytest.mark.parametrize("name,regex", [("gpt2", "date"), ("bert", "date")])
def test_a_disallowed_token_raises_the_same_error_everywhere(name, regex, tmp_path):
    model, _, decoders = forms(name, SIX_REGEXES[regex], tmp_path)
    for k, d in decoders.items():
        s = d.initial()
        banned = int(np.flatnonzero(~d.mask(s))[0])
        with pytest.raises(DisallowedTokenError) as e:
            d.advance(s, banned)
        assert e.value.token == banned, k
        assert isinstance(e.value, ValueError)


def test_load_refuses_what_is_not_an_artifact_or_for_another_tokenizer(tmp_path):
    gpt2, bert = real("gpt2")[0], real("bert")[0]
    _, _, _ = forms("bert", SIX_REGEXES["cities"], tmp_path)
    with pytest.raises(InputError, match="WordPiece factorized"):
        constraint.load(str(tmp_path / "c.tfz"))
    with pytest.raises(InputError, match="another tokenizer"):
        constraint.load(str(tmp_path / "c.tfz"), gpt2)
    with pytest.raises(InputError, match="another tokenizer"):
        constraint.load(str(tmp_path / "c.json"), gpt2)
    assert constraint.load(str(tmp_path / "c.fst")).vocab_size == bert.vocab_size  # sized by its symbol table
    (tmp_path / "junk").write_bytes(b"\x00junk")
    with pytest.raises(InputError, match="not valid JSON"):
        constraint.load(str(tmp_path / "junk"))
    (tmp_path / "other.json").write_text('{"format": "something"}')
    with pytest.raises(InputError, match="not a tokfst-index"):
        constraint.load(str(tmp_path / "other.json"))
    with pytest.raises(InputError, match="cannot read"):
        constraint.load(str(tmp_path / "missing"))


WORDS = ["Bonn", "Berlin", "date", "2024", "hello world", " the", "ab", "a"]


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.sampled_from(WORDS), min_size=1, max_size=4, unique=True), st.booleans(), st.integers(0, 9))
def test_pipeline_result_walks_accept_what_hf_produces(words, optional, seed):
    """build() on random finite languages: HF's encoding of each string is a path of the decoder."""
    model, _, hf = real("gpt2")
    pattern = "(" + "|".join(w.replace(" ", "\\ ") for w in words) + ")" + ("?" if optional else "")
    result = pipeline.build(model, pattern, canonical=True)
    decoder = result.decoder()
    strings = words + ([""] if optional else [])
    for text in strings:
        s = decoder.initial()
        for t in hf.encode(text, add_special_tokens=False).ids:
            assert decoder.mask(s)[t]
            s = decoder.advance(s, t)
        assert decoder.is_final(s)
    rng = random.Random(seed)
    s, seen = decoder.initial(), 0
    while not decoder.is_final(s) or (seen < 5 and decoder.mask(s).any() and rng.random() < 0.5):
        allowed = np.flatnonzero(decoder.mask(s))
        s = decoder.advance(s, int(rng.choice(allowed)))
        seen += 1
    assert decoder.is_final(s)


def test_method_checks_are_library_errors_with_data():
    gpt2, bert = real("gpt2")[0], real("bert")[0]
    with pytest.raises(InputError) as e:
        pipeline.check_method(bert, True, "gadgets")
    assert e.value.hint == "method-family" and e.value.data["allowed"] == "product, aho"
    with pytest.raises(InputError) as e:
        pipeline.check_method(gpt2, False, "implicit")
    assert e.value.hint == "method-needs-canonical"
    assert (pipeline.check_method(gpt2, True, None) == "implicit"
            and pipeline.check_method(bert, True, None) == "product")
    with pytest.raises(LimitError) as e:
        pipeline.build(gpt2, "[0-9]{4}", limits=pipeline.Limits(max_states=2))
    assert (e.value.limit, e.value.bound, e.value.value) == ("max_states", 2, 5) and "max_states 2" in str(e.value)
    assert "--" not in str(e.value)


@pytest.mark.parametrize("name,filters", [("gpt2", Filters()), ("llama2", Filters(no_byte_tokens=True)),
                                          ("llama2", Filters(literal_ascii=True))])
def test_decoder_and_index_reuse_the_arcs_promotion_read(name, filters, monkeypatch):
    """Result.arrays: the agnostic result's decoder and index read no arcs again, and answer as
    those made from the automaton itself; also where a token filter removed arcs (Llama-2's
    byte tokens for the date's ASCII)."""
    from tokfst_cli.decoding import index as index_mod

    model = real(name)[0]
    result = pipeline.build(model, SIX_REGEXES["date"], filters=filters)
    assert result.arrays is not None
    if filters.names():
        assert result.fst.num_arcs(result.fst.start()) < pipeline.build(model, SIX_REGEXES["date"]).fst.num_arcs(
            result.fst.start())  # the filter removed arcs
    fresh_index = index_mod.build_index(result.fst, model, result.pattern)
    fresh = constraint.FstDecoder(result.fst, model.vocab_size)
    reads = []
    for mod in (constraint, index_mod):
        monkeypatch.setattr(mod, "fst_arrays", lambda fst, _f=mod.fst_arrays: reads.append(1) or _f(fst))
    decoder, index = result.decoder(), result.index()
    assert reads == []
    assert index == fresh_index
    s = decoder.initial()
    assert (decoder.mask(s) == fresh.mask(s)).all()
