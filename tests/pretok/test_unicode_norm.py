"""NFC, NFD, NFKC and NFKD (tokfst_cli.pretok.unicode_norm) against HF's own normalizers.

F_k, the DFA of the texts HF's normalizer k leaves unchanged, accepts a text iff
``normalize_str(text) == text`` (Hypothesis texts of ASCII, precomposed and decomposed Latin,
marks of many combining classes in both orders, Hangul jamo and syllables, compatibility
characters, Indic two-part vowels, kana, CJK, emoji; and every table entry: each composing
starter or mark followed by each composing mark or starter, starter + mark + mark triples);
``normalize_str`` always lands in F_k; on F_k the whole P equals
``pre_tokenize_str(normalize_str(text))``. A regex with texts outside F_k is refused by name.
"""

from __future__ import annotations

import json
from functools import lru_cache

import numpy as np
import pynini
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tokenizers import Tokenizer
from tokenizers import normalizers as nm

from tokfst_cli import pipeline
from tokfst_cli.automata.fsts import text_acceptor
from tokfst_cli.pretok import build, image, split, unicode_norm
from tokfst_cli.pretok.image import OutsideDomain
from tokfst_cli.tokenizer.model import from_json, unicode_to_bytes

from ..conftest import TOKENIZERS
from ..runner import run
from .test_split import FAMILIES

U2B = unicode_to_bytes()
GPT2 = json.loads(TOKENIZERS["gpt2"].read_text())
LLAMA = json.loads(TOKENIZERS["llama2"].read_text())
FORMS = unicode_norm.FORMS

ATOMS = (list("aAeEiouUnNcCsSzZ0123456789 .,'-\n")
         + ["é", "è", "ê", "ë", "ñ", "ü", "Å", "ǖ", "ệ", "ạ", "ḗ", "ǻ", "ặ", "Ç", "ş", "ż"]  # precomposed
         + ["\u0300", "\u0301", "\u0302", "\u0303", "\u0304", "\u0306", "\u0307", "\u0308", "\u030a", "\u030c",
            "\u031b", "\u0316", "\u0323", "\u0327", "\u0328", "\u0334", "\u0345", "\u05b0", "\u05b8", "\u0651",
            "\u093c", "\u3099", "\u309a", "\u1ac1", "\u0340", "\u0344", "\u0f73"]  # marks: ccc 1 to 240, unstable
         + ["e\u0301", "a\u0323\u0302", "a\u0302\u0323", "o\u031b\u0301", "u\u0308\u0304", "\u03b1\u0345\u0301"]
         + ["\u1100", "\u1161", "\u11a8", "\uac00", "\uac01", "\ud55c", "\u1100\u1161\u11a8"]  # Hangul
         + ["ﬁ", "①", "Ａ", "ſ", "ẛ", "\u2126", "\u212a", "\u212b", "½", "㎏", "\u00a0", "ǅ", "Ⅻ"]  # compatibility
         + ["\u0b47", "\u0b3e", "\u0b4b", "\u0dd9", "\u0dcf", "\u0dca", "\u0928", "\u0929"]  # Indic
         + ["か", "が", "ひ", "ア", "中", "文", "😀", "👍🏽", "\U00011935", "\U00011930", "α", "ά", "\u1fb3", "й"])
texts = st.lists(st.sampled_from(ATOMS), max_size=10).map("".join)
EXAMPLES = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def hf(form: str, text: str) -> str:
    return getattr(nm, form)().normalize_str(text)


def accepts(fst: pynini.Fst, text: str) -> bool:
    return pynini.compose(text_acceptor(text), fst).connect().num_states() > 0


@pytest.mark.parametrize("form", FORMS)
@EXAMPLES
@given(text=texts)
def test_normal_form_is_what_hf_leaves_unchanged(form, text):
    assert accepts(unicode_norm.normal_form(form), text) == (hf(form, text) == text), ascii(text)


@pytest.mark.parametrize("form", FORMS)
@EXAMPLES
@given(text=texts)
def test_hf_output_is_in_the_normal_form(form, text):
    """The image of the normalizer is F_k: P's image R stays exact."""
    assert accepts(unicode_norm.normal_form(form), hf(form, text)), ascii(text)


