"""Characters a BPE model cannot spell (``pretok.unknown``), against Hugging Face's encode: a
canonical language whose model text can hold one is refused by name (HF would put the
unk_token there, one per run with fuse_unk, or drop the character with no unk_token); every
other language is exactly HF's encodings. The encoder (``tokfst encode``) and the reference BPE
model HF's three behaviours exactly. Tokenizers: the synthetic one of ``common`` (no
pre-tokenizer: a space reaches the model, and it has no token for it), its fuse_unk, no-unk and
Whitespace-pre-tokenizer variants, and Llama-2 without byte fallback."""

from __future__ import annotations

import json
import re

import pynini
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tokenizers import Tokenizer

from tokfst_cli import pipeline
from tokfst_cli.encoder.encode import Encoder
from tokfst_cli.pretok.unknown import UnknownCharacter
from tokfst_cli.tokenizer.model import load

from ..conftest import TOKENIZERS
from ..runner import run
from .common import synthetic_tokenizer

UNK = 16  # the synthetic tokenizer's [UNK]
VARIANTS = {  # name -> changes to the synthetic tokenizer.json
    "unk": {},
    "fuse": {"model.fuse_unk": True},
    "no-unk": {"model.unk_token": None, "added_tokens": []},
    "whitespace": {"pre_tokenizer": {"type": "Whitespace"}},
}
WORDS = st.lists(st.text("abcq xyz", min_size=1, max_size=5), min_size=1, max_size=3, unique=True)


@pytest.fixture(scope="module")
def variants(tmp_path_factory):
    """name -> (path, tokfst model, HF tokenizer); "unk" also stands as the oracle of where an
    unknown character reaches the model (the same normalizer and pre-tokenizer)."""
    d = tmp_path_factory.mktemp("unknown")
    base = json.loads(open(synthetic_tokenizer(d, False)).read())
    out = {}
    for name, changes in VARIANTS.items():
        data = json.loads(json.dumps(base))
        for key, value in changes.items():
            *head, last = key.split(".")
            node = data
            for h in head:
                node = node[h]
            node[last] = value
        path = d / f"{name}.json"
        path.write_text(json.dumps(data))
        out[name] = (path, load(str(path)), Tokenizer.from_file(str(path)))
    return out


def paths(fst: pynini.Fst) -> set[tuple[int, ...]]:
    return {tuple(lab - 1 for lab in p) for p in _label_paths(fst)}


def _label_paths(fst: pynini.Fst) -> list[list[int]]:
    out, stack = [], [(fst.start(), [])]
    zero = pynini.Weight.zero(fst.weight_type())
    while stack:
        s, labels = stack.pop()
        if fst.final(s) != zero:
            out.append(labels)
        stack += [(a.nextstate, labels + [a.ilabel]) for a in fst.arcs(s)]
    return out


def reaches_unknown(variants, name: str, text: str) -> bool:
    oracle = "whitespace" if name == "whitespace" else "unk"
    return UNK in variants[oracle][2].encode(text, add_special_tokens=False).ids


@pytest.mark.parametrize("name", list(VARIANTS))
@settings(max_examples=40, deadline=None)
@given(words=WORDS)
def test_refused_exactly_when_hf_would_meet_an_unknown_character(variants, name, words):
    _, model, hf = variants[name]
    pattern = "|".join(re.escape(w) for w in words)
    unknown = [w for w in words if reaches_unknown(variants, name, w)]
    try:
        result = pipeline.build(model, pattern, canonical=True)
    except UnknownCharacter as e:
        assert unknown, (pattern, str(e))
        assert reaches_unknown(variants, name, e.data["example"]) and e.data["char"] in e.data["example"]
        if name != "no-unk":
            assert "unknown token '[UNK]'" in str(e)
        else:
            assert "drops it" in str(e)
        return
    assert not unknown, (pattern, unknown)
    assert paths(result.fst) == {tuple(hf.encode(w, add_special_tokens=False).ids) for w in words}


@pytest.mark.parametrize("name", list(VARIANTS))
@settings(max_examples=40, deadline=None)
@given(text=st.text("abcq xyz\n", max_size=30))
def test_the_encoder_puts_unknown_tokens_where_hf_does(variants, name, text):
    _, model, hf = variants[name]
    assert Encoder(model).encode(text) == hf.encode(text, add_special_tokens=False).ids


def test_the_model_level_is_checked_too(variants):
    _, model, _ = variants["unk"]
    with pytest.raises(UnknownCharacter) as e:
        pipeline.build(model, "abq", canonical=True, level="model")
    assert e.value.data["char"] == "q"
    assert pipeline.build(model, "abq|ab", canonical=False).fst.num_states() > 0  # agnostic: surfaces only


def test_llama2_without_byte_fallback_refuses_by_name_and_hf_agrees(tmp_path):
    data = json.loads(TOKENIZERS["llama2"].read_text())
    data["model"]["byte_fallback"] = False
    path = tmp_path / "llama2-no-fallback.json"
    path.write_text(json.dumps(data))
    hf = Tokenizer.from_file(str(path))
    model = load(str(path))
    missing = next(c for c in "鸺龘䶵𝔘☃" if model.token_id(c) is None)
    unk_id = model.token_id(data["model"]["unk_token"])
    assert unk_id in hf.encode(f"a{missing}", add_special_tokens=False).ids
    out = tmp_path / "x.fst"
    r = run("promote", path, "-e", f"(yes|a{missing})", "--canonical", out)
    assert r.returncode == 2 and len(r.err_lines) == 1 and repr(missing) in r.stderr, r.stderr
    assert "byte_fallback" in r.stderr and not out.exists()
    result = pipeline.build(model, "(yes|no)", canonical=True)  # every character has a token: as before
    assert paths(result.fst) == {tuple(hf.encode(w, add_special_tokens=False).ids) for w in ("yes", "no")}
