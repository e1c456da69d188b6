"""Token healing by construction (Pitfalls 2025 Sec. 4.4, issue #14) against HF's ``encode``.

``build(..., canonical=True, prompt=P)`` builds the canonical automaton of P · L(regex) and starts
it after the kept prefix e[:k] of e = encode(P). Expected results are derived from HF alone:
k is the longest prefix of e that every encode(P + c), c in L, starts with, and the constraint
accepts exactly {encode(P + c)[k:] : c in L}.

- finite L (R_MAT, every one of its 2,257 completions): the materialized automaton's paths are
  exactly that set, the Healing is the HF-derived one (GPT-2, Llama-2, BERT; designed prompts,
  and, as a hypothesis property, random prefixes of a fixed text); the index carries it;
- infinite-looking L (R_FAC, built past a small max_arcs: factorized): the decoder accepts
  encode(P + c)[k:] of ~90 completions per prompt (all of length <= 1, and sampled ones),
  in process and from the written artifact (same initial masks and Healing); random walks of
  the decoder spell P + c with c in L and are encode's ids (BPE);
- the command line: the stderr line, the written index / .fst / factorized artifact's start,
  exit codes (--prompt without --canonical, with --prompt-file, holding an added token: 2);
- damaged healing fields are refused; artifacts built without a prompt are unchanged (v3).
"""

from __future__ import annotations

import itertools
import json
import random
import re
import struct

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tokfst_cli import constraint, pipeline
from tokfst_cli.bpe import factorized as bpe_factorized
from tokfst_cli.decoding.healing import Healing
from tokfst_cli.errors import InputError
from tokfst_cli.maxmatch import factorized as mm_factorized
from tokfst_cli.support.files import pack, unpack
from tokfst_cli.text.regex import compile_regex

from .conftest import real
from .helpers import enumerate_paths, sample_paths
from .runner import run
from .walks import accepts

CHARS = [*"abcdefghijklmnopqrstuvwxyz", "é", "日", "本", "語", *" .,!?'-", *"0123456789"]
CLASS = "a-zé日本語 .,!?'0-9-"
R_MAT = f"[{CLASS}]{{0,2}}"  # finite: every completion is checked
R_FAC = f"[{CLASS}]{{0,8}}"  # built with SMALL_ARCS: factorized
SMALL_ARCS = 20_000
PROMPTS = ["Hello wor", "The answer is ", "I don", "Wait", "Call 555-12", "日本", "Très bien, caf"]
TEXT = "Hello world, I don't know: 日本語 is 42 cafés! Très bien."  # the hypothesis prompts are its prefixes
BPE = ("gpt2", "llama2")

MAT_COMPLETIONS = ["".join(p) for n in range(3) for p in itertools.product(CHARS, repeat=n)]  # all of L(R_MAT)


def hf(tok: str):
    h = real(tok)[2]
    h.no_padding()  # BERT's file pads to 128
    h.no_truncation()
    return h


def encodes(tok: str, texts: list[str]) -> list[list[int]]:
    return [x.ids for x in hf(tok).encode_batch(texts, add_special_tokens=False)]


def expected(tok: str, prompt: str, completions: list[str]) -> tuple[Healing, list[list[int]]]:
    """The Healing derived from HF alone (k: longest prefix of encode(prompt) that every
    encode(prompt + c) starts with), and every encode(prompt + c)."""
    e = encodes(tok, [prompt])[0]
    ids = encodes(tok, [prompt + c for c in completions])
    k = 0
    while k < len(e) and all(len(x) > k and x[k] == e[k] for x in ids):
        k += 1
    return Healing(prompt, e[:k], len(e) - k), ids


def paths(fst) -> set[tuple[int, ...]]:
    return {tuple(x - 1 for x in p) for p in enumerate_paths(fst)}


def check_exact(tok: str, prompt: str) -> pipeline.Result:
    """The materialized automaton of prompt · R_MAT accepts exactly {encode(prompt + c)[k:]}."""
    result = pipeline.build(real(tok)[0], R_MAT, canonical=True, prompt=prompt)
    assert result.materialized
    healing, ids = expected(tok, prompt, MAT_COMPLETIONS)
    assert result.healing == healing
    assert paths(result.fst) == {tuple(x[len(healing.kept):]) for x in ids}
    return result


