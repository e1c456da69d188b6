"""The strings an artifact spells, and the token paths that spell one string (``sample --uniform strings``).

The strings of a token acceptor are, in general, the byte language of A o T projected and
determinized (:func:`counting.surface` of :func:`counting.spelling`): exact, but the subsets of
that determinization hold every token a string's last bytes may belong to, and on free text
(a JSON string's contents: tens of thousands of tokens at one state) it costs seconds and
gigabytes. Most artifacts need none of it (:func:`single_bytes_suffice`): where every token arc
q -t-> q' is also a path of single-byte tokens from q to q' (an agnostic automaton over a
tokenizer whose tokens spell every byte: GPT-2's byte-level BPE, Llama's byte fallback), a
string is spelled iff its single-byte tokenization is accepted, so the strings' automaton is
the artifact's single-byte-token part, relabelled with bytes (:func:`byte_surface`: a walk of
the decoder over those tokens, a few hundred states, then pynini's determinize and minimize).
Artifacts with terminal labels and lazy ones are agnostic by construction; materialized ones
are checked arc by arc (a canonical or token-filtered automaton fails the check, and takes the
general way).

:func:`draw_spelling` draws one of the decoder's token paths for a string uniformly: a lattice of
(position, state) nodes, joined by the tokens whose surface T reads at that position and the
state allows (``mask``/``advance``: no expansion of the artifact), counted from the end.
"""

from __future__ import annotations

import numpy as np
import pynini

from tokfst_cli.analysis.counting import _below, explore
from tokfst_cli.automata.arrays import fst_arrays, fst_from_arrays, unique
from tokfst_cli.errors import InternalError, LimitError
from tokfst_cli.support.progress import report

_WIDTH = 512  # a trie key: node * _WIDTH + label (labels are bytes + 1, and T's few markers)


