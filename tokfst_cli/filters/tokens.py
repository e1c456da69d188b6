"""Token-level filters on stage S's token acceptor, before stage C (seed 001 Sec. 4.3-4.5).

A filter F is a DFA over token labels (token id + 1) with explicit arcs (pynini 2.1.7 has no
sigma matcher), written in bulk (``artifacts.fst_from_arrays``), minimized, ilabel-sorted and
cached per (tokenizer fingerprint, filter, boundary label), in the process and on disk. Every
state is final. At the pipeline level S_M also carries the pre-token boundary label
(``lexicon.marker_label``): F gives it a self-loop at every state, except where a boundary resets
the filter (``fuse_spaces``).

S ∩ F (``pynini.intersect``; both deterministic, so the product is) costs a pass over S's arcs,
so the labels S uses are read first (``artifacts.fst_arrays``):

* all of them loop on F's start state: S ∩ F = S, returned as is;
* all of them loop on the start state or have no arc there: the product is S without the banned
  arcs, trimmed (:func:`without`, numpy on S's arrays instead of OpenFst's product); if the
  filter ``keeps_states``, for the agnostic S (every tokenization of each text; the banned
  tokens' texts all have allowed spellings, so every state keeps its distinct text language)
  these are S's minimal states: no minimization;
* else the product is minimized (once, after all filters).

``fuse_spaces`` (Sec. 4.5) is here; ``literal_ascii`` and ``no_byte_tokens`` (Sec. 4.3) are in
:mod:`.bytes`, ``max_tokens`` (App. B's Gamma^k) in :mod:`.length`.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pynini

from ..artifacts import FstArrays, cached_fst, fst_arrays, fst_from, fst_from_arrays
from ..errors import EmptyLanguageError
from ..tokenizer import TokenizerModel

CACHED_FILTERS = 16  # filter DFAs kept per process
VERSION = 1  # of the filter constructions (on-disk cache keys)


@dataclass(frozen=True)
class TokenFilter:
    """A filter DFA and what the shortcuts read off its start state (one entry per label 0..|V|+1)."""

    fst: pynini.Fst
    loop: np.ndarray  # start --label--> start
    banned: np.ndarray  # no arc with the label leaves the start state
    keeps_states: bool = False  # see the module docstring


def from_arcs(num_states: int, src: np.ndarray, lab: np.ndarray, dst: np.ndarray, marker: int | None,
              marker_to: int | None = None) -> pynini.Fst:
    """The minimal F from its token arcs (state 0 = start, every state final), with the boundary
    label ``marker`` looping at every state, or going to state ``marker_to``; ilabel-sorted."""
    if marker is not None:
        states = np.arange(num_states, dtype=np.int64)
        src, lab = np.r_[src, states], np.r_[lab, np.full(num_states, marker, np.int64)]
        dst = np.r_[dst, states if marker_to is None else np.full(num_states, marker_to, np.int64)]
    f = fst_from_arrays(num_states, 0, np.ones(num_states, bool), src, lab, lab, dst)
    return f.minimize().arcsort("ilabel")


def describe(f: pynini.Fst, labels: int, keeps_states: bool) -> TokenFilter:
    """F with its start state's loops and missing labels."""
    a = fst_arrays(f)
    start = a.src == a.start
    loop = np.zeros(labels, bool)
    loop[a.ilabel[start & (a.nextstate == a.start)]] = True
    banned = np.ones(labels, bool)
    banned[a.ilabel[start]] = False
    return TokenFilter(f, loop, banned, keeps_states)


_CACHE: OrderedDict[tuple, TokenFilter] = OrderedDict()


def cached(model: TokenizerModel, name: str, marker: int | None,
           build: Callable[[TokenizerModel, int | None], pynini.Fst], keeps_states: bool) -> TokenFilter:
    """F = ``build(model, marker)``, kept per (fingerprint, filter, marker) for this process and in
    the on-disk cache (``artifacts.cached_fst``)."""
    if not model.fingerprint:
        return describe(build(model, marker), model.vocab_size + 2, keeps_states)
    key = (model.fingerprint, model.vocab_size, name, marker)
    if key in _CACHE:
        _CACHE.move_to_end(key)
        return _CACHE[key]
    f = cached_fst(f"filter-{name}-v{VERSION}-{model.fingerprint}-{marker or 0}", lambda: build(model, marker))
    out = _CACHE[key] = describe(f, model.vocab_size + 2, keeps_states)
    while len(_CACHE) > CACHED_FILTERS:
        _CACHE.popitem(last=False)
    return out


def space_ids(model: TokenizerModel) -> list[int]:
    """The isolated-space tokens [ ]: surface exactly one space (GPT-2's "Ġ", Llama-2's "▁" and <0x20>)."""
    return [i for i, s in model.lexicon_items() if s == b" "]


