"""Constrained generation with transformers (tokfst_cli.decoding.logits, issue #12 item 3): a tiny randomly
initialized GPT-2-architecture model (built here, never downloaded) samples under the six bench
regexes, agnostic (promoted, and the lazy decoder), canonical (materialized where the default
limits allow) and factorized canonical, on GPT-2 and Llama-2.

A random model rarely finishes an infinite language (decimal, email) by chance, so a second
processor, the model's "taste", adds a bonus, growing with the length, to the tokens that bring
the text closer to an end (by the agnostic automaton of the text the model reads), and a fixed one
to EOS where the text may end: the first steps are the random model's own, and the constraint
alone decides what is allowed.
"""

from __future__ import annotations

import re
import subprocess
import sys

import numpy as np
import pytest
import torch
from transformers import LogitsProcessor

from tokfst_cli import constraint, pipeline
from tokfst_cli.constraint import FstDecoder
from tokfst_cli.decoding.logits import ConstraintLogitsProcessor, generate, tiny_model
from tokfst_cli.decoding.matcher import DeadEnd, Matcher
from tokfst_cli.errors import InputError
from tokfst_cli.text import catalogue

from .helpers import distance_to_final, finals

EOS = {"gpt2": "<|endoftext|>", "llama2": "</s>"}
BOS = {"gpt2": "<|endoftext|>", "llama2": "<s>"}
SAMPLES = 50  # per regex, form and tokenizer: one batch (num_return_sequences)
FORMS = {"agnostic": dict(canonical=False), "canonical": dict(canonical=True),
         "factorized": dict(canonical=True, limits=pipeline.Limits(max_arcs=1)),
         "lazy": dict(canonical=False, lazy=True)}  # constraint.lazy: no promotion
TASTE = 0.5  # the bonus (logits) per step so far of a token that brings the text closer to an end
EOS_TASTE = 8.0  # the bonus of EOS where the text may end


pytestmark = pytest.mark.usefixtures("torch_one_thread")


class Taste(LogitsProcessor):
    """+TASTE per step on the tokens after which the text is closer to a final state of ``fst`` (an
    agnostic token automaton of the text as the model reads it), +EOS_TASTE on EOS at its finals."""

    def __init__(self, fst, vocab_size: int, eos: int):
        self.decoder, self.eos = FstDecoder(fst, vocab_size), eos
        succ = {s: list(self.decoder.arcs(s)[1]) for s in fst.states()}
        dist = distance_to_final(succ, finals(fst))
        self.dist = np.array([dist[s] for s in range(fst.num_states())])
        self.states: list | None = None

    def __call__(self, input_ids, scores):
        if self.states is None:
            self.states, self.step_count = [self.decoder.initial()] * scores.shape[0], 0
        else:
            self.step_count += 1
            self.states = [self.step(s, int(t)) for s, t in zip(self.states, input_ids[:, -1].tolist())]
        bonus = torch.zeros_like(scores)
        for i, s in enumerate(self.states):
            if s is not None:
                labels, nexts = self.decoder.arcs(s)
                bonus[i, torch.from_numpy(labels[self.dist[nexts] < self.dist[s]])] = TASTE * self.step_count
                if self.decoder.is_final(s):
                    bonus[i, self.eos] = EOS_TASTE
        return scores + bonus

    def step(self, state, token: int):
        if state is None or token == self.eos:
            return None
        try:
            return self.decoder.advance(state, token)
        except ValueError:
            return None  # not a path of the guide: no taste from here


def model_text(name: str, pattern: str, canonical: bool) -> str:
    """The text the model reads: Llama-2's normalizer prepends "▁" (a space) to what it encodes."""
    return f" ({pattern})" if canonical and name == "llama2" else pattern


