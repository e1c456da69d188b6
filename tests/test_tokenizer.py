"""The neutral tokenizer model (tokfst_cli.tokenizer.model) against Hugging Face ``tokenizers``.

HF is the oracle throughout: the ids HF's model produces must spell the input through
``model.surfaces``; vocabulary sizes, added tokens, merges and model options are read back
from HF's own objects and serializations rather than written into the tests.
"""

from __future__ import annotations

import copy
import json
import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tokenizers import Tokenizer, models, pre_tokenizers, trainers

from tokfst_cli.errors import InputError
from tokfst_cli.tokenizer import model as tokmod
from tokfst_cli.tokenizer.model import SPACE_MARK

from .conftest import PACKAGE_DATA, TOKENIZERS, words100
from .helpers import hf_model_ids

HYPO = settings(deadline=None, max_examples=100, suppress_health_check=[HealthCheck.too_slow])

# --- text strategies -----------------------------------------------------------------------

_ranges = {
    "ascii": (0x20, 0x7E),
    "latin1": (0xA0, 0xFF),
    "combining": (0x300, 0x36F),
    "greek-cyrillic": (0x370, 0x4FF),
    "cjk": (0x4E00, 0x9FFF),
    "hangul": (0xAC00, 0xD7A3),
    "emoji": (0x1F300, 0x1FAFF),
}
_chars = st.one_of(
    *(st.integers(lo, hi).map(chr) for lo, hi in _ranges.values()),
    st.sampled_from(" \t\n\u00a0\u3000"),  # blanks of several kinds
    st.characters(exclude_categories=("Cs",)),  # anything else UTF-8 can encode
)
any_text = st.text(alphabet=_chars, max_size=40)
# In a SentencePiece-style model a literal "▁" and a space are the same symbol after the
# normalizer (" " -> "▁"), so "▁" is not an input whose bytes a surface can reproduce.
sp_text = st.text(alphabet=_chars.filter(lambda c: c != SPACE_MARK), max_size=40)


def _spell(model, ids: list[int]) -> bytes:
    out = []
    for i in ids:
        s = model.surfaces[i]
        assert s is not None, f"HF produced id {i} ({model.tokens[i]!r}) which has no surface"
        out.append(s)
    return b"".join(out)


# --- surfaces against HF ---------------------------------------------------------------------

@HYPO
@given(any_text)
def test_gpt2_hf_ids_spell_the_text(tokenizer, text):
    model, hf = tokenizer("gpt2"), tokenizer.hf("gpt2")
    ids = hf_model_ids(hf, model, text)
    assert _spell(model, ids) == text.encode("utf-8")


@HYPO
@given(sp_text)
def test_llama2_hf_ids_spell_the_text(tokenizer, text):
    model, hf = tokenizer("llama2"), tokenizer.hf("llama2")
    ids = hf_model_ids(hf, model, text)
    assert model.token_id("<unk>") not in ids
    assert _spell(model, ids) == text.encode("utf-8")


def _check_wordpiece_word(model, hf, word: str) -> bool:
    """The WordPiece pieces of one pre-token spell it; False if HF falls back to [UNK]."""
    unk = model.options["unk_token"]
    toks = hf.model.tokenize(word)
    if any(t.value == unk for t in toks):
        return False
    ids = [t.id for t in toks]
    assert _spell(model, ids) == word.encode("utf-8")
    assert [model.word_internal[i] for i in ids] == [False] + [True] * (len(ids) - 1)
    return True


bert_text = st.text(alphabet=st.one_of(
    st.sampled_from("abcdefghijklmnopqrstuvwxyz0123456789 .,;:!?'\"-()"),
    st.integers(0xC0, 0xFF).map(chr),
    st.integers(0x4E00, 0x9FFF).map(chr),
    st.characters(exclude_categories=("Cs",)),
), max_size=60)


@HYPO
@given(bert_text)
def test_bert_wordpiece_pieces_spell_each_pre_token(tokenizer, text):
    model, hf = tokenizer("bert"), tokenizer.hf("bert")
    normalized = hf.normalizer.normalize_str(text)
    for word, _ in hf.pre_tokenizer.pre_tokenize_str(normalized):
        _check_wordpiece_word(model, hf, word)


