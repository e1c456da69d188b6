"""Constraint marginalization (tokfst_cli.analysis.marginal, Pitfalls 2025 Sec. 5.1) on GPT-2 and
Llama-2 with a tiny random GPT-2-architecture model (built here, never downloaded).

The model's embedding (tied to its output layer) is scaled up so its next-token distributions are
peaked: the token sequences of a constraint then differ in probability by orders of magnitude, and
the importance weights are far from uniform. EOS is the tokenizer's end of text (GPT-2
``<|endoftext|>``, Llama-2 ``</s>``); the prompt is its BOS (GPT-2: the same token).

The reference for every exact mass is a brute force written here: the constraint's language listed
independently (canonical: HF's encoding of each string; agnostic: the paths of the materialized
acceptor), each sequence scored by one forward pass over prompt + sequence + EOS.
"""

from __future__ import annotations

import math
import subprocess
import sys
from functools import cache

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from tokfst_cli import pipeline
from tokfst_cli.analysis import marginal
from tokfst_cli.decoding.logits import tiny_model
from tokfst_cli.errors import InputError, LimitError

from .conftest import real
from .helpers import enumerate_paths, finals, transitions

pytestmark = pytest.mark.usefixtures("torch_one_thread")

EOS = {"gpt2": "<|endoftext|>", "llama2": "</s>"}
BOS = {"gpt2": "<|endoftext|>", "llama2": "<s>"}
SHARPEN = 20.0  # embedding scale: the top next token gets about half the mass
MILD = 4.0  # a milder scale, for the normal interval over arbitrary constraints
CITIES = ["Cologne", "Berlin", "Bonn"]
LEVEL = 0.999  # interval level of the coverage checks (seeded: deterministic)
TOL = 1e-4  # |log mass - reference|: float32 logits, batched differently


@cache
def setup(name: str, eos_bonus: float = 0.0, sharpen: float = SHARPEN):
    """(TokenizerModel, HF tokenizer, EOS id, prompt ids, torch model, marginal.LM). ``eos_bonus``
    is added to EOS's logit everywhere (through the final layer norm's bias, along EOS's embedding:
    the other logits move by about a sixth of it, at random)."""
    model, _, hf = real(name)
    eos, bos = model.token_id(EOS[name]), model.token_id(BOS[name])
    lm = tiny_model(model.vocab_size, bos, eos)
    with torch.no_grad():
        lm.transformer.wte.weight.mul_(sharpen)
        w = lm.transformer.wte.weight[eos]
        lm.transformer.ln_f.bias.add_(eos_bonus * w / w.dot(w))
    return model, hf, eos, [bos], lm, marginal.lm_logprob(lm, [bos], batch=16)


def covers(e: marginal.Estimate, log_z: float) -> bool:
    """The interval contains log_z, up to float error (estimate and exact batch the model differently)."""
    return e.log_low - 1e-5 <= log_z <= e.log_high + 1e-5


def brute_force(lm, prompt: list[int], seqs, eos: int) -> float:
    """log sum over seqs of p(t) p(EOS | t): one forward pass per sequence, log_softmax and gather."""
    logs = []
    with torch.no_grad():
        for t in seqs:
            ids = torch.tensor([prompt + list(t) + [eos]])
            logp = lm(ids).logits[0].double().log_softmax(-1)
            targets = ids[0, len(prompt):]
            logs.append(float(logp[len(prompt) - 1:-1].gather(-1, targets[:, None]).sum()))
    return float(np.logaddexp.reduce(logs)) if logs else -math.inf


def agnostic_language(fst) -> list[list[int]]:
    """The token sequences of a finite materialized acceptor (labels are ids + 1), by its own paths."""
    return [[x - 1 for x in p] for p in enumerate_paths(fst)]


def canonical_language(hf, words) -> list[list[int]]:
    return [hf.encode(w, add_special_tokens=False).ids for w in sorted(set(words))]


def prefixes(seqs) -> int:
    """The distinct prefixes (the empty one included) of seqs: a plain LogProb's calls in exact()."""
    return len({tuple(s[:i]) for s in seqs for i in range(len(s) + 1)})


