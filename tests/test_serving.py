"""The serving shapes of the matcher (vLLM, SGLang, xgrammar): several stop ids, a batch of
matchers filling one caller's int32 bitmask (numpy and torch) row by row,
``apply_token_bitmask_inplace``, ``accept_tokens`` / ``validate_tokens`` on drafts, rollback
after speculation, ``reset``, and ``generate`` flagging truncation. Every decoder kind."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import tokfst_cli as tokfst
from tokfst_cli import pipeline
from tokfst_cli.decoding.matcher import Matcher, allocate_token_bitmask, apply_token_bitmask_inplace, generate, unpack
from tokfst_cli.errors import UsageError

PATTERN = "[0-9]{2}(-[0-9]{2})?"


@pytest.fixture(scope="module")
def kinds(tokenizer):
    model = tokenizer("gpt2")
    agnostic = pipeline.build(model, PATTERN)
    canonical = pipeline.build(model, PATTERN, canonical=True)
    factorized = pipeline.build(model, PATTERN, canonical=True, limits=pipeline.Limits(max_arcs=1))
    stack = tokfst.lazy(model, grammar='root ::= "(" root ")" | "x"')
    return model, {"fst": agnostic.decoder(), "canonical": canonical.decoder(), "factorized": factorized.decoder(),
                   "lazy": tokfst.lazy(model, PATTERN), "stack": stack}


def walk(decoder, rng, n: int, state=None) -> list[int]:
    """Up to ``n`` random allowed tokens from ``state`` (the initial state by default)."""
    state, out = decoder.initial() if state is None else state, []
    for _ in range(n):
        allowed = np.flatnonzero(decoder.mask(state))
        if not len(allowed):
            break
        out.append(int(rng.choice(allowed)))
        state = decoder.advance(state, out[-1])
    return out


@pytest.mark.parametrize("kind", ["fst", "canonical", "factorized", "lazy", "stack"])
@pytest.mark.parametrize("as_torch", [False, True])
def test_a_batch_of_matchers_fills_one_buffer(kinds, kind, as_torch):
    model, decoders = kinds
    decoder = decoders[kind]
    stops = [50256, 50300]  # the second past the tokenizer's vocabulary (a model's padded rows)
    vocab = 50304
    rng = np.random.default_rng(1)
    matchers = [Matcher(decoder, eos=stops) for _ in range(4)]
    for i, m in enumerate(matchers):  # each row at another point of a walk
        for t in walk(decoder, rng, i)[:i]:
            m.consume(t)
    buf = allocate_token_bitmask(4, vocab, torch=as_torch)
    for i, m in enumerate(matchers):
        m.fill_next_token_bitmask(buf, i)
    rows = buf.numpy() if as_torch else buf
    for i, m in enumerate(matchers):
        got = unpack(rows[i], vocab)
        want = np.zeros(vocab, bool)
        base = decoder.mask(m.state)
        want[:len(base)] = base
        if decoder.is_final(m.state):
            want[stops] = True
        assert (got == want).all(), (kind, i)
    logits = torch.zeros(4, vocab)
    apply_token_bitmask_inplace(logits, torch.as_tensor(rows))
    assert (torch.isfinite(logits).numpy() == np.array([unpack(r, vocab) for r in rows])).all()


@pytest.mark.parametrize("kind", ["fst", "canonical", "factorized", "lazy", "stack"])
def test_drafts_are_validated_accepted_or_rolled_back(kinds, kind):
    model, decoders = kinds
    decoder = decoders[kind]
    rng = np.random.default_rng(7)
    m = Matcher(decoder, eos=(50256, 198))
    draft = walk(decoder, rng, 6)
    bad = [t for t in range(model.vocab_size) if not decoder.mask(decoder.initial())[t]][:1]
    assert m.validate_tokens(draft) == len(draft) and m.tokens == []
    assert m.validate_tokens(bad + draft) == 0
    assert m.validate_tokens(draft[:2] + bad) == min(2, len(draft))
    assert m.accept_tokens(draft) and m.tokens == draft
    assert not m.accept_tokens(bad) and m.tokens == draft
    m.rollback(len(draft))  # speculation undone
    assert m.tokens == [] and m.state == decoder.initial()
    m.accept_tokens(draft)
    if decoder.is_final(m.state):
        assert m.accept_token(198) and m.is_terminated()  # either stop id ends it
        assert not m.accept_token(draft[0])
        m.rollback()
        assert not m.is_terminated()
    m.reset()
    assert m.tokens == [] and m.state == decoder.initial() and not m.is_terminated()


def test_generate_flags_truncation_and_the_stop_id(kinds):
    model, decoders = kinds
    decoder = decoders["fst"]
    digits = [t for t in range(model.vocab_size) if decoder.mask(decoder.initial())[t]]

    def logits(tokens):
        out = np.zeros(model.vocab_size + 48)
        out[[50256, 198]] = 50.0 if len(tokens) >= 2 else -50.0
        return out

    got = generate(logits, Matcher(decoder, eos=[50256, 198]), max_tokens=64, temperature=0)
    assert got.finished and got.reason == "stop" and got.stop in (50256, 198) and got
    cut = generate(logits, Matcher(decoder, eos=[50256, 198]), max_tokens=1, temperature=0)
    assert not cut.finished and cut.reason == "max_tokens" and len(cut) == 1 and cut[0] in digits
    with pytest.raises(UsageError):
        Matcher(decoder, eos=[1, -2])
    with pytest.raises(UsageError):
        Matcher(decoder).fill_next_token_bitmask(np.zeros((1, 4), np.int64))


def test_transformers_generate_stops_on_any_of_several_eos_ids(kinds):
    """A tiny random model (Llama-3 / Qwen style: a list of EOS ids): every sequence ends on one
    of them at a final state, or is flagged truncated; the texts spell the regex's language."""
    from tokfst_cli.decoding.logits import ConstraintLogitsProcessor, generate, tiny_model

    model, decoders = kinds
    decoder = decoders["fst"]
    stops = [50256, 198]
    lm = tiny_model(model.vocab_size, 50256, 50256, seed=3)
    outs = generate(lm, [50256], ConstraintLogitsProcessor(decoder, eos_token_id=stops), eos_token_id=stops,
                    do_sample=True, max_new_tokens=8, num_return_sequences=6)
    surface = dict(model.lexicon_items())
    for ids in outs:
        state = decoder.initial()
        for t in ids:
            state = decoder.advance(state, t)
        text = b"".join(surface[t] for t in ids).decode()
        if ids.finished:
            assert ids.stop in stops and decoder.is_final(state), text
        else:
            assert len(ids) == 8 and ids.reason == "max_tokens"
    assert any(o.finished for o in outs)
