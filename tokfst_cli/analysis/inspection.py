"""Structure and skip rates of token automata: ``tokfst inspect`` (Pitfalls 2025 Sec. 3.3.1, Table 2).

:func:`structure`: states, arcs, finals and coalescence (the structured-generation practical; ``index.coalesce``): the
distinct masks (allowed-token sets), the states sharing a mask with another state, the
single-token states (one allowed token: the model need not be called there) and the final
states with no token.

:func:`inspect_regex` measures Pitfalls 2025 Table 2's skip rate on a regex (App. C: the Pokedex
object, ``catalogue.POKEDEX``) for two automata built in process (BPE tokenizers):

* **canonical**: ``pipeline.build(canonical=True, level="pipeline")``: exactly what
  ``encode(text, add_special_tokens=False)`` produces (A -> P -> S -> C);
* **agnostic**: the tokenization-agnostic automaton *with the tokenizer's preprocessing*
  (A -> P -> S without C): S_M = MIN(PROJ(Y o T_M)) over the pre-tokenized text Y, its
  pre-token boundary label erased (relabelled to epsilon), then rmepsilon, determinize and
  minimize. It accepts every tokenization of every pre-token of the text as the model sees it
  (Llama-2: with the "▁" P prepends), so it holds ``encode``'s output as the canonical one does.

Texts are drawn uniformly from the regex's byte language (``counting.UniformDraw`` over the
minimal byte DFA of ``pipeline.accept``; at most ``max_len`` bytes, needed for an infinite
language); HF's ``encode_batch`` tokenizes them and each id sequence is walked through both
automata. A decoding step is choosing the next token or ending: a sequence of n tokens takes
n + 1 steps, the last one ending. A step has as many options as tokens allowed in its state,
plus one if the state is final; it is **skippable** when it has exactly one option. The skip
rate is skippable steps / steps, over all samples. The walk runs all samples in step with
numpy over the automaton's sorted arcs (``by_label``); a factorized canonical automaton is
walked through its decoder's masks. Every ``encode`` must be accepted by both automata: a
rejection is a bug (AssertionError). **Non-canonical first tokens**: A0 \\ C0, the tokens the
agnostic automaton allows first that start no canonical tokenization, over |A0|.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np
import pynini

from tokfst_cli import pipeline
from tokfst_cli.analysis import counting
from tokfst_cli.automata.arrays import fst_arrays
from tokfst_cli.decoding.index import by_label, coalesce
from tokfst_cli.errors import InputError, InternalError, LimitError
from tokfst_cli.filters.compose import NONE as NO_FILTERS
from tokfst_cli.filters.compose import Filters
from tokfst_cli.text.regex import ByteAutomaton
from tokfst_cli.tokenizer.model import TokenizerModel

SAMPLES = 1000


class _Sorted(NamedTuple):
    """A deterministic token acceptor's arcs as CSR, each state's sorted by token id."""

    start: int
    final: np.ndarray
    offsets: np.ndarray
    tokens: np.ndarray
    nexts: np.ndarray


def _sorted(fst: pynini.Fst) -> _Sorted:
    a = fst_arrays(fst)
    return _Sorted(a.start, a.final, *by_label(a.src, a.ilabel - 1, a.nextstate, len(a.final)))


def structure(fst: pynini.Fst | _Sorted) -> dict[str, int]:
    """States, arcs, finals and coalescence of a deterministic token acceptor (labels id + 1)."""
    a = fst if isinstance(fst, _Sorted) else _sorted(fst)
    n = len(a.final)
    counts = np.diff(a.offsets)
    masks = shared = 0
    if n:
        mask_of, firsts = coalesce(a.offsets, a.tokens)
        sizes = np.bincount(mask_of, minlength=len(firsts))
        masks, shared = len(firsts), int(sizes[sizes > 1].sum())
    return {"states": n, "arcs": len(a.tokens), "finals": int(a.final.sum()), "masks": masks,
            "states_in_shared_masks": shared, "single_token_states": int((counts == 1).sum()),
            "final_only_states": int((counts == 0).sum())}


def agnostic_preprocessed(model: TokenizerModel, automaton: ByteAutomaton,
                          limits: pipeline.Limits = pipeline.Limits(), filters: Filters = NO_FILTERS) -> pynini.Fst:
    """A -> P -> S without C: S_M over the pre-tokenized text, its boundary label erased, made
    deterministic and minimal (see the module docstring); ``filters`` as ``pipeline.build`` applies them."""
    from tokfst_cli.filters.compose import apply_text, apply_tokens  # deferred: start-up: only this path needs it
    from tokfst_cli.promotion.lexicon import marker_label  # deferred: start-up: only this path needs it

    if filters.text_level():
        automaton = ByteAutomaton(apply_text(model, automaton.fst, filters), automaton.pattern)
    text = pipeline.preprocess(model, automaton, canonical=True, limits=limits, level="pipeline")
    marked = pipeline.promote(model, ByteAutomaton(text, automaton.pattern), limits, marked=True)
    marker = marker_label(model)
    if filters.token_level():
        marked = apply_tokens(model, marked, filters, marker, agnostic=True)
    from tokfst_cli.pretok.cut import ids_of_cuts  # deferred: start-up: only this path needs it

    pairs = [(marker, 0), *ids_of_cuts(marked, model.vocab_size)]  # the boundary erased, cuts as their ids
    f = marked.copy().relabel_pairs(ipairs=pairs, opairs=pairs).rmepsilon()
    d = pynini.determinize(f, nstate=limits.max_states + 1)
    if d.num_states() > limits.max_states:
        raise LimitError("the agnostic automaton over the pre-tokenized text", "max_states", limits.max_states,
                         remedy="simplify")
    return d.minimize()


class Rejected(InternalError):
    """An automaton rejects HF's tokenization of a sample: a bug."""