# ---- finite languages, materialized: exactly HF's sequences ---------------------------------------------
@pytest.mark.parametrize("tok", ["gpt2", "llama2", "bert"])
def test_materialized_accepts_exactly_encode_after_the_kept_prefix(tok):
    assert len(set(re.findall(f"[{CLASS}]", "".join(CHARS)))) == len(CHARS)  # CHARS is the class
    assert all(re.fullmatch(R_MAT, c) for c in MAT_COMPLETIONS)
    healed = 0
    for prompt in PROMPTS:
        result = check_exact(tok, prompt)
        healed += result.healing.retokenized > 0
        index = result.index()
        assert index["healing"] == {"prompt": prompt, "kept": result.healing.kept,
                                    "retokenized": result.healing.retokenized}
        loaded = constraint.IndexDecoder(json.loads(json.dumps(index)))
        assert loaded.healing == result.healing
        fst_dec = result.decoder()
        assert (loaded.mask(loaded.initial()) == fst_dec.mask(fst_dec.initial())).all()
    assert healed >= 3  # the prompts do reach across the boundary


@settings(max_examples=6, deadline=None, derandomize=True)
@given(cut=st.integers(0, len(TEXT)))
def test_random_prefixes_of_a_text_heal_as_encode(cut):
    for tok in BPE:
        check_exact(tok, TEXT[:cut])


# ---- factorized: encode's ids of many completions, in process and from the artifact ---------------------
FAC_SAMPLES = sorted({bytes(b - 1 for b in p).decode("utf-8")
                      for p in sample_paths(compile_regex(R_FAC).fst, 40, seed=14, stop=0.1)})
FAC_COMPLETIONS = [c for c in MAT_COMPLETIONS if len(c) <= 1] + FAC_SAMPLES + ["ld", "'t", " world!", "ld 42."]


def reload(tok: str, result: pipeline.Result):
    data = result.to_bytes()
    module = mm_factorized if tok == "bert" else bpe_factorized
    header, _ = unpack(data, module.MAGIC, module.FORMAT, module.HEALED, "artifact", "")
    assert header["healing"] == {"prompt": result.healing.prompt, "kept": result.healing.kept,
                                 "retokenized": result.healing.retokenized}
    return module.from_bytes(data, real(tok)[0])


