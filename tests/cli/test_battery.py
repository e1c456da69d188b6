"""Bad-input battery, inputs: tokenizer.json files and canonical-check lines.

Every bad input ends the same way: exit 2 (1 for an empty result), exactly one stderr line
``tokfst: error: ...`` naming the problem, no traceback, no "internal error", and no output
file (nor a temporary one) left behind. A file that Hugging Face itself reads and tokfst
models may succeed (exit 0); a file HF refuses never does.

Hypothesis generates the damage: random bytes, truncations and byte edits of a valid
tokenizer.json, and structured edits (a field of the model, the vocabulary, the merges, the
added tokens or a pipeline component replaced by a value of another type, or deleted). The
named cases of the issue are spelled out below. In process (tests.runner.run): only the
command's own behaviour matters here. Profile: tests/conftest.py ``BATTERY``
(``TOKFST_BATTERY=full`` for the big one).
"""

from __future__ import annotations

import copy
import json
import tempfile
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from tokenizers import Tokenizer, models, normalizers, pre_tokenizers

from ..conftest import BATTERY
from ..runner import run

LETTERS = [chr(c) for c in range(ord("a"), ord("z") + 1)] + list("0123456789-")


def bpe_json() -> dict:
    vocab = {c: i for i, c in enumerate(LETTERS)}
    vocab.update({"ab": len(vocab), "abc": len(vocab) + 1, "[UNK]": len(vocab) + 2})
    tok = Tokenizer(models.BPE(vocab, [("a", "b"), ("ab", "c")], unk_token="[UNK]"))
    tok.normalizer = normalizers.Lowercase()
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.add_special_tokens(["[UNK]"])
    return json.loads(tok.to_str())


def wordpiece_json() -> dict:
    vocab = {"[UNK]": 0, **{c: i + 1 for i, c in enumerate(LETTERS)}}
    vocab.update({"##b": len(vocab), "##c": len(vocab) + 1, "ab": len(vocab) + 2})
    tok = Tokenizer(models.WordPiece(vocab, unk_token="[UNK]", max_input_chars_per_word=20))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.add_special_tokens(["[UNK]"])
    return json.loads(tok.to_str())


BASES = {"bpe": bpe_json(), "wordpiece": wordpiece_json()}
PATTERN = "(ab|c)+"


def hf_accepts(text: bytes | str) -> bool:
    try:
        Tokenizer.from_str(text.decode("utf-8") if isinstance(text, bytes) else text)
        return True
    except Exception:  # noqa: BLE001 - any refusal
        return False


def assert_clean_failure(r, d: Path, codes=(1, 2)) -> None:
    """Exit code in ``codes``, one 'tokfst: error:' line, nothing on stdout, nothing written."""
    assert r.rc in codes, (r.rc, r.err)
    assert r.out == b""
    assert len(r.err_lines) == 1, r.err_lines
    line = r.err_lines[0]
    assert line.startswith("tokfst: error: "), line
    assert "internal error" not in line and "Traceback" not in r.stderr
    assert not (d / "out.fst").exists()
    assert [p.name for p in d.iterdir()] == ["tokenizer.json"], list(d.iterdir())  # no temporary file


def promote_file(data: bytes, *extra: str):
    """``tokfst promote`` on a tokenizer.json holding ``data``: (Run, its directory)."""
    d = Path(tempfile.mkdtemp(prefix="battery-"))
    (d / "tokenizer.json").write_bytes(data)
    return run("promote", d / "tokenizer.json", d / "out.fst", "-e", PATTERN, "--no-cache", *extra), d


def judge(data: bytes, *extra: str) -> int:
    """Run promote and check the outcome against HF's own verdict on the file; the exit code."""
    r, d = promote_file(data, *extra)
    try:
        if r.rc == 0:
            assert hf_accepts(data), "tokfst accepted a file Hugging Face refuses"
            assert (d / "out.fst").stat().st_size > 0 and r.err == b""
        else:
            assert_clean_failure(r, d)
        return r.rc
    finally:
        for p in d.iterdir():
            p.unlink()
        d.rmdir()


def test_the_base_tokenizers_work():
    for name, base in BASES.items():
        assert hf_accepts(json.dumps(base)), name
        assert judge(json.dumps(base).encode()) == 0, name
        assert judge(json.dumps(base).encode(), "--canonical") == 0, name


