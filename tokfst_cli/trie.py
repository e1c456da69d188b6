"""Stage S without composition: A's byte DFA walked over T's trie (seed 000 Sec. 5, Eq. 3, Lemma 1).

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

from dataclasses import dataclass

import numpy as np
import pynini

from .artifacts import FstArrays, fst_arrays
from .errors import LimitError
from .symbols import MARKER


@dataclass(frozen=True)
class TokenTrie:
    """T's arcs in bulk; state u's arcs are lo[u]:hi[u]."""

    root: int
    lo: np.ndarray  # int64 per state of T
    hi: np.ndarray
    byte: np.ndarray  # int64 per arc: the byte read (MARKER's arc of T_M: 256)
    token: np.ndarray  # int64 per arc: the token emitted (its last byte), -1 on an inner arc
    next: np.ndarray  # int64 per arc: the next state of T
    all_bytes: bool  # every single byte is some token's text (then every state of a trim A is a token state)

    @property
    def states(self) -> int:
        return len(self.lo)


def from_lexicon(lexicon: pynini.Fst) -> TokenTrie:
    """The arcs of T (or T_M) as :class:`TokenTrie` (``lexicon.build``: labels byte + 1, token + 1)."""
    t = fst_arrays(lexicon)
    count = np.bincount(t.src, minlength=len(t.final))
    hi = np.cumsum(count)
    byte = np.where(t.ilabel == MARKER, 256, t.ilabel.astype(np.int64) - 1)
    token = t.olabel.astype(np.int64) - 1
    root = t.start
    ends = byte[(t.src == root) & (token >= 0)]
    return TokenTrie(root, hi - count, hi, byte, token, t.nextstate.astype(np.int64),
                     len(np.unique(ends[ends < 256])) == 256)


def trie_for(model, marked: bool = False, lexicon: pynini.Fst | None = None, cache: bool = True) -> TokenTrie:
    """The :class:`TokenTrie` of T (``marked``: T_M), made once per model from ``lexicon`` (read
    from the cache when None)."""
    key = "_token_trie_marked" if marked else "_token_trie"
    got = model.__dict__.get(key)
    if got is None:
        if lexicon is None:
            from .lexicon import lexicon as read

            lexicon = read(model, cache=cache, marked=marked)
        got = model.__dict__[key] = from_lexicon(lexicon)
    return got


SCRATCH = 1 << 20  # pairs (state of T, state of A) past which the walk counts distinct ones by sorting
MAX_TABLE = 1 << 16  # A's states past which its byte table (1 KiB a state) is not built: OpenFst composes
COLUMNS = 257  # bytes 0-255 and MARKER, the pre-token boundary (stage P's output; T_M reads it at the root)


def byte_dfa(a: FstArrays) -> np.ndarray | None:
    """A's transitions as an int32 table (states + 1) x COLUMNS, the extra row a dead state;
    None if A is not a deterministic acceptor over bytes and :data:`MARKER` (labels 1-257),
    is weighted, or has more than MAX_TABLE states."""
    n = len(a.final)
    if a.weighted or n > MAX_TABLE or (a.ilabel != a.olabel).any():
        return None
    lab = a.ilabel.astype(np.int64)
    if len(lab) and (lab.min() < 1 or lab.max() > MARKER):
        return None
    key = a.src.astype(np.int64) * COLUMNS + (lab - 1)
    if (np.diff(np.sort(key)) == 0).any():  # two arcs on one label: not deterministic
        return None
    delta = np.full((n + 1) * COLUMNS, n, np.int32)
    delta[key] = a.nextstate
    return delta.reshape(n + 1, COLUMNS)


class _Recount(Exception):
    """The walk's quick count (pairs per origin) passed the limit: count distinct pairs instead."""


def walk(trie: TokenTrie, delta: np.ndarray, origins: np.ndarray, max_states: int,
         used: int = 0, exact: bool = False) -> tuple[list, list, list, int]:
    """Arcs (origin, token id, target) of every token A reads from each state of ``origins``
    (``delta``: :func:`byte_dfa`), as lists of arrays, and the number of pairs (inner state of
    T, state of A) entered: the other states of A o T. LimitError once they and ``used`` pass
    ``max_states``, checked after each level (a level's candidates are at most the previous
    level's pairs times T's fan-out).

    Walks from two origins may meet in one pair. Counting the pairs per origin bounds the
    distinct ones from above for free, so the distinct ones are counted (``exact``) only when
    the caller saw that bound pass the limit (``_Recount``)."""
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
        state = delta[state, trie.byte[arc]]
        alive = state != dead
        arc, origin, state = arc[alive], origin[alive], state[alive]
        token = trie.token[arc]
        last = token >= 0  # a token's last byte: an arc of the result (T returns to its root)
        if last.any():
            src.append(origin[last])
            tok.append(token[last])
            dst.append(state[last])
        node, origin, state = trie.next[arc[~last]], origin[~last], state[~last]
        seen += _distinct(node, state, width, scratch) if exact else len(node)
        if seen > max_states:
            if not exact:
                raise _Recount
            raise LimitError("A o T", "max_states", max_states, remedy="simplify")
    return src, tok, dst, seen - used


