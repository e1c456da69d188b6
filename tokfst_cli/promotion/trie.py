"""Stage S without composition: A's byte DFA walked over T's trie (Cognetta & Okazaki 2024 Sec. 5, Eq. 3, Lemma 1).

T (``lexicon``) is a byte trie of the token surfaces closed under concatenation: an inner arc
reads a byte into a deeper node, a token's last byte emits the token and returns to the root.
For a deterministic A the token states of rmepsilon(PROJ(A o T)) are the pairs (q, root), and
token v leads from (q, root) to (delta*(q, surface(v)), root). This module computes those arcs
as the composition would, but a whole trie level at a time with numpy:

- :class:`TokenTrie` (one per tokenizer and alphabet, kept on the model): T's arcs in bulk,
  grouped by state (byte, token or -1, next state);
- :func:`walk`: from a set of A's states at once, the pairs (T state, state of A) level by
  level; a pair whose byte A cannot read dies with its subtree; a token's last byte gives an
  arc. The pairs entered are the accessible states of A o T, counted against ``max_states``
  after each level.

:func:`token_arcs` returns the trimmed token automaton as ``artifacts.FstArrays``: exactly the
token states and arcs of OpenFst's compose + rmepsilon (checked isomorphic in the tests).
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

import numpy as np
import pynini

from tokfst_cli.automata.arrays import FstArrays, fst_arrays, unique
from tokfst_cli.automata.graph import kept_states, trim_mask
from tokfst_cli.errors import LimitError
from tokfst_cli.promotion.lexicon import lexicon as read


@dataclass(frozen=True)
class TokenTrie:
    """T's arcs in bulk; state u's arcs are lo[u]:hi[u]."""

    root: int
    lo: np.ndarray  # int64 per state of T
    hi: np.ndarray
    labels: np.ndarray  # int64: T's input labels, sorted (bytes + 1, MARKER, signatures, terminals)
    column: np.ndarray  # int64 per arc: the index of its input label in ``labels``
    token: np.ndarray  # int64 per arc: its output label - 1 (the token emitted), -1 on an inner arc
    next: np.ndarray  # int64 per arc: the next state of T
    all_bytes: bool  # every single byte is some token's text (then every state of a trim A is a token state)

    @property
    def states(self) -> int:
        return len(self.lo)


def from_lexicon(lexicon: pynini.Fst) -> TokenTrie | None:
    """The arcs of T as :class:`TokenTrie`. T (``lexicon.build``: plain, T_M, or T'' with its
    terminal arcs) is a trie closed under concatenation: every arc either reads into a deeper
    state emitting nothing, or emits and returns to the root, the one final state. None for
    any other shape."""
    t = fst_arrays(lexicon)
    root = t.start
    inner = t.olabel == 0
    if (t.weighted or (t.ilabel == 0).any() or (t.nextstate[~inner] != root).any()
            or (t.nextstate[inner] == root).any() or not t.final[root] or t.final.sum() != 1):
        return None
    count = np.bincount(t.src, minlength=len(t.final))
    hi = np.cumsum(count)
    labels, column = np.unique(t.ilabel.astype(np.int64), return_inverse=True)
    token = t.olabel.astype(np.int64) - 1
    ends = t.ilabel[(t.src == root) & ~inner]
    return TokenTrie(root, hi - count, hi, labels, column.ravel(), token, t.nextstate.astype(np.int64),
                     len(unique(ends[ends <= 256])) == 256)


_GIVEN: OrderedDict[int, tuple[pynini.Fst, TokenTrie | None]] = OrderedDict()  # id(T) -> (T, its trie), a few
GIVEN_MAX = 4


def trie_for(model, marked: bool = False, lexicon: pynini.Fst | None = None, cache: bool = True) -> TokenTrie | None:
    """The :class:`TokenTrie` of T. With ``lexicon`` None, the tokenizer's T (``marked``: T_M),
    read from the cache and made once per model; else of ``lexicon`` itself (a caller's T may
    be another: T with a boundary arc, a test's), kept for the last few T objects given."""
    if lexicon is not None:
        got = _GIVEN.get(id(lexicon))
        if got is None or got[0] is not lexicon:
            got = _GIVEN[id(lexicon)] = (lexicon, from_lexicon(lexicon))  # holding T keeps its id unique
            while len(_GIVEN) > GIVEN_MAX:
                _GIVEN.popitem(last=False)
        _GIVEN.move_to_end(id(lexicon))
        return got[1]
    key = "_token_trie_marked" if marked else "_token_trie"
    got = model.__dict__.get(key)
    if got is None:
        got = model.__dict__[key] = from_lexicon(read(model, cache=cache, marked=marked))
    return got


def signed_trie(model, cache: bool = True) -> TokenTrie:
    """The :class:`TokenTrie` of T'' without its terminal arcs (``lexicon.build(signed=True)``),
    made once per model."""
    got = model.__dict__.get("_token_trie_signed")
    if got is None:
        got = model.__dict__["_token_trie_signed"] = from_lexicon(read(model, cache=cache, signed=True))
    return got


def with_root_arcs(trie: TokenTrie, ilabels: np.ndarray, olabels: np.ndarray) -> TokenTrie:
    """``trie`` with more arcs at the root, each reading ilabels[j] and emitting olabels[j] (T'':
    the signed T and one arc per terminal label), without reading T again."""
    ilabels, olabels = np.asarray(ilabels, np.int64), np.asarray(olabels, np.int64)
    labels = np.union1d(trie.labels, ilabels)
    column = trie.column if len(labels) == len(trie.labels) or trie.labels[-1] < labels[len(trie.labels)] \
        else np.searchsorted(labels, trie.labels)[trie.column]  # new labels past the old ones keep every column
    at, k = int(trie.hi[trie.root]), len(ilabels)
    added = (np.searchsorted(labels, ilabels), olabels - 1, np.full(k, trie.root, np.int64))
    column, token, nxt = (np.concatenate([old[:at], new, old[at:]]) for old, new in
                          zip((column, trie.token, trie.next), added))
    shift = np.where(trie.lo >= at, k, 0)
    lo, hi = trie.lo + shift, trie.hi + shift
    if trie.lo[trie.root] >= at:  # the root's own range starts past ``at`` only if it has no arcs
        lo[trie.root] -= k
    else:
        hi[trie.root] += k
    return TokenTrie(trie.root, lo, hi, labels, column, token, nxt, trie.all_bytes)


SCRATCH = 1 << 20  # pairs (state of T, state of A) past which the walk counts distinct ones by sorting
EXACT_FROM = 64  # A's states past which walks from different states meet often: pairs counted distinct at once
MAX_CELLS = 1 << 24  # A's states x T's labels past which A's table (4 bytes a cell) is not built: OpenFst composes


def label_dfa(a: FstArrays, trie: TokenTrie) -> np.ndarray | None:
    """A's transitions on T's labels as an int32 table (states + 1) x labels, the extra row a
    dead state (A's other labels lead nowhere: T never reads them); None if A is not a
    deterministic unweighted epsilon-free acceptor or its table passes MAX_CELLS."""
    n, width = len(a.final), len(trie.labels)
    if a.weighted or (n + 1) * width > MAX_CELLS or (a.ilabel != a.olabel).any() or (a.ilabel == 0).any():
        return None
    lab = a.ilabel.astype(np.int64)
    col = np.clip(np.searchsorted(trie.labels, lab), 0, max(width - 1, 0))
    read = trie.labels[col] == lab if width else np.zeros(len(lab), bool)
    key = a.src[read].astype(np.int64) * width + col[read]
    if (np.diff(np.sort(key)) == 0).any():  # two arcs on one label: not deterministic
        return None
    delta = np.full((n + 1) * width, n, np.int32)
    delta[key] = a.nextstate[read]
    return delta.reshape(n + 1, width)


class _Recount(Exception):
    """The walk's quick count (pairs per origin) passed the limit: count distinct pairs instead."""


def walk(trie: TokenTrie, delta: np.ndarray, origins: np.ndarray, max_states: int,
         used: int = 0, exact: bool = False) -> tuple[list, list, list, int]:
    """Arcs (origin, token id, target) of every token A reads from each state of ``origins``
    (``delta``: :func:`label_dfa`), as lists of arrays, and the number of pairs (inner state of
    T, state of A) entered: the other states of A o T. ``_Recount`` once they and ``used`` pass
    ``max_states``, checked after each level (a level's candidates are at most the previous
    level's pairs times T's fan-out).

    Walks from two origins may meet in one pair: ``exact`` counts distinct pairs, else pairs
    per origin, an upper bound that costs nothing."""
    dead = len(delta) - 1
    width = len(delta)
    src, tok, dst = [], [], []
    scratch = np.empty(trie.states * width, np.int32) if exact and trie.states * width <= SCRATCH else None
    node = np.full(len(origins), trie.root, np.int64)
    origin = state = np.asarray(origins, np.int64)
    seen = used
    while len(node):
        deg = trie.hi[node] - trie.lo[node]
        arc = np.repeat(trie.lo[node] - np.cumsum(deg) + deg, deg) + np.arange(int(deg.sum()))
        origin, state = np.repeat(origin, deg), np.repeat(state, deg)
        state = delta[state, trie.column[arc]]
        alive = state != dead
        arc, origin, state = arc[alive], origin[alive], state[alive]
        token = trie.token[arc]
        last = token >= 0  # a token's last byte: an arc of the result (T returns to its root)
        if last.any():
            src.append(origin[last])
            tok.append(token[last])
            dst.append(state[last])
        node, origin, state = trie.next[arc[~last]], origin[~last], state[~last]
        seen += _distinct_past(node, state, width, scratch, max_states - seen) if exact else len(node)
        if seen > max_states:
            raise _Recount
    return src, tok, dst, seen - used


def _distinct_past(node: np.ndarray, state: np.ndarray, width: int, scratch: np.ndarray | None, budget: int) -> int:
    """:func:`_distinct`, or the distinct pairs of a prefix of the level once they pass ``budget``
    (a refusal costs a few times the budget, not the whole level)."""
    k = max(budget, 0) + 1
    while k < len(node):
        d = _distinct(node[:k], state[:k], width, scratch)
        if d > budget:
            return d
        k *= 4
    return _distinct(node, state, width, scratch)


def _distinct(node: np.ndarray, state: np.ndarray, width: int, scratch: np.ndarray | None) -> int:
    """How many distinct pairs (node, state) there are. With ``scratch`` (one int32 per pair of
    a state of T and a state of A), each pair writes its index and the pairs that read their
    own back are the distinct ones; else a sort."""
    key = node * width + state
    if scratch is None:  # a sort: np.unique's hashing is far slower on large int64 arrays (numpy 2.4)
        key = np.sort(key.astype(np.uint32) if node.max(initial=0) < (1 << 32) // width else key)
        return int(len(key) > 0) + int(np.count_nonzero(key[1:] != key[:-1]))
    mark = np.arange(len(key), dtype=np.int32)
    scratch[key] = mark
    return int(np.count_nonzero(scratch[key] == mark))


def token_arcs(model, a: FstArrays, max_states: int, marked: bool = False, trim: bool = False,
               lexicon: pynini.Fst | None = None, cache: bool = True, keep: bool = True,
               trie: TokenTrie | None = None) -> FstArrays | None:
    """rmepsilon(PROJ(A o T)) trimmed, labels T's output labels (token id + 1; T_M's boundary,
    the terminals of T''), arcs grouped by state; None if A or T has another shape (OpenFst's
    composition then). States keep A's order. ``lexicon``: T (T_M when ``marked``), read from
    the cache when None (:func:`trie_for`); ``keep`` False: a T made for this A alone, its
    trie not kept; ``trie``: T's trie given (T'': :func:`with_root_arcs`).

    One walk starts from every state of A at once; the result keeps the states reached from
    A's start that reach a final state (``filters.tokens.trim_mask``; ``trim``: A is trim and
    every byte a token, so all do). LimitError past ``max_states`` accessible states of A o T: pairs are counted per
    origin while that stays under the limit (small A), else distinct, and if those from every
    state pass it, again from the states the start reaches only."""
    if trie is None:
        trie = trie_for(model, marked, lexicon, cache) if keep else from_lexicon(lexicon)
    delta = label_dfa(a, trie) if trie is not None else None
    if delta is None:
        return None
    n = len(a.final)
    exact = n > EXACT_FROM
    try:
        try:
            src, tok, dst, _ = walk(trie, delta, np.arange(n), max_states, n, exact)
        except _Recount:
            if exact:
                raise
            src, tok, dst, _ = walk(trie, delta, np.arange(n), max_states, n, exact=True)
    except _Recount:  # pairs from every state passed the limit: those from the states the start reaches?
        if trim and trie.all_bytes:  # every state of a trim A is reached through its bytes' tokens
            raise LimitError("A o T", "max_states", max_states, remedy="simplify") from None
        origins = np.flatnonzero(_reached(trie, delta, a, max_states))
        try:
            src, tok, dst, _ = walk(trie, delta, origins, max_states, len(origins), exact=True)
        except _Recount:
            raise LimitError("A o T", "max_states", max_states, remedy="simplify") from None
    cat = lambda x: np.concatenate(x) if x else np.zeros(0, np.int64)  # noqa: E731
    src, tok, dst = cat(src), cat(tok), cat(dst)
    small = np.uint16 if n <= 1 << 16 else np.int64  # a radix sort for 16-bit keys
    order = np.argsort(src.astype(small), kind="stable")  # arcs grouped by state, as FstArrays has them
    label = tok[order] + 1
    walked = FstArrays(int(a.start), a.final.astype(bool), src[order], label, label, dst[order])
    if trim and trie.all_bytes:  # A trim and every byte a token: every state is a token state
        return walked
    return kept_states(walked, trim_mask(walked, bounded=False))


def _reached(trie: TokenTrie, delta: np.ndarray, a: FstArrays, max_states: int) -> np.ndarray:
    """The token states reached from A's start: walks from the start, then from each newly
    reached state, a round per set. Each distinct pair of A o T is met at most once per origin,
    so past ``max_states`` times A's states pairs counted per origin, A o T has more than
    ``max_states`` states: LimitError."""
    reached = np.zeros(len(a.final), bool)
    frontier = np.array([a.start], np.int64)
    reached[frontier] = True
    used, bound = 1, max_states * len(a.final)
    while len(frontier):
        try:
            _, _, d, seen = walk(trie, delta, frontier, bound, used)
        except _Recount:
            raise LimitError("A o T", "max_states", max_states, remedy="simplify") from None
        used += seen
        targets = np.concatenate(d) if d else np.zeros(0, np.int64)
        frontier = unique(targets[~reached[targets]])
        reached[frontier] = True
        used += len(frontier)
    return reached