# --- generated damage ---------------------------------------------------------------------------

@BATTERY
@given(st.binary(max_size=300))
def test_random_bytes(data):
    assert judge(data) == 2


@BATTERY
@given(st.sampled_from(sorted(BASES)), st.data())
def test_truncated(name, data):
    text = json.dumps(BASES[name]).encode()
    cut = data.draw(st.integers(0, len(text) - 1))
    assert judge(text[:cut]) == 2


@BATTERY
@given(st.sampled_from(sorted(BASES)), st.data())
def test_byte_edits(name, data):
    text = bytearray(json.dumps(BASES[name]).encode())
    for _ in range(data.draw(st.integers(1, 3))):
        i = data.draw(st.integers(0, len(text) - 1))
        text[i] = data.draw(st.integers(0, 255))
    judge(bytes(text))


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-3, 2 ** 33) | st.floats(allow_nan=False, width=32)
    | st.text(max_size=4),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3),
    max_leaves=6)


def paths(doc, prefix=()) -> list[tuple]:
    """Paths into a tokenizer.json worth damaging (a few entries of the long lists and maps)."""
    out = [prefix] if prefix else []
    if isinstance(doc, dict):
        keys = list(doc)
        if prefix and prefix[-1] == "vocab":
            keys = keys[:3] + keys[-2:]
        for k in keys:
            out += paths(doc[k], prefix + (k,))
    elif isinstance(doc, list):
        for i in sorted({0, len(doc) - 1}) if doc else ():
            out += paths(doc[i], prefix + (i,))
    return out


def edit(doc: dict, path: tuple, op: str, value) -> dict:
    doc = copy.deepcopy(doc)
    parent = doc
    for k in path[:-1]:
        parent = parent[k]
    key = path[-1]
    if op == "delete":
        del parent[key]
    else:
        parent[key] = value
    return doc


@BATTERY
@given(st.sampled_from(sorted(BASES)), st.data())
def test_structured_edits(name, data):
    """A field replaced by a value of any type, or deleted; also through --canonical (BPE)."""
    base = BASES[name]
    path = data.draw(st.sampled_from(paths(base)))
    op = data.draw(st.sampled_from(["replace", "delete"]))
    doc = edit(base, path, op, data.draw(JSON_VALUES) if op == "replace" else None)
    text = json.dumps(doc).encode()
    judge(text)
    if name == "bpe":
        judge(text, "--canonical")


# --- the issue's named cases ---------------------------------------------------------------------

def case(name: str, change) -> dict:
    doc = copy.deepcopy(BASES["bpe"])
    change(doc)
    return doc


def _vocab(doc):
    return doc["model"]["vocab"]


ADDED = {"single_word": False, "lstrip": False, "rstrip": False, "normalized": False, "special": True}

