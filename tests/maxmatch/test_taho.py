"""MaxMatch (WordPiece) transducers T_Aho and the text transducer vs HF's WordPiece
(Cognetta & Okazaki 2024 Sec. 6.2)."""

from __future__ import annotations

import itertools
import json
import random
from functools import lru_cache
from importlib import resources

import pynini
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tokenizers import Tokenizer, models, pre_tokenizers

from tokfst_cli.automata.symbols import MARKER, UNKSYM
from tokfst_cli.maxmatch.taho import (
    Tries,
    domain_acceptor,
    maxmatch_transducer,
    success_transducer,
    text_transducer,
    tokenize_labels,
    tokenize_word,
)
from tokfst_cli.tokenizer.model import TokenizerModel, from_json

ALPHABET = "abcé"
MAX_CHARS = 5  # max_input_chars_per_word of the small models: longer words are [UNK] (UNKSYM)
piece = st.text(alphabet=ALPHABET, min_size=1, max_size=4)
vocabs = {"initial": st.sets(piece, min_size=3, max_size=12), "internal": st.sets(piece, min_size=3, max_size=12)}
SLOW = settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])


@lru_cache(maxsize=256)
def _build(initial: tuple[str, ...], internal: tuple[str, ...]) -> tuple[Tokenizer, TokenizerModel, pynini.Fst]:
    vocab = {"[UNK]": 0}
    for tok in list(initial) + ["##" + p for p in internal]:
        vocab.setdefault(tok, len(vocab))
    hf = Tokenizer(models.WordPiece(vocab=vocab, unk_token="[UNK]", max_input_chars_per_word=MAX_CHARS))
    hf.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    model = from_json(json.loads(hf.to_str()))
    return hf, model, maxmatch_transducer(model)


def _vocab(initial, internal):
    return _build(tuple(sorted(initial)), tuple(sorted(internal)))


@lru_cache(maxsize=64)
def _text(initial: tuple[str, ...], internal: tuple[str, ...]) -> pynini.Fst:
    return text_transducer(_build(initial, internal)[1])


def _text_labels(words: list[str], max_chars: int) -> list[int]:
    """Words as text_transducer input: bytes (label b + 1) or UNKSYM if too long, MARKER between."""
    out: list[int] = []
    for k, word in enumerate(words):
        if k:
            out.append(MARKER)
        out.extend([UNKSYM] if len(word) > max_chars else [b + 1 for b in word.encode("utf-8")])
    return out


def _outputs(fst: pynini.Fst, labels: list[int]) -> int:
    """How many distinct outputs ``fst`` has for ``labels``."""
    acc = pynini.accep("".join(f"[{lab}]" for lab in labels))
    out = pynini.project(pynini.compose(acc, fst), "output").rmepsilon()
    return 0 if out.start() == pynini.NO_STATE_ID else len(set(out.paths().ostrings()))


# --- the reference: the previous builder (Python add_arc, every phi transition expanded) -----

def _reference(model: TokenizerModel) -> tuple[pynini.Fst, pynini.Fst]:
    """(S, dom S) as first built: for each node and byte, follow the failure chain by hand."""
    tries = Tries(model)
    s, dom = pynini.Fst(), pynini.Fst()
    one = pynini.Weight.one(s.weight_type())
    n = len(tries.goto)
    for f in (s, dom):
        f.add_states(n)
        f.set_start(0)
    final = s.add_state()
    s.set_final(final)

    def emit(src: int, ilabel: int, tokens: list[int], dst: int) -> None:
        for k, tok in enumerate(tokens or [-1]):
            nxt = dst if k == max(len(tokens) - 1, 0) else s.add_state()
            s.add_arc(src, pynini.Arc(ilabel if k == 0 else 0, tok + 1, one, nxt))
            src = nxt

    for v in range(n):
        for c in range(256):
            z, out = v, []
            while z != -1 and c not in tries.goto[z]:
                out += tries.pops[z]
                z = tries.fail[z]
            if z != -1:
                emit(v, c + 1, out, tries.goto[z][c])
                dom.add_arc(v, pynini.Arc(c + 1, c + 1, one, tries.goto[z][c]))
        z, out = v, []
        while z not in (-1, tries.cont):
            out += tries.pops[z]
            z = tries.fail[z]
        if z == tries.cont and v not in (0, tries.cont):
            emit(v, 0, out, final)
            dom.set_final(v)
    return s, dom


def _dfa(f: pynini.Fst) -> pynini.Fst:
    return pynini.determinize(f.rmepsilon()).minimize()


def _sigma_plus() -> pynini.Fst:
    f = pynini.Fst()
    one = pynini.Weight.one(f.weight_type())
    f.add_states(2)
    f.set_start(0)
    f.set_final(1)
    for lab in range(1, 257):
        for s in (0, 1):
            f.add_arc(s, pynini.Arc(lab, lab, one, 1))
    return f


