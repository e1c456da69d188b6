"""canonical-check in chunks: the same bytes and exit codes as the whole-input version.

The reference is a copy of the command as it was before streaming (read all lines, parse all,
check all, report), run on the same input; the new command runs in process with small chunks
and read blocks, so that lines, multi-byte characters and CR LF pairs straddle them. One
deliberate difference: an empty line for a BPE tokenizer is canonical (the empty sequence, as
``ImplicitBpe.first_violation`` says) where ``check_batch`` used to crash. A second: WordPiece
added tokens ([CLS], [MASK], ...) stand between text segments, each checked on its own, as HF
splits them out of the text; the reference checks one sequence at a time, uncached.
"""

from __future__ import annotations

import io
import json
import random
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tokfst_cli.analysis import check
from tokfst_cli.automata.symbols import escape, unescape
from tokfst_cli.bench.check import sample_lines
from tokfst_cli.bpe import implicit
from tokfst_cli.cli.common import read_text
from tokfst_cli.cli.errors import word
from tokfst_cli.errors import InputError
from tokfst_cli.maxmatch import product
from tokfst_cli.pretok import added
from tokfst_cli.tokenizer.reference import HfReference

from ..runner import run

SPECIAL_TEXTS = ["", " ", "  two  spaces  ", "\ttab\t", "<|endoftext|>", "a<|endoftext|>b", "[CLS] hello [SEP]",
                 "[UNK]", "e\u0301te\u0301", "中文字", "😀 emoji 😀", "x" * 150, "\x00nul", "İstanbul ß Σ",
                 "unaffable", "HELLO World", "don't stop", "3.14159 2024-01-01", "a" * 3 + " " + "b" * 101, "Ġ▁##"]


# ---- the reference: canonical-check before issue #13 --------------------------------------------
def old_parse(model, kind: str, ref: HfReference, line: str, n: int) -> list[int]:
    if kind == "text":
        return ref.tokenize_text(line)
    out = []
    for field in line.split():
        if kind == "ids":
            if not field.lstrip("-").isdigit() or not 0 <= int(field) < model.vocab_size:
                raise InputError(f"line {n}: {field!r} is not a token id of this tokenizer (0..{model.vocab_size - 1})",
                                 "give space-separated token ids, or use --input tokens/text")
            out.append(int(field))
        else:
            tid = model.token_id(unescape(field))
            if tid is None:
                raise InputError(f"line {n}: {field!r} is not a token of this tokenizer",
                                 "give token names as fstprint shows them, or use --input ids/text")
            out.append(tid)
    return out


def old_check(model, imp, kind: str, text: str, json_out: bool) -> tuple[str, int, str]:
    """(stdout, exit code, stderr line) of the old command."""
    ref = HfReference(model)
    try:
        seqs = [old_parse(model, kind, ref, line, n) for n, line in enumerate(text_lines(text), 1)]
    except InputError as e:
        return "", 2, f"tokfst: error: {word(e)}"
    if model.family == "wordpiece":
        segments = check.MaxMatchVerdicts(product.checker(model), *added.splitting(model))  # second difference
        verdicts = [segments._uncached(seq) for seq in seqs]
    else:
        done = iter(imp.check_batch([s for s in seqs if s]) if any(seqs) else [])
        verdicts = [next(done) if s else None for s in seqs]
    out = io.StringIO()
    names = lambda ids: " ".join(escape(model.tokens[i]) for i in ids)  # noqa: E731
    for n, (seq, v) in enumerate(zip(seqs, verdicts), 1):
        canon = ref.canonical(seq) if v is not None else seq
        rec = {"line": n, "canonical": v is None, "tokens": seq}
        if v is not None:
            i, reason = v
            rec.update(index=i, reason=reason, pair=seq[max(i - 1, 0):i + 1], canonical_tokens=canon)
        if json_out:
            out.write(json.dumps(rec) + "\n")
        elif v is None:
            out.write("canonical\t" + names(seq) + "\n")
        else:
            out.write("\t".join(["non-canonical", str(rec["index"]), rec["reason"], names(rec["pair"]),
                                 names(canon) if canon is not None else "-"]) + "\n")
    return out.getvalue(), 1 if any(v is not None for v in verdicts) else 0, ""


# ---- inputs ---------------------------------------------------------------------------------------
_IMPLICIT: dict = {}


def _implicit(model):
    if model.fingerprint not in _IMPLICIT:
        _IMPLICIT[model.fingerprint] = implicit.compile_implicit(model).attach(model)
    return _IMPLICIT[model.fingerprint]


def tokenizer_of(tokenizer, name: str):
    """(model, implicit A_BPE or None, tokenizer.json path) of a real tokenizer."""
    model = tokenizer(name)
    return model, None if model.family == "wordpiece" else _implicit(model), tokenizer.path(name)