class _Walk:
    """A deterministic token acceptor as sorted arc keys (state * width + token) for walking many
    sequences at once."""

    def __init__(self, a: _Sorted):
        labels, offsets = a.tokens, a.offsets
        self.width = int(labels.max()) + 2 if len(labels) else 1
        self.key = np.repeat(np.arange(len(a.final), dtype=np.int64), np.diff(offsets)) * self.width + labels
        self.start, self.final, self.nexts = a.start, a.final, a.nexts
        self.options = np.diff(offsets) + a.final
        self.first = set(labels[offsets[a.start]:offsets[a.start + 1]].tolist())

    def skips(self, ids: list[list[int]], name: str) -> int:
        """Skippable steps of the walks of ``ids`` (Rejected if one is not accepted)."""
        lengths = np.fromiter(map(len, ids), np.int64, len(ids))
        top = int(lengths.max()) if len(ids) else 0
        padded = np.zeros((len(ids), top), np.int64)
        padded[np.arange(top) < lengths[:, None]] = np.fromiter((t for x in ids for t in x), np.int64)
        cur = np.full(len(ids), self.start, np.int64)
        skippable = 0
        for i in range(top + 1):
            skippable += int((self.options[cur[lengths >= i]] == 1).sum())
            if i == top:
                break
            go = lengths > i
            tok, k = padded[go, i], cur[go] * self.width + padded[go, i]
            at = np.minimum(np.searchsorted(self.key, k), max(len(self.key) - 1, 0))
            ok = (tok >= 0) & (tok < self.width) & (self.key[at] == k) if len(self.key) else tok < -1
            if not ok.all():
                _reject(name, ids, np.flatnonzero(go)[np.flatnonzero(~ok)[0]])
            cur[go] = self.nexts[at]
        if not self.final[cur].all():
            _reject(name, ids, int(np.flatnonzero(~self.final[cur])[0]))
        return skippable


class _DecoderWalk:
    """The same through a decoder's masks (a factorized canonical automaton)."""

    def __init__(self, decoder):
        self.decoder = decoder
        self.first = set(np.flatnonzero(decoder.mask(decoder.initial())).tolist())

    def skips(self, ids: list[list[int]], name: str) -> int:
        d, skippable = self.decoder, 0
        for j, seq in enumerate(ids):
            s = d.initial()
            for t in [*seq, None]:
                mask = d.mask(s)
                skippable += (int(mask.sum()) + d.is_final(s)) == 1
                if t is None:
                    if not d.is_final(s):
                        _reject(name, ids, j)
                elif not (0 <= t < len(mask) and mask[t]):
                    _reject(name, ids, j)
                else:
                    s = d.advance(s, t)
        return skippable


def _reject(name: str, ids: list[list[int]], j: int) -> None:
    raise Rejected(f"the {name} automaton rejects encode() of sample {j}: {ids[j]}")


@dataclass
class Inspection:
    """What :func:`inspect_regex` measured; ``automata``: name -> pynini.Fst, or a decoder when factorized."""

    pattern: str
    max_len: int
    strings: int  # the regex's strings of at most max_len bytes
    texts: list[str]
    ids: list[list[int]]
    automata: dict = field(default_factory=dict)
    structures: dict = field(default_factory=dict)
    skippable: dict = field(default_factory=dict)
    first: tuple[int, int] = (0, 0)  # (|A0|, |A0 minus C0|)

    @property
    def steps(self) -> int:
        return sum(map(len, self.ids)) + len(self.ids)

    def skip_rate(self, name: str) -> float:
        return self.skippable[name] / self.steps if self.steps else 0.0

    def to_json(self) -> dict:
        first, noncanonical = self.first
        return {"regex": self.pattern, "max_len": self.max_len, "strings": self.strings, "samples": len(self.texts),
                "steps": self.steps,
                "automata": {k: {**self.structures[k], "skippable_steps": self.skippable[k],
                                 "skip_rate": self.skip_rate(k)} for k in self.automata},
                "first_tokens": {"agnostic": first, "noncanonical": noncanonical,
                                 "share": noncanonical / first if first else 0.0}}