def fuse_spaces(model: TokenizerModel, marker: int | None) -> pynini.Fst:
    """Sec. 4.5: no [ ][t] where a token spells " " + surface(t). State 1 = after a [ ]; a
    pre-token boundary resets to state 0 (the fused token cannot span it)."""
    n = model.vocab_size
    surfaces = {s for _, s in model.lexicon_items()}
    space = np.zeros(n, bool)
    space[space_ids(model)] = True
    fusable = np.zeros(n, bool)
    fusable[[i for i, s in model.lexicon_items() if b" " + s in surfaces]] = True
    ids = np.arange(n, dtype=np.int64)
    keep = ids[~fusable]
    src = np.r_[np.zeros(n, np.int64), np.ones(len(keep), np.int64)]
    return from_arcs(2, src, np.r_[ids, keep] + 1, np.r_[space, space[keep]].astype(np.int64), marker, marker_to=0)


def empty(fst: pynini.Fst) -> bool:
    return fst.start() == pynini.NO_STATE_ID or fst.num_states() == 0


def no_sequence(names: list[str]) -> EmptyLanguageError:
    return EmptyLanguageError(f"no token sequence of the regex's language passes the token filters "
                              f"({', '.join(names)})", "widen the regex or drop a filter",
                              hint="filters-empty", names=", ".join(names))


def restrict(model: TokenizerModel, fst: pynini.Fst, steps: list[tuple[str, Callable, bool]], marker: int | None,
             names: list[str], arrays: FstArrays | None = None) -> tuple[pynini.Fst, bool, FstArrays | None]:
    """S ∩ F for each (name, builder, keeps_states) of ``steps`` with the shortcuts of the module
    docstring: (the result, whether it needs minimizing, its arcs if known). ``arrays``: S's
    arcs, if read already."""
    used, dirty = None, False
    for name, build, keeps_states in steps:
        f = cached(model, name, marker, build, keeps_states)
        if f.loop[1:].all() or (marker is None and f.loop[1:-1].all()):
            continue  # F is Sigma*: nothing to read
        if used is None:
            arrays = fst_arrays(fst) if arrays is None else arrays
            used = np.zeros(len(f.loop), bool)
            used[arrays.ilabel] = True
        if f.loop[used].all():
            continue
        one_state = bool((f.loop | f.banned)[used].all())  # F never leaves its start state on S's labels
        fst, arrays = without(fst, f.banned, arrays) if one_state else (pynini.intersect(fst, f.fst), None)
        if empty(fst):
            raise no_sequence(names)
        if f.keeps_states and not dirty and one_state:
            used &= ~f.banned
        else:
            used, dirty = None, True
    return fst, dirty, arrays


TRIM_EDGES = 1 << 16  # up to this many distinct state-to-state edges, :func:`trim` searches in Python


def without(fst: pynini.Fst, banned: np.ndarray,
            arrays: FstArrays | None = None) -> tuple[pynini.Fst, FstArrays | None]:
    """S ∩ F for an F that stays in its start state on S's labels: S without the arcs whose label
    is ``banned``, trimmed (what ``pynini.intersect`` gives, by one numpy pass over the arcs;
    ``arrays``: S's, if read already), and its arcs, so that a decoder need not read them again
    (None where OpenFst trimmed). Unweighted, as S is."""
    a = fst_arrays(fst) if arrays is None else arrays
    keep = ~banned[a.ilabel]
    a = a._replace(src=a.src[keep], ilabel=a.ilabel[keep], olabel=a.olabel[keep], nextstate=a.nextstate[keep])
    trimmed = trim(a)
    out = fst_from(trimmed) if trimmed is not None else fst_from(a).connect()
    return out.set_input_symbols(fst.input_symbols()).set_output_symbols(fst.output_symbols()), trimmed


def trim(a: FstArrays) -> FstArrays | None:
    """The accessible and coaccessible part of an unweighted automaton's arcs, states renumbered
    in their order (as OpenFst's ``connect``); no states for an empty language. None past
    TRIM_EDGES distinct state-to-state edges, where OpenFst's ``connect`` is the cheaper."""
    from .length import distinct_edges

    n = len(a.final)
    if n == 0 or a.start < 0:
        return a
    s, d = distinct_edges(np.asarray(a.src, np.int64), np.asarray(a.nextstate, np.int64), n)
    if len(s) > TRIM_EDGES:
        return None
    keep = _reached(n, s, d, [a.start]) & _reached(n, d, s, np.flatnonzero(a.final).tolist())
    if keep.all():
        return a
    if not keep[a.start]:
        none = np.zeros(0, np.int64)
        return FstArrays(-1, np.zeros(0, bool), none, none, none, none)
    new = np.cumsum(keep) - 1
    arc = keep[a.src] & keep[a.nextstate]
    return FstArrays(int(new[a.start]), a.final[keep], new[a.src[arc]], a.ilabel[arc], a.olabel[arc],
                     new[a.nextstate[arc]])


def _reached(n: int, src: np.ndarray, dst: np.ndarray, seeds: list[int]) -> np.ndarray:
    """The states reached from ``seeds`` over the edges src -> dst (depth first)."""
    succ: list[list[int]] = [[] for _ in range(n)]
    for p, q in zip(src.tolist(), dst.tolist()):
        succ[p].append(q)
    seen = [False] * n
    for q in seeds:
        seen[q] = True
    todo = list(seeds)
    while todo:
        for q in succ[todo.pop()]:
            if not seen[q]:
                seen[q] = True
                todo.append(q)
    return np.array(seen, bool)
