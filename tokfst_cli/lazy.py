"""Stage S on demand: the token automaton of A o T expanded state by state as a decoder visits it
(seed 000 Eq. 3, computed lazily as OpenFst's delayed composition would; seed 003: the
state -> token mask index, filled on first use).

For a deterministic byte DFA A, the token states of rmepsilon(PROJ(A o T)) are A's states, and
token v leads from q to delta*(q, surface(v)) (``trie``). :class:`LazyDecoder` builds nothing up
front: the mask at q is one run of A over T's trie from q (a compiled kernel over the trie
flattened in depth-first preorder, ``trie_kernels``; a node whose byte A cannot read is skipped
with its subtree), kept per state as packed words; ``advance`` runs the token's surface through
A's table.

No dead ends (issue #12): A is trimmed first, and every single byte is a token (the trie's
``all_bytes``: byte-level BPE, byte fallback), so from every state of A some token sequence
reaches a final state and the masks are exactly those of the promoted, trimmed automaton
(checked equal to the index's in the tests). Tokenizers that lack bytes (BERT's WordPiece)
are refused by name: their dead ends are found only by promoting every state
(``pipeline.build``). Agnostic only: the canonical forms filter the promoted automaton.

What it trades: ready at once (A's table over its classes of bytes, no promotion, no limit on
A o T's size), each first mask at a state paying a walk of the live part of the trie.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pynini

from .artifacts import FstArrays, fst_arrays
from .errors import DisallowedTokenError, EmptyLanguageError, InputError, LimitError
from .bitsets import WORD, words_for
from .matcher import Steps, unpack
from .regex import ByteAutomaton, determinize_bounded
from .tokenizer import TokenizerModel
from .trie import MAX_CELLS, TokenTrie, trie_for

MAX_STATES = 1_000_000  # states of A's DFA when the automaton given must be determinized first
MASK_BUDGET = 64 << 20  # bytes of packed masks kept per decoder (past it the oldest are made again on use)
_DFA = pynini.I_DETERMINISTIC | pynini.NO_EPSILONS | pynini.ACCESSIBLE | pynini.COACCESSIBLE | pynini.UNWEIGHTED


def _kernels():
    from . import trie_kernels

    return trie_kernels


@dataclass(frozen=True)
class Layout:
    """T's trie flattened for the walk (``trie_kernels.flatten``): its prefix nodes in depth-first
    preorder with their label column, depth, subtree size and tokens (CSR ``tptr``/``toks``),
    int32, and the columns under each node (bits); and each token's surface as label columns
    (CSR by token id: ``cols[ptr[t]:ptr[t + 1]]``)."""

    trie: TokenTrie
    col: np.ndarray
    depth: np.ndarray
    size: np.ndarray
    tptr: np.ndarray
    toks: np.ndarray
    below: np.ndarray  # (nodes, bit_words) uint64: the columns of the nodes under each node
    ptr: np.ndarray
    cols: np.ndarray


def layout(model: TokenizerModel, trie: TokenTrie) -> Layout:
    """The :class:`Layout` of ``trie`` (the model's T), made once per model."""
    got = model.__dict__.get("_lazy_layout")
    if got is not None and got.trie is trie:
        return got
    k = _kernels()
    src = np.repeat(np.arange(trie.states), trie.hi - trie.lo)
    order = np.lexsort((trie.column, src))  # each state's arcs by column: a run of one column, one prefix node
    col, depth, size, tptr, toks, below = k.flatten(trie.root, trie.lo, trie.hi, trie.column[order],
                                                    trie.token[order], trie.next[order], bit_words(trie))
    ptr = np.zeros(model.vocab_size + 1, np.int64)
    cols = k.token_paths(col, depth, tptr, toks, model.vocab_size, ptr)
    got = model.__dict__["_lazy_layout"] = Layout(trie, col, depth, size, tptr, toks, below, ptr, cols)
    return got


def bit_words(trie: TokenTrie) -> int:
    """64-bit words of a set of T's label columns."""
    return max(1, (len(trie.labels) + 63) // 64)


def loop_columns(delta: np.ndarray, cls: np.ndarray, nbits: int) -> np.ndarray:
    """Per state of A (rows of ``delta`` but the dead one), the columns it reads back into itself,
    as bits (states, nbits) uint64."""
    n = len(delta) - 1
    stays = delta[:n] == np.arange(n, dtype=delta.dtype)[:, None]  # per state and class
    out = np.zeros((n, nbits), np.uint64)
    for c, k in enumerate(cls.tolist()):
        if k:
            out[:, c >> 6] |= stays[:, k].astype(np.uint64) << np.uint64(c & 63)
    return out


def layout_for(model: TokenizerModel, cache: bool = True) -> Layout | None:
    """The model's T (the cache's) and its :class:`Layout`, made now (a server's set-up)."""
    trie = trie_for(model, cache=cache)
    return layout(model, trie) if trie is not None else None


def class_table(a: FstArrays, trie: TokenTrie, max_cells: int = MAX_CELLS) -> tuple[np.ndarray, np.ndarray]:
    """A's transitions (A deterministic) as an int32 table (states + 1) x classes, and the class
    of each of T's label columns. Labels that A cannot tell apart (from every state both lead to
    the same state, or nowhere) are one class: a JSON Schema's DFA reads a few dozen classes of
    bytes, not 256. Class 0 and the extra row are dead (labels A never reads; no state).
    LimitError past ``max_cells`` cells of the table, checked before it is built."""
    n, width = len(a.final), len(trie.labels)
    column_of = np.full(258, -1, np.int64)  # A's labels are bytes + 1 (checked by the caller)
    small = trie.labels <= 257
    column_of[trie.labels[small]] = np.flatnonzero(small)
    col = column_of[a.ilabel]
    read = col >= 0
    src, nxt, col = a.src[read], a.nextstate[read], col[read]
    order = np.argsort(col.astype(np.uint16), kind="stable")  # arcs come by state: (column, state) order, radix
    src, nxt, col = src[order], nxt[order], col[order]
    bounds = np.flatnonzero(np.r_[True, col[1:] != col[:-1], True]) if len(col) else np.zeros(1, np.int64)
    pairs = np.stack([src, nxt], 1)
    cls = np.zeros(width, np.int32)
    first: dict[bytes, int] = {}  # a column's arcs -> its class
    reps = []  # per class past 0: the arcs of its first column
    for i, j in zip(bounds[:-1].tolist(), bounds[1:].tolist()):
        k = first.setdefault(pairs[i:j].tobytes(), len(first) + 1)
        if k > len(reps):
            reps.append((i, j))
        cls[col[i]] = k
    cells = (n + 1) * (len(reps) + 1)
    if cells > max_cells:
        raise LimitError("A's table over its classes of bytes", "max_cells", max_cells, cells, unit="cells",
                         at_least=False)
    delta = np.full((n + 1, len(reps) + 1), n, np.int32)
    for k, (i, j) in enumerate(reps, 1):
        delta[src[i:j], k] = nxt[i:j]
    return delta, cls


def _deterministic(a: pynini.Fst, max_states: int) -> pynini.Fst:
    """A as a trim, epsilon-free, deterministic acceptor (a copy where it is not one), determinized
    by ``regex``'s own step, which stops past ``max_states`` (LimitError)."""
    if a.properties(_DFA, False) == _DFA or a.properties(_DFA, True) == _DFA:  # known bits first: testing reads every arc
        return a
    d = determinize_bounded(a.copy(), max_states)
    if d.num_states() > max_states:
        raise LimitError("the lazy decoder's byte DFA", "max_states", max_states, remedy="simplify")
    return d.connect()


class LazyDecoder(Steps):
    """The agnostic token automaton of a byte automaton, expanded per state on first use (module
    docstring). States are A's state ids; ``bitmask(state)`` is made once per state and shared
    (read-only), the last ones kept within MASK_BUDGET bytes; ``visited`` counts the masks kept."""

    def __init__(self, model: TokenizerModel, automaton: ByteAutomaton | pynini.Fst, cache: bool = True,
                 max_states: int = MAX_STATES):
        fst = automaton.fst if isinstance(automaton, ByteAutomaton) else automaton
        pattern = automaton.pattern if isinstance(automaton, ByteAutomaton) else "the automaton"
        if fst.input_symbols() is not None:
            from .terminals import placeholder_kinds

            kinds = placeholder_kinds(fst)
            if kinds:
                raise InputError(f"the lazy decoder does not expand token-level groups ({', '.join(kinds)})",
                                 "promote the pattern (pipeline.build), whose terminal labels carry them",
                                 hint="lazy-groups")
        a = _deterministic(fst, max_states)
        if a.start() == pynini.NO_STATE_ID or a.num_states() == 0:
            raise EmptyLanguageError(f"{pattern!r} matches no string", "check the pattern")
        self.trie = trie = trie_for(model, cache=cache)
        if trie is None or not trie.all_bytes:
            raise InputError(f"the lazy decoder needs a tokenizer whose tokens spell every single byte; "
                             f"{model.source} does not, so some states would be dead ends",
                             "promote instead (pipeline.build(...).decoder()), which trims them", hint="lazy-bytes")
        arrays = fst_arrays(a)
        if arrays.weighted or (arrays.ilabel != arrays.olabel).any() or (arrays.ilabel > 256).any():
            raise InputError("the lazy decoder reads unweighted byte acceptors (labels 1-256)",
                             "give the byte DFA of a regex or a schema", hint="lazy-labels")
        self._delta, self._cls = class_table(arrays, trie)
        self.model, self.vocab_size, self.start = model, model.vocab_size, int(arrays.start)
        self._final = arrays.final.astype(bool).tolist()
        self._words: dict[int, np.ndarray] = {}  # state -> its packed mask, oldest first
        self._nwords = words_for(self.vocab_size)
        self._keep = max(1, MASK_BUDGET // (4 * self._nwords))
        self._k, self._t = _kernels(), layout(model, trie)
        self._loops = loop_columns(self._delta, self._cls, self._t.below.shape[1])
        self._at = np.empty(int(self._t.depth.max(initial=0)) + 1, np.int32)  # the walk's state per depth

    @property
    def visited(self) -> int:
        return len(self._words)

    @property
    def states(self) -> int:
        """States of A (the token automaton's states, before any is expanded)."""
        return len(self._final)

    def bitmask(self, state: int) -> np.ndarray:
        """The packed int32 words of ``mask(state)``: one walk of the trie at a state's first use."""
        got = self._words.get(state)
        if got is None:
            if not 0 <= state < len(self._final):
                raise DisallowedTokenError(-1, state)
            t = self._t
            words = np.zeros(self._nwords, WORD)
            self._k.reach_from(state, t.col, t.depth, t.size, t.tptr, t.toks, t.below, self._delta, self._cls,
                               self._loops, words, self._at)
            if len(self._words) >= self._keep:  # the oldest mask goes: memory stays within MASK_BUDGET
                del self._words[next(iter(self._words))]
            got = self._words[state] = words.view("<i4")
            got.flags.writeable = False
        return got

    def mask(self, state: int) -> np.ndarray:
        return unpack(self.bitmask(state), self.vocab_size)

    def initial(self) -> int:
        return self.start

    def advance(self, state: int, token: int) -> int:
        """The state after ``token``: its surface run through A's table, no mask made (A is trim and
        every byte a token, so a token A reads is one of the mask's)."""
        if not (0 <= token < self.vocab_size and 0 <= state < len(self._final)):
            raise DisallowedTokenError(token, state)
        nxt = int(self._k.run(state, token, self._t.ptr, self._t.cols, self._delta, self._cls))
        if nxt < 0:
            raise DisallowedTokenError(token, state)
        return nxt

    def is_final(self, state: int) -> bool:
        return 0 <= state < len(self._final) and self._final[state]


def decoder(model: TokenizerModel, pattern: str | None = None, *, schema: Any = None,
            automaton: ByteAutomaton | pynini.Fst | None = None, cache: bool = True,
            **schema_options: Any) -> LazyDecoder:
    """A :class:`LazyDecoder` of a regex, a JSON Schema (``schema.compile_schema`` with
    ``schema_options``) or a byte automaton: exactly one of them."""
    if sum(x is not None for x in (pattern, schema, automaton)) != 1:
        raise InputError("give exactly one of a regex, a schema or an automaton", "pass one of them")
    if schema is not None:
        from .schema import compile_schema

        automaton = compile_schema(schema, **schema_options).automaton
    elif pattern is not None:
        from .regex import compile_regex

        automaton = compile_regex(pattern)
    return LazyDecoder(model, automaton, cache)
