"""Token-level filters on stage S's token acceptor, before stage C (Pitfalls 2025 Sec. 4.3-4.5).

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
  arcs, trimmed (:func:`without`, numpy on S's arrays instead of OpenFst's product);
* else, where F has few states, or F reaches few states on S's labels (``no_byte_tokens`` on
  Llama-2's S_M: the three bytes of the leading ▁), the product is made over the arrays
  (:mod:`.product`), and by OpenFst's ``intersect`` otherwise;
* the result is minimized (once, after all filters) unless it is known minimal.

Every filter here *keeps texts*: from F's start state, every text has an allowed spelling (a
banned byte token's character has a literal; [ ][t] fuses into [ t]). On an *agnostic* S (every
tokenization of each text: stage S as promoted, whose minimal states have distinct text
languages) that makes the shortcuts exact without OpenFst: banning labels at the start state
only keeps every state of S, accessible and co-accessible (a path through it, re-spelled), and
distinct: neither trim nor minimization; a product is minimal where :func:`.product.minimal`
proves it. On any other acceptor (a canonical one, filtered after C) the result is trimmed and
minimized.

``fuse_spaces`` (Sec. 4.5) is here; ``literal_ascii`` and ``no_byte_tokens`` (Sec. 4.3) are in
:mod:`.bytes`, ``max_tokens`` (App. B's Gamma^k) in :mod:`.length`.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pynini

from tokfst_cli.automata.arrays import FstArrays, fst_arrays, fst_from, fst_from_arrays, unique
from tokfst_cli.automata.fst_io import cached_fst
from tokfst_cli.automata.graph import kept_states, trim_mask
from tokfst_cli.errors import EmptyLanguageError
from tokfst_cli.filters import product
from tokfst_cli.filters.product import table
from tokfst_cli.tokenizer.model import TokenizerModel

CACHED_FILTERS = 16  # filter DFAs kept per process
VERSION = 1  # of the filter constructions (on-disk cache keys)


@dataclass(frozen=True)
class TokenFilter:
    """A filter DFA and what the shortcuts read off its start state (one entry per label 0..|V|+1)."""

    fst: pynini.Fst
    loop: np.ndarray  # start --label--> start
    banned: np.ndarray  # no arc with the label leaves the start state
    table: np.ndarray | None = None  # F's transitions for :mod:`.product` (None: too many states)
    arcs: FstArrays | None = None  # F's arcs, for a table of the states S's labels reach (many-state F)
    sigma: bool = False  # every label (tokens and the boundary) loops on the start state: F = Sigma*
    sigma_tokens: bool = False  # every token label does (F = Sigma* where there is no boundary label)


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


def describe(f: pynini.Fst, labels: int) -> TokenFilter:
    """F with its start state's loops and missing labels, and its transition table."""
    a = fst_arrays(f)
    start = a.src == a.start
    loop = np.zeros(labels, bool)
    loop[a.ilabel[start & (a.nextstate == a.start)]] = True
    banned = np.ones(labels, bool)
    banned[a.ilabel[start]] = False
    delta = table(a, labels)
    return TokenFilter(f, loop, banned, delta, None if delta is not None else a, bool(loop[1:].all()),
                       bool(loop[1:-1].all()))


_CACHE: OrderedDict[tuple, TokenFilter] = OrderedDict()


def cached(model: TokenizerModel, name: str, marker: int | None,
           build: Callable[[TokenizerModel, int | None], pynini.Fst]) -> TokenFilter:
    """F = ``build(model, marker)``, kept per (fingerprint, filter, marker) for this process and in
    the on-disk cache (``artifacts.cached_fst``)."""
    if not model.fingerprint:
        return describe(build(model, marker), model.vocab_size + 2)
    key = (model.fingerprint, model.vocab_size, name, marker)
    if key in _CACHE:
        _CACHE.move_to_end(key)
        return _CACHE[key]
    f = cached_fst(f"filter-{name}-v{VERSION}-{model.fingerprint}-{marker or 0}", lambda: build(model, marker))
    out = _CACHE[key] = describe(f, model.vocab_size + 2)
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