class Counting:
    """A plain LogProb around another one, counting its calls (exact() must not call a refused one)."""

    def __init__(self, f):
        self.f, self.calls = f, 0

    def __call__(self, prefix):
        self.calls += 1
        return self.f(prefix)


FORMS = {"agnostic": dict(canonical=False), "canonical": dict(canonical=True),
         "factorized": dict(canonical=True, limits=pipeline.Limits(max_arcs=1))}


def language(name: str, form: str, words: list[str], result) -> list[list[int]]:
    return agnostic_language(result.fst) if form == "agnostic" else canonical_language(setup(name)[1], words)


@pytest.mark.parametrize("form", list(FORMS))
@pytest.mark.parametrize("name", ["gpt2", "llama2"])
def test_exact_equals_brute_force(name, form):
    """exact() over the LM adapter and over a plain function (one call per distinct prefix) equals
    the brute force; the factorized form enumerates the same sequences as HF's encodings."""
    model, hf, eos, prompt, lm, f = setup(name)
    result = pipeline.build(model, f"({'|'.join(CITIES)})", **FORMS[form])
    assert result.materialized == (form != "factorized")
    seqs = language(name, form, CITIES, result)
    assert marginal.paths(result.decoder(), eos) == sorted(seqs)
    reference = brute_force(lm, prompt, seqs, eos)
    got = marginal.exact(result.decoder(), f, eos)
    assert got.paths == len(seqs) and got.lm_calls >= 1
    assert got.log_mass == pytest.approx(reference, abs=TOL)
    assert got.mass == pytest.approx(math.exp(reference), rel=1e-3)
    plain = Counting(f)
    again = marginal.exact(result.decoder(), plain, eos)
    assert again.log_mass == pytest.approx(reference, abs=TOL)
    assert again.lm_calls == plain.calls == prefixes(seqs)


@pytest.mark.parametrize("name", ["gpt2", "llama2"])
def test_empty_sequence_and_marginal_of_one_string(name):
    """"(Bonn)?" accepts the empty sequence (its mass is p(EOS | prompt)); the marginal log-probability
    of Berlin among the cities is log Z(Berlin) - log Z(cities), each by its own brute force."""
    model, hf, eos, prompt, lm, f = setup(name)
    for form in ("agnostic", "canonical"):
        result = pipeline.build(model, "(Bonn)?", **FORMS[form])
        seqs = language(name, form, ["", "Bonn"], result)
        assert [] in seqs
        for logprob in (f, lambda p: f(p)):
            assert marginal.exact(result.decoder(), logprob, eos).log_mass == pytest.approx(
                brute_force(lm, prompt, seqs, eos), abs=TOL)
    berlin = marginal.exact(pipeline.build(model, "Berlin", canonical=True).decoder(), f, eos)
    cities = marginal.exact(pipeline.build(model, "(Cologne|Berlin|Bonn)", canonical=True).decoder(), f, eos)
    assert berlin.log_mass - cities.log_mass == pytest.approx(
        brute_force(lm, prompt, canonical_language(hf, ["Berlin"]), eos)
        - brute_force(lm, prompt, canonical_language(hf, CITIES), eos), abs=2 * TOL)


@pytest.mark.parametrize("name", ["gpt2", "llama2"])
@pytest.mark.parametrize("form", ["agnostic", "canonical"])
def test_estimate_interval_contains_exact(name, form):
    """Seeded importance sampling: both intervals at 99.9 % contain the exact mass; the mean is
    within a few standard errors; every walk ends within the budget (a finite language)."""
    model, hf, eos, prompt, lm, f = setup(name)
    decoder = pipeline.build(model, f"({'|'.join(CITIES)})", **FORMS[form]).decoder()
    z = marginal.exact(decoder, f, eos)
    for method in marginal.METHODS:
        e = marginal.estimate(decoder, f, eos, 300, seed=7, level=LEVEL, method=method)
        assert e.n == 300 and e.truncated == 0 and e.zero == 0 and e.method == method
        assert covers(e, z.log_mass), (method, e, z)
        assert 1 <= e.ess <= e.n and e.lm_calls >= 1
    assert abs(e.mean - z.mass) <= 4 * e.std_error
    assert e.log_mean == pytest.approx(math.log(e.mean)) and e.log_std_error == pytest.approx(math.log(e.std_error))


