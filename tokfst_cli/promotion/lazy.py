"""Stage S on demand: the token automaton of A o T expanded state by state as a decoder visits it
(Cognetta & Okazaki 2024 Eq. 3, computed lazily as OpenFst's delayed composition would; the
structured-generation practical: the state -> token mask index, filled on first use).

For a deterministic byte DFA A, the token states of rmepsilon(PROJ(A o T)) are A's states, and
token v leads from q to delta*(q, surface(v)) (``trie``). :class:`LazyDecoder` builds nothing up
front: the mask at q is one run of A over T's trie from q (a compiled kernel over the trie
flattened in depth-first preorder, ``trie_kernels``; a node whose byte A cannot read is skipped
with its subtree), kept per state as packed words; ``advance`` runs the token's surface through
A's table.

No dead ends: A is trimmed first, and every single byte is a token (the trie's
``all_bytes``: byte-level BPE, byte fallback), so from every state of A some token sequence
reaches a final state and the masks are exactly those of the promoted, trimmed automaton
(checked equal to the index's in the tests). Tokenizers that lack bytes (BERT's WordPiece)
are refused by name: their dead ends are found only by promoting every state
(``pipeline.build``). Agnostic only: the canonical forms filter the promoted automaton.

Once a mask has had ``CLASS_TRIE_TOKENS`` tokens, a decoder whose A reads at most
``CLASS_TRIE_CLASSES`` classes of bytes (free text, e-mail: 3-6) walks the class trie for its
next masks (``trie_kernels.class_trie``): T's prefix nodes merged by their sequence of A's
classes, the class A never reads pruned. Tokens that A cannot tell apart share its nodes
(o200k: 421,660 prefix nodes, 174 class nodes for ``[a-z]+( [a-z]+){0,3}``), so a wide mask
visits a few hundred nodes and sets its tokens. It is made once per decoder (0.5-3 ms on
free text), after the first mask, which keeps the decoder ready at once. Narrow masks (a date,
a few names: under 1,000 tokens) keep the prefix walk, whose cost the class trie's build
(about 0.1 ms, as the live part of T for any state) would not repay; so does a JSON Schema,
whose 40-80 classes merge little.

What it trades: ready at once (A's table over its classes of bytes, no promotion, no limit on
A o T's size), each first mask at a state paying a walk of the live part of the trie.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

import numpy as np
import pynini

from tokfst_cli.automata.bitsets import WORD, words_for
from tokfst_cli.decoding.matcher import Steps, int_state, token_id, unpack
from tokfst_cli.errors import DisallowedTokenError, ForeignStateError, InputError
from tokfst_cli.filters.compose import TEXT, Filters, apply_text
from tokfst_cli.promotion.byte_table import LABELS, MAX_STATES, ByteTable, from_bytes, of_automaton, to_bytes
from tokfst_cli.promotion.trie import TokenTrie, trie_for
from tokfst_cli.text.regex import ByteAutomaton
from tokfst_cli.tokenizer.model import TokenizerModel

MASK_BUDGET = 64 << 20  # bytes of packed masks kept per decoder (past it the oldest are made again on use)
CLASS_TRIE_CLASSES = 16  # A's classes of bytes up to which masks walk the class trie (after a wide mask)
CLASS_TRIE_TOKENS = 4096  # a wide mask: once one has this many tokens, the next masks walk the class trie


def _kernels():
    from tokfst_cli.promotion import trie_kernels  # deferred: loads numba

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
    bits = np.zeros((n, nbits * 64), bool)
    cols = np.flatnonzero(cls)  # T's columns with a class of A's (class 0: A reads none of them)
    bits[:, cols] = stays[:, cls[cols]]
    return np.packbits(bits, axis=1, bitorder="little").view("<u8").astype(np.uint64, copy=False)


def layout_for(model: TokenizerModel, cache: bool = True) -> Layout | None:
    """The model's T (the cache's) and its :class:`Layout`, made now (a server's set-up)."""
    trie = trie_for(model, cache=cache)
    return layout(model, trie) if trie is not None else None


def spelling_trie(model: TokenizerModel, cache: bool = True) -> TokenTrie:
    """The model's T, refused by name (``lazy-bytes``) unless its tokens spell every single byte."""
    trie = trie_for(model, cache=cache)
    if trie is None or not trie.all_bytes:
        raise InputError(f"the lazy decoder needs a tokenizer whose tokens spell every single byte; "
                         f"{model.source} does not, so some states would be dead ends",
                         "promote instead (pipeline.build(...).decoder()), which trims them", hint="lazy-bytes")
    return trie


class LazyDecoder(Steps):
    """The agnostic token automaton of a byte automaton, expanded per state on first use (module
    docstring). States are A's state ids; ``bitmask(state)`` is made once per state and shared
    (read-only), the last ones kept within MASK_BUDGET bytes; ``visited`` counts the masks kept.
    Safe to share between threads: each walk has its own scratch, the masks kept a lock."""

    def __init__(self, model: TokenizerModel, automaton: ByteAutomaton | pynini.Fst | ByteTable, cache: bool = True,
                 max_states: int = MAX_STATES):
        table = automaton if isinstance(automaton, ByteTable) else of_automaton(automaton, max_states)
        self.trie = trie = spelling_trie(model, cache)
        self.table = table
        self._delta = table.delta
        self._cls = table.label_class[np.minimum(trie.labels, LABELS - 1)]  # per T's column (label 257+: class 0)
        self.model, self.vocab_size, self.start = model, model.vocab_size, table.start
        self._final = table.final.tolist()
        self._words: dict[int, np.ndarray] = {}  # state -> its packed mask, oldest first
        self._nwords = words_for(self.vocab_size)
        self._keep = max(1, MASK_BUDGET // (4 * self._nwords))
        self._k, self._t = _kernels(), layout(model, trie)
        self._loops = loop_columns(self._delta, self._cls, self._t.below.shape[1])
        self._depth = int(self._t.depth.max(initial=0)) + 1  # T's depth + 1: a walk's state per depth
        self._widest = 0  # the most tokens a walk of T has set
        t = self._t  # what a mask walks: T's prefix nodes, or (after a wide mask, few classes) the class trie
        self._walk: tuple = (t.col, t.depth, t.size, t.tptr, t.toks, t.below, self._cls, self._loops)
        self._classes = False
        self._lock = threading.Lock()  # the masks kept, shared by threads (the kernels release the GIL)

    @property
    def visited(self) -> int:
        return len(self._words)

    @property
    def states(self) -> int:
        """States of A (the token automaton's states, before any is expanded)."""
        return len(self._final)

    def is_state(self, state: Any) -> bool:
        return int_state(state, len(self._final))

    def bitmask(self, state: int) -> np.ndarray:
        """The packed int32 words of ``mask(state)``: one walk of the trie at a state's first use."""
        if type(state) is not int:
            if not self.is_state(state):
                raise ForeignStateError(state, type(self).__name__)
            state = int(state)
        got = self._words.get(state)
        if got is None:
            if not 0 <= state < len(self._final):
                raise ForeignStateError(state, type(self).__name__)
            words = np.zeros(self._nwords, WORD)
            if not self._classes and self._widest >= CLASS_TRIE_TOKENS and self._delta.shape[1] <= CLASS_TRIE_CLASSES:
                self._class_trie()
            classes, walk = self._classes, self._walk  # one read: another thread may switch them
            at = np.empty(self._depth, np.int32)  # the walk's state per depth, this call's own
            n = self._k.reach_from(state, *walk[:6], self._delta, walk[6], walk[7], words, at)
            if not classes:
                self._widest = max(self._widest, n)
            got = words.view("<i4")
            got.flags.writeable = False
            with self._lock:  # the oldest mask goes: memory stays within MASK_BUDGET
                while len(self._words) >= self._keep:
                    del self._words[next(iter(self._words))]
                got = self._words.setdefault(state, got)
        return got

    def _class_trie(self) -> None:
        """T's prefix nodes merged by their sequence of A's classes (``trie_kernels.class_trie``)
        and, per state, the bits of the classes it reads back into itself."""
        t, k = self._t, self._delta.shape[1]
        kt = self._k.class_trie(t.col, t.depth, t.size, t.tptr, t.toks, self._cls, k)
        kcls = np.arange(k, dtype=np.int32)  # the class trie's columns are classes
        self._walk = (*kt, kcls, loop_columns(self._delta, kcls, 1))
        self._classes = True

    def mask(self, state: int) -> np.ndarray:
        return unpack(self.bitmask(state), self.vocab_size)

    def initial(self) -> int:
        return self.start

    def advance(self, state: int, token: int) -> int:
        """The state after ``token``: its surface run through A's table, no mask made (A is trim and
        every byte a token, so a token A reads is one of the mask's)."""
        if type(token) is not int or not 0 <= token < self.vocab_size:
            token = token_id(token, self.vocab_size)
        if type(state) is not int or not 0 <= state < len(self._final):
            if not self.is_state(state):
                raise ForeignStateError(state, type(self).__name__)
            state = int(state)
        nxt = int(self._k.run(state, token, self._t.ptr, self._t.cols, self._delta, self._cls))
        if nxt < 0:
            raise DisallowedTokenError(token, state)
        return nxt

    def ends(self, state: int, tokens: np.ndarray) -> np.ndarray:
        """The state after each of ``tokens`` from ``state`` (-1 where A cannot read the token)."""
        tokens = np.asarray(tokens, np.int64)
        bad = np.flatnonzero((tokens < 0) | (tokens >= self.vocab_size))
        if len(bad) or not 0 <= state < len(self._final):
            raise DisallowedTokenError(int(tokens[bad[0]]) if len(bad) else -1, state)
        return self._k.run_many(state, tokens, self._t.ptr, self._t.cols, self._delta, self._cls,
                                np.empty(len(tokens), np.int64))

    def is_final(self, state: int) -> bool:
        if (type(state) is int and 0 <= state < len(self._final)) or self.is_state(state):
            return self._final[state]
        raise ForeignStateError(state, type(self).__name__)

    def arcs(self, state: int) -> tuple[np.ndarray, np.ndarray]:
        """Token ids (sorted) and next states of ``state``: its mask, each token run through A."""
        tokens = np.flatnonzero(self.mask(state))
        return tokens, self.ends(state, tokens)


def check_filters(filters: Filters | None) -> None:
    """Refuse the token-level filters by name (``lazy-filters``): they act on token sequences,
    which the lazy decoder never builds; the text-level ones restrict the byte DFA."""
    if filters is not None and filters.token_level():
        names = ", ".join(n for n in filters.names() if n not in TEXT)
        raise InputError(f"the lazy decoder applies text filters only, not {names}",
                         "drop them, or promote (pipeline.build), whose token automaton they filter",
                         hint="lazy-filters", names=names)


def restricted(model: TokenizerModel, automaton: ByteAutomaton | pynini.Fst,
               filters: Filters | None) -> ByteAutomaton | pynini.Fst:
    """The byte automaton under the text-level filters (``filters.apply_text``: A ∩ F_text)."""
    check_filters(filters)
    if filters is None or not filters.text_level():
        return automaton
    fst = automaton.fst if isinstance(automaton, ByteAutomaton) else automaton
    pattern = automaton.pattern if isinstance(automaton, ByteAutomaton) else "the automaton"
    return ByteAutomaton(apply_text(model, fst, filters), pattern)


def decoder(model: TokenizerModel, pattern: str | None = None, *, schema: Any = None,
            automaton: ByteAutomaton | pynini.Fst | None = None, cache: bool = True, filters: Filters | None = None,
            **schema_options: Any) -> LazyDecoder:
    """A :class:`LazyDecoder` of a regex, a JSON Schema (``schema.compile_schema`` with
    ``schema_options``) or a byte automaton: exactly one of them; ``filters``: text-level only."""
    if sum(x is not None for x in (pattern, schema, automaton)) != 1:
        raise InputError("give exactly one of a regex, a schema or an automaton", "pass one of them")
    check_filters(filters)
    if schema is not None:
        from tokfst_cli.schema.compile import compile_schema  # deferred: start-up: only this path needs it

        automaton = compile_schema(schema, **schema_options).automaton
    elif pattern is not None:
        from tokfst_cli.text.regex import compile_regex  # deferred: start-up: only this path needs it

        automaton = compile_regex(pattern)
    return LazyDecoder(model, restricted(model, automaton, filters), cache)


def table_for(model: TokenizerModel, automaton: ByteAutomaton | pynini.Fst, max_states: int = MAX_STATES,
              cache: bool = True, filters: Filters | None = None) -> ByteTable:
    """The :class:`ByteTable` of a byte automaton (text filters applied) for ``model``, refused now
    for what :class:`LazyDecoder` would refuse."""
    check_filters(filters)
    spelling_trie(model, cache)
    return of_automaton(restricted(model, automaton, filters), max_states)


def artifact(model: TokenizerModel, automaton: ByteAutomaton | pynini.Fst, max_states: int = MAX_STATES,
             cache: bool = True, filters: Filters | None = None) -> bytes:
    """The lazy artifact (``tokfst promote --format lazy``) of :func:`table_for`: :mod:`.byte_table`'s
    container, with the model's fingerprint."""
    return to_bytes(table_for(model, automaton, max_states, cache, filters), model.fingerprint)


def from_artifact(data: bytes, model: TokenizerModel, source: str = "artifact") -> LazyDecoder:
    """The decoder of a lazy artifact's bytes for ``model`` (its fingerprint checked)."""
    return LazyDecoder(model, from_bytes(data, source, model.fingerprint))
