"""Exact counts and uniform draws over deterministic acceptors (Pitfalls 2025 Sec. 3.3.1, App. C).

An acceptor here is a deterministic, epsilon-free ``pynini.Fst`` (token acceptors: labels token
id + 1; byte acceptors: byte + 1, as ``regex.ByteAutomaton``). Being deterministic, it has one
path per accepted label sequence, so counting paths counts sequences. Counts are Python ints
(exact: free text passes 10^300); the dynamic programs run on numpy int64 vectors and switch to
object vectors (Python ints) before a sum could overflow.

* :func:`by_length`: the accepted sequences of each length 0..max_len (a forward program,
  one step per length; arcs between the same two states are merged, their number a factor);
* :func:`is_finite` (pynini's ``connect`` and its ACYCLIC property), :func:`longest` (rounds of
  Kahn's algorithm from the final sinks);
* :class:`UniformDraw`: sequences of length <= max_len drawn uniformly. Backward counts N_k(s)
  (accepted paths of at most k labels from s; N_0(s) = [s final], N_k(s) = [s final] +
  sum over arcs s -> t of N_{k-1}(t)) weigh each choice, so each sequence has probability
  1 / N_max_len(start). A finite language drawn whole needs one count per state (states in
  order of height, each pair of states read once), not the table;
* :func:`spelling`, :func:`surface`, :func:`spellings`: the strings a token acceptor A spells,
  with the lexicon transducer T (``lexicon``: bytes -> tokens): reverse(A) o invert(reverse(T))
  projected on the bytes, reversed back, determinized and minimized by pynini; and the token
  paths spelling one string;
* :func:`tally`: both counts by length, for ``tokfst count``;
* :func:`explore`: the reachable part of any decoder (``constraint.load``) as an acceptor,
  read through ``arcs`` or, factorized, through ``mask``/``advance``, up to ``max_arcs``;
  :func:`explore_within`: the part within ``max_len`` tokens (a pushdown grammar's decoder,
  whose states are unbounded), for :func:`tally_decoder`.

Every program is sized before it runs or allocates its table: (states + pairs of states joined
by an arc) x (max_len + 1) past ``MAX_CELLS`` is a ``LimitError`` on ``max_len``.
"""

from __future__ import annotations

import random
from bisect import bisect_right
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
import pynini

from tokfst_cli.automata.arrays import fst_arrays, fst_from_arrays, unique
from tokfst_cli.automata.fsts import linear
from tokfst_cli.decoding.index import rows
from tokfst_cli.errors import InputError, LimitError, UsageError

MAX_CELLS = 20_000_000  # (states + state pairs) x (max_len + 1): a program's work, and its table's size
MAX_ARCS = 1_000_000  # arcs read from a decoder by explore
_SAFE = 1 << 62  # int64 sums stay below this; past it the vectors hold Python ints


class _Graph(NamedTuple):
    n: int
    start: int
    final: np.ndarray  # bool per state
    src: np.ndarray  # nondecreasing
    label: np.ndarray
    dst: np.ndarray


def _graph(fst: pynini.Fst) -> _Graph:
    a = fst_arrays(fst)
    return _Graph(len(a.final), a.start, a.final, a.src, a.ilabel, a.nextstate)


def trimmed(fst: pynini.Fst) -> pynini.Fst:
    """A copy without the states on no accepting path (pynini's ``connect``)."""
    return fst.copy().connect()


def is_finite(fst: pynini.Fst) -> bool:
    """Does the acceptor accept finitely many sequences? (no cycle on an accepting path)"""
    g = trimmed(fst)
    return g.num_states() == 0 or g.properties(pynini.ACYCLIC, True) == pynini.ACYCLIC


def longest(fst: pynini.Fst) -> int | None:
    """The length of the longest accepted sequence; None for an infinite language, -1 for the empty one."""
    g = _graph(trimmed(fst))
    if g.n == 0:
        return -1
    heights = _heights(g)
    return None if heights is None else int(heights[g.start])


def _heights(g: _Graph) -> np.ndarray | None:
    """Per state of a trimmed acceptor the longest path to a final state, in rounds of Kahn's
    algorithm from the sinks (every arc is read once); None when there is a cycle."""
    outdeg = np.bincount(g.src, minlength=g.n)
    by_dst = np.argsort(g.dst, kind="stable")
    in_off = np.zeros(g.n + 1, np.int64)
    np.cumsum(np.bincount(g.dst, minlength=g.n), out=in_off[1:])
    height = np.full(g.n, -1, np.int64)
    frontier, level, done = np.flatnonzero(outdeg == 0), 0, 0
    while len(frontier):
        height[frontier] = level
        done += len(frontier)
        sources, counts = np.unique(g.src[rows(by_dst, in_off, frontier)[0]], return_counts=True)
        outdeg[sources] -= counts
        frontier, level = sources[outdeg[sources] == 0], level + 1
    return height if done == g.n else None


