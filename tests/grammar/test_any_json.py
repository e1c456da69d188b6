"""``--any-json`` / ``tokfst.lazy(model, any_json=True)``: every JSON document, nested to any depth,
against Python's ``json`` module: documents Hypothesis draws (unicode, escapes, numbers, deep
nesting) written as each whitespace policy spells them are accepted token by token in the
tokenizer's own encoding and end final; texts of walks led by the masks parse with
``json.loads``; what a policy does not spell is refused."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tokfst_cli as tokfst
from tokfst_cli.errors import InputError
from tokfst_cli.promotion.stack import PushdownDecoder

from ..runner import run
from ..walks import accepts

LEAF = st.one_of(st.none(), st.booleans(), st.integers(-10**12, 10**12),
                 st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=8))
DOCS = st.recursive(LEAF, lambda c: st.one_of(st.lists(c, max_size=4), st.dictionaries(st.text(max_size=5), c,
                                                                                         max_size=4)), max_leaves=16)
SPELLING = {"compact": {"separators": (",", ":")}, "pretty": {"separators": (", ", ": ")},
            "flexible": {"indent": 2}}


@pytest.fixture(scope="module")
def decoders(tokenizer):
    model = tokenizer("gpt2")
    return {w: tokfst.lazy(model, any_json=True, whitespace=w) for w in SPELLING}


@pytest.mark.parametrize("whitespace", sorted(SPELLING))
def test_documents_are_accepted_in_the_tokenizers_encoding(whitespace, decoders, tokenizer):
    hf, decoder = tokenizer.hf("gpt2"), decoders[whitespace]
    assert isinstance(decoder, PushdownDecoder)

    @settings(max_examples=60, deadline=None)
    @given(DOCS, st.booleans())
    def check(doc, ascii_only):
        text = json.dumps(doc, ensure_ascii=ascii_only, **SPELLING[whitespace])
        assert accepts(decoder, hf.encode(text, add_special_tokens=False).ids), text

    check()


def test_each_policy_refuses_what_it_does_not_spell(decoders, tokenizer):
    hf = tokenizer.hf("gpt2")
    doc = {"a": [1, {"b": None}]}

    def ids(**kw):
        return hf.encode(json.dumps(doc, **kw), add_special_tokens=False).ids
    assert not accepts(decoders["compact"], ids(separators=(", ", ": ")))
    assert not accepts(decoders["pretty"], ids(indent=2))
    for bad in ['{"a":}', "[1,]", "01", '"\x01"', "{'a':1}", "[1]]"]:
        assert not accepts(decoders["flexible"], hf.encode(bad, add_special_tokens=False).ids), bad


def test_walks_led_by_the_masks_parse(decoders, tokenizer):
    """Random walks (after 60 bytes they lean towards closing: quotes, brackets, digits) end final,
    and their texts parse; no mask is empty before the end."""
    model = tokenizer("gpt2")
    surface = dict(model.lexicon_items())
    rng = np.random.default_rng(3)
    ended = 0
    for whitespace, decoder in decoders.items():
        for _ in range(4):
            state, text = decoder.initial(), b""
            while len(text) < 3000 and not (decoder.is_final(state) and len(text) > 1):
                allowed = np.flatnonzero(decoder.mask(state))
                assert len(allowed), text
                closing = [t for t in allowed if surface[int(t)] in (b"]", b"}", b'"', b"0", b"1")]
                short = [t for t in allowed if len(surface[int(t)]) == 1]
                pool = closing if closing and len(text) > 60 else short if rng.random() < 0.8 else allowed
                token = int(rng.choice(pool))
                state = decoder.advance(state, token)
                text += surface[token]
            if decoder.is_final(state):
                json.loads(text.decode("utf-8"))
                ended += 1
    assert ended >= 10


def test_nesting_has_no_depth_limit(decoders, tokenizer):
    model = tokenizer("gpt2")
    text = "[" * 3000 + "]" * 3000
    assert accepts(decoders["compact"], tokenizer.hf("gpt2").encode(text, add_special_tokens=False).ids)
    assert model.vocab_size == len(decoders["compact"].mask(decoders["compact"].initial()))


def test_cli(tmp_path):
    out = tmp_path / "json.fst"
    r = run("promote", "gpt2", "--any-json", "--whitespace", "pretty", out)
    assert r.rc == 0, r.stderr
    d = tokfst.load(str(out), "gpt2")
    assert isinstance(d, PushdownDecoder) and d.mask(d.initial()).any()
    r = run("promote", "gpt2", "--any-json", "-e", "x", tmp_path / "y.fst")
    assert r.rc == 2 and "--any-json" in r.stderr and len(r.err_lines) == 1


def test_unknown_policy_is_refused(tokenizer):
    with pytest.raises(InputError, match="whitespace"):
        tokfst.lazy(tokenizer("gpt2"), any_json=True, whitespace="tabs")