def pieces(model, t: int) -> list[int] | None:
    """Token t spelled with one token per character (a non-canonical split), if they exist."""
    name = model.tokens[t]
    if model.family == "wordpiece":
        inner = model.word_internal[t]
        body = name[2:] if inner else name
        parts = [("##" if inner or k else "") + c for k, c in enumerate(body)]
    else:
        parts = list(name)
    ids = [model.token_id(p) for p in parts]
    return ids if len(ids) > 1 and None not in ids else None


def mixed_lines(model, n: int, seed: int) -> tuple[list[str], list[list[int]]]:
    """Texts, and token sequences: HF's tokenizations, character splits, swaps, random ids, empty."""
    ref = HfReference(model)
    rng = random.Random(seed)
    texts = sample_lines(n, seed=seed) + SPECIAL_TEXTS
    seqs: list[list[int]] = []
    for text in texts:
        ids = ref.tokenize_text(text)
        seqs.append(ids)
        if ids:
            k = rng.randrange(len(ids))
            split = pieces(model, ids[k])
            if split:
                seqs.append(ids[:k] + split + ids[k + 1:])
        if len(ids) > 1:
            k = rng.randrange(len(ids) - 1)
            seqs.append(ids[:k] + [ids[k + 1], ids[k]] + ids[k + 2:])
        seqs.append([rng.randrange(model.vocab_size) for _ in range(rng.randint(1, 5))])
        if rng.random() < 0.05:
            seqs.append([])
    return texts, seqs


@pytest.fixture
def small_chunks(monkeypatch):
    monkeypatch.setattr(check, "CHUNK_LINES", 61)
    monkeypatch.setattr(check, "BLOCK_BYTES", 509)


@pytest.mark.parametrize("name", ["gpt2", "llama2", "bert"])
def test_same_output_as_before(name, tmp_path, small_chunks, tokenizer):
    model, imp, path = tokenizer_of(tokenizer, name)
    level = ["--level", "model"] if imp is not None else []  # the model level: as before the pipeline level
    texts, seqs = mixed_lines(model, 500, seed=len(name))
    art = []
    if imp is not None:
        (tmp_path / "a.bpe").write_bytes(implicit.to_bytes(imp))
        art = ["--artifact", tmp_path / "a.bpe"]
    inputs = {"text": "\r\n".join(texts) + "\n",  # CR LF: one line break, as before
              "ids": "\n".join(" ".join(map(str, s)) for s in seqs) + "\n",
              "tokens": "\n".join(" ".join(escape(model.tokens[t]) for t in s) for s in seqs[:800])}
    assert len(seqs) > 1500
    for kind, text in inputs.items():
        for json_out in ([False, True] if kind != "tokens" else [False]):
            src = tmp_path / f"{kind}.txt"
            src.write_bytes(text.encode("utf-8"))
            want_out, want_rc, _ = old_check(model, imp, kind, text, json_out)
            r = run("canonical-check", path, src, "--input", kind, *(["--json"] if json_out else []), *art, *level)
            assert r.err == b"" and r.rc == want_rc, (kind, r.err)
            assert r.out.decode("utf-8") == want_out, kind
    assert "non-canonical" in want_out and want_rc == 1
    _, want_rc, _ = old_check(model, imp, "text", inputs["text"], False)
    r = run("canonical-check", path, "-", "-q", "--input", "text", *art, *level, stdin=inputs["text"])  # in blocks
    assert r.rc == want_rc and r.out == b"" and r.err == b""


def test_bad_line_in_a_later_chunk(tmp_path, small_chunks, tokenizer):
    """Chunks before the bad line's chunk are written; the error and the exit code are as before."""
    model, imp, path = tokenizer_of(tokenizer, "gpt2")
    _, seqs = mixed_lines(model, 100, seed=5)
    lines = [" ".join(map(str, s)) for s in seqs[:250]]
    text = "\n".join(lines + ["1 2 notanid", "3"]) + "\n"
    src = tmp_path / "bad.txt"
    src.write_text(text)
    art = tmp_path / "a.bpe"
    art.write_bytes(implicit.to_bytes(imp))
    _, rc, err = old_check(model, imp, "ids", text, False)
    before, _, _ = old_check(model, imp, "ids", "\n".join(lines[:244]), False)  # chunks of 61 lines: 4 written
    r = run("canonical-check", path, src, "--artifact", art, "--level", "model")
    assert r.rc == rc == 2 and r.stderr.strip() == err and "line 251" in err
    assert r.out.decode() == before


def test_empty_input_still_checks_the_tokenizer(tmp_path, tokenizer):
    nfkc = tmp_path / "nfkc.json"
    nfkc.write_text(json.dumps({**json.loads(tokenizer.path("bert").read_text()), "normalizer": {"type": "NFKC"}}))
    r = run("canonical-check", nfkc, stdin=b"")
    assert r.rc == 2 and "not modelled" in r.stderr