def _walk(fst: pynini.Fst, texts_: list[str]) -> np.ndarray:
    """Does the DFA accept each text (all at once, on its transition table)?"""
    delta, final = image.table(fst)
    enc = [t.encode("utf-8") for t in texts_]
    width = max(map(len, enc))
    grid = np.frombuffer(b"".join(e.ljust(width, b"\0") for e in enc), np.uint8).reshape(len(enc), width)
    length = np.array([len(e) for e in enc])
    q = np.zeros(len(enc), np.int64)
    for i in range(width):
        on = (i < length) & (q >= 0)
        q[on] = delta[q[on], grid[on, i].astype(np.int64) + 1]
    ok = q >= 0
    ok[ok] = final[q[ok]]
    return ok


@pytest.mark.parametrize("form", FORMS)
def test_every_table_entry(form):
    """Each composing starter, composite (Hangul LVT: every 200th) and mark, followed by each
    character that ends a decomposition, composes, or is a mark of another combining class;
    starter + mark + mark for every kind of starter."""
    t = unicode_norm.tables()
    starters = unicode_norm._starters(t)
    composing = sorted({c for s in starters.values() for c in s.danger})
    by_rank = sorted({r: c for c, r in sorted(t.rank.items())}.values())
    seconds = {s.first for s in starters.values() if s.first is not None}
    lvt = {c for c, d in t.decomposition.items() if len(d) == 3 and 0xAC00 <= c <= 0xD7A3}
    lefts = sorted(set(starters) | set(t.rank) | set(range(0x20, 0x7F)) | (set(t.decomposition) - lvt)
                   | set(sorted(lvt)[::200]))
    rights = sorted(set(composing) | set(by_rank) | seconds | {c for d in t.decomposition.values() for c in d[1:]}
                    | {0x61, 0x4E2D})
    pairs = [chr(a) + chr(b) for a in lefts for b in rights]
    kinds = sorted({s: c for c, s in sorted(starters.items()) if s.danger}.values())
    triples = [chr(a) + chr(b) + chr(c) for a in kinds for b in by_rank for c in composing]
    cases = pairs + triples
    want = np.array([a == b for a, b in zip(hf(form, "\0".join(cases)).split("\0"), cases)])
    got = _walk(unicode_norm.normal_form(form), cases)
    wrong = [ascii(cases[i]) for i in np.flatnonzero(got != want)[:10]]
    assert not wrong, wrong


def _bytelevel(use_regex: bool = False) -> dict:
    return {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": use_regex}


CONFIGS = {
    "NFC+ByteLevel": {**GPT2, "normalizer": {"type": "NFC"}},
    "NFKC+Split": {**GPT2, "normalizer": {"type": "NFKC"}, "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
        {"type": "Split", "pattern": {"Regex": FAMILIES["cl100k"]}, "behavior": "Isolated", "invert": False},
        _bytelevel()]}},
    "NFD+Metaspace": {**LLAMA, "normalizer": {"type": "NFD"},
                      "pre_tokenizer": {"type": "Metaspace", "replacement": "▁", "prepend_scheme": "always",
                                        "split": True}},
    "NFKD+Lowercase+WhitespaceSplit": {**GPT2, "normalizer": {"type": "Sequence", "normalizers": [
        {"type": "NFKD"}, {"type": "Lowercase"}]}, "pre_tokenizer": {"type": "WhitespaceSplit"}},
    "Lowercase+NFC+ByteLevel": {**GPT2, "normalizer": {"type": "Sequence", "normalizers": [
        {"type": "Lowercase"}, {"type": "NFC"}]}},
}


@lru_cache(maxsize=None)
def machines(name: str):
    data = CONFIGS[name]
    return build.transducer(data), build.domain(data["normalizer"]), Tokenizer.from_str(json.dumps(data))


def hf_pieces(name: str, tok: Tokenizer, text: str) -> list[str]:
    pieces = [p for p, _ in tok.pre_tokenizer.pre_tokenize_str(tok.normalizer.normalize_str(text))]
    if "ByteLevel" in json.dumps(CONFIGS[name]["pre_tokenizer"]):
        pieces = [bytes(U2B[c] for c in p).decode("utf-8") for p in pieces]
    return pieces