class Spelling:
    """T's trie (``lexicon``: bytes -> tokens, a token named on its last byte) read for one text at a
    time, its single-byte tokens, and the tokens' ``surfaces`` (the model's, from which T is built)."""

    def __init__(self, lexicon: pynini.Fst, surfaces: list[bytes | None]):
        t = fst_arrays(lexicon)
        self.model_surfaces, self._matrix, self._lengths = surfaces, None, None
        inner = t.olabel == 0
        self.root = t.start
        self.child = dict(zip((t.src[inner] * _WIDTH + t.ilabel[inner]).tolist(), t.nextstate[inner].tolist()))
        self.ends: dict[int, list[int]] = {}
        for key, token in zip((t.src[~inner] * _WIDTH + t.ilabel[~inner]).tolist(), (t.olabel[~inner] - 1).tolist()):
            self.ends.setdefault(key, []).append(token)
        single = ~inner & (t.src == t.start)
        self.single_tokens, self.single_labels = t.olabel[single] - 1, t.ilabel[single]
        self.all_bytes = len(unique(self.single_labels[self.single_labels <= 256])) == 256
        tokens = t.olabel[~inner] - 1
        self.unique_spellings = len(unique(tokens)) == len(tokens)  # one surface per token

    def tokens_at(self, labels: list[int], i: int) -> list[tuple[int, int]]:
        """(token, end) for each token whose surface is ``labels[i:end]``."""
        node, out = self.root, []
        for k in range(i, len(labels)):
            key = node * _WIDTH + labels[k]
            out.extend((token, k + 1) for token in self.ends.get(key, ()))
            node = self.child.get(key)
            if node is None:
                break
        return out

    def surfaces(self, tokens: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
        """(labels, lengths): each token's surface (``model.surfaces``, what T spells) as a row of
        labels padded with 0; None if one has none (an added token)."""
        if self._matrix is None:
            spelled = [s or b"" for s in self.model_surfaces]
            lengths = np.fromiter(map(len, spelled), np.int64, len(spelled))
            flat = np.frombuffer(b"".join(spelled), np.uint8).astype(np.uint16) + 1
            matrix = np.zeros((len(spelled), int(lengths.max(initial=0))), np.uint16)
            starts = np.cumsum(lengths) - lengths
            rows = np.repeat(np.arange(len(spelled)), lengths)
            matrix[rows, np.arange(len(flat)) - np.repeat(starts, lengths)] = flat
            self._matrix, self._lengths = matrix, lengths
        if len(tokens) and (tokens.min() < 0 or tokens.max() >= len(self._lengths) or
                            (self._lengths[tokens] == 0).any()):
            return None
        return self._matrix[tokens].astype(np.int64), self._lengths[tokens]


def single_bytes_suffice(decoder, spelling: Spelling, max_arcs: int) -> bool:
    """Is every string the decoder spells also spelled by single-byte tokens it accepts? (module docstring)"""
    from tokfst_cli.constraint import FstDecoder, IndexDecoder  # deferred: start-up: only this path needs it
    from tokfst_cli.filters.length import CountedDecoder  # deferred: start-up: only this path needs it
    from tokfst_cli.promotion.lazy import LazyDecoder  # deferred: start-up: only this path needs it

    if not spelling.all_bytes or not spelling.unique_spellings:
        return False
    if not isinstance(decoder, CountedDecoder) and (getattr(decoder, "terminals", None)
                                                    or isinstance(decoder, LazyDecoder)):
        return True  # agnostic by construction (a token budget is not: checked below, arc by arc)
    if not isinstance(decoder, (FstDecoder, IndexDecoder, CountedDecoder)):
        return False
    a = fst_arrays(explore(decoder, max_arcs))
    single = np.zeros(int(max(a.ilabel.max(initial=0), spelling.single_tokens.max(initial=0) + 1)) + 1, np.int64)
    single[spelling.single_tokens + 1] = spelling.single_labels
    one = single[a.ilabel] > 0
    keys = a.src[one] * _WIDTH + single[a.ilabel[one]]
    order = np.argsort(keys, kind="stable")
    keys, dst = keys[order], a.nextstate[one][order]
    if len(keys) > 1 and ((keys[1:] == keys[:-1]) & (dst[1:] != dst[:-1])).any():
        return False  # two single-byte tokens of one byte to two states: not a function to walk
    if not len(keys):
        return not len(a.ilabel)
    got = spelling.surfaces(a.ilabel - 1)
    if got is None:
        return False
    labels, lengths = got
    cur = a.src.copy()
    for k in range(labels.shape[1]):
        live = (lengths > k) & (cur >= 0)
        at = np.searchsorted(keys, cur[live] * _WIDTH + labels[live, k])
        hit = (at < len(keys)) & (keys[np.minimum(at, len(keys) - 1)] == cur[live] * _WIDTH + labels[live, k])
        cur[live] = np.where(hit, dst[np.minimum(at, len(keys) - 1)], -1)
    return bool((cur == a.nextstate).all())


def byte_surface(decoder, spelling: Spelling, max_states: int) -> pynini.Fst:
    """The minimal byte acceptor (labels byte + 1) of the decoder's single-byte-token paths: its
    states walked from the initial one (LimitError past ``max_states``), then determinized and
    minimized."""
    start = decoder.initial()
    number, order = {start: 0}, [start]
    src, lab, dst = [], [], []
    for i, s in enumerate(order):  # the list grows
        allowed = np.asarray(decoder.mask(s))[spelling.single_tokens]
        for token, label in zip(spelling.single_tokens[allowed].tolist(), spelling.single_labels[allowed].tolist()):
            nx = decoder.advance(s, token)
            j = number.get(nx)
            if j is None:
                if len(order) >= max_states:
                    raise LimitError("the surface automaton (strings)", "max_states", max_states, remedy="simplify")
                j = number[nx] = len(order)
                order.append(nx)
            src.append(i)
            lab.append(label)
            dst.append(j)
        if i % 256 == 0:
            report(len(order))
    final = np.array([bool(decoder.is_final(s)) for s in order])
    il = np.asarray(lab, np.int64)
    nfa = fst_from_arrays(len(order), 0, final, np.asarray(src, np.int64), il, il, np.asarray(dst, np.int64))
    d = pynini.determinize(nfa, nstate=max_states + 1)
    if d.num_states() > max_states:
        raise LimitError("the surface automaton (strings)", "max_states", max_states, remedy="simplify")
    return d.minimize()


def draw_spelling(decoder, spelling: Spelling, labels: list[int], rng) -> list[int]:
    """One of the decoder's token sequences spelling ``labels`` (bytes + 1), drawn uniformly."""
    n, start = len(labels), (0, decoder.initial())
    edges: dict[tuple, list[tuple[int, tuple]]] = {}
    frontier = [start]
    while frontier:  # the lattice's nodes reachable from the start, by position
        node = frontier.pop()
        if node in edges:
            continue
        i, s = node
        mask = np.asarray(decoder.mask(s)) if i < n else None
        out = edges[node] = [(token, (end, decoder.advance(s, token))) for token, end in
                             (spelling.tokens_at(labels, i) if i < n else ()) if mask[token]]
        frontier.extend(nx for _, nx in out)
    count: dict[tuple, int] = {}
    for node in sorted(edges, key=lambda x: -x[0]):  # later positions first: their counts are known
        count[node] = int(node[0] == n and bool(decoder.is_final(node[1]))) + sum(count[nx] for _, nx in edges[node])
    if count[start] == 0:
        raise InternalError("a string of the artifact's surface has no token path in it")
    out, node = [], start
    while True:
        r = _below(rng, count[node])
        if node[0] == n and decoder.is_final(node[1]):
            if r == 0:
                return out
            r -= 1
        for token, nx in edges[node]:
            if r < count[nx]:
                out.append(token)
                node = nx
                break
            r -= count[nx]
