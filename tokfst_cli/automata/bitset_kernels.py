"""The compiled kernels of ``bitsets`` (numba, cached on disk): bits of token ids set or cleared
in packed little-endian 32-bit words, bit ``t % 32`` of word ``t // 32``. Imported lazily by
``bitsets``: importing numba loads LLVM (about 0.5 s and 100 MB), which only a process that
makes factorized masks needs.

numba caches compiled code next to this file, else in ``NUMBA_CACHE_DIR`` or the user's cache
directory. Where none is writable (a read-only install and home, as in some containers) numba
refuses to cache; the kernels are then compiled in memory, once per process (``CACHED`` False,
about 0.6 s at the first mask), instead of failing."""

from __future__ import annotations

import numpy as np
from numba import njit


def _set_ids(words, ids):  # pragma: no cover - compiled
    for i in range(ids.shape[0]):
        t = ids[i]
        words[t >> 5] |= np.uint32(1) << np.uint32(t & 31)


def _clear_intervals(words, lo, hi, a, b, lorder):  # pragma: no cover - compiled
    for k in range(a, b):
        for pos in range(lo[k], hi[k] + 1):
            t = lorder[pos]
            words[t >> 5] &= ~(np.uint32(1) << np.uint32(t & 31))


def _set_outside(words, ids, lpos, lo, hi, a, b):  # pragma: no cover - compiled
    n, j = b, a
    for i in range(ids.shape[0]):  # lpos ascending: one merge with the intervals
        lp = lpos[i]
        while j < n and hi[j] < lp:
            j += 1
        if lp >= 0 and j < n and lo[j] <= lp:
            continue
        t = ids[i]
        words[t >> 5] |= np.uint32(1) << np.uint32(t & 31)


def jit_all(*fns) -> tuple[tuple, bool]:
    """``fns`` compiled by numba (nopython, no GIL), cached on disk where numba can cache, else in
    memory: (the compiled functions, whether they are cached)."""
    try:
        return tuple(njit(cache=True, nogil=True)(f) for f in fns), True
    except RuntimeError as err:  # numba: "cannot cache function ...: no locator available"
        if "cannot cache" not in str(err):
            raise
        return tuple(njit(cache=False, nogil=True)(f) for f in fns), False


(set_ids, clear_intervals, set_outside), CACHED = jit_all(_set_ids, _clear_intervals, _set_outside)
