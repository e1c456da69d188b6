"""Canonical BPE on the whole pipeline against ``encode(text, add_special_tokens=False).ids``.

For tokenizers trained here under each family's normalizer and pre-tokenizer blocks
(``pipelines.CONFIGS``) and the real GPT-2 and Llama-2 files:
- canonical-check (library and command line) judges ``encode``'s ids of 2,000 probing texts
  canonical, and decides perturbed sequences as ``encode(decode(ids)) == ids`` does;
- finite regex languages: the canonical automaton's paths are exactly {encode(s) : s in L};
- infinite ones: ``encode(s)`` of sampled s is accepted (materialized and factorized), and every
  sampled path has a text of L (found through A o P) whose ``encode`` is that path.
"""

from __future__ import annotations

import json
import random
from functools import lru_cache

import numpy as np
import pynini
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tokenizers import Tokenizer

from tokfst_cli import pipeline
from tokfst_cli.analysis import check
from tokfst_cli.automata.symbols import MARKER
from tokfst_cli.constraint import FstDecoder
from tokfst_cli.errors import DisallowedTokenError, InputError
from tokfst_cli.pretok import image
from tokfst_cli.text.regex import compile_regex
from tokfst_cli.tokenizer.model import from_json

from ..conftest import TOKENIZERS, budget
from ..runner import run
from . import pipelines as pl

REAL = {"gpt2.json": TOKENIZERS["gpt2"], "llama2.json": TOKENIZERS["llama2"]}
ALL = list(pl.CONFIGS) + list(REAL)
DECODABLE = pl.DECODABLE + list(REAL)


@lru_cache(maxsize=None)
def tokenizer(name: str):
    """(path, HF Tokenizer, TokenizerModel)."""
    if name in REAL:
        path = REAL[name]
        return path, Tokenizer.from_file(str(path)), from_json(json.loads(path.read_text()), str(path))
    path, hf = pl.trained(name)
    return path, hf, pl.model(name)


def encode(hf: Tokenizer, text: str) -> list[int]:
    return hf.encode(text, add_special_tokens=False).ids


@lru_cache(maxsize=None)
def checker(name: str) -> check.Checker:
    return check.Checker(tokenizer(name)[2], None, None, "pipeline")


def verdicts(name: str, seqs: list[list[int]]) -> list[bool]:
    ch = checker(name)
    return [v is None for v in ch.verdicts()(seqs)]


# ---- canonical-check ---------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ALL)
def test_encode_is_canonical(name):
    """2,000 probing texts: every ``encode`` is judged canonical (the check runs on encode's ids)."""
    texts = pl.texts(2000, seed=7)
    got = checker(name).check(texts)
    bad = [(texts[v.line - 1], v.offence) for v in got if v.offence is not None]
    assert not bad, bad[:5]
    hf = tokenizer(name)[1]
    assert [v.tokens for v in got[:200]] == [encode(hf, t) for t in texts[:200]]


def perturbed(name: str, n: int, seed: int) -> list[list[int]]:
    """Near misses of canonical sequences: two tokens re-tokenized as one piece by the model,
    one token split at a random point, a random token inserted, or a sequence kept."""
    _, hf, model = tokenizer(name)
    rng = random.Random(seed)
    normal = [i for i, s in enumerate(model.surfaces) if s and i not in model.special_ids]
    out = []
    for text in pl.texts(n, seed=seed):
        ids = encode(hf, text)
        if not ids:
            continue
        i = rng.randrange(len(ids))
        kind = rng.randrange(4)
        if kind == 0 and i + 1 < len(ids):
            joined = model.tokens[ids[i]] + model.tokens[ids[i + 1]]
            ids = ids[:i] + [t.id for t in hf.model.tokenize(joined)] + ids[i + 2:]
        elif kind == 1 and len(model.tokens[ids[i]]) > 1:
            tok = model.tokens[ids[i]]
            k = rng.randrange(1, len(tok))
            parts = [t.id for t in hf.model.tokenize(tok[:k])] + [t.id for t in hf.model.tokenize(tok[k:])]
            ids = ids[:i] + parts + ids[i + 1:]
        elif kind == 2:
            ids = ids[:i] + [rng.choice(normal)] + ids[i:]
        out.append(ids)
    return out


@pytest.mark.parametrize("name", DECODABLE)
def test_perturbed_sequences(name):
    """A sequence is canonical iff ``pipelines.decodes`` (the text is fixed by the ids)."""
    _, hf, _ = tokenizer(name)
    seqs = perturbed(name, 1500, seed=3)
    want = [pl.decodes(hf, s) for s in seqs]
    got = verdicts(name, seqs)
    wrong = [(s, w) for s, g, w in zip(seqs, got, want) if g != w]
    assert not wrong, wrong[:5]
    assert 0.2 < np.mean(want) < 0.9  # both kinds are well represented