def walk_texts(tok: str, dec, kept: list[int], n: int, seed: int) -> list[tuple[str, list[int]]]:
    """n random mask-following walks (finite language: each ends), as (decode(kept + walk), ids)."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        state, seq = dec.initial(), list(kept)
        while True:
            allowed = np.flatnonzero(dec.mask(state))
            if dec.is_final(state) and (not len(allowed) or rng.random() < 0.3):
                break
            assert len(allowed), "dead end"
            seq.append(int(allowed[rng.randrange(len(allowed))]))
            state = dec.advance(state, seq[-1])
        out.append((hf(tok).decode(seq, skip_special_tokens=False), seq))
    return out


@pytest.mark.parametrize("tok", ["gpt2", "llama2", "bert"])
def test_factorized_accepts_encode_after_the_kept_prefix(tok):
    assert all(re.fullmatch(R_FAC, c) for c in FAC_COMPLETIONS) and len(FAC_SAMPLES) >= 30
    checked = 0
    for prompt in PROMPTS:
        result = pipeline.build(real(tok)[0], R_FAC, canonical=True, prompt=prompt,
                                limits=pipeline.Limits(max_arcs=SMALL_ARCS))
        assert not result.materialized
        healing, ids = expected(tok, prompt, FAC_COMPLETIONS)
        assert result.healing == healing
        loaded = reload(tok, result)
        assert loaded.healing == healing
        assert (loaded.mask(loaded.initial()) == result.lazy.mask(result.lazy.initial())).all()
        k = len(healing.kept)
        for x in ids:
            assert accepts(result.lazy, x[k:]) and accepts(loaded, x[k:]), (prompt, x)
            checked += 1
        if tok != "bert":  # BERT's decode does not give the text back
            for text, seq in walk_texts(tok, result.lazy, healing.kept, 8, seed=len(prompt)):
                assert text.startswith(prompt) and re.fullmatch(R_FAC, text[len(prompt):]), text
                assert encodes(tok, [text])[0] == seq
    assert checked >= 500


def test_a_healed_factorized_artifact_refuses_a_kept_prefix_that_is_no_path():
    result = pipeline.build(real("llama2")[0], R_FAC, canonical=True, prompt="Hello wor",
                            limits=pipeline.Limits(max_arcs=SMALL_ARCS))
    m = bpe_factorized
    header, body = unpack(result.to_bytes(), m.MAGIC, m.FORMAT, m.HEALED, "artifact", "")
    header = {k: v for k, v in header.items() if k not in ("sha256", "checksum")}
    bad_kept = {**header, "healing": {**header["healing"], "kept": header["healing"]["kept"] * 2}}
    missing = {k: v for k, v in header.items() if k != "healing"}
    mistyped = {**header, "healing": {**header["healing"], "kept": "x"}}
    for h, why in ((bad_kept, "not a path"), (missing, "healing field"), (mistyped, "healing field")):
        with pytest.raises(InputError, match=why):
            m.from_bytes(pack(m.MAGIC, h, body), real("llama2")[0])
    assert m.from_bytes(pack(m.MAGIC, header, body)).healing == result.healing  # repacked as it was: loads


def test_without_a_prompt_the_artifacts_are_as_before():
    result = pipeline.build(real("llama2")[0], R_FAC, canonical=True, limits=pipeline.Limits(max_arcs=SMALL_ARCS))
    data = result.to_bytes()
    header, _ = unpack(data, bpe_factorized.MAGIC, bpe_factorized.FORMAT, bpe_factorized.VERSION, "a", "")
    assert header["version"] == 3 and "healing" not in header
    assert bpe_factorized.from_bytes(data).healing is None and result.healing is None
    index = check_exact("llama2", "").index()  # an empty prompt keeps nothing
    assert index["healing"] == {"prompt": "", "kept": [], "retokenized": 0}
    del index["healing"]
    assert constraint.IndexDecoder(index).healing is None


def test_an_index_with_a_damaged_healing_field_is_refused(tmp_path):
    index = check_exact("gpt2", "Hello wor").index()
    index["healing"]["retokenized"] = -1
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(index))
    with pytest.raises(InputError, match="healing"):
        constraint.load(str(path))


# ---- the command line ---------------------------------------------------------------------------------
LINE = re.compile(r"keep the prompt's first (\d+) tokens: ([\d ]+|\(none\)); "
                  r"the constraint re-tokenizes the last (\d+) of encode\(prompt\)")


def said(r) -> Healing:
    m = LINE.search(r.stderr)
    assert m, r.stderr
    kept = [] if m.group(2) == "(none)" else [int(x) for x in m.group(2).split()]
    assert len(kept) == int(m.group(1))
    return Healing("Hello wor", kept, int(m.group(3)))


def test_cli_writes_the_healed_index_and_fst(tmp_path):
    healing, ids = expected("gpt2", "Hello wor", MAT_COMPLETIONS)
    want = {tuple(x[len(healing.kept):]) for x in ids}
    r = run("promote", "gpt2", tmp_path / "a.json", "-e", R_MAT, "--canonical", "--prompt", "Hello wor",
            "--format", "index")
    assert r.rc == 0 and said(r) == healing
    dec = constraint.load(str(tmp_path / "a.json"), real("gpt2")[0])
    assert dec.healing == healing
    assert all(accepts(dec, list(x)) for x in want)
    (tmp_path / "prompt.txt").write_text("Hello wor")
    r = run("promote", "gpt2", tmp_path / "a.fst", "-e", R_MAT, "--canonical", "--prompt-file", tmp_path / "prompt.txt")
    assert r.rc == 0 and said(r) == healing
    dec = constraint.load(str(tmp_path / "a.fst"), real("gpt2")[0])
    assert paths(dec.fst) == want


def test_cli_writes_the_healed_factorized_artifact(tmp_path):
    out = tmp_path / "a.fac"
    r = run("promote", "gpt2", out, "-e", R_FAC, "--canonical", "--prompt", "Hello wor", "--format", "index",
            "--max-arcs", SMALL_ARCS)
    assert r.rc == 0 and "writing the factorized form" in r.stderr
    healing, ids = expected("gpt2", "Hello wor", FAC_COMPLETIONS)
    assert said(r) == healing
    data = out.read_bytes()
    size = struct.unpack_from("<I", data, len(bpe_factorized.MAGIC))[0]
    header = json.loads(data[len(bpe_factorized.MAGIC) + 4:][:size])
    assert header["version"] == bpe_factorized.HEALED and header["healing"]["kept"] == healing.kept
    dec = constraint.load(str(out))
    assert dec.healing == healing
    assert all(accepts(dec, x[len(healing.kept):]) for x in ids)
    assert not accepts(dec, ids[0])  # the kept tokens are behind the start


def test_cli_refuses_bad_prompt_options(tmp_path):
    r = run("promote", "gpt2", tmp_path / "a.fst", "-e", "ld", "--prompt", "Hello wor")
    assert r.rc == 2 and "--canonical" in r.stderr and not (tmp_path / "a.fst").exists()
    (tmp_path / "p.txt").write_text("x")
    r = run("promote", "gpt2", tmp_path / "a.fst", "-e", "ld", "--canonical", "--prompt", "Hello",
            "--prompt-file", tmp_path / "p.txt")
    assert r.rc == 2 and "--prompt-file" in r.stderr
    r = run("promote", "gpt2", tmp_path / "a.fst", "-e", "ld", "--canonical", "--prompt", "Hi<|endoftext|>wor")
    assert r.rc == 2 and "<|endoftext|>" in r.stderr
