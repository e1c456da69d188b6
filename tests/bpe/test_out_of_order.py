"""Merge lists whose traces pop out of rank order (item 4): exact, against HF's model.

The tokenizer is GPT-2's vocabulary turned into a rank table with some ranks moved earlier and
converted to merges the way tiktoken rank tables are (``rank_table_tokenizer``): hundreds of
tokens then have traces that HF pops out of (rank, position) order. HF's model
(``Tokenizer.model.tokenize`` via a bare ``encode_batch``) is the oracle: (u, v) is allowed iff
HF tokenizes text(u) text(v) as [u, v].
"""

from __future__ import annotations

import bisect
import json
import random
from functools import lru_cache

import numpy as np
import pytest
from tokenizers import Tokenizer

from tokfst_cli.bpe import implicit, trace
from tokfst_cli.bpe.hf import HfBpe
from tokfst_cli.tokenizer import model as tokmod
from tokfst_cli.tokenizer.model import model_text

from .common import rank_table_tokenizer, trained_tokenizer


@lru_cache(maxsize=1)
def setup():
    import tempfile
    from pathlib import Path

    path = rank_table_tokenizer(Path(tempfile.mkdtemp()))
    model = tokmod.load(path)
    imp = implicit.compile_implicit(model)
    bare = Tokenizer.from_file(path)
    bare.normalizer = bare.pre_tokenizer = bare.post_processor = None
    return model, imp, bare


def hf_banned(us, vs) -> np.ndarray:
    model, _, bare = setup()
    texts = [model.tokens[u] + model.tokens[v] for u, v in zip(us, vs)]
    encs = bare.encode_batch(texts, add_special_tokens=False)
    return np.array([e.ids != [u, v] for e, u, v in zip(encs, us, vs)])


@lru_cache(maxsize=1)
def _boundary_index():
    model, imp, _ = setup()
    ids = {t: i for i, t in enumerate(model.tokens) if t}
    right_of: dict[int, list[int]] = {}
    for a, b in model.merges:
        right_of.setdefault(a, []).append(b)
    texts = sorted((model.tokens[t], int(t)) for t in np.flatnonzero(imp.allowed))
    return ids, right_of, [t for t, _ in texts], [t for _, t in texts]


def partner(rng, u: int) -> int | None:
    """A v such that some merge (a, b) has a ending u and b starting v, so that a merge can cross
    the boundary (a: a suffix of u's text that is a token; v's text starts with b's), if any."""
    model = setup()[0]
    ids, right_of, keys, toks = _boundary_index()
    s = model.tokens[u]
    sufs = [ids[s[k:]] for k in range(len(s)) if s[k:] in ids and ids[s[k:]] in right_of]
    if not sufs:
        return None
    b = model.tokens[int(rng.choice(right_of[int(rng.choice(sufs))]))]
    lo, hi = bisect.bisect_left(keys, b), bisect.bisect_left(keys, b + "\U0010ffff")
    return toks[int(rng.integers(lo, hi))]


def crossing_pairs(rng, us) -> tuple[list[int], list[int]]:
    pairs = [(int(u), partner(rng, int(u))) for u in us]
    pairs = [(u, v) for u, v in pairs if v is not None]
    return [u for u, _ in pairs], [v for _, v in pairs]


def test_many_out_of_order_traces_compile():
    model, imp, _ = setup()
    info = imp.info()
    assert info["non_monotone_tokens"] >= 300, info  # hundreds of traces out of rank order
    assert info["allowed_tokens"] > 0.99 * (model.vocab_size - 1)
    back = implicit.from_bytes(implicit.to_bytes(imp), model.fingerprint)
    rng = np.random.default_rng(3)
    u, v = rng.integers(0, model.vocab_size, 50000), rng.integers(0, model.vocab_size, 50000)
    assert np.array_equal(back.banned(u, v), imp.banned(u, v)) and back.info() == info


def test_biased_pairs_agree_with_hf():
    """>= 100k pairs, biased towards the out-of-order tokens and towards pairs a merge can cross."""
    model, imp, _ = setup()
    rng = np.random.default_rng(7)
    toks = np.flatnonzero(imp.allowed)
    odd = np.flatnonzero(imp.allowed & ~imp.monotone)
    us, vs = [], []
    for left_odd in (True, False):  # a merge can cross: out-of-order token on the left, on the right
        a, b = crossing_pairs(rng, rng.choice(odd if left_odd else toks, 30000))
        us += a
        vs += b
    k = rng.choice(odd, 20000)  # out-of-order tokens against random ones, both sides
    o = rng.choice(toks, 20000)
    us += list(k[:10000]) + list(o[10000:])
    vs += list(o[:10000]) + list(k[10000:])
    sub = rng.choice(odd, 160, replace=False)  # every pair of 160 out-of-order tokens
    us += list(np.repeat(sub, len(sub)))
    vs += list(np.tile(sub, len(sub)))
    us, vs = np.array(us), np.array(vs)
    ours = imp.banned(us, vs)
    theirs = hf_banned(us.tolist(), vs.tolist())
    odd_pair = ~imp.monotone[us] | ~imp.monotone[vs]
    assert len(us) >= 100_000 and odd_pair.sum() >= 60_000
    assert np.array_equal(ours, theirs), [(model.tokens[us[i]], model.tokens[vs[i]], ours[i])
                                          for i in np.flatnonzero(ours != theirs)[:5]]
    assert 0.05 < theirs[odd_pair].mean() < 0.95  # the sample really exercises banned pairs


