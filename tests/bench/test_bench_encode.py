"""``tokfst bench encode`` on a small corpus: every table, ids equal to HF's (its check), tiktoken's
Encoding built from the tokenizer.json equal to HF too, the pathological runs and the stream."""

from __future__ import annotations

import json
from pathlib import Path

from tokenizers import Tokenizer

from tokfst_cli.bench.encode import tiktoken_encoding
from tokfst_cli.tokenizer.model import load

from ..runner import run

CORPUS = Path(__file__).parents[1] / "data" / "tiny_corpus.txt"


def test_bench_encode_tables(tmp_path):
    out = tmp_path / "encode.json"
    r = run("bench", "encode", "--tokenizer", "gpt2", "--corpus", CORPUS, "--encode-mb", "0.02", "--max-log", "12",
            "--json", out)
    assert r.returncode == 0, r.stderr
    doc = json.loads(out.read_text())
    through, worst, stream = doc["tables"]
    assert [row["corpus"] for row in through["rows"]] == ["prose", "code", "mixed"]
    for row in through["rows"]:
        assert row["exact"] == "yes" and row["tokfst"] > 0 and row["hf"] > 0 and row["tiktoken"] > 0
    assert {row["input"] for row in worst["rows"]} >= {"a x 2^12", "space x 2^12", "random code points x 2^12"}
    assert all(row["tokfst"] > 0 for row in worst["rows"])
    assert all(row["held"] > 0 and row["rss"] is not None for row in stream["rows"])
    assert doc["checks"] and all(c["passed"] for c in doc["checks"])


def test_tiktoken_from_the_tokenizer_json_equals_hf():
    model = load("gpt2")
    (enc, to_id), why = tiktoken_encoding(model, json.loads(Path(model.source).read_text()))
    assert why is None
    hf = Tokenizer.from_file(model.source)
    for text in (CORPUS.read_text()[:3000], "a" * 500 + " <|endoftext|> x", "naïve 😀 12345"):
        assert [to_id[r] for r in enc.encode(text, allowed_special="all")] == \
            hf.encode(text, add_special_tokens=False).ids
    assert tiktoken_encoding(load("tests/data/llama2.json"), {})[0] is None
