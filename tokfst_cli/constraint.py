"""One per-step decoder protocol for every artifact kind, and one loader (seed 003; seed 001 Sec. 3.2).

A decoder walks a constraint one token at a time, as a language model's decoding loop does:

    initial()               the start state
    mask(state)             numpy bool array over token ids: the tokens allowed next
    advance(state, token)   the next state; ``DisallowedTokenError`` if the token is not allowed
    is_final(state)         may the sequence end here?

Implementations: :class:`FstDecoder` (a materialized ``.fst``), :class:`IndexDecoder` (the
``tokfst-index`` JSON), ``bpe.product.Factorized`` (``tokfst-factorized``) and
``maxmatch.product.Canonical`` (``tokfst-factorized-maxmatch``). :func:`load` picks the
kind from the file's magic bytes or format field. The factorized forms compute masks as
allowed minus banned, so they may offer dead ends.
"""

from __future__ import annotations

import json
from typing import Any, Protocol, runtime_checkable

import numpy as np
import pynini

from .artifacts import read_artifact
from .errors import DisallowedTokenError, InputError
from .tokenizer import TokenizerModel

_OPENFST_MAGIC = (2125659606).to_bytes(4, "little")


@runtime_checkable
class Decoder(Protocol):
    def initial(self) -> Any: ...

    def mask(self, state: Any) -> np.ndarray: ...

    def advance(self, state: Any, token: int) -> Any: ...

    def is_final(self, state: Any) -> bool: ...


class _Table:
    """A deterministic token acceptor as per-state sorted (tokens, next states) arrays."""

    def __init__(self, vocab_size: int, start: int, finals: set[int]):
        self.vocab_size, self.start, self.finals = vocab_size, start, finals

    def arcs(self, state: int) -> tuple[np.ndarray, np.ndarray]:
        raise NotImplementedError

    def initial(self) -> int:
        return self.start

    def mask(self, state: int) -> np.ndarray:
        m = np.zeros(self.vocab_size, bool)
        m[self.arcs(state)[0]] = True
        return m

    def advance(self, state: int, token: int) -> int:
        labels, nexts = self.arcs(state)
        i = int(np.searchsorted(labels, token))
        if i >= len(labels) or labels[i] != token:
            raise DisallowedTokenError(token, state)
        return int(nexts[i])

    def is_final(self, state: int) -> bool:
        return state in self.finals


class FstDecoder(_Table):
    """A materialized token acceptor (labels = token id + 1)."""

    def __init__(self, fst: pynini.Fst, vocab_size: int):
        zero = pynini.Weight.zero(fst.weight_type())
        super().__init__(vocab_size, fst.start(), {s for s in fst.states() if fst.final(s) != zero})
        self.fst = fst
        self._cache: dict[int, tuple[np.ndarray, np.ndarray]] = {}

    def arcs(self, state: int) -> tuple[np.ndarray, np.ndarray]:
        got = self._cache.get(state)
        if got is None:
            from .bpe.product import sorted_arcs

            got = self._cache[state] = sorted_arcs(self.fst, state)
        return got


class IndexDecoder(_Table):
    """The ``tokfst-index`` JSON (masks shared between states: coalescence)."""

    def __init__(self, index: dict):
        super().__init__(index["tokenizer"]["vocab_size"], index["initial"], set(index["finals"]))
        self.fingerprint = index["tokenizer"]["fingerprint"]
        self._masks = [np.asarray(m, np.int64) for m in index["masks"]]
        self._states = index["states"]

    def arcs(self, state: int) -> tuple[np.ndarray, np.ndarray]:
        st = self._states[state]
        return self._masks[st["mask"]], np.asarray(st["next"], np.int64)


def _index(data: bytes, source: str) -> IndexDecoder:
    try:
        index = json.loads(data)
    except (ValueError, UnicodeDecodeError, RecursionError):
        raise InputError(f"{source} is not valid JSON", "give an artifact written by tokfst promote") from None
    if not isinstance(index, dict) or index.get("format") != "tokfst-index":
        raise InputError(f"{source} is not a tokfst-index file", "give an artifact written by tokfst promote")
    problem = index_problem(index)
    if problem:
        raise InputError(f"{source} is a damaged tokfst-index file: {problem}", "rebuild it with tokfst promote",
                         hint="rebuild-index")
    return IndexDecoder(index)


def index_problem(index: dict) -> str | None:
    """What is wrong with a parsed index (version, checksum, structure), or None."""
    from .index import VERSION, checksum

    if index.get("version") != VERSION:
        return f"version {index.get('version')!r}, expected {VERSION}"
    if "sha256" in index and index["sha256"] != checksum(index):
        return "checksum mismatch"
    try:
        tok = index["tokenizer"]
        vocab = tok["vocab_size"]
        if not (isinstance(tok["fingerprint"], str) and isinstance(vocab, int) and vocab > 0):
            return "bad tokenizer field"
        masks, states, finals = index["masks"], index["states"], index["finals"]
        n = len(states)
        if not (isinstance(index["initial"], int) and 0 <= index["initial"] < n):
            return "initial state out of range"
        if any(not isinstance(f, int) or not 0 <= f < n for f in finals):
            return "final state out of range"
        for m in masks:
            a = np.asarray(m)
            if a.ndim != 1 or (a.size and (a.dtype.kind != "i" or a[0] < 0 or a[-1] >= vocab or (np.diff(a) <= 0).any())):
                return "a mask is not a sorted list of token ids"
        for st in states:
            k, nxt = st["mask"], np.asarray(st["next"])
            if not isinstance(k, int) or not 0 <= k < len(masks) or nxt.ndim != 1 or len(nxt) != len(masks[k]):
                return "a state's mask or next states do not fit"
            if nxt.size and (nxt.dtype.kind != "i" or nxt.min() < 0 or nxt.max() >= n):
                return "a next state out of range"
    except (KeyError, TypeError, ValueError, IndexError):
        return "missing or mistyped fields"
    return None


def load(path: str, tokenizer: TokenizerModel | str | None = None) -> Decoder:
    """The decoder of any tokfst artifact: ``.fst``, index JSON, BPE or WordPiece factorized.

    ``tokenizer`` (a model, a path or a bundled name) is checked against the artifact's
    fingerprint; the WordPiece factorized form needs it to rebuild its tries.
    """
    from .bpe import factorized as bpe_factorized
    from .maxmatch import factorized as mm_factorized
    from .tokenizer import load as load_tokenizer

    model = load_tokenizer(tokenizer) if isinstance(tokenizer, str) else tokenizer
    data = read_artifact(path)
    if data.startswith(bpe_factorized.MAGIC):
        return bpe_factorized.from_bytes(data, model, path)
    if data.startswith(mm_factorized.MAGIC):
        if model is None:
            raise InputError(f"{path} is a WordPiece factorized artifact", "load it with its tokenizer")
        return mm_factorized.from_bytes(data, model, path)
    if data.startswith(_OPENFST_MAGIC):
        from .artifacts import read_fst

        fst = read_fst(path)
        size = model.vocab_size if model is not None else _vocab_of(fst, path)
        return FstDecoder(fst, size)
    decoder = _index(data, path)
    if model is not None and model.fingerprint != decoder.fingerprint:
        raise InputError(f"{path} was built for another tokenizer", "rebuild it for this tokenizer")
    return decoder


def _vocab_of(fst: pynini.Fst, path: str) -> int:
    table = fst.input_symbols()
    if table is None:
        raise InputError(f"{path} has no symbol table to size its vocabulary", "load it with its tokenizer")
    return table.num_symbols() - 1