@pytest.mark.parametrize("form", list(FORMS))
@pytest.mark.parametrize("name", ["gpt2", "llama2"])
def test_sampling_under_the_bench_regexes(tokenizer, name, form):
    """Every sample fully matches its regex and is a path of the constraint ending at a final
    state; canonical ones re-encode to themselves; no step meets an empty mask (the processor
    raises DeadEnd there). Failures are collected over the six regexes, then reported together."""
    model, hf = tokenizer(name), tokenizer.hf(name)
    eos, bos = model.token_id(EOS[name]), model.token_id(BOS[name])
    lm = tiny_model(model.vocab_size, bos, eos)
    kw = dict(FORMS[form])
    lazy = kw.pop("lazy", False)
    failures = []
    for rname, pattern in catalogue.six().items():
        decoder = constraint.lazy(model, pattern) if lazy else pipeline.build(model, pattern, **kw).decoder()
        taste = Taste(pipeline.build(model, model_text(name, pattern, kw["canonical"])).fst, model.vocab_size, eos)
        try:
            samples = generate(lm, [bos], decoder, eos_token_id=eos, do_sample=True, max_new_tokens=64,
                               num_return_sequences=SAMPLES, logits_processor=[taste])
        except DeadEnd as e:
            failures.append(f"{rname}: {e}")
            continue
        assert len(samples) == SAMPLES
        for ids in samples:
            m = Matcher(decoder, eos)
            for t in ids:
                m.consume(t)  # DisallowedTokenError if the processor let a token through
            text = hf.decode(ids, skip_special_tokens=False)
            if not m.is_final() or not re.fullmatch(pattern, text):
                failures.append(f"{rname}: {ids} ({text!r}) is not a complete sample")
            elif kw["canonical"] and hf.encode(text, add_special_tokens=False).ids != ids:
                failures.append(f"{rname}: {ids} ({text!r}) is not canonical")
    assert not failures, "\n".join(failures[:20])


def processor_for(tokenizer, pattern: str, **kw):
    model = tokenizer("gpt2")
    eos = model.token_id("<|endoftext|>")
    return model, eos, pipeline.build(model, pattern, **kw).decoder()


class BoolOnly:
    """A decoder with the protocol's four calls only (bool masks, no packed words of its own)."""

    def __init__(self, decoder):
        self.d = decoder
        self.initial, self.mask, self.advance, self.is_final = (decoder.initial, decoder.mask, decoder.advance,
                                                                decoder.is_final)


@pytest.mark.parametrize("packed", [True, False])
def test_masks_padding_rows_eos_and_finished_rows(tokenizer, packed):
    """Direct calls: logits past the vocabulary are -inf, EOS only at final states, a finished row
    gets only EOS, the allowed set is the matcher's mask, and a reused processor is refused; from
    the decoder's packed words, or from bool masks where a decoder has no words of its own."""
    model, eos, decoder = processor_for(tokenizer, "(ab|abc)( x)?")
    decoder = decoder if packed else BoolOnly(decoder)
    width = model.vocab_size + 64  # a model with padding rows
    proc = ConstraintLogitsProcessor(decoder, eos_token_id=eos)
    assert proc.packed == packed
    rng = np.random.default_rng(3)
    rows = 3
    ids = torch.full((rows, 1), eos)
    shadow = [Matcher(decoder, eos) for _ in range(rows)]
    for step in range(8):
        scores = torch.from_numpy(rng.normal(size=(rows, width)).astype(np.float32))
        out = proc(ids, scores)
        allowed = torch.isfinite(out).numpy()
        assert not allowed[:, model.vocab_size:].any()
        nxt = []
        for i, m in enumerate(shadow):
            expect = np.zeros(width, bool)
            expect[:model.vocab_size] = m.mask()
            if m.is_terminated():
                expect[eos] = True
            assert (allowed[i] == expect).all(), (step, i)
            assert allowed[i, eos] == (m.is_final() or m.is_terminated())
            assert (out[i][allowed[i]] == scores[i][allowed[i]]).all()  # allowed scores untouched
            choices = np.flatnonzero(allowed[i])
            t = int(eos if i == 0 and m.is_final() else rng.choice(choices))  # row 0 ends as soon as it may
            if not m.is_terminated():
                m.consume(t)
            nxt.append(t)
        ids = torch.cat([ids, torch.tensor(nxt)[:, None]], dim=1)
    assert shadow[0].is_terminated() and proc.steps == 8
    with pytest.raises(InputError):
        proc(ids[:, :2], scores)  # a second generate: make a new processor, or reset()
    proc.reset()
    assert torch.isfinite(proc(ids[:, :1], scores)).any()


