"""``Encoder`` and ``tokfst encode`` against the oracle, Hugging Face's
``encode(text, add_special_tokens=False).ids``: real GPT-2 and Llama-2, and every pipeline family
of ``tests/bpe/pipelines.py`` (byte-level with several split patterns, Metaspace, SentencePiece
normalizers with byte fallback, Lowercase) trained here; texts Hypothesis draws and the
probing fragments; the same texts streamed in random chunks (eager output a prefix of the
result after every chunk); added tokens; ignore_merges; refusals by name."""

from __future__ import annotations

import json
import random
import select
import subprocess

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tokenizers import Tokenizer

from tokfst_cli.encoder.encode import Encoder
from tokfst_cli.errors import InputError
from tokfst_cli.tokenizer.model import from_json

from ..bpe import pipelines as pl
from ..conftest import TOKENIZERS
from ..runner import TOKFST, run

TEXT = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=60)
MIXED = st.lists(st.one_of(TEXT, st.sampled_from(pl.FRAGMENTS)), max_size=8).map("".join)
RUNS = ["a" * 3000, " " * 700 + "x", "1" * 500, "\n" * 300, "Supercalifragilistic" * 40, "\t \n" * 200, ""]


def hf_ids(hf: Tokenizer, text: str) -> list[int]:
    return hf.encode(text, add_special_tokens=False).ids


def streamed(enc: Encoder, text: str, oracle: list[int], rng: random.Random, as_bytes: bool = False) -> list[int]:
    """``text`` fed in random chunks (bytes cut anywhere when ``as_bytes``); after every feed the
    ids so far are a prefix of ``oracle``."""
    s, got, i = enc.stream(), [], 0
    data = text.encode("utf-8") if as_bytes else text
    while i < len(data):
        j = i + rng.randint(1, 24)
        got += s.feed(data[i:j])
        assert got == oracle[:len(got)], (text[:60], i)
        i = j
    return got + s.finish()


@pytest.fixture(scope="module")
def real():
    out = {}
    for name in ("gpt2", "llama2"):
        path = TOKENIZERS[name]
        model = from_json(json.loads(path.read_text()), str(path))
        out[name] = (Encoder(model), Tokenizer.from_file(str(path)))
    return out


@pytest.mark.parametrize("name", ["gpt2", "llama2"])
def test_real_tokenizers_encode_as_hf_whole_and_streamed(name, real):
    enc, hf = real[name]
    rng = random.Random(7)

    @settings(max_examples=150, deadline=None)
    @given(MIXED, st.booleans())
    def check(text, as_bytes):
        oracle = hf_ids(hf, text)
        assert enc.encode(text) == oracle, text
        assert streamed(enc, text, oracle, rng, as_bytes) == oracle, text

    check()


@pytest.mark.parametrize("name", ["gpt2", "llama2"])
def test_special_tokens_and_pathological_runs(name, real):
    enc, hf = real[name]
    rng = random.Random(3)
    specials = ["<|endoftext|>"] if name == "gpt2" else ["<s>", "</s>", "<unk>"]
    texts = RUNS + [f"a{s}b {s}{s}  {s}\n" for s in specials] + ["".join(specials) * 3 + "x" + specials[0][:-1]]
    for text in texts:
        oracle = hf_ids(hf, text)
        assert enc.encode(text) == oracle and enc.count(text) == len(oracle), text[:40]
        assert streamed(enc, text, oracle, rng) == oracle, text[:40]


@pytest.mark.parametrize("name", list(pl.CONFIGS))
def test_every_pipeline_family_encodes_as_hf(name):
    path, hf = pl.trained(name)
    enc = Encoder(str(path))
    rng = random.Random(11)
    for text in pl.texts(150, seed=9):
        oracle = hf_ids(hf, text)
        assert enc.encode(text) == oracle, text
        assert streamed(enc, text, oracle, rng) == oracle, text


def edited(name: str, edit) -> tuple[str, Tokenizer]:
    """A trained family's tokenizer.json changed by ``edit`` (in place on the parsed JSON)."""
    path, _ = pl.trained(name)
    data = json.loads(path.read_text())
    edit(data)
    out = path.with_name(f"{path.stem}-{abs(hash(edit.__name__))}.json")
    out.write_text(json.dumps(data, ensure_ascii=False))
    return str(out), Tokenizer.from_file(str(out))


def test_non_special_added_tokens_and_ignore_merges():
    def added(data):
        vocab = data["model"]["vocab"]
        free = len(vocab)
        for k, content in enumerate(["<tool>", "\n\n", "ab", "  "]):  # "ab" may be a vocabulary token: its id
            aid = vocab.get(content, free)
            free += aid == free  # new ids follow the vocabulary without a gap (HF renumbers a gap)
            data["added_tokens"].append({"id": aid, "content": content, "single_word": False, "lstrip": False,
                                         "rstrip": False, "normalized": False, "special": k == 0})

    def ignore(data):
        data["model"]["ignore_merges"] = True

    for name, edit in (("cl100k", added), ("metaspace-first", added), ("o200k", ignore), ("gpt2", ignore)):
        path, hf = edited(name, edit)
        enc = Encoder(path)
        rng = random.Random(5)
        for text in pl.texts(120, seed=2) + ["<tool>ab\n\n\n  x  <tool", "abab  \n\n"]:
            oracle = hf_ids(hf, text)
            assert enc.encode(text) == oracle, (name, text)
            assert streamed(enc, text, oracle, rng) == oracle, (name, text)