@settings(SLOW, max_examples=40)
@given(**vocabs)
def test_fast_builder_equals_the_reference(initial, internal):
    """Same domain, same range (tokens spell their word, so a range fixes S), same [UNK] words."""
    _, model, fst = _vocab(initial, internal)
    ref_s, ref_dom = _reference(model)
    s, dom = success_transducer(model)
    assert pynini.equivalent(ref_dom.arcsort("ilabel"), domain_acceptor(model))
    assert pynini.equivalent(dom, domain_acceptor(model))
    assert pynini.equivalent(_dfa(ref_s.copy().project("output")), _dfa(s.copy().project("output")))
    unk = pynini.accep(f"[{model.token_id('[UNK]') + 1}]")
    unk_words = pynini.compose(fst, unk).project("input")
    ref_unk_words = pynini.union(pynini.difference(_sigma_plus(), ref_dom), pynini.compose(ref_s, unk).project("input"))
    assert pynini.equivalent(_dfa(unk_words), _dfa(ref_unk_words))  # the word "[UNK]" itself is in S
    # Every short byte string (a byte outside the vocabulary included) has the reference's output.
    for k in range(1, 4):
        for word in itertools.product(list(b"abcz\xc3\xa9"), repeat=k):
            expected = tokenize_labels(ref_s, list(word), offset=1) if _outputs(ref_dom, [b + 1 for b in word]) \
                else [model.token_id("[UNK]")]
            assert tokenize_labels(fst, list(word), offset=1) == expected, word


@settings(SLOW, max_examples=60)
@given(**vocabs, words=st.lists(st.text(alphabet=ALPHABET, min_size=1, max_size=8), min_size=1, max_size=15))
def test_random_vocab_matches_hf(initial, internal, words):
    hf, model, fst = _vocab(initial, internal)
    for word in words:
        if len(word) <= MAX_CHARS:
            assert tokenize_word(fst, model, word) == [t.id for t in hf.model.tokenize(word)], word


@settings(SLOW, max_examples=40)
@given(**vocabs, words=st.lists(st.text(alphabet=ALPHABET, min_size=1, max_size=8), max_size=6))
def test_text_transducer_matches_hf(initial, internal, words):
    hf = _vocab(initial, internal)[0]
    fst = _text(tuple(sorted(initial)), tuple(sorted(internal)))
    labels = _text_labels(words, MAX_CHARS)
    assert tokenize_labels(fst, labels) == hf.encode(" ".join(words), add_special_tokens=False).ids, words


def test_text_transducer_markers_only_between_words():
    model = _build(("a", "ab"), ("b",))[1]
    fst = _text(("a", "ab"), ("b",))
    a, b = ord("a") + 1, ord("b") + 1
    assert tokenize_labels(fst, []) == []
    assert tokenize_labels(fst, [UNKSYM]) == [model.token_id("[UNK]")]
    assert tokenize_labels(fst, [a, b, MARKER, UNKSYM, MARKER, b]) == [
        model.token_id("ab"), model.token_id("[UNK]"), model.token_id("[UNK]")]
    for bad in ([MARKER], [a, MARKER], [MARKER, a], [a, MARKER, MARKER, a], [a, UNKSYM], [UNKSYM, a]):
        assert _outputs(fst, bad) == 0, bad


def test_unk_whole_word():
    _, model, fst = _build(("a", "ab", "abc", "é"), ("b", "c", "é"))
    unk = model.token_id("[UNK]")
    assert tokenize_word(fst, model, "abd") == [unk]
    assert tokenize_word(fst, model, "b") == [unk]
    assert tokenize_word(fst, model, "abcb") == [model.token_id("abc"), model.token_id("##b")]
    assert _outputs(fst, []) == 0  # the empty string is not a word


# --- BERT ------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def bert(tokenizer) -> tuple[Tokenizer, TokenizerModel, pynini.Fst, pynini.Fst]:
    """bert-base-uncased: HF, the model, T_Aho and the text transducer (a few seconds to build)."""
    model = tokenizer("bert")
    hf = tokenizer.hf("bert")
    hf.no_padding()
    hf.no_truncation()
    return hf, model, maxmatch_transducer(model), text_transducer(model)


def test_bert_words_match_hf(bert):
    hf, model, fst, _ = bert
    rng = random.Random(0)
    words = [w.lower() for w in (resources.files("tokfst_cli") / "data" / "words100.txt").read_text().split()]
    pieces = [t for t in model.tokens if t and not t.startswith("[")]
    while len(words) < 400:
        word = "".join(rng.choice(pieces).removeprefix("##") for _ in range(rng.randint(1, 4)))
        if rng.random() < 0.3:  # a character BERT may lack, anywhere
            i = rng.randrange(len(word) + 1)
            word = word[:i] + rng.choice("zé中!ß\u0301\x7f") + word[i:]
        words.append(word)
    for word in words:
        assert tokenize_word(fst, model, word) == [t.id for t in hf.model.tokenize(word)], word


def test_bert_text_matches_hf(bert):
    hf, model, _, fst = bert
    limit = model.options["max_input_chars_per_word"]
    texts = ["The quick brown fox jumps over the lazy dog.", "Tokenization-preserving promotion, e.g. MaxMatch!",
             "naïve café: 42 x 3.5 = 147 (approx.)", "", "unaffable " + "x" * (limit + 1) + " end"]
    for text in texts:
        words = [w for w, _ in hf.pre_tokenizer.pre_tokenize_str(hf.normalizer.normalize_str(text))]
        assert tokenize_labels(fst, _text_labels(words, limit)) == hf.encode(text, add_special_tokens=False).ids