# name: (tokenizer.json, expected exit code, text the error line names)
NAMED = {
    "truncated": (json.dumps(BASES["bpe"])[:200], 2, "not JSON"),
    "not an object": ("[1, 2, 3]", 2, "no 'model' section"),
    "id as string": (case("s", lambda d: _vocab(d).update({"zz": "40"})), 2, "'zz'"),
    "id as float": (case("f", lambda d: _vocab(d).update({"zz": 40.0})), 2, "'zz'"),
    "negative id": (case("n", lambda d: _vocab(d).update({"zz": -1})), 2, "'zz'"),
    "vocab as a list": (case("l", lambda d: d["model"].update(vocab=[[k, v] for k, v in _vocab(d).items()])),
                        2, "not a list"),
    "empty vocabulary": (case("e", lambda d: d["model"].update(vocab={}, merges=[])), 2, "empty"),
    "duplicate ids": (case("d", lambda d: _vocab(d).update({"zz": 0})), 2, "share id 0"),
    "missing ids (a gap)": (case("g", lambda d: _vocab(d).update({"zz": 100})), 0, None),
    "merge part not in vocab": (case("m", lambda d: d["model"]["merges"].append("q zz")), 2, "merge 2"),
    "merge result not in vocab": (case("r", lambda d: d["model"]["merges"].append("b a")), 2, "merge 2"),
    "merge of three": (case("3", lambda d: d["model"]["merges"].append("a b c")), 2, "not a pair"),
    "merges not a list": (case("ml", lambda d: d["model"].update(merges={"a": "b"})), 2, "merges"),
    "unknown normalizer": (case("un", lambda d: d.update(normalizer={"type": "Frobnicate"})), 2, "normalizer"),
    "unknown pre-tokenizer": (case("up", lambda d: d.update(pre_tokenizer={"type": "Frobnicate"})), 2,
                              "pre-tokenizer"),
    "unknown decoder": (case("ud", lambda d: d.update(decoder={"type": "Frobnicate"})), 2, "decoder"),
    "normalizer as a string": (case("ns", lambda d: d.update(normalizer="Lowercase")), 2, "normalizer"),
    "unknown model type": (case("ut", lambda d: d["model"].update(type="Frobnicate")), 2, "Frobnicate"),
    "prefix of wrong type": (case("p", lambda d: d["model"].update(continuing_subword_prefix=7)), 2,
                             "continuing_subword_prefix"),
    "byte_fallback without byte tokens": (case("bf", lambda d: d["model"].update(byte_fallback=True)), 0, None),
    "added token = vocab token, same id": (case("a0", lambda d: d["added_tokens"].append(
        {"id": _vocab(d)["ab"], "content": "ab", **ADDED})), 0, None),
    "added token shadows a vocab token": (case("a1", lambda d: d["added_tokens"].append(
        {"id": 90, "content": "ab", **ADDED})), 2, "'ab'"),
    "added token takes a vocab id": (case("a2", lambda d: d["added_tokens"].append(
        {"id": _vocab(d)["ab"], "content": "zz", **ADDED})), 2, "'zz'"),
    "added token without fields": (case("a3", lambda d: d["added_tokens"].append({"id": 90, "content": "zz"})),
                                   2, "added tokens"),
    "dropout": (case("do", lambda d: d["model"].update(dropout=0.5)), 2, "dropout"),
    "nested too deeply": ("[" * 100_000 + "]" * 100_000, 2, "nested"),
    "not UTF-8": (b"\xff\xfe{", 2, "not JSON"),
    "NUL bytes": (b"{\x00}", 2, "not JSON"),
}


ADDED_IN_PATTERN = {"added token = vocab token, same id": "ab"}  # an added token PATTERN can spell


@pytest.mark.parametrize("name", list(NAMED))
def test_named_case(name):
    doc, code, needle = NAMED[name]
    data = doc if isinstance(doc, bytes) else (doc if isinstance(doc, str) else json.dumps(doc)).encode()
    for extra in ((), ("--canonical",)):
        r, d = promote_file(data, *extra)
        if code == 0 and extra and name in ADDED_IN_PATTERN:  # HF would split it out of the regex's text
            assert r.rc == 0, r.err  # a special token: its texts left out of the language
            r, d = promote_file(data, *extra, "--special-text", "refuse")
            assert_clean_failure(r, d, (2,))
            assert f"added token {ADDED_IN_PATTERN[name]!r}" in r.err_lines[0], r.err_lines
        elif code == 0:
            assert r.rc == 0, (extra, r.err)
            assert hf_accepts(data)
        else:
            assert_clean_failure(r, d, (code,))
            assert needle in r.err_lines[0], r.err_lines


def test_wordpiece_named_cases(tmp_path):
    """The same refusals reach WordPiece files (and --canonical, whose P reads the normalizer)."""
    for change, needle in ((lambda d: d.update(normalizer={"type": "Frobnicate"}), "normalizer"),
                           (lambda d: d["model"].update(max_input_chars_per_word="20"), "max_input_chars_per_word"),
                           (lambda d: d["model"]["vocab"].update({"##zz": 1}), "share id 1")):
        doc = copy.deepcopy(BASES["wordpiece"])
        change(doc)
        for extra in ((), ("--canonical",)):
            r, d = promote_file(json.dumps(doc).encode(), *extra)
            assert_clean_failure(r, d, (2,))
            assert needle in r.err_lines[0]


# --- canonical-check input -----------------------------------------------------------------------

@pytest.fixture(scope="module")
def small_bpe(tmp_path_factory) -> Path:
    p = tmp_path_factory.mktemp("cc") / "bpe.json"
    p.write_text(json.dumps(BASES["bpe"]))
    return p


