"""Tokenizers trained here by HF's BpeTrainer under the pipelines the major BPE families publish,
and texts that probe them.

The normalizer and pre-tokenizer blocks are the public tokenizer.json blocks of each family:
GPT-2's ByteLevel regex; cl100k/Llama-3-style (``(?i:...)`` contractions, ``\\p{N}{1,3}``) and
o200k-style Splits + ByteLevel; a Qwen-style single-digit Split; a DeepSeek-style Sequence of
Splits; Metaspace with prepend_scheme first and always; Llama-2's Prepend + Replace normalizer
and a Gemma-style Replace normalizer, both with byte fallback; Lowercase + ByteLevel.
"""

from __future__ import annotations

import json
import random
import tempfile
from functools import lru_cache
from pathlib import Path

from tokenizers import Tokenizer, pre_tokenizers, trainers

from tokfst_cli.tokenizer.model import from_json

from ..pretok.test_split import FAMILIES

DATA = Path(__file__).resolve().parent.parent / "data"


def _split(name: str) -> dict:
    return {"type": "Split", "pattern": {"Regex": FAMILIES[name]}, "behavior": "Isolated", "invert": False}


BYTELEVEL = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False}
GPT2 = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}
BL_DECODER = {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True}
SP_DECODER = {"type": "Sequence", "decoders": [
    {"type": "Replace", "pattern": {"String": "▁"}, "content": " "}, {"type": "ByteFallback"}, {"type": "Fuse"},
    {"type": "Strip", "content": " ", "start": 1, "stop": 0}]}
GEMMA_DECODER = {"type": "Sequence", "decoders": [
    {"type": "Replace", "pattern": {"String": "▁"}, "content": " "}, {"type": "ByteFallback"}, {"type": "Fuse"}]}


def _seq(*items) -> dict:
    return {"type": "Sequence", "pretokenizers": list(items)}


def _meta(scheme: str) -> dict:
    return {"type": "Metaspace", "replacement": "▁", "prepend_scheme": scheme, "split": True}


# name -> (normalizer, pre_tokenizer, decoder, byte-level alphabet, byte fallback)
CONFIGS = {
    "gpt2": (None, GPT2, BL_DECODER, True, False),
    "cl100k": (None, _seq(_split("cl100k"), BYTELEVEL), BL_DECODER, True, False),
    "o200k": (None, _seq(_split("o200k"), BYTELEVEL), BL_DECODER, True, False),
    "qwen": (None, _seq(_split("qwen"), BYTELEVEL), BL_DECODER, True, False),
    "deepseek": (None, _seq(_split("deepseek-digits"), _split("deepseek-cjk"), _split("deepseek-main"), BYTELEVEL),
                 BL_DECODER, True, False),
    "metaspace-first": (None, _meta("first"), SP_DECODER, False, True),
    "metaspace-always": (None, _meta("always"), SP_DECODER, False, True),
    "llama2": ({"type": "Sequence", "normalizers": [{"type": "Prepend", "prepend": "▁"},
                                                     {"type": "Replace", "pattern": {"String": " "}, "content": "▁"}]},
               None, SP_DECODER, False, True),
    "gemma": ({"type": "Replace", "pattern": {"String": " "}, "content": "▁"}, None, GEMMA_DECODER, False, True),
    "lowercase": ({"type": "Lowercase"}, GPT2, BL_DECODER, True, False),
}
# configurations whose text is fixed by the ids up to what P cannot tell apart and a prepended
# "▁" (the decoder strips one): a sequence is canonical iff ``encode(x) == ids`` for x = decode(ids)
# or " " + decode(ids) (:func:`decodes`). Lowercase: many texts per sequence, no such oracle.
DECODABLE = [name for name in CONFIGS if name != "lowercase"]

FRAGMENTS = [
    "the", "The", "THE", "quick", "Brown", "fox", "jumps", "over", "lazy", "dog", "hello", "world", "Berlin",
    " ", " ", " ", "  ", "   ", "    ", "\t", "\n", "\n\n", " \n", "\r\n",
    "0", "7", "42", "123", "2024", "12345", "9876543",
    "'s", "'t", "'re", "'ve", "'m", "'ll", "'d", "'S", "'T", "'LL", "'Re", "n't",
    ".", ",", "!", "?", "...", "!?", "--", "(", ")", "{", "}", "\"", ":", ";", "/", "#", "@", "+=",
    "漢字", "ひらがな", "カタカナ", "Привет", "naïve", "é", "e\u0301", "ß", "Σ", "١٢٣",
    "😀", "👍🏽", "🇩🇪", "def f(x):\n    return x+1", "{\"a\": 1, \"b\": [2, 3]}", "if (a && b) { c++; }",
    "▁", "<0x41>", "Ġ",
]


def decodes(hf: Tokenizer, ids: list[int]) -> bool:
    """Is ``ids`` the encoding of its decoded text, with or without the stripped leading space?"""
    text = hf.decode(ids, skip_special_tokens=False)
    return any(hf.encode(x, add_special_tokens=False).ids == ids for x in (text, " " + text))


def texts(n: int, seed: int, max_parts: int = 8) -> list[str]:
    """Texts made of fragments that probe space runs, leading spaces, digit runs longer than 3,
    contractions in any case, punctuation runs, newlines and tabs, mixed scripts, emoji, code."""
    rng = random.Random(seed)
    return ["".join(rng.choice(FRAGMENTS) for _ in range(rng.randint(1, max_parts))) for _ in range(n)]


@lru_cache(maxsize=None)
def trained(name: str, vocab_size: int = 600) -> tuple[Path, Tokenizer]:
    """(tokenizer.json path, HF Tokenizer) for a configuration, trained on the probing texts."""
    normalizer, pre, decoder, byte_level, byte_fallback = CONFIGS[name]
    spec = {"version": "1.0", "truncation": None, "padding": None, "added_tokens": [], "normalizer": normalizer,
            "pre_tokenizer": pre, "post_processor": None, "decoder": decoder,
            "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
                      "end_of_word_suffix": None, "fuse_unk": byte_fallback, "byte_fallback": byte_fallback,
                      "ignore_merges": False, "vocab": {}, "merges": []}}
    tok = Tokenizer.from_str(json.dumps(spec))
    alphabet = pre_tokenizers.ByteLevel.alphabet() if byte_level else []
    corpus = [t for t in texts(3000, seed=1) + (DATA / "tiny_corpus.txt").read_text().splitlines()
              if "<0x" not in t]  # a merged "<0x41>" would shadow the byte token of the same name
    tok.train_from_iterator(corpus, trainers.BpeTrainer(vocab_size=vocab_size, show_progress=False,
                                                        initial_alphabet=alphabet))
    data = json.loads(tok.to_str())
    if byte_fallback:  # the <0xNN> tokens HF's byte fallback writes (the trainer does not make them)
        vocab = data["model"]["vocab"]
        for b in range(256):
            vocab.setdefault(f"<0x{b:02X}>", len(vocab))
    path = _workdir() / f"{name}-{vocab_size}.json"
    path.write_text(json.dumps(data, ensure_ascii=False))
    return path, Tokenizer.from_file(str(path))


@lru_cache(maxsize=1)
def _workdir() -> Path:
    return Path(tempfile.mkdtemp(prefix="tokfst-trained-"))


def model(name: str):
    path, _ = trained(name)
    return from_json(json.loads(path.read_text()), str(path))