def test_bert_spells_real_words_without_unk(tokenizer):
    # Deterministic companion of the property above: none of these may be skipped as [UNK].
    model, hf = tokenizer("bert"), tokenizer.hf("bert")
    words = words100() + ["unaffable", "tokenization", "électricité".lower(), "東京"]
    checked = 0
    for text in words:
        for word, _ in hf.pre_tokenizer.pre_tokenize_str(hf.normalizer.normalize_str(text)):
            assert _check_wordpiece_word(model, hf, word), word
            checked += 1
    assert checked >= len(words)
    # Some of them really are split into ## pieces.
    assert any(len(hf.model.tokenize(w)) > 1 for w in words)


@pytest.mark.parametrize("name", ["gpt2", "llama2", "bert"])
def test_vocab_size_and_tokens_match_hf(tokenizer, name):
    model, hf = tokenizer(name), tokenizer.hf(name)
    assert model.vocab_size == hf.get_vocab_size()
    vocab = hf.get_vocab()
    assert {t: i for i, t in enumerate(model.tokens)} == vocab


@pytest.mark.parametrize("name", ["gpt2", "llama2", "bert"])
def test_added_tokens_have_no_surface_and_are_the_only_ones(tokenizer, name):
    model, hf = tokenizer(name), tokenizer.hf(name)
    added = set(hf.get_added_tokens_decoder())
    assert added, "every real tokenizer here has special tokens"
    assert model.special_ids == added
    assert {i for i, s in enumerate(model.surfaces) if s is None} == added
    assert all(i not in added for i, _ in model.lexicon_items())


def test_llama2_byte_fallback_tokens_are_single_bytes(tokenizer):
    model, hf = tokenizer("llama2"), tokenizer.hf("llama2")
    byte_tokens = {tok: i for tok, i in hf.get_vocab().items() if re.fullmatch(r"<0x[0-9A-F]{2}>", tok)}
    assert len(byte_tokens) == 256
    a = hf.token_to_id("a")
    for tok, i in byte_tokens.items():
        assert model.surfaces[i] == bytes([int(tok[3:5], 16)])
        # HF's decoder turns the byte token back into that byte too (an ASCII byte decodes on
        # its own; the leading "a" keeps the decoder's Strip(" ") away from it).
        if int(tok[3:5], 16) < 0x80:
            assert hf.decode([a, i]).encode("utf-8") == b"a" + model.surfaces[i]


@pytest.mark.parametrize("name", ["gpt2", "llama2"])
def test_every_single_byte_is_a_surface(tokenizer, name):
    model = tokenizer(name)
    singles = {s for s in model.surfaces if s is not None and len(s) == 1}
    assert singles == {bytes([b]) for b in range(256)}


def test_bert_surfaces_strip_the_continuation_prefix(tokenizer):
    model, hf = tokenizer("bert"), tokenizer.hf("bert")
    prefix = hf.model.continuing_subword_prefix
    for tok, i in hf.get_vocab().items():
        if i in model.special_ids:
            continue
        inner = tok.startswith(prefix) and len(tok) > len(prefix)
        assert model.word_internal[i] == inner
        assert model.surfaces[i] == (tok[len(prefix):] if inner else tok).encode("utf-8")


# --- merges -----------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def llama_json() -> dict:
    return json.loads(TOKENIZERS["llama2"].read_bytes())


def _same_model(a, b) -> None:
    for f in ("family", "style", "tokens", "surfaces", "word_internal", "merges", "options", "special_ids"):
        assert getattr(a, f) == getattr(b, f), f


def test_string_and_list_merges_give_the_same_model(llama_json):
    strings = llama_json["model"]["merges"]
    assert all(isinstance(m, str) for m in strings)
    as_lists = copy.deepcopy(llama_json)
    as_lists["model"]["merges"] = [m.split(" ") for m in strings]
    a = tokmod.from_json(llama_json)
    b = tokmod.from_json(as_lists)
    _same_model(a, b)
    assert len(a.merges) == len(strings)


