"""One tokenizer loader everywhere (``tokenizer.model.load``): a tokenizer.json path, a directory
holding one, a bundled name, a hub name in the local Hugging Face cache (a cache laid out here,
nothing downloaded), a ``tokenizers.Tokenizer``, a transformers fast tokenizer (built in code);
each gives the same model, and the Python entry points and the command line take them all.
Anything else: a one-line InputError naming what to give."""

from __future__ import annotations

import shutil

import pytest
from tokenizers import Tokenizer

import tokfst_cli as tokfst
from tokfst_cli import pipeline
from tokfst_cli.encoder.encode import Encoder
from tokfst_cli.errors import InputError
from tokfst_cli.tokenizer.model import load

from .conftest import TOKENIZERS
from .runner import run


@pytest.fixture
def kinds(tmp_path, monkeypatch):
    """The GPT-2 tokenizer as every kind of input (the hub cache under tmp_path)."""
    import transformers  # deferred: the hf extra

    src = TOKENIZERS["gpt2"]
    model_dir = tmp_path / "model"
    model_dir.mkdir()
    shutil.copy(src, model_dir / "tokenizer.json")
    hub = tmp_path / "hub"
    snap = hub / "models--acme--tiny-gpt" / "snapshots" / "0123abcd"
    snap.mkdir(parents=True)
    shutil.copy(src, snap / "tokenizer.json")
    (hub / "models--acme--tiny-gpt" / "refs").mkdir()
    (hub / "models--acme--tiny-gpt" / "refs" / "main").write_text("0123abcd")
    monkeypatch.setenv("HF_HUB_CACHE", str(hub))
    hf = Tokenizer.from_file(str(src))
    fast = transformers.PreTrainedTokenizerFast(tokenizer_object=Tokenizer.from_file(str(src)))
    return {"path": str(src), "directory": str(model_dir), "bundled": "gpt2", "hub": "acme/tiny-gpt",
            "tokenizers": hf, "transformers": fast}


@pytest.mark.parametrize("kind", ["path", "directory", "bundled", "hub", "tokenizers", "transformers"])
def test_every_input_kind_gives_the_same_model_everywhere(kinds, kind):
    given = kinds[kind]
    model = load(given)
    assert model.fingerprint == load("gpt2").fingerprint and model.vocab_size == 50257
    assert load(model) is model
    decoder = tokfst.lazy(given, "[0-9]{2}")
    assert decoder.mask(decoder.initial()).sum() > 10
    assert pipeline.build(given, "(ab|cd)").fst.num_states() > 1
    assert Encoder(given).encode("Hello world") == [15496, 995]
    if isinstance(given, str):
        r = run("encode", given, stdin="Hello world")
        assert r.returncode == 0 and r.stdout.split() == ["15496", "995"], r.stderr


def test_what_is_not_a_tokenizer_is_one_line(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path))
    (tmp_path / "empty").mkdir()
    for given, words in ((str(tmp_path / "empty"), "holds no tokenizer.json"),
                         ("acme/absent", "huggingface-cli download acme/absent"),
                         ("no-such-file.json", "not found"), (42, "cannot use a int"),
                         (None, "cannot use a NoneType")):
        with pytest.raises(InputError) as e:
            load(given)
        assert words in e.value.one_line() and "\n" not in e.value.one_line(), e.value.one_line()
    r = run("encode", "acme/absent", stdin="x")
    assert r.returncode == 2 and "never downloads" in r.stderr and len(r.stderr.strip().splitlines()) == 1


def test_a_slow_transformers_tokenizer_is_named():
    class Slow:  # what a slow (Python) transformers tokenizer says of itself
        is_fast = False

    with pytest.raises(InputError) as e:
        load(Slow())
    assert "use_fast=True" in e.value.one_line()
