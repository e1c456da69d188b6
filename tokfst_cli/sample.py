"""Random token sequences of a constraint, for inspection and tests: ``tokfst sample`` (issue #12 item 4).

:func:`sampler` picks the way by the decoder's kind (any of :func:`tokfst_cli.constraint.load`):

* a materialized acceptor (``.fst``, index JSON: :class:`Uniform`): **uniform** over the accepted
  sequences of at most ``max_tokens`` tokens. A backward dynamic program over the reachable
  states counts, for every state s and budget k, the accepted paths of at most k tokens from s:
  ``N_0(s) = [s final]``, ``N_k(s) = [s final] + sum over arcs s -t-> s' of N_{k-1}(s')``, in
  float64 log space (the counts pass 10^300 on free text; a log count is exact to about 1e-13
  relative, far below what a test of uniformity can see). A path is drawn step by step: at s
  with budget k, end with weight [s final], take arc t with weight N_{k-1}(s'), so every
  sequence has probability 1 / N_max(initial).
* a factorized form (BPE or WordPiece, no arc table; :class:`Walk`): a **random walk**, not
  uniform over paths: for the first half of the budget each step is one choice, uniformly,
  among the allowed tokens and (at a final state) ending; then the walk is steered
  (:mod:`tokfst_cli.steering`: among the allowed tokens, those nearest a final state of the
  underlying automaton) and ends at the first final state. A walk not final at the budget is
  dropped and drawn again. On free text the walks are mostly about ``max_tokens / 2`` long.

:func:`sample` draws n sequences; :func:`record` gives their ids, token names and text (HF's
``decode``).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from .constraint import FstDecoder, IndexDecoder
from .errors import InputError, LimitError

MAX_TOKENS = 64
MAX_CELLS = 50_000_000  # path-count table cells (states x (max_tokens + 1)), float64: 400 MB
WALK_TRIES = 10  # dropped walks allowed per requested sample (at least 50) before giving up


def _no_path(max_tokens: int, why: str = "") -> InputError:
    return InputError(f"the artifact accepts no token sequence of at most {max_tokens} tokens{why}",
                      "allow more tokens (max_tokens), or check the artifact", hint="sample-no-path",
                      max_tokens=max_tokens)


class Uniform:
    """Uniform paths of a materialized acceptor (``arcs(state)``: sorted tokens, next states)."""

    uniform = True

    def __init__(self, decoder, max_tokens: int = MAX_TOKENS):
        self.max_tokens = max_tokens
        states, seen = [int(decoder.initial())], {int(decoder.initial())}
        labels, nexts = [], []
        for s in states:  # breadth-first over the reachable states (the list grows), then renumbered
            lab, nxt = decoder.arcs(s)
            labels.append(np.asarray(lab, np.int64))
            nexts.append(np.asarray(nxt, np.int64))
            for t in np.unique(nxt).tolist():
                if t not in seen:
                    seen.add(t)
                    states.append(t)
        cells = len(states) * (max_tokens + 1)
        if cells > MAX_CELLS:  # refused before the table is allocated
            raise LimitError("the path-count table of uniform sampling", "max_tokens", max_tokens, cells,
                             remedy="lower", unit="cells", at_least=True)
        remap = np.full(max(states) + 1, -1, np.int64)
        remap[states] = np.arange(len(states))
        self.labels = np.concatenate(labels)
        self.nexts = remap[np.concatenate(nexts)]
        self.offsets = np.concatenate([[0], np.cumsum([len(x) for x in labels])])
        final = np.array([decoder.is_final(s) for s in states])
        self.log_final = np.where(final, 0.0, -np.inf)
        self.log_counts = self._counts()
        if not np.isfinite(self.log_counts[max_tokens][0]):
            raise _no_path(max_tokens)

    def _counts(self) -> np.ndarray:
        """(max_tokens + 1, states): log N_k(s), the accepted paths of at most k tokens from s."""
        n = len(self.log_final)
        src = np.repeat(np.arange(n), np.diff(self.offsets))
        starts = self.offsets[:-1][np.diff(self.offsets) > 0]
        has_arcs = np.diff(self.offsets) > 0
        out = np.empty((self.max_tokens + 1, n))
        out[0] = self.log_final
        with np.errstate(divide="ignore", invalid="ignore"):
            for k in range(1, self.max_tokens + 1):
                vals = out[k - 1][self.nexts]
                if len(vals):
                    top = np.full(n, -np.inf)
                    top[has_arcs] = np.maximum.reduceat(vals, starts)
                    shift = np.where(np.isfinite(top), top, 0.0)
                    arcs = np.full(n, -np.inf)
                    arcs[has_arcs] = np.log(np.add.reduceat(np.exp(vals - shift[src]), starts)) + shift[has_arcs]
                else:
                    arcs = np.full(n, -np.inf)
                out[k] = np.logaddexp(self.log_final, arcs)
        return out

    def paths(self) -> float:
        """How many sequences there are to draw from (a float: it may be huge)."""
        return float(np.exp(self.log_counts[self.max_tokens][0]))

    def draw(self, rng: np.random.Generator) -> list[int]:
        s, out = 0, []
        for k in range(self.max_tokens, 0, -1):
            lo, hi = self.offsets[s], self.offsets[s + 1]
            total = self.log_counts[k][s]
            weights = np.exp(np.append(self.log_counts[k - 1][self.nexts[lo:hi]], self.log_final[s]) - total)
            i = int(rng.choice(len(weights), p=weights / weights.sum()))
            if i == hi - lo:
                return out  # end here
            out.append(int(self.labels[lo + i]))
            s = int(self.nexts[lo + i])
        return out  # budget spent: s is final (its count at budget 0 was not zero)


class Walk:
    """Random walks of any decoder: uniform among the allowed tokens and ending, per step, for the
    first half of the budget; then steered (``steering``) to a final state, ending there."""

    uniform = False

    def __init__(self, decoder, max_tokens: int = MAX_TOKENS):
        from .steering import steering

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


def sampler(decoder, max_tokens: int = MAX_TOKENS) -> Uniform | Walk:
    """:class:`Uniform` for a materialized decoder, :class:`Walk` for a factorized one."""
    if max_tokens < 0:
        raise InputError(f"max_tokens {max_tokens} is negative", "give 0 or more")
    if isinstance(decoder, (FstDecoder, IndexDecoder)):
        return Uniform(decoder, max_tokens)
    return Walk(decoder, max_tokens)


def sample(decoder, n: int, max_tokens: int = MAX_TOKENS, seed: int | None = None) -> list[list[int]]:
    """n token sequences of the decoder's language (see the module docstring for the law)."""
    rng = np.random.default_rng(seed)
    how = sampler(decoder, max_tokens)
    out: list[list[int]] = []
    dropped = 0
    while len(out) < n:
        ids = how.draw(rng)
        if ids is not None:
            out.append(ids)
            continue
        dropped += 1
        if dropped > max(50, WALK_TRIES * n):
            raise InputError(f"{dropped} random walks of the factorized artifact met a dead end or no final state "
                             f"within {max_tokens} tokens ({len(out)} of {n} ended)",
                             "allow more tokens (max_tokens), or sample the materialized artifact (uniform)",
                             hint="sample-walks", max_tokens=max_tokens)
    return out


def names(model, ids: list[int]) -> list[str]:
    """Token names as fstprint shows them (``symbols.escape``; canonical-check --input tokens reads them)."""
    from .symbols import escape

    return [escape(model.tokens[i]) for i in ids]


def record(model, ids: list[int], decode: Callable[[list[int]], str]) -> dict:
    """The JSON object of one sample: ids, token names and text."""
    return {"ids": ids, "tokens": names(model, ids), "text": decode(ids)}


def hf_decoder(model) -> Callable[[list[int]], str]:
    """Hugging Face's ``decode`` of the model's tokenizer.json (special tokens kept)."""
    from .reference import HfReference

    hf = HfReference(model, "pipeline").hf
    return lambda ids: hf.decode(ids, skip_special_tokens=False)