def test_merge_ranks_are_hf_ranks(tokenizer, llama_json):
    model, hf = tokenizer("llama2"), tokenizer.hf("llama2")
    # HF re-serializes the merges it loaded, in rank order, as [a, b] pairs.
    hf_merges = json.loads(hf.to_str())["model"]["merges"]
    vocab = hf.get_vocab()
    assert model.merges == [(vocab[a], vocab[b]) for a, b in hf_merges]


def test_list_merges_allow_tokens_with_spaces():
    hf = Tokenizer(models.BPE({"a": 0, " ": 1, "b": 2, "a ": 3, "a b": 4}, [("a", " "), ("a ", "b")]))
    data = json.loads(hf.to_str())
    model = tokmod.from_json(data)
    assert model.merges == [(0, 1), (3, 2)]
    ids = [t.id for t in hf.model.tokenize("a b")]
    assert _spell(model, ids) == b"a b"


def test_merge_with_unknown_token_is_refused():
    hf = Tokenizer(models.BPE({"a": 0, "b": 1, "ab": 2}, [("a", "b")]))
    data = json.loads(hf.to_str())
    data["model"]["merges"].append(["a", "zz"])
    with pytest.raises(InputError, match="zz"):
        tokmod.from_json(data)
    data["model"]["merges"][-1] = "b a"  # both known, but "ba" is not a token
    with pytest.raises(InputError, match="merge 1"):
        tokmod.from_json(data)


# --- refusals --------------------------------------------------------------------------------

def _small_bpe(**kw) -> dict:
    return json.loads(Tokenizer(models.BPE({"a": 0, "b": 1, "ab": 2}, [("a", "b")], **kw)).to_str())


def _write(tmp_path, name: str, content) -> str:
    p = tmp_path / name
    p.write_text(content if isinstance(content, str) else json.dumps(content), encoding="utf-8")
    return str(p)


def test_dropout_is_refused(tmp_path):
    path = _write(tmp_path, "drop.json", _small_bpe(dropout=0.1))
    with pytest.raises(InputError, match="dropout"):
        tokmod.load(path)


@pytest.mark.parametrize("dropout", [None, 0, 0.0])
def test_no_dropout_is_accepted(tmp_path, dropout):
    data = _small_bpe()
    data["model"]["dropout"] = dropout
    model = tokmod.load(_write(tmp_path, "nodrop.json", data))
    assert model.merges == [(0, 1)]


@pytest.mark.parametrize("kind,hf_model", [
    ("Unigram", lambda: models.Unigram([("a", -1.0), ("b", -2.0)], 0)),
    ("WordLevel", lambda: models.WordLevel({"a": 0, "[UNK]": 1}, unk_token="[UNK]")),
])
def test_unsupported_models_are_refused(tmp_path, kind, hf_model):
    data = json.loads(Tokenizer(hf_model()).to_str())
    assert data["model"]["type"] == kind
    with pytest.raises(InputError, match=kind):
        tokmod.load(_write(tmp_path, f"{kind}.json", data))


def test_missing_model_section_is_refused(tmp_path):
    data = _small_bpe()
    del data["model"]
    path = _write(tmp_path, "nomodel.json", data)
    with pytest.raises(InputError, match="model"):
        tokmod.load(path)


def test_from_json_without_model_is_an_input_error():
    with pytest.raises(InputError, match="model"):
        tokmod.from_json({"version": "1.0"})


@pytest.mark.parametrize("text", ["{", '{"model": {"type": "BPE",}}', "", "\x00"])
def test_invalid_json_is_refused(tmp_path, text):
    path = _write(tmp_path, "bad.json", text)
    with pytest.raises(json.JSONDecodeError) as reference:
        json.loads(text)
    why = reference.value.msg  # the parser's own diagnosis must reach the user
    with pytest.raises(InputError) as info:
        tokmod.load(path)
    assert path in str(info.value) and why in str(info.value)


def test_empty_vocab_is_refused(tmp_path):
    data = json.loads(Tokenizer(models.BPE({}, [])).to_str())
    with pytest.raises(InputError, match="vocab.*empty"):
        tokmod.load(_write(tmp_path, "empty.json", data))


def test_missing_tokenizer_file_is_refused(tmp_path):
    with pytest.raises(InputError, match="not found"):
        tokmod.load(str(tmp_path / "nope.json"))


# --- fingerprint -----------------------------------------------------------------------------