def test_dead_end_and_missing_eos_are_named(tokenizer):
    """Without eos_token_id, a final state that allows nothing else cannot end: DeadEnd says so."""
    model, eos, decoder = processor_for(tokenizer, "ab")
    ab = model.token_id("ab")
    assert decoder.is_final(decoder.advance(decoder.initial(), ab))
    proc = ConstraintLogitsProcessor(decoder)
    scores = torch.zeros((1, model.vocab_size))
    assert torch.isfinite(proc(torch.tensor([[eos]]), scores))[0, ab]
    with pytest.raises(DeadEnd, match="eos_token_id"):
        proc(torch.tensor([[eos, ab]]), scores)


def test_generate_greedy_and_vocab_size(tokenizer):
    """``generate`` strips the prompt and EOS, takes a processor (its counters then readable) or no
    constraint; ``vocab_size`` bans the tokens past it."""
    model, eos, decoder = processor_for(tokenizer, "(Cologne|Berlin|Bonn|Munich)")
    lm = tiny_model(model.vocab_size, eos, eos)
    hf = tokenizer.hf("gpt2")
    proc = ConstraintLogitsProcessor(decoder, eos_token_id=eos)
    [ids] = generate(lm, [eos], proc, eos_token_id=eos, do_sample=False, max_new_tokens=16)
    assert hf.decode(ids) in ("Cologne", "Berlin", "Bonn", "Munich") and eos not in ids
    assert proc.steps == len(ids) + 1 and proc.matchers[0].is_final()  # the last call offered EOS
    free = generate(lm, [eos], None, eos_token_id=eos, do_sample=True, max_new_tokens=5, num_return_sequences=3)
    assert len(free) == 3 and all(len(x) <= 5 for x in free)
    allowed = np.flatnonzero(decoder.mask(decoder.initial()))
    cut = int(np.median(allowed)) + 1
    proc = ConstraintLogitsProcessor(decoder, eos_token_id=eos, vocab_size=cut)
    out = proc(torch.tensor([[eos]]), torch.zeros((1, model.vocab_size)))
    assert list(np.flatnonzero(torch.isfinite(out[0]).numpy())) == [int(t) for t in allowed if t < cut]


def test_import_needs_no_torch_and_missing_extra_is_named(monkeypatch, tokenizer):
    code = "import sys, tokfst_cli, tokfst_cli.decoding.logits; assert 'torch' not in sys.modules, 'torch imported'"
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    import tokfst_cli.decoding.logits as logits

    monkeypatch.setitem(sys.modules, "transformers", None)  # as if not installed
    monkeypatch.setattr(logits, "_CLASS", None)
    with pytest.raises(InputError) as e:
        logits.ConstraintLogitsProcessor(processor_for(tokenizer, "ab")[2])
    assert "pip install 'tokfst[hf]'" in e.value.one_line()


def test_bench_logits_table(tokenizer):
    """``tokfst bench logits`` (tokfst_cli.bench.logits) on one regex: a row per constraint with
    timing cells, the tokens generated, and its dead-end check."""
    from tokfst_cli.bench.logits import logits_table

    res = logits_table([("gpt2", str(tokenizer.path("gpt2")), False)], {"cities": catalogue.FOUNDATION["cities"]},
                       1, lambda message: None)
    [table] = res.tables
    assert [(r["constraint"], r["form"]) for r in table.rows] == [("agnostic", "materialized"),
                                                                  ("canonical", "materialized"), ("agnostic", "lazy")]
    for row in table.rows:
        assert 2 <= row["tokens"] <= 8  # a city and EOS
        assert all(row[k]["status"] == "ok" for k in ("unconstrained", "constrained", "processor"))
    assert [c["passed"] for c in res.checks] == [True]