def _unchanged_by_each(name: str, text: str) -> bool:
    """Is ``text`` in P's domain as HF says: every NF normalizer leaves its input unchanged?"""
    spec = CONFIGS[name]["normalizer"]
    for item in spec.get("normalizers", [spec]):
        out = getattr(nm, item["type"])().normalize_str(text)
        if item["type"] in FORMS and out != text:
            return False
        text = out
    return True


@pytest.mark.parametrize("name", sorted(CONFIGS))
@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=texts, normalize=st.booleans())
def test_p_equals_hf_on_its_domain(name, text, normalize):
    p, dom, tok = machines(name)
    if normalize:
        text = tok.normalizer.normalize_str(text)
    inside = _unchanged_by_each(name, text)
    assert all(accepts(d, text) for d in dom) == inside, ascii(text)
    if inside:
        assert split.apply(p, text) == hf_pieces(name, tok, text), ascii(text)
    else:
        with pytest.raises(ValueError, match="no output"):
            split.apply(p, text)


# ---- refusing a regex with texts outside the domain ------------------------------------------------
@lru_cache(maxsize=None)
def nfc_tokenizer(tmp: str, form: str = "NFC") -> tuple[str, object]:
    path = f"{tmp}/{form.lower()}.json"
    data = {**GPT2, "normalizer": {"type": form}}
    with open(path, "w", encoding="utf-8") as f:
        json.dump(data, f)
    return path, from_json(data, path)


@pytest.fixture(scope="module")
def workdir(tmp_path_factory) -> str:
    return str(tmp_path_factory.mktemp("nf"))


@pytest.mark.parametrize("form,pattern,example", [
    ("NFC", "e\u0301", "e\u0301"),
    ("NFC", "caf(e|\u00e9)\u0301?", "cafe\u0301"),
    ("NFC", "\uac00\u11a8?", "\uac00\u11a8"),
    ("NFC", "a\u05b0\u0301", "a\u05b0\u0301"),  # 0301 is not blocked by a point of class 10
    ("NFKC", "(ﬁ|fi)x", "ﬁx"),
    ("NFD", "\u00e9", "\u00e9"),
])
def test_regex_outside_the_domain_is_refused(workdir, form, pattern, example):
    _, model = nfc_tokenizer(workdir, form)
    with pytest.raises(OutsideDomain, match=form) as e:
        pipeline.build(model, pattern, canonical=True)
    assert e.value.data == {"normalizer": form, "example": example}
    assert ascii(example) in str(e.value)


def _paths(fst: pynini.Fst) -> set[tuple[int, ...]]:
    """Every label sequence of a finite acceptor (token id + 1 per label)."""
    zero, out, stack = pynini.Weight.zero(fst.weight_type()), set(), [(fst.start(), ())]
    while stack:
        s, acc = stack.pop()
        if fst.final(s) != zero:
            out.add(acc)
        stack += [(arc.nextstate, acc + (arc.ilabel - 1,)) for arc in fst.arcs(s)]
    return out


def test_regex_inside_the_domain_is_exactly_encode(workdir):
    path, model = nfc_tokenizer(workdir)
    tok = Tokenizer.from_file(path)
    for pattern, strings in [("caf\u00e9", ["caf\u00e9"]), ("\u00e1\u0316|\u1ebf", ["\u00e1\u0316", "\u1ebf"]),
                             ("(\uac00|\u1100) ?\u1100", ["\uac00\u1100", "\uac00 \u1100", "\u1100\u1100",
                                                               "\u1100 \u1100"])]:
        result = pipeline.build(model, pattern, canonical=True)
        assert _paths(result.fst) == {tuple(tok.encode(x, add_special_tokens=False).ids) for x in strings}, pattern


def test_cli_refuses_in_one_line(workdir, tmp_path):
    path, _ = nfc_tokenizer(workdir)
    r = run("promote", path, "-e", "e\u0301", "--canonical", str(tmp_path / "out.fst"))
    assert r.rc == 2
    lines = r.err.decode().splitlines()
    assert len(lines) == 1 and "NFC" in lines[0] and "'e\\u0301'" in lines[0] and "--level model" in lines[0], lines
    assert not (tmp_path / "out.fst").exists()
    assert run("promote", path, "-e", "e\u0301", "--canonical", "--level", "model", str(tmp_path / "m.fst")).rc == 0