@pytest.fixture(scope="module")
def trained_json() -> dict:
    """A small BPE trained by HF on local text, with a "##" prefix and a "</w>" suffix."""
    hf = Tokenizer(models.BPE(continuing_subword_prefix="##", end_of_word_suffix="</w>", unk_token="[UNK]"))
    hf.pre_tokenizer = pre_tokenizers.Whitespace()
    trainer = trainers.BpeTrainer(vocab_size=150, continuing_subword_prefix="##", end_of_word_suffix="</w>",
                                  special_tokens=["[UNK]"], show_progress=False)
    text = (PACKAGE_DATA / "words100.txt").read_text()
    hf.train_from_iterator([text] * 3, trainer=trainer)
    return json.loads(hf.to_str())


def _reorder(obj):
    """The same JSON value with every object's keys in reverse order."""
    if isinstance(obj, dict):
        return {k: _reorder(obj[k]) for k in reversed(list(obj))}
    if isinstance(obj, list):
        return [_reorder(x) for x in obj]
    return obj


def test_fingerprint_is_stable_across_reloads_and_formatting(tmp_path, trained_json):
    a = _write(tmp_path, "a.json", json.dumps(trained_json))
    b = _write(tmp_path, "b.json", json.dumps(_reorder(trained_json), indent=4, ensure_ascii=True))
    fa, fa2, fb = tokmod.load(a).fingerprint, tokmod.load(a).fingerprint, tokmod.load(b).fingerprint
    assert re.fullmatch(r"[0-9a-f]{64}", fa)
    assert fa == fa2 == fb


def test_bundled_fingerprint_is_stable(tokenizer):
    assert (tokmod.load("gpt2").fingerprint == tokmod.load(str(TOKENIZERS["gpt2"])).fingerprint
            == tokenizer("gpt2").fingerprint)


def test_fingerprint_changes_with_one_merge_or_vocab_entry(trained_json):
    base = tokmod.from_json(trained_json).fingerprint
    variants = {}
    d = copy.deepcopy(trained_json)
    d["model"]["merges"].pop()
    variants["last merge dropped"] = d
    d = copy.deepcopy(trained_json)
    m = d["model"]["merges"]
    m[0], m[1] = m[1], m[0]
    variants["two merges swapped"] = d
    d = copy.deepcopy(trained_json)
    v = d["model"]["vocab"]
    x, y = list(v)[-2:]
    v[x], v[y] = v[y], v[x]
    variants["two ids swapped"] = d
    d = copy.deepcopy(trained_json)
    d["model"]["vocab"]["zzz-new"] = len(d["model"]["vocab"])
    variants["one entry added"] = d
    prints = {k: tokmod.from_json(d).fingerprint for k, d in variants.items()}
    for k, fp in prints.items():
        assert fp != base, k
    assert len(set(prints.values())) == len(prints)


def test_fingerprint_covers_everything_that_decides_surfaces():
    plain = json.loads(Tokenizer(models.BPE({"a": 0, SPACE_MARK + "a": 1, SPACE_MARK: 2},
                                            [(SPACE_MARK, "a")])).to_str())
    spm = copy.deepcopy(plain)
    spm["decoder"] = {"type": "Metaspace", "replacement": SPACE_MARK, "prepend_scheme": "always", "split": True}
    a, b = tokmod.from_json(plain), tokmod.from_json(spm)
    assert a.surfaces != b.surfaces  # the decoder changes what the tokens spell ...
    assert a.fingerprint != b.fingerprint  # ... so it must change the fingerprint


# --- options ---------------------------------------------------------------------------------

def test_wordpiece_options_are_read():
    hf = Tokenizer(models.WordPiece({"<unk>": 0, "a": 1, "b": 2, "@@b": 3, "@@a": 4, "ab": 5},
                                    unk_token="<unk>", max_input_chars_per_word=7,
                                    continuing_subword_prefix="@@"))
    model = tokmod.from_json(json.loads(hf.to_str()))
    assert model.family == "wordpiece"
    assert model.options == {
        "unk_token": hf.model.unk_token,
        "continuing_subword_prefix": hf.model.continuing_subword_prefix,
        "max_input_chars_per_word": hf.model.max_input_chars_per_word,
    }
    for tok, i in hf.get_vocab().items():
        if tok.startswith("@@"):
            assert model.word_internal[i] and model.surfaces[i] == tok[2:].encode()
        else:
            assert not model.word_internal[i]
    for word in ("ab", "abba", "baab", "aaaa"):
        ids = [t.id for t in hf.model.tokenize(word)]
        assert _spell(model, ids) == word.encode()
        assert [model.word_internal[i] for i in ids] == [False] + [True] * (len(ids) - 1)