def test_unmodelled_configurations_are_refused_by_name():
    def dropout(data):
        data["model"]["dropout"] = 0.1

    def lstrip(data):
        data["added_tokens"].append({"id": len(data["model"]["vocab"]), "content": "<x>", "single_word": False,
                                     "lstrip": True, "rstrip": False, "normalized": False, "special": True})

    for edit, words, hint in ((dropout, "dropout", None), (lstrip, "strips spaces", "encode-unsupported")):
        with pytest.raises(InputError) as e:
            Encoder(edited("gpt2", edit)[0])
        assert words in str(e.value) and e.value.hint == hint
    with pytest.raises(InputError) as e:
        Encoder(str(TOKENIZERS["bert"]))
    assert "wordpiece" in str(e.value)
    assert Encoder(edited("gpt2", lstrip)[0], level="model").encode("ab") == Encoder(
        str(pl.trained("gpt2")[0]), level="model").encode("ab")


def test_the_model_level_is_hfs_model_on_the_text_as_one_pre_token(real):
    enc = Encoder(real["gpt2"][0].model, level="model")
    hf = real["gpt2"][1]
    for text in ["Hello world", "  a b  c", "x" * 200]:
        model_text = "".join(enc._map[b] for b in text.encode())
        assert enc.encode(text) == [t for t, _ in [(hf.model.token_to_id(tok.value), 0)
                                                   for tok in hf.model.tokenize(model_text)]]


def test_kernel_work_per_byte_stays_bounded_as_the_run_grows(real):
    """'a' * 2^k as one pre-token: the merge queue entries popped per byte do not grow with k."""
    enc = real["gpt2"][0]
    per_byte = []
    for k in range(8, 17, 2):
        enc.work = 0
        enc._words.clear()
        enc.encode("a" * 2 ** k)
        per_byte.append(enc.work / 2 ** k)
    assert max(per_byte) <= 3 and per_byte[-1] <= per_byte[0] * 1.1, per_byte


def test_command_line(tmp_path, real):
    hf = real["gpt2"][1]
    text = "Hello world, <|endoftext|> naïve café 😀\n  x = 12345;"
    (tmp_path / "in.txt").write_text(text, encoding="utf-8")
    oracle = hf_ids(hf, text)
    r = run("encode", "gpt2", tmp_path / "in.txt")
    assert r.returncode == 0 and list(map(int, r.stdout.split())) == oracle
    r = run("encode", "gpt2", "--json", "--tokens", stdin=text)
    doc = json.loads(r.stdout)
    assert doc["ids"] == oracle and doc["count"] == len(oracle) and len(doc["tokens"]) == len(oracle)
    r = run("encode", "gpt2", "-", tmp_path / "out.txt", "--count", stdin=text)
    assert r.returncode == 0 and (tmp_path / "out.txt").read_text() == f"{len(oracle)}\n"
    for args, stdin in ((["encode", "gpt2"], b"ab\xffcd"), (["encode", str(TOKENIZERS["bert"])], b"x"),
                        (["encode", "gpt2", "--stream", "--count"], b"x")):
        r = run(*args, stdin=stdin)
        assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr


def test_stream_prints_tokens_before_the_input_ends(real):
    """Behind a pipe: the first line comes while stdin is still open, and the lines joined are the ids."""
    hf = real["gpt2"][1]
    first, rest = "Hello world, how are you doing today? " * 10, "Fine, thanks.\n"  # past Stream's BATCH
    p = subprocess.Popen([str(TOKFST), "encode", "gpt2", "--stream"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE)
    p.stdin.write(first.encode())
    p.stdin.flush()
    ready, _, _ = select.select([p.stdout], [], [], 60)  # tokfst prints while stdin is still open
    if not ready:
        p.kill()
        pytest.fail("no tokens before the end of the input")
    line = p.stdout.readline().decode()
    early = list(map(int, line.split()))
    assert early and early == hf_ids(hf, first + rest)[:len(early)]
    out, err = p.communicate(rest.encode(), timeout=60)
    assert p.returncode == 0, err
    assert early + list(map(int, out.split())) == hf_ids(hf, first + rest)


def test_eager_output_keeps_little_back_on_long_text(real):
    """A long text of many pre-tokens (GPT-2) fed in 64-byte chunks: the tokens held back at any
    time stay within a few BATCHes of characters, and all but the last few tokens come before
    ``finish``; Llama-2 (no pre-tokenizer: one pre-token per segment) emits inside the pre-token
    (the last token of every prefix): it holds back about a chunk and a token."""
    text = " ".join(pl.texts(400, seed=4))
    for name, bound in (("gpt2", 1200), ("llama2", 200)):
        enc, hf = real[name]
        oracle = hf_ids(hf, text)
        s, early = enc.stream(), []
        data = text.encode()
        for i in range(0, len(data), 64):
            early += s.feed(data[i:i + 64])
            assert early == oracle[:len(early)]
        assert early + s.finish() == oracle
        assert s.held <= bound and len(early) >= len(oracle) - 200, (name, s.held, len(early), len(oracle))
