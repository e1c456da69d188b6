"""Eager BPE inside one pre-token (``encoder.incremental.EagerWord``) against HF's model: the
theta chain of every prefix is HF's encoding of that prefix (Incremental BPE 2026 Sec. 4), and a
stream that emits what settled equals HF's encoding of the whole, on the real tokenizers at the
model level and on the synthetic vocabulary whose merges are out of order (duplicate results, a
merge ranked before its operand exists), with and without fused unknowns."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tokenizers import Tokenizer

from tokfst_cli.encoder.encode import Encoder

from ..bpe.common import synthetic_tokenizer
from ..conftest import TOKENIZERS


def _synthetic(tmp: Path, fuse: bool) -> str:
    path = Path(synthetic_tokenizer(tmp, False))
    data = json.loads(path.read_text())
    data["model"]["fuse_unk"] = fuse
    out = tmp / f"synthetic-fuse-{fuse}.json"
    out.write_text(json.dumps(data))
    return str(out)


@pytest.fixture(scope="module")
def encoders(tmp_path_factory) -> dict[str, tuple[Encoder, Tokenizer]]:
    tmp = tmp_path_factory.mktemp("eager")
    paths = {"gpt2": str(TOKENIZERS["gpt2"]), "llama2": str(TOKENIZERS["llama2"]),
             "synthetic": _synthetic(tmp, False), "synthetic-fused": _synthetic(tmp, True)}
    return {k: (Encoder(p, level="model"), Tokenizer.from_file(p)) for k, p in paths.items()}


ALPHABETS = {"gpt2": ["a", "b", " ", "the", "aa", "ab", "中", "é", "\n", "  ", "'s", "1"],
             "llama2": ["a", "b", "▁", "the", "aa", "ab", "中", "é", "\n", "▁▁", "😀", "1"],
             "synthetic": ["a", "b", "c", "x", "y", "z", "q", "aa", "ab", "ca"]}
ALPHABETS["synthetic-fused"] = ALPHABETS["synthetic"]
TEXTS = st.sampled_from(sorted(ALPHABETS)).flatmap(
    lambda name: st.tuples(st.just(name), st.lists(st.sampled_from(ALPHABETS[name]), max_size=24).map("".join)))


def model_ids(hf: Tokenizer, model_text: str) -> list[int]:
    """HF's model alone on one pre-token."""
    return [tok.id for tok in hf.model.tokenize(model_text)]


def model_text(enc: Encoder, text: str) -> str:
    return "".join(enc._map[b] for b in text.encode()) if enc._byte_level else text


@settings(max_examples=200, deadline=None)
@given(TEXTS)
def test_the_theta_chain_of_every_prefix_is_hfs_encoding(encoders, case):
    name, text = case
    enc, hf = encoders[name]
    word, mtext = enc.eager_word(), model_text(enc, text)
    for i, ch in enumerate(mtext, 1):
        word.push(enc.bpe.initial_symbols(ch))  # a character's symbols (several: byte fallback)
        if enc.bpe.unk_id not in word.sym[:word.n]:  # with an unknown, HF's run ends with its unk: checked whole
            assert word._chain(word.n) == model_ids(hf, mtext[:i]), (name, text, i)
    assert word.rest() == list(enc.word(text, whole=True)) == model_ids(hf, mtext)


@settings(max_examples=200, deadline=None)
@given(TEXTS, st.integers(0, 2 ** 32))
def test_a_model_level_stream_emits_a_prefix_and_ends_as_hf(encoders, case, seed):
    name, text = case
    enc, hf = encoders[name]
    oracle = model_ids(hf, model_text(enc, text))
    rng, stream, got, i = random.Random(seed), enc.stream(), [], 0
    while i < len(text):
        j = i + rng.randint(1, 6)
        got += stream.feed(text[i:j])
        assert got == oracle[:len(got)], (name, text)
        i = j
    assert got + stream.finish() == oracle


def test_long_runs_settle_and_hold_little(encoders):
    """Hundreds of characters fed one at a time: what is held stays within a few tokens."""
    for name, text in (("llama2", "▁the▁cat▁sat" * 60), ("gpt2", "hello world, " * 60), ("synthetic", "abcx" * 150)):
        enc, hf = encoders[name]
        stream, got = enc.stream(), []
        for ch in text:
            got += stream.feed(ch)
        assert got + stream.finish() == model_ids(hf, model_text(enc, text))
        assert stream.held <= 2 * enc.eager_word().t.longest and len(got) > 0, (name, stream.held)


def test_ignore_merges_is_held_whole(tmp_path):
    """ignore_merges looks a whole word up first: no eager word, the stream holds the pre-token."""
    enc = Encoder(synthetic_tokenizer(tmp_path, True), level="model")
    assert enc.eager_word() is None
    stream = enc.stream()
    assert stream.feed("abcabc") == [] and stream.finish() == list(enc.word("abcabc", whole=True))