def test_bpe_options_are_read():
    hf = Tokenizer(models.BPE({"<unk>": 0, "a": 1, "@@b": 2, "ab": 3}, [("a", "@@b")], unk_token="<unk>",
                              fuse_unk=True, byte_fallback=True, ignore_merges=True,
                              continuing_subword_prefix="@@", end_of_word_suffix="</w>"))
    model = tokmod.from_json(json.loads(hf.to_str()))
    for key in ("unk_token", "fuse_unk", "byte_fallback", "ignore_merges",
                "continuing_subword_prefix", "end_of_word_suffix"):
        assert model.options[key] == getattr(hf.model, key), key


@pytest.mark.parametrize("name", ["gpt2", "llama2"])
def test_real_bpe_options_match_hf(tokenizer, name):
    model, hf = tokenizer(name), tokenizer.hf(name)
    for key in ("unk_token", "fuse_unk", "byte_fallback", "continuing_subword_prefix", "end_of_word_suffix"):
        assert model.options[key] == getattr(hf.model, key), key
    assert bool(model.options["ignore_merges"]) == hf.model.ignore_merges


def test_trained_bpe_with_prefix_and_suffix(trained_json):
    model = tokmod.from_json(trained_json)
    hf = Tokenizer.from_str(json.dumps(trained_json))
    assert model.vocab_size == hf.get_vocab_size()
    prefix, suffix = hf.model.continuing_subword_prefix, hf.model.end_of_word_suffix
    assert (prefix, suffix) == ("##", "</w>")
    assert any(t.startswith(prefix) for t in model.tokens) and any(t.endswith(suffix) for t in model.tokens)
    for tok, i in hf.get_vocab().items():
        if i in model.special_ids:
            assert model.surfaces[i] is None
            continue
        core = tok[len(prefix):] if tok.startswith(prefix) and len(tok) > len(prefix) else tok
        core = core[: -len(suffix)] if core.endswith(suffix) and len(core) > len(suffix) else core
        assert model.surfaces[i] == core.encode("utf-8"), tok
        assert prefix.encode() not in model.surfaces[i] and suffix.encode() not in model.surfaces[i]
        assert model.word_internal[i] == tok.startswith(prefix)
    assert len(model.merges) == len(trained_json["model"]["merges"])


@pytest.fixture(scope="module")
def trained(trained_json):
    return tokmod.from_json(trained_json), Tokenizer.from_str(json.dumps(trained_json))


_train_alphabet = sorted(set("".join((PACKAGE_DATA / "words100.txt").read_text().split())))


def _check_trained_word(model, hf, word: str) -> bool:
    """HF's pieces of one word spell it; False if HF falls back to the unknown token."""
    toks = hf.model.tokenize(word)
    if any(t.value == hf.model.unk_token for t in toks):
        return False
    ids = [t.id for t in toks]
    assert _spell(model, ids) == word.encode("utf-8")
    assert [model.word_internal[i] for i in ids] == [False] + [True] * (len(ids) - 1)
    return True


@HYPO
@given(st.lists(st.text(alphabet=_train_alphabet, min_size=1, max_size=12), min_size=1, max_size=6))
def test_trained_bpe_hf_pieces_spell_each_word(trained, words):
    # Words HF cannot write (e.g. a lone "a": "a</w>" was never learned) come out as [UNK].
    model, hf = trained
    for word, _ in hf.pre_tokenizer.pre_tokenize_str(" ".join(words)):
        _check_trained_word(model, hf, word)


def test_trained_bpe_spells_its_training_words(trained):
    model, hf = trained
    words = words100()
    assert all(_check_trained_word(model, hf, w) for w in words)
    assert any(len(hf.model.tokenize(w)) > 1 for w in words)  # some words really are split