class _Step:
    """One step of a program over the arcs: ``out[s] = sum of vec[t] * m`` over the pairs of states
    (s, t) joined by m arcs, s the arcs' source (``forward`` False) or target (True). Arcs between
    the same two states are merged (a canonical Pokedex automaton: 1.65 M arcs, 186 k pairs)."""

    def __init__(self, g: _Graph, forward: bool):
        pairs, mult = np.unique(g.src * g.n + g.dst, return_counts=True)
        key, other = (pairs % g.n, pairs // g.n) if forward else (pairs // g.n, pairs % g.n)
        order = np.argsort(key, kind="stable")
        self.key, self.other, self.mult, self.n = key[order], other[order], mult[order], g.n
        self.offsets = np.searchsorted(self.key, np.arange(g.n + 1))
        self.owners = np.flatnonzero(np.diff(self.offsets) > 0)
        self.starts = self.offsets[self.owners]
        self.fan = int(np.add.reduceat(self.mult, self.starts).max()) if len(self.starts) else 0

    def cells(self, max_len: int) -> int:
        return (self.n + len(self.key)) * (max_len + 1)

    def __call__(self, vec: np.ndarray) -> np.ndarray:
        if vec.dtype != object and (int(vec.max()) + 1) * max(self.fan, 1) >= _SAFE:
            vec = vec.astype(object)  # a sum could pass int64: Python ints from here on
        out = np.zeros(self.n, vec.dtype)
        if len(self.starts):
            out[self.owners] = np.add.reduceat(vec[self.other] * self.mult, self.starts)
        return out


def _guard(step: _Step, max_len: int, what: str) -> None:
    cells = step.cells(max_len)
    if cells > MAX_CELLS:
        raise LimitError(what, "max_len", max_len, cells, remedy="lower", unit="cells", at_least=True)


def by_length(fst: pynini.Fst, max_len: int) -> list[int]:
    """The number of accepted sequences of each length 0..max_len."""
    if max_len < 0:
        raise InputError(f"max_len {max_len} is negative", "give 0 or more")
    g = _graph(trimmed(fst))
    if g.n == 0:
        return [0] * (max_len + 1)
    step = _Step(g, forward=True)
    _guard(step, max_len, "the count by length")
    cur = np.zeros(g.n, np.int64)
    cur[g.start] = 1
    out = [int(g.final[g.start])]
    for _ in range(max_len):
        cur = step(cur)
        out.append(sum(cur[g.final].tolist()))
    return out


def _below(rng, n: int) -> int:
    """A uniform integer in [0, n): ``random.Random`` or a numpy Generator (any size of n)."""
    if isinstance(rng, random.Random):
        return rng.randrange(n)
    if n <= 1 << 62:
        return int(rng.integers(n))
    bits = n.bit_length()
    nbytes = (bits + 7) // 8
    while True:  # rejection: accepted with probability > 1/2
        x = int.from_bytes(rng.bytes(nbytes), "little") >> (8 * nbytes - bits)
        if x < n:
            return x


class UniformDraw:
    """Accepted label sequences of length <= ``max_len``, each drawn with probability 1 / ``total``.

    ``max_len`` None: every sequence of a finite language (InputError for an infinite one).
    ``draw(rng)`` takes a ``random.Random`` or a numpy Generator; a choice costs one random
    integer below the count of the state: it picks the end or an arc with the counts of the
    states reached as weights, arcs to the same state sharing one interval."""

    def __init__(self, fst: pynini.Fst, max_len: int | None = None):
        g = self.g = _graph(trimmed(fst))
        heights = _heights(g) if g.n else np.zeros(0, np.int64)
        if max_len is None and heights is None:
            raise InputError("the language is infinite", "bound the length (max_len)", hint="count-infinite")
        if max_len is not None and max_len < 0:
            raise InputError(f"max_len {max_len} is negative", "give 0 or more")
        height = int(heights[g.start]) if g.n and heights is not None else 0
        self.max_len = height if max_len is None else max_len
        self.budgeted = heights is None or self.max_len < height  # else every sequence fits
        self._fin = g.final.astype(np.int64)
        order = np.lexsort((g.label, g.dst, g.src))  # arcs by (src, dst, label): one group per (src, dst)
        self._label, dst, src = g.label[order], g.dst[order], g.src[order]
        first = np.flatnonzero(np.r_[True, (src[1:] != src[:-1]) | (dst[1:] != dst[:-1])]) if len(src) else order
        self._gfirst, self._gdst = first, dst[first]
        self._gsize = np.diff(np.r_[first, len(src)])
        self._goff = np.searchsorted(src[first], np.arange(g.n + 1)) if g.n else np.zeros(1, np.int64)
        self._cache: dict[int, tuple] = {}
        if g.n == 0:
            self.table, self.counts, self.total = [], np.zeros(0, object), 0
        elif self.budgeted:
            step = _Step(g, forward=False)
            _guard(step, self.max_len, "the path-count table of uniform sampling")
            self.table = [self._fin]
            for _ in range(self.max_len):
                self.table.append(step(self.table[-1]) + self._fin)
            self.total = int(self.table[-1][g.start])
        else:
            self.counts = self._level_counts(heights, _Step(g, forward=False))
            self.total = int(self.counts[g.start])

    def _level_counts(self, heights: np.ndarray, step: _Step) -> np.ndarray:
        """N(s) for every state, in order of height (a state's successors are lower): each pair of
        states joined by arcs is read once."""
        counts = np.zeros(self.g.n, object)
        by_height = np.argsort(heights, kind="stable")
        bounds = np.searchsorted(heights[by_height], np.arange(int(heights.max()) + 2))
        for a, b in zip(bounds[:-1], bounds[1:]):
            states = by_height[a:b]
            pairs, off = rows(np.arange(len(step.key)), step.offsets, states)
            sums = np.zeros(len(states), object)
            has = np.diff(off) > 0
            if has.any():
                sums[has] = np.add.reduceat(counts[step.other[pairs]] * step.mult[pairs], off[:-1][has])
            counts[states] = sums + self._fin[states].astype(object)
        return counts

    def _groups(self, s: int) -> tuple[list[int], list[int], list[int]]:
        a, b = self._goff[s], self._goff[s + 1]
        return self._gdst[a:b].tolist(), self._gsize[a:b].tolist(), self._gfirst[a:b].tolist()

    def _weights(self, s: int, k: int) -> tuple[list[int], list[int], list[int], list[int], bool]:
        """(cumulative weights: end first, then one per target; targets; counts; first arcs; forced:
        one arc and no end, so no random choice)."""
        if not self.budgeted and s in self._cache:
            return self._cache[s]
        targets, sizes, firsts = self._groups(s)
        row = self.counts if not self.budgeted else self.table[k - 1] if k > 0 else None
        each = [int(row[t]) for t in targets] if row is not None else [0] * len(targets)
        cum = [int(self._fin[s])]
        for c, m in zip(each, sizes):
            cum.append(cum[-1] + c * m)
        got = (cum, targets, each, firsts, cum[0] == 0 and sizes == [1])
        if not self.budgeted:
            self._cache[s] = got
        return got

    def draw(self, rng) -> list[int]:
        """One accepted label sequence (ValueError when there is none to draw)."""
        if self.total == 0:
            raise UsageError("the acceptor has no sequence to draw within the length bound")
        s, out = self.g.start, []
        for k in range(self.max_len, -1, -1):
            cum, targets, each, firsts, forced = self._weights(s, k)
            r = 0 if forced or cum[-1] == 1 else _below(rng, cum[-1])
            if r < cum[0]:
                return out
            j = bisect_right(cum, r) - 1
            out.append(int(self._label[firsts[j] + (r - cum[j]) // each[j]]))
            s = targets[j]
        raise AssertionError("a draw passed its length bound")  # the counts make this impossible


# ---- the strings a token acceptor spells --------------------------------------------------------
def spelling(fst: pynini.Fst, lexicon: pynini.Fst) -> pynini.Fst:
    """What a token acceptor spells, reversed: reverse(A) o invert(reverse(T)), trimmed, maps A's
    token sequences read backwards (input, id + 1) to the strings they spell read backwards
    (output, b + 1). ``lexicon``: the tokenizer's T (``lexicon.lexicon(model)``: bytes -> tokens).
    Reversed, T names each token on its first arc, so the composition follows only the tokens of A
    (T o A would walk T's whole trie, on epsilon outputs, from every state of A)."""
    tokens_first = pynini.reverse(lexicon).invert().arcsort("ilabel")
    return pynini.compose(pynini.reverse(fst).arcsort("olabel"), tokens_first).connect()


def surface(spelled: pynini.Fst, max_states: int = 1_000_000) -> pynini.Fst:
    """The minimal byte acceptor of the strings of :func:`spelling`'s transducer (LimitError past
    ``max_states``: its states, counted before determinizing, or the DFA's)."""
    if spelled.num_states() > max_states:
        raise LimitError("the surface automaton (strings)", "max_states", max_states, spelled.num_states(),
                         remedy="simplify")
    f = pynini.reverse(pynini.project(spelled, "output")).rmepsilon()
    d = pynini.determinize(f, nstate=max_states + 1)
    if d.num_states() > max_states:
        raise LimitError("the surface automaton (strings)", "max_states", max_states, remedy="simplify")
    return d.minimize()


def spellings(spelled: pynini.Fst, labels: list[int]) -> pynini.Fst:
    """The deterministic acceptor of the token sequences that spell one string (byte labels)."""
    f = pynini.compose(spelled, linear(labels[::-1])).project("input")
    return pynini.determinize(pynini.reverse(f).rmepsilon())


@dataclass
class Tally:
    """The counts of ``tokfst count``: token sequences by length in tokens, strings by length in bytes."""

    max_len: int | None
    sequences: list[int]
    strings: list[int]
    longest_sequence: int | None  # None: infinite (or, ``cut``, not known)
    longest_string: int | None
    stopped: bool = False  # a pushdown language whose exploration stopped at max_len tokens
    unknown: bool = False  # ... and closed no cycle there: finite? longest? not known

    def to_json(self) -> dict:
        def part(counts: list[int], top: int | None) -> dict:
            return {"by_length": counts, "total": sum(counts), "finite": None if self.unknown else top is not None,
                    "longest": top}

        return {"max_len": self.max_len, "sequences": part(self.sequences, self.longest_sequence),
                "strings": part(self.strings, self.longest_string), "cut_at_max_len": self.stopped}


def acceptor(decoder, max_arcs: int = MAX_ARCS, max_len: int | None = None) -> tuple[pynini.Fst, bool]:
    """Any decoder's language as an acceptor: :func:`explore`'s (the whole; False), or for a pushdown
    grammar, whose states are unbounded, its states within ``max_len`` tokens (:func:`explore_within`;
    True where that cut it): every sequence of at most ``max_len`` tokens, and so every string of at
    most ``max_len`` bytes, is on it."""
    from tokfst_cli.promotion.stack import PushdownDecoder  # deferred: start-up: only this path needs it

    if not isinstance(decoder, PushdownDecoder):
        return explore(decoder, max_arcs), False
    if max_len is None:
        raise InputError(f"{decoder.pdt.pattern} is a pushdown automaton: its decoder states are unbounded",
                         "bound the length (max_len): the states within that many tokens are explored",
                         hint="pushdown-max-len")
    return explore_within(decoder, max_len, max_arcs)


def tally_decoder(decoder, lexicon: pynini.Fst, max_len: int | None = None, max_arcs: int = MAX_ARCS,
                  max_states: int = 1_000_000) -> Tally:
    """:func:`tally` of :func:`acceptor`'s acceptor: exact up to ``max_len``; where a pushdown
    grammar's exploration was cut and closed no cycle, whether the language is finite and its
    longest member are not known."""
    fst, cut = acceptor(decoder, max_arcs, max_len)
    got = tally(fst, lexicon, max_len, max_states)
    got.stopped = cut
    if cut and got.longest_sequence is not None:  # an acyclic part of an unknown whole (a cycle: infinite)
        got.unknown, got.longest_sequence, got.longest_string = True, None, None
    return got


def tally(fst: pynini.Fst, lexicon: pynini.Fst, max_len: int | None = None, max_states: int = 1_000_000) -> Tally:
    """Exact counts of a token acceptor's sequences and of the strings they spell (:func:`surface`),
    by length up to ``max_len`` (None: the longest of a finite language; InputError if infinite)."""
    top = longest(fst)
    if top is None and max_len is None:
        raise InputError("the artifact's language is infinite (token sequences of every length)",
                         "bound the length (max_len)", hint="count-infinite")
    strings = surface(spelling(fst, lexicon), max_states)
    top_string = longest(strings)
    seqs = by_length(fst, max(top, 0) if max_len is None else max_len)
    return Tally(max_len, seqs, by_length(strings, max(top_string, 0) if max_len is None else max_len),
                 None if top is None else max(top, 0), None if top_string is None else max(top_string, 0))


# ---- decoders as acceptors ----------------------------------------------------------------------
def explore(decoder, max_arcs: int = MAX_ARCS) -> pynini.Fst:
    """The states reachable through ``decoder`` (breadth first) as an acceptor (labels id + 1).

    A materialized ``.fst`` is returned as it is and an index read through ``arcs(state)``, in
    bulk; a factorized form, or one with terminal labels (each becomes its tokens' arcs), is
    expanded through ``mask``/``advance`` (its states are hashable), at most ``max_arcs`` arcs
    (else LimitError)."""
    from tokfst_cli.constraint import FstDecoder, IndexDecoder  # deferred: start-up: only this path needs it
    from tokfst_cli.filters.length import CountedDecoder  # deferred: start-up: only this path needs it
    from tokfst_cli.promotion.stack import PushdownDecoder  # deferred: start-up: only this path needs it

    if isinstance(decoder, PushdownDecoder):
        raise InputError(f"{decoder.pdt.pattern} is a pushdown automaton: its token sequences are not a finite "
                         "automaton", "sample it (tokfst sample), or count or inspect it up to a length (max_len)",
                         hint="grammar-pushdown")
    if getattr(decoder, "terminals", None):
        pass
    elif isinstance(decoder, FstDecoder):
        return decoder.fst
    elif isinstance(decoder, IndexDecoder):
        return _explore_table(decoder)
    elif isinstance(decoder, CountedDecoder):  # S x F_N: may be N times S
        return _explore_table(decoder, max_arcs)
    return _expand(decoder, max_arcs, None)[0]


def explore_within(decoder, max_len: int, max_arcs: int = MAX_ARCS) -> tuple[pynini.Fst, bool]:
    """The states of ``decoder`` within ``max_len`` tokens of the start (breadth first) as an
    acceptor, and whether a state at that depth still had tokens to offer (the exploration was cut).
    Breadth first, a state is first met at its least depth, so each state on a path of at most
    ``max_len`` tokens is expanded: the acceptor holds every such path, and only paths of the
    decoder (LimitError past ``max_arcs`` arcs)."""
    return _expand(decoder, max_arcs, max_len)


def _expand(decoder, max_arcs: int, max_len: int | None) -> tuple[pynini.Fst, bool]:
    """``mask``/``advance`` breadth first from the start (states hashable), to ``max_len`` tokens."""
    start = decoder.initial()
    number, order, depth = {start: 0}, [start], [0]
    src, lab, dst = [], [], []
    cut = False
    for i, s in enumerate(order):  # the list grows
        toks = np.flatnonzero(decoder.mask(s)).tolist()
        if max_len is not None and depth[i] >= max_len:
            cut = cut or bool(toks)
            continue
        if len(src) + len(toks) > max_arcs:
            raise LimitError("the artifact's expansion", "max_arcs", max_arcs, remedy=None)
        for t in toks:
            nx = decoder.advance(s, t)
            j = number.get(nx)
            if j is None:
                j = number[nx] = len(order)
                order.append(nx)
                depth.append(depth[i] + 1)
            src.append(i)
            lab.append(t + 1)
            dst.append(j)
    final = np.array([bool(decoder.is_final(s)) for s in order])
    il = np.asarray(lab, np.int64)
    return fst_from_arrays(len(order), 0, final, np.asarray(src, np.int64), il, il, np.asarray(dst, np.int64)), cut


def _explore_table(decoder, max_arcs: int | None = None) -> pynini.Fst:
    """An index's reachable states, read a state's arcs at a time (at most ``max_arcs`` arcs)."""
    start = int(decoder.initial())
    order, seen = [start], {start}
    tokens, nexts = [], []
    arcs = 0
    for s in order:  # the list grows
        tok, nxt = decoder.arcs(s)
        arcs += len(tok)
        if max_arcs is not None and arcs > max_arcs:
            raise LimitError("the artifact's expansion", "max_arcs", max_arcs, remedy=None)
        tokens.append(np.asarray(tok, np.int64))
        nexts.append(np.asarray(nxt, np.int64))
        for t in unique(nxt).tolist():
            if t not in seen:
                seen.add(t)
                order.append(t)
    ids = np.asarray(order, np.int64)
    sort = np.argsort(ids)
    src = np.repeat(np.arange(len(order), dtype=np.int64), [len(x) for x in tokens])
    labels = np.concatenate(tokens) + 1
    final = np.array([bool(decoder.is_final(s)) for s in order])
    dst = sort[np.searchsorted(ids[sort], np.concatenate(nexts))]  # state ids may be sparse (CountedDecoder)
    return fst_from_arrays(len(order), 0, final, src, labels, labels, dst)
