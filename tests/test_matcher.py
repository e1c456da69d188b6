"""The decoding-loop view (tokfst_cli.decoding.matcher, issue #12 item 2): packed bitmasks, EOS at final
states, consume/rollback and forced runs, on every decoder kind."""

from __future__ import annotations

import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tokfst_cli import pipeline
from tokfst_cli.constraint import IndexDecoder
from tokfst_cli.decoding.matcher import Matcher, forced, pack, unpack
from tokfst_cli.errors import DisallowedTokenError


@given(st.lists(st.booleans(), min_size=1, max_size=300))
@settings(max_examples=200, deadline=None)
def test_pack_is_xgrammars_layout(bits):
    mask = np.array(bits, bool)
    words = pack(mask)
    assert words.dtype == np.dtype("<i4") and len(words) == (len(mask) + 31) // 32
    for t, b in enumerate(bits):  # bit t % 32 of word t // 32
        assert ((int(words[t // 32]) >> (t % 32)) & 1) == b
    assert (unpack(words, len(mask)) == mask).all()


def decoders(tokenizer, pattern: str):
    model = tokenizer("gpt2")
    mat = pipeline.build(model, pattern, canonical=True)
    fac = pipeline.build(model, pattern, canonical=True, limits=pipeline.Limits(max_arcs=1))
    agnostic = pipeline.build(model, pattern)
    return model, {"fst": mat.decoder(), "index": IndexDecoder(mat.index()), "factorized": fac.decoder(),
                   "agnostic": agnostic.decoder()}


@pytest.mark.parametrize("pattern", ["(Cologne|Berlin|Bonn|Munich)", "[0-9]{4}-[0-9]{2}", "(ab|abc)( x)?"])
def test_matcher_walks_rollback_and_forced(tokenizer, pattern):
    model, decs = decoders(tokenizer, pattern)
    eos = model.token_id("<|endoftext|>")
    rng = random.Random(pattern)
    for kind, dec in decs.items():
        for _ in range(30):
            m = Matcher(dec, eos)
            history = [(m.mask().copy(), m.is_final(), False)]
            while not m.is_terminated():
                mask = m.mask()
                assert mask[eos] == m.is_final(), kind  # EOS exactly at final states
                assert (unpack(m.bitmask(), len(mask)) == mask).all()
                run = m.forced()
                probe = Matcher(dec, eos)
                for t in m.tokens:
                    probe.consume(t)
                for t in run:  # every state of a forced run has one allowed token and is not final
                    allowed = np.flatnonzero(probe.mask())
                    assert list(allowed) == [t] and not probe.is_final()
                    probe.consume(t)
                allowed = np.flatnonzero(mask)
                assert len(allowed), kind  # EOS at least where final; no dead end in any form
                m.consume(int(rng.choice(allowed)))
                history.append((m.mask().copy(), m.is_final(), m.is_terminated()))
            k = rng.randint(0, len(m.tokens))
            m.rollback(k)  # the earlier state and mask exactly
            mask, final, terminated = history[len(m.tokens)]
            assert (m.mask() == mask).all() and m.is_final() == final and m.is_terminated() == terminated


def test_matcher_refuses_and_keeps_its_state(tokenizer):
    model, decs = decoders(tokenizer, "(Cologne|Berlin)")
    eos = model.token_id("<|endoftext|>")
    m = Matcher(decs["fst"], eos)
    bad = int(np.flatnonzero(~m.mask())[0])
    with pytest.raises(DisallowedTokenError):
        m.consume(bad)
    with pytest.raises(DisallowedTokenError):
        m.consume(eos)  # not at a final state
    assert m.tokens == [] and not m.is_terminated()
    run, state = forced(decs["fst"], decs["fst"].initial())
    assert run == []  # two words: a choice at the start
    with pytest.raises(ValueError):
        m.rollback(1)


@pytest.mark.parametrize("canonical", [False, True])
@pytest.mark.parametrize("name", ["gpt2", "llama2"])
def test_generate_with_a_random_model(tokenizer, name, canonical):
    """The numpy decoding loop with a random next-token model (fixed seed): 50 samples per regex
    fully match it, canonical ones re-encode to themselves, no step meets an empty mask."""
    import re

    from tokfst_cli.decoding.matcher import generate
    from tokfst_cli.text import catalogue

    model, hf = tokenizer(name), tokenizer.hf(name)
    eos = model.token_id("<|endoftext|>" if name == "gpt2" else "</s>")
    rng = np.random.default_rng(7)
    table = rng.normal(size=(64, model.vocab_size))  # a "model": logits picked by the sequence so far,
    table[:, eos] += 4.0  # which likes to stop where it may
    logits = lambda toks: table[hash(tuple(toks)) % 64]  # noqa: E731
    six = catalogue.six()
    for rname in ("date", "cities", "words100", "json"):  # finite: a random model ends them
        pattern = six[rname]
        result = pipeline.build(model, pattern, canonical=canonical)
        assert result.materialized
        for _ in range(50):
            m = Matcher(result.decoder(), eos)
            ids = generate(logits, m, max_tokens=500, rng=rng)
            assert m.is_terminated() or m.is_final(), (rname, ids)
            text = hf.decode(ids, skip_special_tokens=False)
            assert re.fullmatch(pattern, text), (rname, text)
            if canonical:
                assert hf.encode(text, add_special_tokens=False).ids == ids, (rname, text)


@pytest.mark.parametrize("pattern", ["[0-9]{4}-[0-9]{2}", "(Cologne|Berlin|Bonn|Munich)"])
def test_every_decoder_has_bitmask_forced_and_matcher(tokenizer, pattern):
    """decoder.bitmask(state) (precomputed per shared mask for .fst and index) is pack(mask(state)),
    decoder.forced(state) is matcher.forced, decoder.matcher(eos) a Matcher over it, in every form."""
    model, decs = decoders(tokenizer, pattern)
    eos = model.token_id("<|endoftext|>")
    rng = random.Random(pattern)
    for kind, dec in decs.items():
        state = dec.initial()
        for _ in range(12):
            words = dec.bitmask(state)
            assert words.dtype == np.dtype("<i4") and (words == pack(dec.mask(state))).all(), kind
            assert dec.forced(state) == forced(dec, state)[0]
            allowed = np.flatnonzero(dec.mask(state))
            if not len(allowed):
                assert dec.is_final(state)
                break
            state = dec.advance(state, int(rng.choice(allowed)))
        m = dec.matcher(eos)
        assert isinstance(m, Matcher) and m.decoder is dec and (unpack(m.bitmask(), len(m.mask())) == m.mask()).all()
