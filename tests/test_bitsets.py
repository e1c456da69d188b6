"""The packed-mask kernels of the factorized canonical decoder (``tokfst_cli.automata.bitsets``) against
NumPy's own packing and interval arithmetic, on random id sets and BANNED-like rows."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from tokfst_cli.automata import bitsets
from tokfst_cli.decoding.matcher import pack, unpack


@st.composite
def cases(draw):
    """(vocabulary size, a permutation as lorder, sorted disjoint intervals of it, a sorted id set)."""
    v = draw(st.integers(1, 300))
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    lorder = rng.permutation(v).astype(np.int32)
    cuts = np.sort(rng.choice(v + 1, size=2 * draw(st.integers(0, min(8, v // 2))), replace=False))
    lo, hi = cuts[0::2].astype(np.int64), (cuts[1::2] - 1).astype(np.int64)
    keep = lo <= hi
    ids = np.flatnonzero(rng.random(v) < draw(st.floats(0, 1))).astype(np.int64)
    return v, lorder, lo[keep], hi[keep], ids


def banned(v: int, lorder: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Bool over ids: inside some interval of left positions."""
    out = np.zeros(v, bool)
    for a, b in zip(lo, hi):
        out[lorder[a:b + 1]] = True
    return out


@settings(max_examples=300, deadline=None)
@given(cases())
def test_from_ids_is_pack(case):
    v, _, _, _, ids = case
    m = np.zeros(v, bool)
    m[ids] = True
    assert (bitsets.as_int32(bitsets.from_ids(ids, bitsets.words_for(v))) == pack(m)).all()


@settings(max_examples=300, deadline=None)
@given(cases())
def test_clear_intervals_removes_exactly_the_rows_ids(case):
    v, lorder, lo, hi, ids = case
    words = bitsets.from_ids(ids, bitsets.words_for(v))
    bitsets.kernels().clear_intervals(words, lo, hi, 0, len(lo), lorder)
    got = unpack(bitsets.as_int32(words), v)
    m = np.zeros(v, bool)
    m[ids] = True
    assert (got == (m & ~banned(v, lorder, lo, hi))).all()


@settings(max_examples=300, deadline=None)
@given(cases(), st.booleans())
def test_set_outside_keeps_the_ids_outside_every_interval(case, unplaced):
    v, lorder, lo, hi, ids = case
    lpos = np.empty(v, np.int64)
    lpos[lorder] = np.arange(v)
    if unplaced and v:  # ids without a left position (-1) are never banned
        lpos[ids[::2]] = -1
    order = np.argsort(lpos[ids], kind="stable")  # the kernel takes the ids in left-spine order
    words = np.zeros(bitsets.words_for(v), bitsets.WORD)
    bitsets.kernels().set_outside(words, ids[order], lpos[ids][order], lo, hi, 0, len(lo))
    got = unpack(bitsets.as_int32(words), v)
    inside = banned(v, lorder, lo, hi) & (lpos >= 0)
    m = np.zeros(v, bool)
    m[ids] = True
    assert (got == (m & ~inside)).all()


UNCACHED = """
import json, sys
import numba.core.caching as caching
caching.CacheImpl._locator_classes = []  # as where no cache directory is writable: numba cannot cache
import numpy as np
from tokfst_cli import bitsets
k = bitsets.kernels()
ids, lorder, lo, hi = (np.array(x, np.int64) for x in json.load(sys.stdin))
words = bitsets.from_ids(ids, bitsets.words_for(len(lorder)))
k.clear_intervals(words, lo, hi, 0, len(lo), lorder)
print(json.dumps({"cached": k.CACHED, "words": words.tolist()}))
"""


def test_kernels_compile_in_memory_where_numba_cannot_cache():
    """No writable cache directory (numba finds no cache locator): the kernels are compiled
    without a disk cache, and give the same words, instead of the first mask failing."""
    v, rng = 300, np.random.default_rng(5)
    lorder = rng.permutation(v)
    ids, lo, hi = np.flatnonzero(rng.random(v) < 0.5), np.array([3, 40, 200]), np.array([10, 90, 201])
    run = subprocess.run([sys.executable, "-c", UNCACHED], capture_output=True, text=True, timeout=300,
                         input=json.dumps([ids.tolist(), lorder.tolist(), lo.tolist(), hi.tolist()]))
    assert run.returncode == 0, run.stderr
    got = json.loads(run.stdout)
    m = np.zeros(v, bool)
    m[ids] = True
    assert got["cached"] is False
    assert (unpack(np.array(got["words"], np.uint32).view(np.int32), v) == (m & ~banned(v, lorder, lo, hi))).all()
