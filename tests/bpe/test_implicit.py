"""Canonical BPE: the implicit A_BPE, its artifact and explicit form, against Hugging Face's BPE model.

HF's model (``Tokenizer.model.tokenize``, no normalizer or pre-tokenizer) is the oracle: a pair
(u, v) is allowed iff HF tokenizes text(u) text(v) as [u, v]; a sequence is canonical iff HF
tokenizes its text as exactly that sequence. (canonical-check on the command line: test_cli.py.)
"""

from __future__ import annotations

import bisect
import itertools
import json
import random
import re
from functools import lru_cache

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tokenizers import Tokenizer

from tokfst_cli.bpe import implicit
from tokfst_cli.bpe.explicit import explicit_automaton
from tokfst_cli.errors import InputError
from tokfst_cli.tokenizer import model as tokmod
from tokfst_cli.tokenizer.model import model_text
from tokfst_cli.tokenizer.reference import HfReference

from ..conftest import TOKENIZERS, budget, words100
from ..helpers import accepts, finals, transitions
from ..runner import run, tool
from .common import CORPUS, REAL, compiled, normal_tokens, sequences, synthetic_tokenizer, trained_tokenizer


@lru_cache(maxsize=None)
def bare_hf(name: str) -> Tokenizer:
    """HF with only its model: encode_batch then runs the model alone, in parallel."""
    tok = Tokenizer.from_file(str(TOKENIZERS[name]))
    tok.normalizer = None
    tok.pre_tokenizer = None
    tok.post_processor = None
    return tok


def hf_pairs_banned(name: str, us, vs) -> np.ndarray:
    model, _, hf = compiled(name)
    texts = [model.tokens[u] + model.tokens[v] for u, v in zip(us, vs)]
    bare = bare_hf(name)
    encodings = getattr(bare, "encode_batch_fast", bare.encode_batch)(texts, add_special_tokens=False)
    out = np.fromiter((enc.ids != [u, v] for enc, u, v in zip(encodings, us, vs)), bool, len(texts))
    for i in _holding_specials(texts, [model.tokens[i] for i in model.special_ids]):
        # encode would split out an added token: ask the model
        out[i] = [t.id for t in hf.model.tokenize(texts[i])] != [us[i], vs[i]]
    return out


def _holding_specials(texts: list[str], specials: list[str]) -> list[int]:
    """The indices of the texts holding a special token's text (found in one search of their join)."""
    if not specials:
        return []
    sep = "\x00\x01\x00"
    joined = sep.join(texts)
    starts = list(itertools.accumulate((len(t) + len(sep) for t in texts[:-1]), initial=0))
    hits = re.finditer("|".join(map(re.escape, specials)), joined)
    return sorted({bisect.bisect_right(starts, m.start()) - 1 for m in hits})


@pytest.mark.parametrize("name", REAL)
def test_full_rows_agree_with_hf(name):
    """BANNED(u) for every v, for 50 random rows per tokenizer (100 in all; the quick profile's share)."""
    model, imp, _ = compiled(name)
    toks = normal_tokens(name)
    rng = random.Random(11)
    for u in rng.sample(list(toks), budget(50)):
        us = np.full(len(toks), u)
        ours = imp.banned(us, toks)
        assert np.array_equal(ours, hf_pairs_banned(name, list(us), list(toks))), model.tokens[u]
        row = imp.banned_row(int(u))
        assert np.array_equal(row[toks], ours)


@pytest.mark.parametrize("name", REAL)
def test_random_pairs_agree_with_hf(name):
    """>= 100k pairs (50k per tokenizer): uniform, short tokens, and pairs whose boundary
    characters share a merge (a random merge's operands at the end of u / start of v)."""
    model, imp, _ = compiled(name)
    rng = np.random.default_rng(7)
    toks = normal_tokens(name)
    texts = [model.tokens[t] for t in toks]
    short = toks[np.array([len(t) <= 3 for t in texts])]
    by_last: dict[str, list[int]] = {}
    by_first: dict[str, list[int]] = {}
    for t, s in zip(toks, texts):
        by_last.setdefault(s[-1], []).append(int(t))
        by_first.setdefault(s[0], []).append(int(t))
    us, vs = [], []
    us += list(rng.choice(toks, 17000))
    vs += list(rng.choice(toks, 17000))
    us += list(rng.choice(short, 17000))
    vs += list(rng.choice(short, 17000))
    merges = model.merges
    for k in rng.integers(0, len(merges), 16000):
        a, b = merges[k]
        la, fb = model.tokens[a][-1], model.tokens[b][0]
        us.append(int(rng.choice(by_last.get(la, [a]))))
        vs.append(int(rng.choice(by_first.get(fb, [b]))))
    ours = imp.banned(np.array(us), np.array(vs))
    theirs = hf_pairs_banned(name, us, vs)
    assert len(us) >= 50_000
    assert np.array_equal(ours, theirs)
    assert 0.01 < theirs.mean() < 0.9  # the biased sample really exercises banned pairs