@pytest.mark.parametrize("name", ["gpt2", "llama2"])
def test_estimate_with_equal_weights_is_exact(name):
    """Where every walk has the same weight the estimate is the mass itself: one canonical sequence
    under the tiny model, and (GPT-2: the cities are two tokens each) the canonical cities under a
    uniform model, whose mass is counted here: sum over the sequences of V^-(length + 1)."""
    model, hf, eos, prompt, lm, f = setup(name)
    berlin = pipeline.build(model, "Berlin", canonical=True).decoder()
    z = marginal.exact(berlin, f, eos)
    e = marginal.estimate(berlin, f, eos, 20, seed=0)
    assert e.mean == pytest.approx(z.mass, rel=1e-5) and e.std_error <= 1e-5 * z.mass
    assert e.ess == pytest.approx(20) and e.log_low <= e.log_mean <= e.log_high
    if name == "gpt2":
        width = model.vocab_size
        uniform = lambda prefix: np.full(width, -math.log(width))  # noqa: E731
        cities = pipeline.build(model, "(Cologne|Berlin|Bonn)", canonical=True).decoder()
        seqs = canonical_language(hf, CITIES)
        assert {len(s) for s in seqs} == {2}
        counted = float(np.logaddexp.reduce([-(len(s) + 1) * math.log(width) for s in seqs]))
        z = marginal.exact(cities, uniform, eos)
        e = marginal.estimate(cities, uniform, eos, 50, seed=1)
        assert z.log_mass == pytest.approx(counted, abs=1e-9)
        assert e.log_mean == pytest.approx(counted, abs=1e-9) and e.ess == pytest.approx(50)


WORDS = st.text(alphabet="abcBo ", min_size=1, max_size=4)


@settings(max_examples=12, deadline=None, derandomize=True)
@given(name=st.sampled_from(["gpt2", "llama2"]), words=st.lists(WORDS, min_size=1, max_size=3, unique=True),
       canonical=st.booleans())
def test_property_small_finite_regexes(name, words, canonical):
    """Unions of short literal strings: exact() equals the brute force over the independently listed
    language; the seeded estimates' 99.9 % intervals contain it: Bernstein's always, the normal one
    under a milder model (MILD: under the peaked one the masked model may almost never walk the
    sequence that carries the mass, and then all walks agree on a wrong value, see marginal.Estimate)."""
    result = pipeline.build(setup(name)[0], "(" + "|".join(words) + ")", canonical=canonical)
    seqs = language(name, "canonical" if canonical else "agnostic", words, result)
    for sharpen, method in ((SHARPEN, "bernstein"), (MILD, "normal")):
        model, hf, eos, prompt, lm, f = setup(name, sharpen=sharpen)
        z = marginal.exact(result.decoder(), f, eos)
        assert z.paths == len(seqs)
        assert z.log_mass == pytest.approx(brute_force(lm, prompt, seqs, eos), abs=TOL)
        e = marginal.estimate(result.decoder(), f, eos, 200, seed=3, level=LEVEL, method=method)
        assert covers(e, z.log_mass), (sharpen, e, z)


def bounded_language(fst, most: int) -> list[list[int]]:
    """The accepted token sequences of at most ``most`` tokens of an acceptor (cyclic or not)."""
    delta, fin, out = transitions(fst), finals(fst), []
    stack = [(fst.start(), [])]
    while stack:
        s, path = stack.pop()
        if s in fin:
            out.append(path)
        if len(path) < most:
            stack += [(t, path + [label - 1]) for label, t in delta[s].items()]
    return out