def draw_texts(automaton: ByteAutomaton, n: int, seed: int | None, max_len: int | None) -> tuple[list[str], int, int]:
    """n texts drawn uniformly from the regex's strings of at most ``max_len`` bytes (None: all of a
    finite language); and how many there are, and the bound."""
    if max_len is None and not counting.is_finite(automaton.fst):
        raise InputError("the regex's language is infinite (strings of every length)", "bound the length (max_len)",
                         hint="count-infinite")
    how = counting.UniformDraw(automaton.fst, max_len)
    if how.total == 0:
        raise InputError(f"the regex has no string of at most {how.max_len} bytes", "allow longer strings (max_len)",
                         hint="inspect-no-string", max_len=how.max_len)
    rng = random.Random(seed)
    return [bytes(b - 1 for b in how.draw(rng)).decode("utf-8") for _ in range(n)], how.total, how.max_len


def inspect_regex(model: TokenizerModel, pattern: str, samples: int = SAMPLES, seed: int | None = 0,
                  max_len: int | None = None, limits: pipeline.Limits = pipeline.Limits(),
                  filters: Filters = NO_FILTERS) -> Inspection:
    """Both automata of ``pattern`` (:func:`automata`), their structure, and their skip rates on
    uniform samples (:func:`survey`)."""
    a, built = automata(model, pattern, limits, filters)
    return survey(model, a, built, samples, seed, max_len)


def automata(model: TokenizerModel, pattern: str, limits: pipeline.Limits = pipeline.Limits(),
             filters: Filters = NO_FILTERS) -> tuple[ByteAutomaton, dict]:
    """The regex's byte DFA and its two token automata: name -> pynini.Fst, or a decoder when
    factorized. ``filters`` (Pitfalls 2025 Sec. 4) restrict both automata; the samples are drawn from
    the regex's text-filtered language."""
    if model.family != "bpe":
        raise InputError(f"inspecting a regex needs a BPE tokenizer, not {model.family}: the agnostic automaton "
                         "is built over the pre-tokenized text", "inspect an artifact of this tokenizer instead",
                         hint="inspect-bpe", family=model.family)
    if filters.token_level():  # they may reject encode() of a sample: the skip rate would not be defined
        raise InputError(f"inspecting a regex takes text-level filters only, not {', '.join(filters.names())}",
                         "drop the token-level filters", hint="inspect-token-filters")
    a = pipeline.accept(pattern, limits)
    canonical = pipeline.build(model, pattern, canonical=True, level="pipeline", limits=limits, automaton=a,
                               filters=filters)
    if filters.text_level():  # once for the agnostic automaton and the samples (only text-level ones here)
        from tokfst_cli.filters.compose import apply_text  # deferred: start-up: only this path needs it

        a = ByteAutomaton(apply_text(model, a.fst, filters), a.pattern)
    agnostic = agnostic_preprocessed(model, a, limits)
    return a, {"agnostic": agnostic, "canonical": canonical.fst if canonical.materialized else canonical.lazy}


def survey(model: TokenizerModel, a: ByteAutomaton, built: dict, samples: int = SAMPLES, seed: int | None = 0,
           max_len: int | None = None) -> Inspection:
    """Draw ``samples`` texts of A uniformly, encode them with HF, walk both automata (Pitfalls 2025
    Table 2's skip rate, without a model)."""
    from tokfst_cli.tokenizer.reference import HfReference  # deferred: start-up: only this path needs it

    texts, total, bound = draw_texts(a, samples, seed, max_len)
    ids = [e.ids for e in HfReference(model, "pipeline").hf.encode_batch(texts, add_special_tokens=False)]
    out = Inspection(a.pattern, bound, total, texts, ids)
    out.automata = built
    walks = {}
    for name, f in out.automata.items():
        arcs = _sorted(f) if isinstance(f, pynini.Fst) else None
        walk = _Walk(arcs) if arcs is not None else _DecoderWalk(f)
        out.structures[name] = structure(arcs) if arcs is not None else {"form": "factorized"}
        out.skippable[name] = walk.skips(ids, name)
        walks[name] = walk
    out.first = (len(walks["agnostic"].first), len(walks["agnostic"].first - walks["canonical"].first))
    return out