@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(name=st.sampled_from(DECODABLE), parts=st.lists(st.sampled_from(pl.FRAGMENTS), min_size=1, max_size=6),
       cut=st.integers(0, 40), extra=st.integers(0, 10 ** 6))
def test_property_against_encode(name, parts, cut, extra):
    """Hypothesis: encode(s) is canonical; and a sequence with one token swapped for another is
    canonical iff ``pipelines.decodes``."""
    _, hf, model = tokenizer(name)
    ids = encode(hf, "".join(parts))
    assert verdicts(name, [ids]) == [True]
    if ids:
        seq = list(ids)
        seq[cut % len(seq)] = extra % model.vocab_size
        if model.tokens[seq[cut % len(seq)]] and seq[cut % len(seq)] not in model.special_ids:
            want = pl.decodes(hf, seq)
            assert verdicts(name, [seq]) == [want], (seq, want)


def test_canonical_check_cli_pipeline(tmp_path):
    """The command line: text lines print encode's ids, judged canonical; ids judged as encode does."""
    path, hf, model = tokenizer("cl100k")
    texts = pl.texts(300, seed=11)
    src = tmp_path / "t.txt"
    src.write_text("\n".join(t.replace("\n", " ").replace("\r", " ") for t in texts) + "\n")
    r = run("canonical-check", path, src, "--input", "text", "--json")
    recs = [json.loads(line) for line in r.out.decode().splitlines()]
    assert r.rc == 0 and all(x["canonical"] for x in recs)
    assert [x["tokens"] for x in recs] == [encode(hf, t.replace("\n", " ").replace("\r", " ")) for t in texts]
    seqs = perturbed("cl100k", 300, seed=5)
    src.write_text("\n".join(" ".join(map(str, s)) for s in seqs) + "\n")
    r = run("canonical-check", path, src, "--json")
    want = [pl.decodes(hf, s) for s in seqs]
    recs = [json.loads(line) for line in r.out.decode().splitlines()]
    assert [x["canonical"] for x in recs] == want and r.rc == 1
    assert all(x["canonical_tokens"] == encode(hf, hf.decode(x["tokens"])) for x in recs if not x["canonical"])


def test_added_tokens():
    """An added token splits the text (P restarts after it); a regex that can hold one is refused."""
    _, hf, model = tokenizer("llama2.json")
    bos = model.token_id("<s>")
    ids = encode(hf, "Hi<s> there") + encode(hf, "x")  # the segment after <s> gets its own "▁"
    assert bos in ids and ids == encode(hf, "Hi<s> there x")
    assert verdicts("llama2.json", [ids]) == [True]
    bare = [bos, model.token_id("x")]  # no segment of Llama-2's normalizer starts without "▁"
    assert encode(hf, "<s>x") != bare and verdicts("llama2.json", [bare, encode(hf, "<s>x")]) == [False, True]
    with pytest.raises(InputError, match="added token '<s>'"):
        pipeline.build(model, "a(<s>)?", canonical=True, special_text="refuse")
    left = pipeline.build(model, "a(<s>)?", canonical=True)  # by default the special token's text is left out
    plain = pipeline.build(model, "a", canonical=True)
    assert left.excluded == ["<s>"] and paths(left.fst) == paths(plain.fst)
    assert pipeline.build(model, "a(<t>)?", canonical=True).materialized


# ---- promotion ----------------------------------------------------------------------------------
FINITE = ["(  hello|hello world|it's|Isn't it|IT'S|12345678|1234| {1,3}ab|a\n\nb|x  y|naïve café|漢字 ok)",
          "(Cologne|Berlin|New York|São Paulo)( ,| !|!!|\\.\\.\\.)?",
          "[0-9]{1,2}(  | |\t)?[a-c]{1,2}"]
INFINITE = ["[a-z]+( [a-z]+){1,3}", "[0-9]{4,8}", " {0,3}[A-Za-z]+",
            '\\{"[a-z]{1,8}": ?[0-9]{1,4}(, "[a-z]{1,8}": ?[0-9]{1,4}){0,2}\\}']


def strings(fst: pynini.Fst) -> list[bytes]:
    """Every string of a finite byte acceptor."""
    out = []
    zero = pynini.Weight.zero(fst.weight_type())

    def walk(s, acc):
        if fst.final(s) != zero:
            out.append(bytes(acc))
        for a in fst.arcs(s):
            walk(a.nextstate, acc + [a.ilabel - 1])
    walk(fst.start(), [])
    return out


def paths(fst: pynini.Fst) -> set[tuple[int, ...]]:
    return {tuple(b - 1 for b in s) for s in (list(x) for x in _label_paths(fst))}


