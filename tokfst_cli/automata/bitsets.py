"""Packed token bitmasks: compiled kernels for the factorized canonical masks.

A mask over token ids is packed as little-endian 32-bit words, bit ``t % 32`` of word
``t // 32`` (``matcher.pack``: the layout xgrammar and llguidance use). The factorized decoder
of canonical BPE (``bpe.liveness``) builds one per decoding step as

    live tokens of the unit  minus  BANNED(class of the last token)

where BANNED is a handful of intervals of A_BPE's left-spine order (``bpe.rows``): the banned
token ids are ``lorder[lo:hi + 1]`` per interval. NumPy pays a call per step of that (the
interval expansion, the gather, the scatter and the packing, each a fresh array over the
vocabulary), so the two per-step operations are numba kernels over the words themselves
(``kernels()``; ``bpe.liveness`` calls them directly):

- ``clear_intervals``: clear the bits of ``lorder[lo[k]:hi[k] + 1]`` for every k (a unit with
  many live tokens: its words are copied, then the class's BANNED ids cleared);
- ``set_outside``: set the bits of those of a few ids whose left positions lie in no interval
  (a unit with few live tokens, kept in left-spine order: one merge with the row's intervals).

The kernels (``bitset_kernels``) are compiled once per machine and cached on disk (numba's
``cache=True``); numba is imported on the first kernel call, not with this module.
"""

from __future__ import annotations

import numpy as np

from tokfst_cli.errors import UsageError

WORD = np.uint32


def words_for(vocab_size: int) -> int:
    """Number of 32-bit words of a mask over ``vocab_size`` token ids."""
    return (vocab_size + 31) // 32


_KERNELS = None


def kernels():
    """The compiled kernels (``bitset_kernels``), imported on first use: numba and LLVM load only
    in a process that makes masks."""
    global _KERNELS
    if _KERNELS is None:
        from tokfst_cli.automata import bitset_kernels  # deferred: loads numba

        _KERNELS = bitset_kernels
    return _KERNELS


def from_ids(ids: np.ndarray, nwords: int) -> np.ndarray:
    """The packed words of a set of token ids (int64)."""
    return set_ids(np.zeros(nwords, WORD), ids)


def set_ids(words: np.ndarray, ids: np.ndarray) -> np.ndarray:
    """Set, in ``words``, the bits of the token ids ``ids`` (int64); returns ``words``."""
    (_KERNELS or kernels()).set_ids(words, ids)
    return words


I32 = np.dtype("<i4")


def as_int32(words: np.ndarray) -> np.ndarray:
    """The words as the int32 bitmask decoders return (a view)."""
    return words.view(I32)


def as_words(out: np.ndarray | None) -> np.ndarray | None:
    """A caller's int32 bitmask buffer as the kernels' uint32 words (a view; None stays None)."""
    if out is None:
        return None
    if out.dtype.itemsize != 4 or out.dtype.kind not in "iu" or out.ndim != 1 or not out.flags.c_contiguous:
        raise UsageError("out must be a contiguous 1-d int32 array of one word per 32 token ids")
    return out.view(WORD)