@pytest.mark.parametrize("form", list(FORMS))
def test_infinite_constraint_refused_by_exact_estimated_by_sampling(form):
    """An infinite language: exact() refuses it before any model call; estimate() cuts walks at
    max_tokens (weight 0), so it estimates the mass of the sequences of at most max_tokens tokens,
    which the brute force gets from the acceptor's paths of that length. With EOS likely (a bonus)
    both intervals contain it; without, the walks rarely end where the mass is (most are cut): the
    normal interval may miss, the Bernstein bound still holds."""
    most = 3
    for bonus in (8.0, 0.0):
        model, hf, eos, prompt, lm, f = setup("gpt2", bonus)
        result = pipeline.build(model, "a+", **FORMS[form])
        plain = Counting(f)
        with pytest.raises(InputError, match="infinitely many"):
            marginal.exact(result.decoder(), plain, eos)
        assert plain.calls == 0
        reference_fst = result.fst if result.materialized else pipeline.build(model, "a+", canonical=True).fst
        seqs = bounded_language(reference_fst, most)
        assert max(map(len, seqs)) == most
        reference = brute_force(lm, prompt, seqs, eos)
        for method in marginal.METHODS if bonus else ["bernstein"]:
            e = marginal.estimate(result.decoder(), f, eos, 300, seed=5, max_tokens=most, level=LEVEL, method=method)
            assert e.truncated > 0 and e.n == 300
            assert covers(e, reference), (bonus, e, reference)
    free = marginal.estimate(result.decoder(), setup("gpt2", 8.0)[-1], eos, 50, seed=5, max_tokens=40)
    assert free.log_mean > -math.inf and free.truncated < 50


def test_refusals(tokenizer):
    """Too many sequences, a too long one, EOS inside the constraint, a model smaller than the
    vocabulary, an empty prompt and bad estimate arguments: each refused before any model call."""
    model, hf, eos, prompt, lm, f = setup("gpt2")
    cities = pipeline.build(model, "(Cologne|Berlin|Bonn)")
    seqs = agnostic_language(cities.fst)
    plain = Counting(f)
    with pytest.raises(LimitError) as e:
        marginal.exact(cities.decoder(), plain, eos, max_paths=len(seqs) - 1)
    assert e.value.limit == "max_paths" and e.value.bound == len(seqs) - 1
    with pytest.raises(LimitError) as e:
        marginal.exact(cities.decoder(), plain, eos, max_tokens=max(map(len, seqs)) - 1)
    assert e.value.limit == "max_tokens"
    assert plain.calls == 0
    assert marginal.exact(cities.decoder(), plain, eos, max_paths=len(seqs),
                          max_tokens=max(map(len, seqs))).paths == len(seqs)
    inside = int(np.flatnonzero(cities.decoder().mask(cities.decoder().initial()))[0])
    for run in (lambda: marginal.exact(cities.decoder(), f, inside),
                lambda: marginal.estimate(cities.decoder(), f, inside, 5)):
        with pytest.raises(InputError, match="EOS"):
            run()
    small = lambda prefix: np.full(10, -math.log(10))  # noqa: E731  (the cities' tokens are all past 10)
    for run in (lambda: marginal.exact(cities.decoder(), small, eos),
                lambda: marginal.estimate(cities.decoder(), small, 0, 5)):
        with pytest.raises(InputError, match="outside the model"):
            run()
    with pytest.raises(InputError, match="prompt"):
        marginal.lm_logprob(lm, [])
    for kw in (dict(n=0), dict(level=1.0), dict(method="bootstrap")):
        with pytest.raises(InputError):
            marginal.estimate(cities.decoder(), f, eos, **{"n": 5, **kw})


def test_lm_logprob_matches_one_forward_pass():
    """The adapter's rows are the model's log-softmax after prompt + prefix (KV cache or not)."""
    model, hf, eos, prompt, lm, f = setup("llama2")
    for prefix in ([], [334], [334, 1165, 485]):
        with torch.no_grad():
            want = lm(torch.tensor([prompt + prefix])).logits[0, -1].double().log_softmax(-1).numpy()
        got = f(prefix)
        assert got.shape == (model.vocab_size,) and np.abs(got - want).max() < 1e-4


def test_import_needs_no_torch():
    code = "import sys, tokfst_cli.analysis.marginal; assert 'torch' not in sys.modules, 'torch imported'"
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