def _label_paths(fst: pynini.Fst):
    zero = pynini.Weight.zero(fst.weight_type())
    stack = [(fst.start(), [])]
    while stack:
        s, acc = stack.pop()
        if fst.final(s) != zero:
            yield acc
        for a in fst.arcs(s):
            stack.append((a.nextstate, acc + [a.ilabel]))


@pytest.mark.parametrize("name", ALL)
def test_finite_languages_are_exactly_encode(name):
    _, hf, model = tokenizer(name)
    for pattern in FINITE:
        result = pipeline.build(model, pattern, canonical=True)
        want = {tuple(encode(hf, s.decode("utf-8"))) for s in strings(compile_regex(pattern).fst)}
        assert paths(result.fst) == want, pattern
    if name not in REAL:  # Eq. 5's explicit A_BPE: small vocabularies
        assert pynini.equivalent(pipeline.build(model, FINITE[0], canonical=True, method="precomputed").fst,
                                 pipeline.build(model, FINITE[0], canonical=True).fst)


def sample_labels(fst: pynini.Fst, rng: random.Random, stop: float = 0.25) -> list[int]:
    zero = pynini.Weight.zero(fst.weight_type())
    s, out = fst.start(), []
    while True:
        arcs = list(fst.arcs(s))
        if fst.final(s) != zero and (not arcs or rng.random() < stop):
            return out
        a = rng.choice(arcs)
        out.append(a.ilabel - 1)
        s = a.nextstate


def witness(ap: pynini.Fst, texts: dict[int, bytes], path: list[int]) -> str | None:
    """A text of L(A) whose P output spells ``path`` (a boundary allowed between any two tokens);
    ``texts``: the model's token texts (``dict(model.model_items())``)."""
    w = pynini.Fst()
    one = pynini.Weight.one(w.weight_type())
    q = w.add_state()
    w.set_start(q)
    for k, t in enumerate(path):
        if k:
            nxt = w.add_state()
            w.add_arc(q, pynini.Arc(MARKER, MARKER, one, nxt))
            w.add_arc(q, pynini.Arc(0, 0, one, nxt))
            q = nxt
        for b in texts[t]:
            nxt = w.add_state()
            w.add_arc(q, pynini.Arc(b + 1, b + 1, one, nxt))
            q = nxt
    w.set_final(q)
    found = pynini.compose(ap, w.arcsort("ilabel"), connect=True)
    if found.num_states() == 0:
        return None
    found = pynini.shortestpath(found).rmepsilon().topsort()
    return bytes(a.ilabel - 1 for s in found.states() for a in found.arcs(s) if a.ilabel).decode("utf-8")


@pytest.mark.parametrize("name", ["gpt2", "cl100k", "deepseek", "metaspace-first", "llama2", "gemma", "lowercase",
                                  "gpt2.json", "llama2.json"])
def test_sampled_languages(name):
    """encode(s) of 500 sampled s is accepted; 500 sampled paths re-encode to themselves."""
    check_sampled(name, dict(enumerate(INFINITE)), 500 if name in ("gpt2", "llama2") else 100, 100)


@pytest.mark.parametrize("name", ["cl100k", "metaspace-first", "gpt2.json", "llama2.json"])
def test_bench_regexes(name):
    """The six bench regexes: encode(s) of 500 sampled s is accepted; 100 sampled paths re-encode
    (5 through a factorized form, e-mail on the real tokenizers)."""
    from tokfst_cli.text import catalogue

    check_sampled(name, catalogue.six(), 100, 5)


def check_sampled(name: str, patterns: dict, paths: int, factorized_paths: int) -> None:
    """Per pattern: ``encode`` of 500 sampled strings walks the canonical automaton to a final
    state; ``paths`` sampled paths (``factorized_paths`` through a factorized form, a full mask per
    step) have a text of the language, found through A o P, whose ``encode`` is the path."""
    _, hf, model = tokenizer(name)
    rng = random.Random(name)
    p = image.for_model(model)
    texts = dict(model.model_items())
    for key, pattern in patterns.items():
        a = compile_regex(pattern).fst
        result = pipeline.build(model, pattern, canonical=True)
        dec = result.decoder()
        for _ in range(budget(500)):
            s = sample_string(a, rng).decode("utf-8")
            state = dec.initial()
            for t in encode(hf, s):
                state = dec.advance(state, t)
            assert dec.is_final(state), (key, s)
        ap = pynini.compose(a, p, connect=True).arcsort("olabel")
        for _ in range(budget(paths if result.materialized else factorized_paths, floor=3)):
            path = sample_path(dec, rng)
            text = witness(ap, texts, path)
            assert text is not None and encode(hf, text) == path, (key, path, text)