def test_full_rows_and_columns_of_out_of_order_tokens():
    model, imp, _ = setup()
    toks = np.flatnonzero(imp.allowed)
    odd = np.flatnonzero(imp.allowed & ~imp.monotone)
    for u in np.random.default_rng(1).choice(odd, 4, replace=False):
        one = np.full(len(toks), u)
        for a, b in ((one, toks), (toks, one)):
            assert np.array_equal(imp.banned(a, b), hf_banned(a.tolist(), b.tolist())), model.tokens[u]
        assert np.array_equal(imp.banned_row(int(u))[toks], imp.banned(one, toks))


def test_sequences_agree_with_hf():
    model, imp, bare = setup()
    rng = np.random.default_rng(5)
    toks = np.flatnonzero(imp.allowed)
    odd = np.flatnonzero(imp.allowed & ~imp.monotone)
    seqs = []
    for u in rng.choice(odd, 2000):  # chains of pairs that a merge can cross, from out-of-order tokens
        seq = [int(u)]
        for _ in range(int(rng.integers(1, 5))):
            v = partner(rng, seq[-1])
            if v is None:
                break
            seq.append(v)
        seqs.append(seq)
    for i in range(2000):
        seq = [int(rng.choice(odd if j % 2 == i % 2 else toks)) for j in range(int(rng.integers(2, 6)))]
        seqs.append(bare.encode("".join(model.tokens[t] for t in seq), add_special_tokens=False).ids)
    verdicts = imp.check_batch(seqs)
    encs = bare.encode_batch(["".join(model.tokens[t] for t in s) for s in seqs], add_special_tokens=False)
    expected = [e.ids == s for e, s in zip(encs, seqs)]
    assert [v is None for v in verdicts] == expected
    assert sum(expected) >= 1500 and len(expected) - sum(expected) >= 500


def test_vectorized_traces_equal_hf_traces_one_by_one():
    """trace.derive (all tokens in lock-step) against HfBpe.merge_all per token."""
    model, _, _ = setup()
    hf = HfBpe(model)
    der = trace.derive(model, hf)
    for t in range(model.vocab_size):
        if t in model.special_ids:
            continue
        out, events = trace.trace_one(hf, hf.initial_symbols(model.tokens[t]))
        assert der.reachable[t] == (out == [t])
        if not der.reachable[t]:
            continue
        keys = [(e.rank, e.pos) for e in events]
        assert der.monotone[t] == all(x < y for x, y in zip(keys, keys[1:]))
        last = events[-1] if events else None
        assert (der.rc[t], der.left[t], der.right[t]) == ((last.rank, last.left, last.right) if last else (-1, -1, -1))


@pytest.mark.parametrize("opts", [{}, {"end_of_word_suffix": "</w>"}, {"continuing_subword_prefix": "##"}])
def test_merges_moved_early_with_word_markers(tmp_path, opts):
    """A trained merge list with merges moved before their operands' creation (they fire as soon
    as the operand exists): every pair of tokens, with the word markers' rules, against HF."""
    path = trained_tokenizer(tmp_path, 300, **opts)
    d = json.loads(open(path).read())
    merges = d["model"]["merges"]
    rng = random.Random(4)
    for _ in range(len(merges) // 3):
        i = rng.randrange(len(merges))
        merges.insert(rng.randrange(i + 1), merges.pop(i))
    open(path, "w").write(json.dumps(d))
    model = tokmod.load(path)
    hf = Tokenizer.from_file(path)
    imp = implicit.compile_implicit(model).attach(model)
    assert imp.info()["non_monotone_tokens"] >= 10
    toks = [int(t) for t in np.flatnonzero(imp.allowed)]
    seqs = [[u, v] for u in toks for v in toks]
    verdicts = imp.check_batch(seqs)
    texts = [model_text(model, t)[0] for t in range(model.vocab_size)]
    expected = [[t.id for t in hf.model.tokenize(texts[u] + texts[v])] == [u, v] for u, v in seqs]
    bad = [(model.tokens[u], model.tokens[v], e) for (u, v), e, got in zip(seqs, expected, verdicts)
           if e != (got is None)]
    assert not bad, bad[:5]
    assert sum(expected) > 1000 and len(expected) - sum(expected) > 1000