# ---- reading: lines and errors as reading the whole text -------------------------------------------
SEPARATORS = ["\n", "\r\n", "\r", "\x0b", "\x0c", "\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\u2029"]


def text_lines(text: str) -> list[str]:
    """The oracle: the lines Python's io gives with '\\n' as the only line ending, each without
    its '\\n' or a CR LF's '\\r'."""
    return [x[:-2] if x.endswith("\r\n") else x[:-1] if x.endswith("\n") else x
            for x in io.StringIO(text, newline="\n")]


@settings(max_examples=200, deadline=None)
@given(parts=st.lists(st.sampled_from(["a", "bc", "é", "中", "😀", " ", *SEPARATORS]), max_size=40),
       block=st.integers(1, 9), chunk=st.integers(1, 4))
def test_lines_end_at_line_feeds_only(tmp_path_factory, parts, block, chunk):
    """A line ends at '\\n' (a CR LF's '\\r' dropped); \\v, \\f, U+2028, a lone '\\r' ... are text
    (``str.splitlines`` would split there, and the verdicts would no longer be the input's lines)."""
    path = tmp_path_factory.mktemp("lines") / "in.txt"
    path.write_bytes("".join(parts).encode("utf-8"))
    got = list(check.read_chunks(str(path), chunk, block))
    assert all(len(c) == chunk for c in got[:-1]) and all(0 < len(c) <= chunk for c in got)
    assert [x for c in got for x in c] == text_lines(path.read_bytes().decode("utf-8"))


BAD = [b"ok\n\xff", b"abc\xe4\xb8", b"\xe4\x41zz", b"line\n\xed\xa0\x80x", b"\xf0\x9f\x98", b"12\n" * 40 + b"\xc3(",
       b"caf\xc3\xa9 \xe2\x82"]


@pytest.mark.parametrize("data", BAD)
@pytest.mark.parametrize("block", [1, 2, 3, 7, 1000])
def test_decode_errors_as_before(tmp_path, monkeypatch, data, block):
    path = tmp_path / "bad.txt"
    path.write_bytes(data)
    with pytest.raises(InputError) as old:
        read_text(str(path))
    with pytest.raises(InputError) as new:
        list(check.read_chunks(str(path), 5, block))
    assert new.value.one_line() == old.value.one_line()
    for src in (None, "-"):
        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data), encoding="utf-8"))
        with pytest.raises(InputError) as old:
            read_text(src)
        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data), encoding="utf-8"))
        with pytest.raises(InputError) as new:
            list(check.read_chunks(src, 5, block))
        assert new.value.one_line() == old.value.one_line()


def test_unreadable_file_as_before(tmp_path):
    for src in (str(tmp_path / "absent.txt"), str(tmp_path)):
        with pytest.raises(InputError) as old:
            read_text(src)
        with pytest.raises(InputError) as new:
            list(check.read_chunks(src))
        assert new.value.one_line() == old.value.one_line()


# ---- the checkers against the per-sequence algorithms -----------------------------------------------
@pytest.mark.parametrize("opts", [{}, {"end_of_word_suffix": "</w>"}, {"continuing_subword_prefix": "##"},
                                  {"ignore_merges": True}])
def test_bpe_verdicts_are_check_batch(tmp_path, opts):
    """Markers, ignore_merges (the whole-word rule), unreachable and out-of-order tokens."""
    from tokenizers import Tokenizer

    from tokfst_cli.tokenizer import model as tokmod

    from ..bpe.common import CORPUS, trained_tokenizer

    path = trained_tokenizer(tmp_path, 300, **opts)
    model = tokmod.load(path)
    imp = implicit.compile_implicit(model).attach(model)
    hf = Tokenizer.from_file(path)
    rng = random.Random(4)
    seqs: list[list[int]] = [[]]
    for _ in range(800):
        w = rng.choice(CORPUS)
        w = w[rng.randint(0, len(w) - 1):][:rng.randint(1, 8)]
        seqs.append([t.id for t in hf.model.tokenize(w)])
        seqs.append([rng.randrange(model.vocab_size) for _ in range(rng.randint(1, 5))])
    done = iter(imp.check_batch([s for s in seqs if s]))
    assert check.BpeVerdicts(imp)(seqs) == [next(done) if s else None for s in seqs]


def test_maxmatch_verdicts_are_first_violation(tokenizer, monkeypatch):
    """With a tiny transition cache (reset again and again) and ids outside the vocabulary."""
    model = tokenizer("bert")
    machine = product.checker(model)
    _, seqs = mixed_lines(model, 150, seed=8)
    seqs += [[model.vocab_size + 3], [5, -1], []]
    want = [machine.first_violation(s) for s in seqs]
    assert check.MaxMatchVerdicts(machine)(seqs) == want
    monkeypatch.setattr(check.MaxMatchVerdicts, "CAP", 7)
    assert check.MaxMatchVerdicts(machine)(seqs[:-3]) == want[:-3]