def sample_path(dec, rng: random.Random) -> list[int]:
    """A random walk through a decoder, stopping at a final state with probability 0.3 (a mask is
    never empty at a non-final state: issue #12)."""
    state, out = dec.initial(), []
    while True:
        allowed = np.flatnonzero(dec.mask(state))
        if dec.is_final(state) and (not len(allowed) or rng.random() < 0.3):
            return out
        assert len(allowed), f"dead end after {out}"
        t = int(allowed[rng.randrange(len(allowed))])
        out.append(t)
        state = dec.advance(state, t)


def sample_string(fst: pynini.Fst, rng: random.Random) -> bytes:
    return bytes(sample_labels(fst, rng))


@pytest.mark.parametrize("name, pattern", [("cl100k", INFINITE[0]), ("gpt2.json", INFINITE[1]),
                                           ("llama2.json", INFINITE[1])])
def test_factorized_agrees_with_materialized(name, pattern):
    """Past max_arcs the factorized (subset) decoder: the materialized masks along encode's walks
    (no dead ends: issue #12), the same finality, and its artifact loads back to the same decoder."""
    path, hf, model = tokenizer(name)
    mat = pipeline.build(model, pattern, canonical=True)
    fac = pipeline.build(model, pattern, canonical=True, limits=pipeline.Limits(max_arcs=1))
    assert mat.materialized and not fac.materialized
    loaded = load_bytes(fac.to_bytes(), model)
    rng = random.Random(1)
    a = compile_regex(pattern).fst
    md = FstDecoder(mat.fst, model.vocab_size)
    for dec in (fac.decoder(), loaded):
        for _ in range(40):
            s = sample_string(a, rng).decode()
            x, y = md.initial(), dec.initial()
            for t in encode(hf, s):
                assert (dec.mask(y) == md.mask(x)).all()
                x, y = md.advance(x, t), dec.advance(y, t)
            assert dec.is_final(y) and (dec.mask(y) == md.mask(x)).all()
        bad = int(np.flatnonzero(~md.mask(md.initial()))[0])
        with pytest.raises(DisallowedTokenError):
            dec.advance(dec.initial(), bad)


def load_bytes(data: bytes, model):
    from tokfst_cli.bpe import factorized

    return factorized.from_bytes(data, model)


def test_levels_and_refusals(tmp_path):
    """--level model keeps the model-level automaton; gadgets is model-level only; bad levels refused."""
    path, hf, model = tokenizer("cl100k")
    pipe = pipeline.build(model, "  hello", canonical=True)
    assert paths(pipe.fst) == {tuple(encode(hf, "  hello"))}
    mod = pipeline.build(model, "  hello", canonical=True, level="model")
    mapped = "".join(chr(c) for c in [0x120, 0x120]) + "hello"
    assert paths(mod.fst) == {tuple(t.id for t in hf.model.tokenize(mapped))}
    with pytest.raises(InputError, match="model-level"):
        pipeline.build(model, "ab", canonical=True, method="gadgets")
    r = run("promote", path, "-e", "  hello", "--canonical", "--level", "word", tmp_path / "x.fst")
    assert r.rc == 2 and not (tmp_path / "x.fst").exists()
    r = run("promote", "gpt2", "-e", "ab?(<[|]endoftext[|]>)?", "--canonical", "--special-text", "refuse",
            tmp_path / "x.fst")
    err = r.err.decode()
    assert r.rc == 2 and "'<|endoftext|>'" in err and "--level model" in err and len(err.strip().splitlines()) == 1
    assert run("promote", "gpt2", "-e", "ab?(<[|]endoftext[|]>)?", "--canonical", "--level", "model",
               tmp_path / "x.fst").rc == 0


def test_unmodelled_added_tokens_are_refused(tmp_path):
    """An added token with lstrip (HF strips the spaces before it) is not modelled by the
    pipeline-level check: a sequence holding it is refused by name (exit 2), never judged; other
    lines and the model level are unaffected."""
    path, hf, _ = tokenizer("gpt2")
    data = json.loads(path.read_text())
    new = max(data["model"]["vocab"].values()) + 1
    data["added_tokens"] = [{"id": new, "content": "<sep>", "single_word": False, "lstrip": True, "rstrip": False,
                             "normalized": False, "special": True}]
    src = tmp_path / "tok.json"
    src.write_text(json.dumps(data))
    model = from_json(data, str(src))
    ch = check.Checker(model, None, None, "pipeline")
    ok = encode(hf, "hello world")
    assert ch.verdicts()([ok]) == [None]
    with pytest.raises(InputError, match="'<sep>'"):
        ch.verdicts()([ok + [new]])
    r = run("canonical-check", src, stdin=" ".join(map(str, ok + [new])) + "\n")
    err = r.err.decode()
    assert r.rc == 2 and r.out == b"" and "'<sep>'" in err and "--level model" in err
    assert len(err.strip().splitlines()) == 1
    r = run("canonical-check", src, "--level", "model", stdin=" ".join(map(str, ok)) + "\n")
    assert r.rc == 0
