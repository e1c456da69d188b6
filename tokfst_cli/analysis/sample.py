"""Random token sequences of a constraint, for inspection and tests: ``tokfst sample``.

:func:`sampler` picks the way by the decoder's kind (any of :func:`tokfst_cli.constraint.load`)
and the law asked for (``uniform``):

* ``None`` (the default): a materialized acceptor (``.fst``, index JSON) is sampled uniformly over
  its paths (as ``"paths"``); a factorized form (BPE or WordPiece, no arc table) or the lazy form
  (``promote --format lazy``) by **random walks** (:class:`Walk`), not uniform over paths: for
  the first half of the budget each step is one choice, uniformly, among the allowed tokens and
  (at a final state) ending; then the walk is steered (:mod:`tokfst_cli.analysis.steering`: among the
  allowed tokens, those nearest a final state of the underlying automaton) and ends at the first
  final state. A walk not final at the budget is dropped and drawn again. On free text the walks
  are mostly about ``max_tokens / 2`` long.
* ``"paths"`` (:class:`Uniform`): **uniform** over the accepted sequences of at most
  ``max_tokens`` tokens, with exact (big-integer) path counts (:class:`counting.UniformDraw`);
  a factorized form is first expanded through its decoder (:func:`counting.explore`, up to
  ``max_arcs`` arcs, else LimitError).
* ``"strings"`` (:class:`UniformStrings`): **uniform over the distinct strings** the sequences
  spell (the surface language: token surfaces as the lexicon T reads them, at most ``max_len``
  bytes; default every string of a finite language, else ``MAX_BYTES``), each given as a path
  spelling it, drawn uniformly among the artifact's paths for that string (canonical artifacts:
  the only one). The surface is the single-byte-token part of the decoder where that is exact,
  else :func:`counting.surface`; the path, a lattice walked through the decoder
  (:mod:`.strings`).

:func:`sample` draws n sequences; :func:`record` gives their ids, token names and text (HF's
``decode``).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from tokfst_cli.analysis import counting, strings
from tokfst_cli.constraint import FstDecoder, IndexDecoder
from tokfst_cli.errors import InputError, LimitError
from tokfst_cli.filters.length import CountedDecoder
from tokfst_cli.support.progress import stage

MAX_TOKENS = 64
MAX_BYTES = 64  # default bound of uniform strings for an infinite surface language
WALK_TRIES = 10  # dropped walks allowed per requested sample (at least 50) before giving up
LAWS = ("paths", "strings")


def _no_path(max_tokens: int, why: str = "") -> InputError:
    return InputError(f"the artifact accepts no token sequence of at most {max_tokens} tokens{why}",
                      "allow more tokens (max_tokens), or check the artifact", hint="sample-no-path",
                      max_tokens=max_tokens)


def _renamed(e: LimitError, limit: str) -> LimitError:
    return LimitError(e.stage, limit, e.bound, e.value, e.remedy, e.unit, e.at_least)


class Uniform:
    """Uniform paths of at most ``max_tokens`` tokens of an acceptor (a decoder, expanded by
    :func:`counting.explore`), with exact path counts."""

    uniform = True

    def __init__(self, decoder, max_tokens: int = MAX_TOKENS, max_arcs: int = counting.MAX_ARCS):
        self.max_tokens = max_tokens
        try:
            self.how = counting.UniformDraw(counting.explore(decoder, max_arcs), max_tokens)
        except LimitError as e:  # the table's bound is this sampler's max_tokens
            raise (_renamed(e, "max_tokens") if e.limit == "max_len" else e) from None
        if self.how.total == 0:
            raise _no_path(max_tokens)

    def paths(self) -> int:
        """How many sequences there are to draw from (exact)."""
        return self.how.total

    def draw(self, rng) -> list[int]:
        return [label - 1 for label in self.how.draw(rng)]


class UniformStrings:
    """Uniform strings of the surface language of at most ``max_len`` bytes, each as a path of the
    decoder spelling it (uniform among those paths). The surface: the decoder's single-byte-token
    part where that is exact, else A o T projected (:mod:`.strings`)."""

    uniform = True

    def __init__(self, decoder, model, max_len: int | None = None, max_arcs: int = counting.MAX_ARCS,
                 max_states: int = 1_000_000):
        from tokfst_cli.promotion.lexicon import lexicon  # deferred: start-up: only this path needs it

        self.decoder, self.spelling = decoder, strings.Spelling(lexicon(model), model.surfaces)
        with stage("uniform strings: the strings' automaton"):
            if strings.single_bytes_suffice(decoder, self.spelling, max_arcs):
                surface = strings.byte_surface(decoder, self.spelling, max_states)
            else:
                surface = counting.surface(counting.spelling(counting.explore(decoder, max_arcs), lexicon(model)),
                                           max_states)
        if max_len is None and not counting.is_finite(surface):
            max_len = MAX_BYTES
        with stage("uniform strings: the count of strings by length"):
            self.strings = counting.UniformDraw(surface, max_len)
        self.max_len = self.strings.max_len
        if self.strings.total == 0:
            raise InputError(f"the artifact spells no string of at most {self.max_len} bytes",
                             "allow longer strings (max_len), or check the artifact", hint="sample-no-string",
                             max_len=self.max_len)

    def count(self) -> int:
        """How many strings there are to draw from (exact)."""
        return self.strings.total

    def draw(self, rng) -> list[int]:
        return strings.draw_spelling(self.decoder, self.spelling, self.strings.draw(rng), rng)


class Walk:
    """Random walks of any decoder: uniform among the allowed tokens and ending, per step, for the
    first half of the budget; then steered (``steering``) to a final state, ending there."""

    uniform = False

    def __init__(self, decoder, max_tokens: int = MAX_TOKENS):
        from tokfst_cli.analysis.steering import steering  # deferred: start-up: only this path needs it

        self.decoder, self.max_tokens = decoder, max_tokens
        self.closer = steering(decoder)

    def draw(self, rng: np.random.Generator) -> list[int] | None:
        """A walk to a final state, or None (not final at the budget)."""
        d = self.decoder
        s, out = d.initial(), []
        while True:
            final = d.is_final(s)
            if len(out) == self.max_tokens:
                return out if final else None
            allowed = np.flatnonzero(d.mask(s))
            if not len(allowed):
                return out if final else None
            if 2 * len(out) >= self.max_tokens:  # steer: end at once where final, else get nearer
                if final:
                    return out
                allowed = self.closer(s, allowed)
                i = int(rng.integers(len(allowed)))
            else:
                i = int(rng.integers(len(allowed) + final))
                if i == len(allowed):
                    return out
            out.append(int(allowed[i]))
            s = d.advance(s, out[-1])


def sampler(decoder, max_tokens: int = MAX_TOKENS, uniform: str | None = None, model=None,
            max_len: int | None = None, max_arcs: int = counting.MAX_ARCS) -> Uniform | UniformStrings | Walk:
    """The sampler of ``uniform`` (None, "paths" or "strings"; see the module docstring): ``model``
    (the tokenizer) and ``max_len`` (bytes) are for "strings"."""
    if max_tokens < 0:
        raise InputError(f"max_tokens {max_tokens} is negative", "give 0 or more")
    if uniform not in (None, *LAWS):
        raise InputError(f"uniform law {uniform} is not known", f"use one of: {', '.join(LAWS)}")
    if max_len is not None and uniform != "strings":
        raise InputError("a bound in bytes (max_len) applies to uniform strings only",
                         "bound paths by max_tokens, or ask for uniform strings", hint="sample-max-len")
    if uniform == "strings":
        return UniformStrings(decoder, model, max_len, max_arcs)
    if uniform == "paths" or isinstance(decoder, (FstDecoder, IndexDecoder, CountedDecoder)):
        return Uniform(decoder, max_tokens, max_arcs)
    return Walk(decoder, max_tokens)


def sample(decoder, n: int, max_tokens: int = MAX_TOKENS, seed: int | None = None, uniform: str | None = None,
           model=None, max_len: int | None = None, max_arcs: int = counting.MAX_ARCS) -> list[list[int]]:
    """n token sequences of the decoder's language (see the module docstring for the law)."""
    rng = np.random.default_rng(seed)
    how = sampler(decoder, max_tokens, uniform, model, max_len, max_arcs)
    out: list[list[int]] = []
    dropped = 0
    while len(out) < n:
        ids = how.draw(rng)
        if ids is not None:
            out.append(ids)
            continue
        dropped += 1
        if dropped > max(50, WALK_TRIES * n):
            raise InputError(f"{dropped} random walks of the artifact met a dead end or no final state "
                             f"within {max_tokens} tokens ({len(out)} of {n} ended)",
                             "allow more tokens (max_tokens), or sample the materialized artifact (uniform)",
                             hint="sample-walks", max_tokens=max_tokens)
    return out


def names(model, ids: list[int]) -> list[str]:
    """Token names as fstprint shows them (``symbols.escape``; canonical-check --input tokens reads them)."""
    from tokfst_cli.automata.symbols import escape  # deferred: start-up: only this path needs it

    return [escape(model.tokens[i]) for i in ids]


def record(model, ids: list[int], decode: Callable[[list[int]], str]) -> dict:
    """The JSON object of one sample: ids, token names and text."""
    return {"ids": ids, "tokens": names(model, ids), "text": decode(ids)}


def hf_decoder(model) -> Callable[[list[int]], str]:
    """Hugging Face's ``decode`` of the model's tokenizer.json (special tokens kept)."""
    from tokfst_cli.tokenizer.reference import HfReference  # deferred: start-up: only this path needs it

    hf = HfReference(model, "pipeline").hf
    return lambda ids: hf.decode(ids, skip_special_tokens=False)