def _distinct(node: np.ndarray, state: np.ndarray, width: int, scratch: np.ndarray | None) -> int:
    """How many distinct pairs (node, state) there are. With ``scratch`` (one int32 per pair of
    a state of T and a state of A), each pair writes its index and the pairs that read their
    own back are the distinct ones; else a sort."""
    key = node * width + state
    if scratch is None:
        return len(np.unique(key))
    mark = np.arange(len(key), dtype=np.int32)
    scratch[key] = mark
    return int(np.count_nonzero(scratch[key] == mark))


def token_arcs(model, a: FstArrays, max_states: int, marked: bool = False, trim: bool = False,
               lexicon: pynini.Fst | None = None, cache: bool = True) -> FstArrays | None:
    """rmepsilon(PROJ(A o T)) trimmed, labels token id + 1 (``marked``: T_M, whose boundary
    label is one past the last token's), arcs grouped by state; None if A is no byte DFA
    (OpenFst's composition then). States keep A's order. ``lexicon``: T (or T_M), read from
    the cache when None and no walk of this model has read it yet.

    The walks start at A's start and then at each newly reached state, a round per set;
    ``trim`` (A is accessible and co-accessible) and every byte a token: every state of A is
    a token state of A o T, so the walk starts from all of them in one round and nothing is
    trimmed. LimitError past ``max_states`` accessible states of A o T."""
    delta = byte_dfa(a)
    if delta is None:
        return None
    trie = trie_for(model, marked, lexicon, cache)
    all_states = trim and trie.all_bytes
    try:
        src, tok, dst, reached = _reached(trie, delta, a, max_states, all_states)
    except _Recount:  # count distinct pairs: one walk from every token state (a pair may come from several)
        try:  # each distinct pair is met at most once per origin
            _, _, _, reached = _reached(trie, delta, a, max_states * len(a.final), all_states)
        except _Recount:
            raise LimitError("A o T", "max_states", max_states, remedy="simplify") from None
        origins = np.flatnonzero(reached)
        src, tok, dst, _ = walk(trie, delta, origins, max_states, len(origins), exact=True)
    return _trimmed(a, src, tok, dst, reached, all_states)


def _reached(trie: TokenTrie, delta: np.ndarray, a: FstArrays, max_states: int,
             all_states: bool) -> tuple[list, list, list, np.ndarray]:
    """The walks of :func:`token_arcs` from A's start, then from each newly reached state (or
    from every state at once): their arcs and the token states reached. ``_Recount`` once the
    pairs per origin pass ``max_states``."""
    src, tok, dst = [], [], []
    reached = np.zeros(len(a.final), bool)
    frontier = np.arange(len(a.final)) if all_states else np.array([a.start], np.int64)
    reached[frontier] = True
    used = len(frontier)  # the accessible states of A o T: token states (q, root) and inner ones
    while len(frontier):  # token states reachable from the start, a round per new set
        s, t, d, seen = walk(trie, delta, frontier, max_states, used)
        used += seen
        src += s
        tok += t
        dst += d
        targets = np.concatenate(d) if d else np.zeros(0, np.int64)
        frontier = np.unique(targets[~reached[targets]])
        reached[frontier] = True
        used += len(frontier)
    if used > max_states:
        raise _Recount
    return src, tok, dst, reached


def _trimmed(a: FstArrays, src: list, tok: list, dst: list, reached: np.ndarray, all_states: bool) -> FstArrays:
    """The walked arcs between reached, co-reachable states as FstArrays (A's state order kept)."""
    n = len(a.final)
    src = np.concatenate(src) if src else np.zeros(0, np.int64)
    tok = np.concatenate(tok) if tok else np.zeros(0, np.int64)
    dst = np.concatenate(dst) if dst else np.zeros(0, np.int64)
    keep = reached[src]
    src, tok, dst = src[keep], tok[keep], dst[keep]
    # all_states: A is trim and tokens spell any string, so every state reaches a final one
    states = reached if all_states else reached & _coreachable(n, src, dst, a.final.astype(bool))
    if not states[a.start]:
        return FstArrays(0, np.zeros(0, bool), *(np.zeros(0, np.int32) for _ in range(4)))
    keep = states[src] & states[dst]
    src, tok, dst = src[keep], tok[keep], dst[keep]
    number = (np.cumsum(states) - 1).astype(np.int32)
    order = np.argsort(src, kind="stable")
    label = (tok[order] + 1).astype(np.int32)
    return FstArrays(int(number[a.start]), a.final.astype(bool)[states], number[src[order]], label, label,
                     number[dst[order]])


def _coreachable(n: int, src: np.ndarray, dst: np.ndarray, final: np.ndarray) -> np.ndarray:
    """States from which some final state is reachable along the arcs (breadth-first, backward,
    over the distinct state pairs)."""
    pairs = np.unique(dst * n + src)
    back_dst, back_src = np.divmod(pairs, n)  # grouped by the arc's target
    lo = np.searchsorted(back_dst, np.arange(n), "left")
    hi = np.searchsorted(back_dst, np.arange(n), "right")
    live = final.copy()
    frontier = np.flatnonzero(live)
    while len(frontier):
        deg = hi[frontier] - lo[frontier]
        at = np.repeat(lo[frontier] - np.cumsum(deg) + deg, deg) + np.arange(int(deg.sum()))
        prev = np.unique(back_src[at])
        frontier = prev[~live[prev]]
        live[frontier] = True
    return live