@pytest.mark.parametrize("name", REAL)
def test_sequences_agree_with_hf(name):
    model, imp, hf = compiled(name)
    seqs = sequences(name, 5000, seed=3)
    verdicts = imp.check_batch(seqs)
    expected = [[t.id for t in hf.model.tokenize("".join(model.tokens[t] for t in s))] == s for s in seqs]
    assert [v is None for v in verdicts] == expected
    assert sum(expected) >= 2500 and len(expected) - sum(expected) >= 100  # both kinds really occur


def test_byte_fallback_runs():
    """Llama-2: an absent character is its UTF-8 bytes; anything else with <0xNN> is not canonical."""
    model, imp, hf = compiled("llama2")
    ref = HfReference(model)
    absent = [c for c in "𝔘ꙮ𒀀🜲" if c not in model._ids()]
    assert absent
    for c in absent:
        ids = ref.tokenize_text("a" + c + "b")
        assert any(model.tokens[i].startswith("<0x") for i in ids)
        assert imp.first_violation(ids) is None
        fb = [i for i in ids if model.tokens[i].startswith("<0x")]
        assert imp.first_violation(fb[:-1]) is not None  # a character cut short
        assert imp.first_violation(fb + fb[:1]) is not None
    present = ref.tokenize_text("é")
    as_bytes = [model.token_id(f"<0x{b:02X}>") for b in "é".encode()]
    assert imp.first_violation(present) is None and imp.first_violation(as_bytes) is not None


