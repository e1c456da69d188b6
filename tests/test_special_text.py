"""Canonical constraints and special tokens (``pipeline.build(special_text=...)``, ``promote
--special-text``): by default the texts that contain a special token's content (which HF's
encode cuts out as a control token) are left out of the language, so a free-text regex or a
schema with strings compiles on GPT-2 and Llama-2; walks never spell a special token; every
walk re-encodes to itself with HF; ``refuse`` keeps the refusal."""

from __future__ import annotations

import json

import numpy as np
import pytest

from tokfst_cli import pipeline
from tokfst_cli.errors import InputError
from tokfst_cli.schema.compile import compile_schema

from .bpe.pipelines import decodes
from .runner import run

SPECIALS = {"gpt2": ["<|endoftext|>"], "llama2": ["<unk>", "<s>", "</s>"]}
SCHEMA = {"type": "object", "properties": {"note": {"type": "string", "maxLength": 14}}, "required": ["note"],
          "additionalProperties": False}


def walks(decoder, model, n: int, seed: int, steer: list[bytes]) -> list[list[int]]:
    """Random walks that lean towards the bytes of the special tokens' texts (so that a walk that
    could spell one would)."""
    rng = np.random.default_rng(seed)
    near_ids = np.array(sorted(t for t, s in model.lexicon_items() if s and any(s in x for x in steer)), dtype=np.int64)
    out = []
    for _ in range(n):
        state, ids = decoder.initial(), []
        for _ in range(40):
            allowed = np.flatnonzero(decoder.mask(state))
            if not len(allowed) or (decoder.is_final(state) and rng.random() < 0.1):
                break
            near = allowed[np.isin(allowed, near_ids)]
            t = int(rng.choice(near if len(near) and rng.random() < 0.7 else allowed))
            ids.append(t)
            state = decoder.advance(state, t)
        if decoder.is_final(state):
            out.append(ids)
    return out


@pytest.mark.parametrize("name,what", [("gpt2", "regex"), ("gpt2", "schema"), ("llama2", "regex")])
def test_canonical_free_text_compiles_and_never_spells_a_special_token(tokenizer, name, what):
    model, hf = tokenizer(name), tokenizer.hf(name)
    kwargs = {"automaton": compile_schema(SCHEMA).automaton} if what == "schema" else {}
    result = pipeline.build(model, '"[^"]{0,14}"', canonical=True, limits=pipeline.Limits(max_arcs=1), **kwargs)
    assert sorted(result.excluded) == sorted(SPECIALS[name])
    decoder = result.decoder()
    surface = dict(model.lexicon_items())
    steer = [s.encode() for s in SPECIALS[name]]
    found = walks(decoder, model, 24, seed=3, steer=steer)
    assert len(found) >= 12
    for ids in found:
        text = b"".join(surface[t] for t in ids)
        assert not any(s in text for s in steer), text
        assert decodes(hf, ids), (ids, text)  # canonical: encode(text) is these ids


def test_refuse_keeps_the_refusal_and_the_command_line_names_what_it_left_out(tokenizer, tmp_path):
    tok = "tests/data/llama2.json"
    r = run("promote", tok, "-e", "(<s>|ab|</s>x)", "--canonical", "--format", "index", tmp_path / "q.json", "-v")
    assert r.returncode == 0 and "'<s>', '</s>'" in r.stderr and "left out" in r.stderr, r.stderr
    index = json.loads((tmp_path / "q.json").read_text())
    assert index["stats"]["arcs"] == 1 and tokenizer("llama2").tokens[index["masks"][0][0]] == "▁ab"  # "ab" only
    r = run("promote", tok, "-e", "(<s>|ab|</s>x)", "--canonical", "--special-text", "refuse", tmp_path / "r.fst")
    assert r.returncode == 2 and "added token" in r.stderr and not (tmp_path / "r.fst").exists()
    with pytest.raises(InputError):
        pipeline.build(tokenizer("gpt2"), "a<[|]endoftext[|]>", canonical=True, special_text="refuse")
