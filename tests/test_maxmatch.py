"""MaxMatch (WordPiece) transducer for one word vs HF's WordPiece model (seed 000 Sec. 6.2)."""

from __future__ import annotations

import dataclasses
import json
import random
from functools import lru_cache
from importlib import resources

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tokenizers import Tokenizer, models

from tokfst_cli.maxmatch import maxmatch_transducer, tokenize_word
from tokfst_cli.tokenizer import from_json, load

from .conftest import TOKENIZERS

ALPHABET = "abcé"
piece = st.text(alphabet=ALPHABET, min_size=1, max_size=4)


@lru_cache(maxsize=256)
def _build(initial: tuple[str, ...], internal: tuple[str, ...]):
    vocab = {"[UNK]": 0}
    for tok in list(initial) + ["##" + p for p in internal]:
        vocab.setdefault(tok, len(vocab))
    hf = Tokenizer(models.WordPiece(vocab=vocab, unk_token="[UNK]", max_input_chars_per_word=100))
    model = from_json(json.loads(hf.to_str()))
    return hf, model, maxmatch_transducer(model)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    initial=st.sets(piece, min_size=3, max_size=12),
    internal=st.sets(piece, min_size=3, max_size=12),
    words=st.lists(st.text(alphabet=ALPHABET, min_size=1, max_size=8), min_size=1, max_size=15),
)
def test_random_vocab_matches_hf(initial, internal, words):
    hf, model, fst = _build(tuple(sorted(initial)), tuple(sorted(internal)))
    for word in words:
        assert tokenize_word(fst, model, word) == [t.id for t in hf.model.tokenize(word)], word


def test_unk_whole_word():
    _, model, fst = _build(("a", "ab", "abc", "é"), ("b", "c", "é"))
    unk = model.token_id("[UNK]")
    assert tokenize_word(fst, model, "abd") == [unk]
    assert tokenize_word(fst, model, "b") == [unk]
    assert tokenize_word(fst, model, "abcb") == [model.token_id("abc"), model.token_id("##b")]


LOWER = set(b"abcdefghijklmnopqrstuvwxyz")


@pytest.fixture(scope="module")
def bert():
    """BERT restricted to the pieces spelled in a-z (same ids).

    A greedy match on an a-z word only ever uses pieces that are substrings of it, so on a-z
    words the restricted transducer must agree with HF's full model. The full 30,522-token
    transducer takes about a minute to build (too slow for the suite).
    """
    full = load(str(TOKENIZERS["bert"]))
    surfaces = [s if s and set(s) <= LOWER else None for s in full.surfaces]
    model = dataclasses.replace(full, surfaces=surfaces)
    hf = Tokenizer.from_file(str(TOKENIZERS["bert"]))
    return hf, model, maxmatch_transducer(model)


def test_bert_words_match_hf(bert):
    hf, model, fst = bert
    rng = random.Random(0)
    words = (resources.files("tokfst_cli") / "data" / "words100.txt").read_text().split()
    sample = [w.lower() for w in words]
    while len(sample) < 300:
        sample.append("".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(1, 12))))
    for word in sample[:300]:
        assert tokenize_word(fst, model, word) == [t.id for t in hf.model.tokenize(word)], word