def test_artifact_round_trip_and_refusals(tmp_path, tokenizer):
    model, imp, _ = compiled("llama2")
    data = implicit.to_bytes(imp)
    assert len(data) <= 4_000_000
    back = implicit.from_bytes(data, model.fingerprint)
    rng = np.random.default_rng(1)
    u, v = rng.integers(0, model.vocab_size, 20000), rng.integers(0, model.vocab_size, 20000)
    assert np.array_equal(back.banned(u, v), imp.banned(u, v))
    assert back.info() == imp.info()
    with pytest.raises(InputError, match="built for tokenizer"):
        implicit.from_bytes(data, tokenizer("gpt2").fingerprint)
    for cut in (5, 40, len(data) // 2, len(data) - 1):
        with pytest.raises(InputError):
            implicit.from_bytes(data[:cut], model.fingerprint)
    flipped = bytearray(data)
    flipped[-10] ^= 0xFF
    with pytest.raises(InputError, match="checksum"):
        implicit.from_bytes(bytes(flipped), model.fingerprint)
    out = tmp_path / "l.bpe"
    r = run("compile-bpe", tokenizer.path("llama2"), out)
    assert r.returncode == 0 and out.read_bytes()[:10] == implicit.MAGIC
    r = run("compile-bpe", "--info", out, "--json")
    info = json.loads(r.out.decode())
    assert info["states"] == imp.info()["states"] and info["bytes"] == out.stat().st_size
    out.write_bytes(out.read_bytes()[:1000])
    r = run("compile-bpe", "--info", out)
    assert r.returncode == 2 and "Traceback" not in r.err.decode()


# ---- small tokenizers: trained with HF, and synthetic corner cases -----------------------------

def _exhaustive_agreement(path: str, max_len: int, alphabet_limit: int = 14) -> int:
    model = tokmod.load(path)
    hf = Tokenizer.from_file(path)
    imp = implicit.compile_implicit(model).attach(model)
    toks = [t for t in range(model.vocab_size) if model.tokens[t] and t not in model.special_ids][:alphabet_limit]
    text = lambda s: "".join(model_text(model, t)[0] for t in s)  # noqa: E731
    n = 0
    for k in range(1, max_len + 1):
        seqs = [list(s) for s in itertools.product(toks, repeat=k)]
        for seq, verdict in zip(seqs, imp.check_batch(seqs)):
            expected = [t.id for t in hf.model.tokenize(text(seq))] == seq
            assert expected == (verdict is None), ([model.tokens[t] for t in seq], verdict)
            n += expected
    return n


@pytest.mark.parametrize("ignore_merges", [False, True])
def test_synthetic_corner_cases_exhaustively(tmp_path, ignore_merges):
    assert _exhaustive_agreement(synthetic_tokenizer(tmp_path, ignore_merges), 4, alphabet_limit=16) > 100


@pytest.mark.parametrize("opts", [{}, {"end_of_word_suffix": "</w>"}, {"continuing_subword_prefix": "##"},
                                  {"ignore_merges": True}])
def test_trained_tokenizers_agree_with_hf(tmp_path, opts):
    path = trained_tokenizer(tmp_path, 300, **opts)
    model = tokmod.load(path)
    hf = Tokenizer.from_file(path)
    imp = implicit.compile_implicit(model).attach(model)
    rng = random.Random(2)
    words = CORPUS + words100()
    seqs = []
    for _ in range(1500):
        w = rng.choice(words)
        w = w[rng.randint(0, len(w) - 1):][: rng.randint(1, 8)]
        seqs.append([t.id for t in hf.model.tokenize(w)])
        k = rng.randint(2, 5)
        seqs.append([rng.randrange(model.vocab_size) for _ in range(k)])
    verdicts = imp.check_batch(seqs)
    for seq, v in zip(seqs, verdicts):
        parts = [model_text(model, t) for t in seq]
        expected = bool(seq) and [t.id for t in hf.model.tokenize("".join(p[0] for p in parts))] == seq
        assert expected == (v is None), ([model.tokens[t] for t in seq], v)


@given(st.lists(st.sampled_from("abcxyz"), min_size=1, max_size=8).map("".join))
@settings(max_examples=150, deadline=None)
def test_exactly_hf_segmentation_of_a_word_is_canonical(word):
    """Of all segmentations of a word into tokens, exactly HF's is canonical."""
    model, imp, hf = _synthetic_cached()
    canonical = [t.id for t in hf.model.tokenize(word)]
    pieces = {model.tokens[t]: t for t in range(model.vocab_size) if model.tokens[t] and t not in model.special_ids}

    def segs(i):
        if i == len(word):
            yield []
        for j in range(i + 1, len(word) + 1):
            if word[i:j] in pieces:
                for rest in segs(j):
                    yield [pieces[word[i:j]]] + rest

    all_segs = list(segs(0))
    assert canonical in all_segs
    verdicts = imp.check_batch(all_segs)
    assert [s for s, v in zip(all_segs, verdicts) if v is None] == [canonical]


@lru_cache(maxsize=1)
def _synthetic_cached():
    import tempfile
    from pathlib import Path

    path = synthetic_tokenizer(Path(tempfile.mkdtemp()), False)
    model = tokmod.load(path)
    return model, implicit.compile_implicit(model).attach(model), Tokenizer.from_file(path)


@pytest.mark.parametrize("ignore_merges", [False, True])
def test_explicit_automaton_accepts_exactly_the_canonical_sequences(tmp_path, tokenizer, ignore_merges):
    path = synthetic_tokenizer(tmp_path, ignore_merges)
    model = tokmod.load(path)
    hf = Tokenizer.from_file(path)
    imp = implicit.compile_implicit(model).attach(model)
    fst = explicit_automaton(imp, model)
    delta, fin = transitions(fst), finals(fst)
    toks = [t for t in range(model.vocab_size) if model.tokens[t] and t not in model.special_ids]
    for k in range(1, 4):
        for seq in itertools.product(toks, repeat=k):
            expected = [t.id for t in hf.model.tokenize("".join(model.tokens[t] for t in seq))] == list(seq)
            assert accepts(fst, [t + 1 for t in seq], delta, fin) == expected
    if ignore_merges:
        return
    r = run("compile-bpe", path, tmp_path / "a.fst", "--form", "fst")
    assert r.returncode == 0
    r = tool("fstinfo", tmp_path / "a.fst")
    assert r.returncode == 0 and "# of states" in r.stdout.decode()
    r = run("compile-bpe", tokenizer.path("gpt2"), tmp_path / "g.fst", "--form", "fst", "--max-arcs", "100000")
    assert r.returncode == 3 and "max-arcs" in r.err.decode() and not (tmp_path / "g.fst").exists()