BAD_LINES = {
    "id too large": ("0 1 40\n", "'40'"),
    "negative id": ("0 -1\n", "'-1'"),
    "huge id": ("1" * 40 + "\n", "1111"),
    "hex id": ("0x1\n", "'0x1'"),
    "NUL byte": ("0 \x00 1\n", "\\x00"),
    "letters": ("a b\n", "'a'"),
    "superscript digit": ("0 \u00b2\n", "'\u00b2'"),
    "two minus signs": ("--5\n", "'--5'"),
}


@pytest.mark.parametrize("name", list(BAD_LINES))
def test_canonical_check_refuses_bad_ids(small_bpe, name):
    text, needle = BAD_LINES[name]
    r = run("canonical-check", small_bpe, stdin=text)
    assert r.rc == 2 and r.out == b""
    assert len(r.err_lines) == 1 and "line 1" in r.err_lines[0] and needle in r.err_lines[0], r.err_lines
    assert "internal error" not in r.stderr


def test_canonical_check_empty_lines_crlf_and_nul_free_input(small_bpe):
    ab, c = BASES["bpe"]["model"]["vocab"]["ab"], BASES["bpe"]["model"]["vocab"]["c"]
    # the model level: "ab c" is not canonical ("abc" is a token); through the Whitespace pre-tokenizer
    # the text "ab c" gives exactly it
    r = run("canonical-check", small_bpe, "--json", stdin=f"{ab}\r\n\r\n\n{ab} {c}\r\n")
    assert r.rc == 0, r.err
    r = run("canonical-check", small_bpe, "--json", "--level", "model", stdin=f"{ab}\r\n\r\n\n{ab} {c}\r\n")
    assert r.rc == 1, r.err
    recs = [json.loads(x) for x in r.stdout.splitlines()]
    assert [x["tokens"] for x in recs] == [[ab], [], [], [ab, c]]
    assert [x["canonical"] for x in recs] == [True, True, True, False]
    r = run("canonical-check", small_bpe, stdin=b"")
    assert r.rc == 0 and r.out == b"" and r.err == b""


def test_canonical_check_bad_line_writes_nothing_of_its_chunk(small_bpe):
    """check.py: "an input error in a chunk stops the run before any of that chunk's lines is reported"."""
    for text in ("0\n:\n", "\x1e:\n", "0\n1\n2 x\n"):
        r = run("canonical-check", small_bpe, "--json", stdin=text)
        assert r.rc == 2 and len(r.err_lines) == 1, (text, r.err_lines)
        assert r.out == b"", (text, r.out)


def test_canonical_check_not_utf8(small_bpe):
    r = run("canonical-check", small_bpe, stdin=b"0 1\n\xff\xfe\n")
    assert r.rc == 2 and len(r.err_lines) == 1 and "UTF-8" in r.err_lines[0], r.err_lines


def test_canonical_check_a_line_of_a_million_tokens(small_bpe):
    a = BASES["bpe"]["model"]["vocab"]["a"]
    z = BASES["bpe"]["model"]["vocab"]["z"]
    line = " ".join([str(a), str(z)] * 500_000)
    r = run("canonical-check", small_bpe, "--json", stdin=line + "\n")
    assert r.rc == 0, r.err[:300]
    (rec,) = [json.loads(x) for x in r.stdout.splitlines()]
    assert rec["canonical"] and len(rec["tokens"]) == 1_000_000
    bad = " ".join([str(z)] * 999_998 + [str(a), str(BASES["bpe"]["model"]["vocab"]["b"])])
    r = run("canonical-check", small_bpe, "--json", "--level", "model", stdin=bad + "\n")  # model level: a b is ab
    assert r.rc == 1
    (rec,) = [json.loads(x) for x in r.stdout.splitlines()]
    assert rec["index"] == 999_999 and rec["reason"] == "banned pair"


@BATTERY
@given(st.lists(st.one_of(st.integers(-2, 45).map(str), st.text(max_size=3)), max_size=12))
def test_canonical_check_generated_lines(small_bpe, fields):
    text = " ".join(fields)
    r = run("canonical-check", small_bpe, "--json", stdin=text + "\n")
    assert r.rc in (0, 1, 2), r.err
    assert "internal error" not in r.stderr and "Traceback" not in r.stderr
    if r.rc == 2:
        assert len(r.err_lines) == 1 and r.err_lines[0].startswith("tokfst: error: line ")
    else:
        assert r.err == b"" and len(r.stdout.splitlines()) == len((text + "\n").splitlines())