def restrict(model: TokenizerModel, fst: pynini.Fst, steps: list[tuple[str, Callable]], marker: int | None,
             names: list[str], arrays: FstArrays | None = None,
             agnostic: bool = False) -> tuple[pynini.Fst, bool, FstArrays | None]:
    """S ∩ F for each (name, builder) of ``steps`` with the shortcuts of the module docstring:
    (the result, whether it needs minimizing, its arcs if known). ``arrays``: S's arcs, if read
    already; ``agnostic``: S is stage S's agnostic automaton, as promoted."""
    used, dirty = None, False  # the labels S uses (sorted)
    plain = agnostic  # still S's own states, each with its own text language
    for name, build in steps:
        f = cached(model, name, marker, build)
        if f.sigma or (marker is None and f.sigma_tokens):
            continue  # F is Sigma*: nothing to read
        if used is None:
            arrays = fst_arrays(fst) if arrays is None else arrays
            used = _labels(arrays.ilabel, len(f.loop))
        if f.loop[used].all():
            continue
        if bool((f.loop[used] | f.banned[used]).all()):  # F never leaves its start state on S's labels
            fst, arrays = without(fst, f.banned, arrays, trim=not plain)
            dirty |= not plain
            used = used[~f.banned[used]] if plain else None
        else:
            delta = f.table if f.table is not None or not plain else product.table(f.arcs, len(f.loop), used)
            made = product.intersect(arrays, delta) if plain and delta is not None else None
            if made is None:
                fst, arrays, dirty = pynini.intersect(fst, f.fst), None, True
            else:
                arrays, fstate = made
                fst = fst_from(arrays).set_input_symbols(fst.input_symbols()).set_output_symbols(fst.output_symbols())
                dirty |= not product.minimal(arrays, fstate)
            used, plain = None, False
        if empty(fst):
            raise no_sequence(names)
    return fst, dirty, None if dirty else arrays


def _labels(ilabel: np.ndarray, size: int) -> np.ndarray:
    """The distinct labels (sorted, < ``size``): a sort for few arcs, a scatter over the labels else."""
    if len(ilabel) * 8 < size:
        return unique(ilabel)
    seen = np.zeros(size, bool)
    seen[ilabel] = True
    return np.flatnonzero(seen)




def without(fst: pynini.Fst, banned: np.ndarray, arrays: FstArrays | None = None,
            trim: bool = True) -> tuple[pynini.Fst, FstArrays | None]:
    """S ∩ F for an F that stays in its start state on S's labels: S without the arcs whose label
    is ``banned``, trimmed (what ``pynini.intersect`` gives, by one numpy pass over the arcs;
    ``arrays``: S's, if read already), and its arcs, so that a decoder need not read them again
    (None where OpenFst trimmed). Unweighted, as S is. ``trim=False``: known trim already (an
    agnostic S: every state keeps a path through it, re-spelled; module docstring)."""
    a = fst_arrays(fst) if arrays is None else arrays
    keep = ~banned[a.ilabel]
    a = a._replace(src=a.src[keep], ilabel=a.ilabel[keep], olabel=a.olabel[keep], nextstate=a.nextstate[keep])
    trimmed = trimmed_arrays(a) if trim else a
    out = fst_from(trimmed) if trimmed is not None else fst_from(a).connect()
    return out.set_input_symbols(fst.input_symbols()).set_output_symbols(fst.output_symbols()), trimmed


def trimmed_arrays(a: FstArrays) -> FstArrays | None:
    """The accessible and coaccessible part of an unweighted automaton's arcs, states renumbered
    in their order (as OpenFst's ``connect``); no states for an empty language. None past
    TRIM_EDGES distinct state-to-state edges, where OpenFst's ``connect`` is the cheaper."""
    keep = trim_mask(a)
    return None if keep is None else kept_states(a, keep)






