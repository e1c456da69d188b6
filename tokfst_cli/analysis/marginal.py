"""Constraint marginalization: the probability mass a language model gives a constraint (Pitfalls 2025 Sec. 5, 5.1).

For a constraint A (any decoder of :mod:`tokfst_cli.constraint`: materialized or factorized) and
a model p, the mass is ``Z = sum over accepted token sequences t of p(t) * p(EOS | t)``: the
probability that the model, left free, writes a sequence of A and then stops. Conditioning on A
(Pitfalls 2025 Sec. 5) divides by it; ``log Z(Berlin) - log Z(cities)`` is the marginal log-probability of
"Berlin" among the cities, summed over all its tokenizations (Pitfalls 2025 App. A.3).

:func:`exact` enumerates the language (a DFS over ``mask``/``advance``/``is_final``, before any model
call) and scores every sequence; it refuses an infinite language (a state repeated along a path;
``InputError``) and a large one (``max_tokens``, ``max_paths``: ``LimitError``). Canonical
constraints are the tractable case: one sequence per string.

:func:`estimate` is importance sampling with the masked model as the proposal (Pitfalls 2025 Sec. 5.1):
each walk draws, at every step, from q = p restricted to the allowed tokens (and EOS where the
sequence may end), renormalized, so its weight ``p(t) p(EOS|t) / q(t)`` is the product of the
allowed masses met along the way; ``E_q[w] = Z``. See :class:`Estimate` for the interval and the
walks cut at ``max_tokens``.

The model is a :data:`LogProb`, ``prefix -> log p(. | prompt + prefix)`` over its whole vocabulary
(EOS included; the caller closes over the prompt). :func:`lm_logprob` makes one of a Hugging Face
causal LM with the prompt's KV cache computed once, whole sequences scored in batched forward
passes (:meth:`LM.score`) and walks advanced in lockstep on a shared cache (:meth:`LM.walks`).
A plain function is called once per distinct prefix. Weights and masses are kept in log space.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable
from dataclasses import dataclass
from statistics import NormalDist
from typing import Any, Protocol

import numpy as np

from tokfst_cli.decoding.logits import _require
from tokfst_cli.errors import InputError, LimitError

LogProb = Callable[[list[int]], np.ndarray]
Scores = list[tuple[np.ndarray, np.ndarray]]  # per sequence: log p(t_j | t_<j) (len), log p(EOS | t_<j) (len + 1)
MAX_TOKENS = 64  # estimate: the tokens of a walk before it is cut
EXACT_MAX_TOKENS = 256  # exact: the longest sequence enumerated
MAX_PATHS = 10_000  # exact: the sequences enumerated (each is scored by the model)
MAX_LOGITS = 1 << 26  # float32 logits per forward pass of LM.score (256 MB)
METHODS = ("normal", "bernstein")


@dataclass(frozen=True)
class Mass:
    """:func:`exact`'s result: ``mass`` = Z (0.0 when it underflows; ``log_mass`` stays exact),
    ``paths`` the accepted sequences scored, ``lm_calls`` the model calls (forward passes of an
    :class:`LM`, else calls of the function)."""

    mass: float
    log_mass: float
    paths: int
    lm_calls: int


@dataclass(frozen=True)
class Estimate:
    """:func:`estimate`'s result over ``n`` walks with weights w_i in [0, 1].

    ``mean`` estimates Z (unbiased for the mass of the sequences of at most ``max_tokens`` tokens),
    ``std_error`` = sd(w) / sqrt(n). ``low``/``high``: a two-sided interval at ``level``, clipped to
    [0, 1]. ``method`` "normal": mean +- z * std_error, the central limit approximation. It can
    miss badly when the proposal seldom walks the sequences that carry the mass (a likely first
    token whose continuations are unlikely): the walks then agree on a wrong value, with a small
    std_error and a fine ``ess``; with every weight 0 it is [0, 0]. "bernstein": the empirical
    Bernstein bound for variables in [0, 1] (Maurer & Pontil 2009, Thm. 4, delta / 2 per side):
    valid at every n whatever the proposal, but its upper end is at least about 7 log(4 / (1 -
    level)) / (3 n), loose when Z is far below 1/n.
    ``log_*`` are the same figures in log space (exact where the others underflow). ``truncated``:
    walks that reached ``max_tokens`` without ending (weight 0); ``zero``: walks where every allowed
    continuation has probability 0 (weight 0, exactly). ``ess`` = (sum w)^2 / sum w^2."""

    mean: float
    log_mean: float
    std_error: float
    log_std_error: float
    low: float
    high: float
    log_low: float
    log_high: float
    level: float
    method: str
    n: int
    truncated: int
    zero: int
    ess: float
    lm_calls: int


class Walks(Protocol):
    def step(self, keep: list[int] | None, tokens: list[int] | None) -> np.ndarray:
        """(rows, V) log-probabilities of the walks; ``keep`` the rows that go on (indices into the
        previous call's rows), each extended by its token; None at the first call."""


class Batched(Protocol):
    """What :func:`exact` and :func:`estimate` use; :func:`batched` makes one of a plain LogProb."""

    calls: int

    def __call__(self, prefix: list[int]) -> np.ndarray: ...

    def width(self) -> int: ...

    def score(self, seqs: list[list[int]], eos: int) -> Scores: ...

    def walks(self, k: int) -> Walks: ...


# ---- the model ---------------------------------------------------------------------------------
class _Plain:
    """A plain :data:`LogProb` as a :class:`Batched`: one call per distinct prefix."""

    def __init__(self, f: LogProb):
        self.f, self.calls, self._root = f, 0, None

    def __call__(self, prefix: list[int]) -> np.ndarray:
        self.calls += 1
        return np.asarray(self.f(list(prefix)), np.float64)

    def width(self) -> int:
        if self._root is None:
            self._root = self([])
        return len(self._root)

    def score(self, seqs: list[list[int]], eos: int) -> Scores:
        """Sorted ``seqs`` share the rows of their common prefixes (a DFS over their trie)."""
        self.width()
        rows, prev, out = [self._root], [], []
        for seq in seqs:
            common = 0
            while common < min(len(prev), len(seq)) and prev[common] == seq[common]:
                common += 1
            del rows[common + 1:]
            rows += [self(seq[:i]) for i in range(common + 1, len(seq) + 1)]
            out.append((np.array([rows[i][t] for i, t in enumerate(seq)]), np.array([r[eos] for r in rows])))
            prev = seq
        return out

    def walks(self, k: int) -> Walks:
        return _PlainWalks(self, k)


class _PlainWalks:
    def __init__(self, f: _Plain, k: int):
        self.f, self.prefixes = f, [[] for _ in range(k)]

    def step(self, keep: list[int] | None, tokens: list[int] | None) -> np.ndarray:
        if keep is not None:
            self.prefixes = [self.prefixes[i] + [t] for i, t in zip(keep, tokens)]
        return np.stack([self.f(p) for p in self.prefixes])


def batched(logprob: LogProb | Batched) -> Batched:
    """``logprob`` itself when it has the batched methods (an :class:`LM`), else a wrapper."""
    return logprob if hasattr(logprob, "score") and hasattr(logprob, "walks") else _Plain(logprob)


class LM:
    """log p(. | prompt + prefix) of a transformers causal LM (float64 numpy, the model's whole
    vocabulary). The prompt runs once; its KV cache is copied for every batch. ``batch``: sequences
    (``score``) or walks (``walks``) per forward pass. ``calls`` counts forward passes."""

    def __init__(self, model, prompt_ids: list[int], batch: int = 32):
        self.torch = _require()[0]
        if not len(prompt_ids):
            raise InputError("the prompt is empty", "give at least one token (e.g. BOS)", hint="marginal-prompt")
        if batch < 1:
            raise InputError(f"batch {batch} is not positive", "give a batch of at least 1")
        self.model, self.batch, self.calls = model, batch, 0
        with self.torch.no_grad():
            out = self._forward(self.torch.tensor([list(prompt_ids)], device=model.device), None)
        self._cache = out.past_key_values
        self._root = self._logsoftmax(out.logits[0, -1])

    def _forward(self, ids, cache):
        self.calls += 1
        return self.model(ids, past_key_values=cache, use_cache=True)

    def _cache_for(self, rows: int):
        cache = copy.deepcopy(self._cache)
        cache.batch_repeat_interleave(rows)
        return cache

    def _logsoftmax(self, logits) -> np.ndarray:
        return logits.double().log_softmax(-1).cpu().numpy()

    def width(self) -> int:
        return len(self._root)

    def __call__(self, prefix: list[int]) -> np.ndarray:
        if not len(prefix):
            return self._root.copy()
        torch = self.torch
        with torch.no_grad():
            out = self._forward(torch.tensor([list(prefix)], device=self.model.device), self._cache_for(1))
        return self._logsoftmax(out.logits[0, -1])

    def score(self, seqs: list[list[int]], eos: int) -> Scores:
        """Each sequence's token and EOS log-probabilities from one forward pass per batch
        (right-padded: causal attention never reads the padding)."""
        out: Scores = []
        i, width = 0, self.width()
        while i < len(seqs):
            longest, j = len(seqs[i]), i + 1  # at least one sequence per pass
            while j < len(seqs) and j - i < self.batch and \
                    (j - i + 1) * max(longest, len(seqs[j])) * width <= MAX_LOGITS:  # logits of the pass
                longest, j = max(longest, len(seqs[j])), j + 1
            out += self._score(seqs[i:j], longest, eos)
            i = j
        return out

    def _score(self, seqs: list[list[int]], longest: int, eos: int) -> Scores:
        if longest == 0:
            return [(np.zeros(0), self._root[[eos]]) for _ in seqs]
        torch = self.torch
        ids = torch.tensor([s + [0] * (longest - len(s)) for s in seqs], device=self.model.device)
        with torch.no_grad():
            logits = self._forward(ids, self._cache_for(len(seqs))).logits
            lse = torch.logsumexp(logits, -1).double()
            nxt = torch.cat([ids[:, 1:], ids[:, :1]], 1)  # the token after each position (last: unused)
            tok = (logits.gather(-1, nxt[..., None])[..., 0].double() - lse).cpu().numpy()
            end = (logits[..., eos].double() - lse).cpu().numpy()
        root, root_end = self._root, self._root[[eos]]
        return [(np.concatenate([root[s[:1]], tok[r, :max(len(s) - 1, 0)]]),
                 np.concatenate([root_end, end[r, :len(s)]])) for r, s in enumerate(seqs)]

    def walks(self, k: int) -> Walks:
        return _LMWalks(self, k)


class _LMWalks:
    """Walks in lockstep on one KV cache: each step feeds one token per walk still going."""

    def __init__(self, lm: LM, k: int):
        self.lm, self.k, self.cache = lm, k, None

    def step(self, keep: list[int] | None, tokens: list[int] | None) -> np.ndarray:
        lm, torch = self.lm, self.lm.torch
        if keep is None:
            return np.repeat(lm._root[None], self.k, 0)
        with torch.no_grad():
            if self.cache is None:
                self.cache = lm._cache_for(self.k)
            self.cache.batch_select_indices(torch.tensor(keep, device=lm.model.device))
            out = lm._forward(torch.tensor(tokens, device=lm.model.device)[:, None], self.cache)
        return lm._logsoftmax(out.logits[:, -1])


def lm_logprob(model, prompt_ids: list[int], batch: int = 32) -> LM:
    """The :data:`LogProb` of a transformers causal LM after ``prompt_ids`` (non-empty: e.g. BOS),
    with the batched forms :func:`exact` and :func:`estimate` use. Needs ``tokfst[hf]``."""
    return LM(model, prompt_ids, batch)


# ---- exact -------------------------------------------------------------------------------------
def _allowed(decoder, state: Any, eos: int) -> np.ndarray:
    """The token ids allowed at ``state``; InputError when EOS is one of them (it would be ambiguous)."""
    mask = decoder.mask(state)
    if eos < len(mask) and mask[eos]:
        raise InputError(f"the EOS id {eos} is a token of the constraint", "give the id of a special token the "
                         "constraint never allows", hint="marginal-eos", eos=eos)
    return np.flatnonzero(mask)


def paths(decoder, eos: int, max_tokens: int = EXACT_MAX_TOKENS, max_paths: int = MAX_PATHS) -> list[list[int]]:
    """Every accepted token sequence, by a DFS (no model call). InputError for an infinite language
    (a state met twice on one path: the decoders offer only tokens that can still reach a final
    state; states that cannot be hashed are only bounded by ``max_tokens``); LimitError past
    ``max_tokens`` tokens in one sequence or ``max_paths`` sequences."""
    start = decoder.initial()
    try:
        hash(start)
        on_path: set | None = {start}
    except TypeError:
        on_path = None
    found = [[]] if decoder.is_final(start) else []
    stack, prefix = [(start, iter(_allowed(decoder, start, eos)))], []
    while stack:
        state, todo = stack[-1]
        token = next(todo, None)
        if token is None:
            stack.pop()
            if on_path is not None:
                on_path.discard(state)
            if stack:
                prefix.pop()
            continue
        nxt = decoder.advance(state, int(token))
        if on_path is not None and nxt in on_path:
            raise InputError("the constraint accepts infinitely many token sequences", "estimate its mass "
                             "by sampling (marginal.estimate), or give a finite constraint", hint="marginal-infinite")
        if len(prefix) >= max_tokens:
            raise LimitError("exact marginalization", "max_tokens", max_tokens, None, None, "tokens")
        prefix.append(int(token))
        if decoder.is_final(nxt):
            found.append(list(prefix))
            if len(found) > max_paths:
                raise LimitError("exact marginalization", "max_paths", max_paths, None, None, "token sequences")
        stack.append((nxt, iter(_allowed(decoder, nxt, eos))))
        if on_path is not None:
            on_path.add(nxt)
    return found


def _check_ids(width: int, eos: int, tokens: int) -> None:
    """InputError unless EOS and the largest token id ``tokens`` are within the model's ``width`` logits."""
    if not 0 <= eos < width or tokens >= width:
        bad = eos if not 0 <= eos < width else tokens
        raise InputError(f"token id {bad} is outside the model's {width} logits", "give the model and EOS id of the "
                         "constraint's tokenizer", hint="marginal-vocab", token=bad, width=width)


def exact(decoder, logprob: LogProb, eos: int, max_tokens: int = EXACT_MAX_TOKENS,
          max_paths: int = MAX_PATHS) -> Mass:
    """Z = sum over the accepted t of p(t) p(EOS | t), by enumeration (Pitfalls 2025 Sec. 5.1); see
    :func:`paths` for the refusals, all raised before the first model call. Sequences that are a
    prefix of another one are read off the longer one's forward pass."""
    found = sorted(paths(decoder, eos, max_tokens, max_paths))
    if not found:
        return Mass(0.0, -math.inf, 0, 0)
    lm = batched(logprob)
    before = lm.calls
    _check_ids(lm.width(), eos, max((max(p) for p in found if p), default=-1))
    # each sequence is scored with the longest of the run of sequences it is a prefix of (sorted: the next ones)
    longest = [i for i in range(len(found)) if i + 1 == len(found) or found[i + 1][:len(found[i])] != found[i]]
    scores = lm.score([found[i] for i in longest], eos)
    logs, k = [], 0
    for i, path in enumerate(found):
        while longest[k] < i:
            k += 1
        tok, end = scores[k]
        logs.append(tok[:len(path)].sum() + end[len(path)])
    log_mass = float(np.logaddexp.reduce(logs))
    return Mass(math.exp(log_mass), log_mass, len(found), lm.calls - before)


# ---- importance sampling -----------------------------------------------------------------------
def estimate(decoder, logprob: LogProb, eos: int, n: int, seed: int | None = None, max_tokens: int = MAX_TOKENS,
             level: float = 0.95, method: str = "normal") -> Estimate:
    """Importance sampling of Z with the masked model as proposal (Pitfalls 2025 Sec. 5.1): ``n`` walks
    (``seed`` for numpy's generator), in lockstep groups of the model's ``batch``. A walk cut at
    ``max_tokens`` tokens counts with weight 0, so the mean is unbiased for the mass of the accepted
    sequences of at most ``max_tokens`` tokens and under-estimates Z by the mass of the longer ones
    (``Estimate.truncated`` counts them; exact when the language has no longer sequence)."""
    if n < 1 or not 0 < level < 1 or method not in METHODS:
        raise InputError(f"estimate needs n >= 1, 0 < level < 1 and a method of {', '.join(METHODS)} "
                         f"(got n={n}, level={level}, method={method!r})", "give valid values", hint="marginal-args")
    lm = batched(logprob)
    before, width = lm.calls, lm.width()
    _check_ids(width, eos, -1)
    rng = np.random.default_rng(seed)
    logw, cut, dead = np.full(n, -math.inf), 0, 0
    group = getattr(lm, "batch", n)
    for first in range(0, n, group):
        k = min(group, n - first)
        states, acc, rows = [decoder.initial()] * k, np.zeros(k), list(range(k))
        walks = lm.walks(k)
        lp = walks.step(None, None)
        for step in range(max_tokens + 1):
            keep, tokens, going = [], [], []
            for r, i in enumerate(rows):
                allowed = _allowed(decoder, states[i], eos)
                _check_ids(width, eos, allowed[-1] if len(allowed) else -1)
                if decoder.is_final(states[i]):
                    allowed = np.append(allowed, eos)
                scores = lp[r, allowed]
                mass = np.logaddexp.reduce(scores) if len(scores) else -math.inf
                if mass == -math.inf:
                    dead += 1  # every continuation has probability 0: the weight is exactly 0
                    continue
                acc[i] += mass
                token = int(allowed[rng.choice(len(allowed), p=_normalized(scores - mass))])
                if token == eos:
                    logw[first + i] = acc[i]
                elif step == max_tokens:
                    cut += 1
                else:
                    states[i] = decoder.advance(states[i], token)
                    keep.append(r)
                    tokens.append(token)
                    going.append(i)
            if not going:
                break
            rows, lp = going, walks.step(keep, tokens)
    return _summary(logw, level, method, cut, dead, lm.calls - before)


def _normalized(log_q: np.ndarray) -> np.ndarray:
    q = np.exp(log_q)
    return q / q.sum()


def _summary(logw: np.ndarray, level: float, method: str, truncated: int, zero: int, calls: int) -> Estimate:
    """Mean, standard error and interval of the weights exp(logw), computed scaled by their largest."""
    n = len(logw)
    top = float(logw.max())
    if top == -math.inf:
        top = 0.0
    w = np.exp(logw - top)
    mean = float(w.mean())
    sd = float(w.std(ddof=1)) if n > 1 else math.inf
    se = sd / math.sqrt(n)
    if method == "normal":
        half = NormalDist().inv_cdf((1 + level) / 2) * se
        log_low, log_high = _log(mean - half) + top, _log(mean + half) + top
    else:  # empirical Bernstein, two-sided: delta / 2 per side; its range term is in absolute units
        c = math.log(4 / (1 - level))
        dev = math.sqrt(2 * sd * sd * c / n) if n > 1 else math.inf
        rng_term = math.log(7 * c / (3 * (n - 1))) if n > 1 else math.inf
        log_high = float(np.logaddexp(_log(mean + dev) + top, rng_term))
        log_low = _log(mean - dev - math.exp(min(rng_term - top, 700.0))) + top
    log_high = min(log_high, 0.0)
    w2 = float((w * w).sum())
    return Estimate(mean=math.exp(_log(mean) + top), log_mean=_log(mean) + top, std_error=se * math.exp(top),
                    log_std_error=_log(se) + top, low=math.exp(log_low), high=math.exp(log_high), log_low=log_low,
                    log_high=log_high, level=level, method=method, n=n, truncated=truncated, zero=zero,
                    ess=float(w.sum()) ** 2 / w2 if w2 > 0 else 0.0, lm_calls=calls)


def _log(x: float) -> float:
    return math.log(x) if x > 0 else -math.inf
