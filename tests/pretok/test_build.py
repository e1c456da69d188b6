"""P of a whole tokenizer.json (tokfst_cli.pretok.build) against HF's normalizer + pre-tokenizer.

For the real GPT-2 and Llama-2 files and for the pipeline blocks the major BPE families publish
(cl100k/o200k/Llama-3/Qwen-style Split + ByteLevel, DeepSeek-style Sequence of Splits, Metaspace
first/always, Digits, Punctuation, Whitespace, WhitespaceSplit, Prepend + Replace), P's unique
output on generated texts equals ``pre_tokenize_str(normalize_str(text))`` piece for piece
(byte-level pieces compared as raw bytes). Unmodelled components are refused by name.
"""

from __future__ import annotations

import json
from functools import lru_cache

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tokenizers import Tokenizer

from tokfst_cli.errors import InputError
from tokfst_cli.pretok import build, split
from tokfst_cli.tokenizer.model import unicode_to_bytes

from ..conftest import TOKENIZERS
from .test_split import CHARS, FAMILIES

U2B = unicode_to_bytes()
GPT2 = json.loads(TOKENIZERS["gpt2"].read_text())
LLAMA = json.loads(TOKENIZERS["llama2"].read_text())


def _bytelevel(add_prefix_space=False, use_regex=False) -> dict:
    return {"type": "ByteLevel", "add_prefix_space": add_prefix_space, "trim_offsets": True, "use_regex": use_regex}


def _split(name: str, behavior="Isolated", invert=False) -> dict:
    return {"type": "Split", "pattern": {"Regex": FAMILIES[name]}, "behavior": behavior, "invert": invert}


def _seq(*items) -> dict:
    return {"type": "Sequence", "pretokenizers": list(items)}


def _meta(scheme: str, split_: bool = True) -> dict:
    return {"type": "Metaspace", "replacement": "▁", "prepend_scheme": scheme, "split": split_}


CONFIGS = {
    "gpt2.json": GPT2,
    "llama2.json": LLAMA,
    "cl100k": {**GPT2, "pre_tokenizer": _seq(_split("cl100k"), _bytelevel())},
    "o200k": {**GPT2, "pre_tokenizer": _seq(_split("o200k"), _bytelevel())},
    "qwen": {**GPT2, "pre_tokenizer": _seq(_split("qwen"), _bytelevel())},
    "deepseek": {**GPT2, "pre_tokenizer": _seq(_split("deepseek-digits"), _split("deepseek-cjk"),
                                                _split("deepseek-main"), _bytelevel())},
    "bytelevel-prefix": {**GPT2, "pre_tokenizer": _bytelevel(True, True)},
    "metaspace-first": {**LLAMA, "normalizer": None, "pre_tokenizer": _meta("first")},
    "metaspace-always": {**LLAMA, "normalizer": None, "pre_tokenizer": _meta("always", False)},
    "whitespace+metaspace": {**LLAMA, "normalizer": None,
                             "pre_tokenizer": _seq({"type": "Whitespace"}, _meta("always"))},
    "digits+punctuation": {**GPT2, "pre_tokenizer": _seq({"type": "Digits", "individual_digits": False},
                                                          {"type": "Punctuation", "behavior": "Contiguous"},
                                                          _bytelevel(True, False))},
    "wssplit+digits": {**GPT2, "pre_tokenizer": _seq({"type": "WhitespaceSplit"}, {"type": "Digits",
                                                                                   "individual_digits": True})},
    "replace-normalizers": {**LLAMA, "normalizer": {"type": "Sequence", "normalizers": [
        {"type": "Replace", "pattern": {"Regex": " {2,}"}, "content": " "}, {"type": "Prepend", "prepend": "▁"},
        {"type": "Replace", "pattern": {"String": " "}, "content": "▁"}]}},
    "lowercase+strip": {**GPT2, "normalizer": {"type": "Sequence", "normalizers": [
        {"type": "Strip", "strip_left": True, "strip_right": True}, {"type": "Lowercase"}]}},
    "rstrip+metaspace": {**LLAMA, "normalizer": {"type": "Strip", "strip_left": False, "strip_right": True},
                         "pre_tokenizer": _meta("always")},
    "split-behaviours": {**GPT2, "pre_tokenizer": _seq(_split("deepseek-digits", "MergedWithNext"),
                                                        {**_split("gpt2", "Removed", True)})},
}


@lru_cache(maxsize=None)
def machines(name: str):
    data = CONFIGS[name]
    return build.transducer(data), Tokenizer.from_str(json.dumps(data))


def hf_pieces(name: str, tok: Tokenizer, text: str) -> list[str]:
    normalized = tok.normalizer.normalize_str(text) if tok.normalizer else text
    pieces = [p for p, _ in tok.pre_tokenizer.pre_tokenize_str(normalized)] if tok.pre_tokenizer else (
        [normalized] if normalized else [])
    if "ByteLevel" in json.dumps(CONFIGS[name].get("pre_tokenizer")):
        pieces = [bytes(U2B[c] for c in p).decode("utf-8") for p in pieces]
    return pieces


@pytest.mark.parametrize("name", sorted(CONFIGS))
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=st.lists(st.sampled_from(CHARS + ["1234567", "▁", "  x", "a,b", "!!", "’", "Σ", "İ", "ẞ", "\u3000"]),
                    max_size=12).map("".join))
def test_p_cuts_as_hf_normalizer_and_pre_tokenizer(name, text):
    p, tok = machines(name)
    assert split.apply(p, text) == hf_pieces(name, tok, text), text


@pytest.mark.parametrize("spec,what", [
    ({"normalizer": {"type": "Nmt"}}, "normalizer Nmt"),
    ({"normalizer": {"type": "StripAccents"}}, "normalizer StripAccents"),
    ({"pre_tokenizer": {"type": "BertPreTokenizer"}}, "pre-tokenizer BertPreTokenizer"),
    ({"pre_tokenizer": {"type": "Split", "pattern": {"Regex": "(?<=a)b"}, "behavior": "Isolated"}}, "look-behind"),
    ({"pre_tokenizer": _seq({"type": "Whitespace"}, _meta("first"))}, "prepend_scheme first"),
])
def test_unmodelled_components_are_refused_by_name(spec, what):
    with pytest.raises(InputError, match=what):
        build.transducer({**GPT2, **spec})
