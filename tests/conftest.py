from __future__ import annotations

import os
import sys
from functools import lru_cache
from pathlib import Path

import pytest
from tokenizers import Tokenizer

from tokfst_cli import lexicon, tokenizer

DATA = Path(__file__).parent / "data"
PACKAGE_DATA = Path(tokenizer.__file__).parent / "data"
TOKENIZERS = {
    "gpt2": PACKAGE_DATA / "gpt2.json",  # bundled with the package; not copied twice
    "llama2": DATA / "llama2.json",
    "bert": DATA / "bert-base-uncased.json",
}


# Subprocess tests run the `tokfst` installed beside this interpreter, activated venv or not.
os.environ["PATH"] = os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", "")


@pytest.fixture(autouse=True, scope="session")
def _private_cache(tmp_path_factory):
    """Tests never touch the user's cache."""
    os.environ["TOKFST_CACHE"] = str(tmp_path_factory.mktemp("cache"))
    yield


@lru_cache(maxsize=None)
def real(name: str):
    """(TokenizerModel, lexicon T, HF Tokenizer) for a real tokenizer, loaded once per session."""
    path = str(TOKENIZERS[name])
    model = tokenizer.load(path)
    return model, lexicon.build(model), Tokenizer.from_file(path)


@lru_cache(maxsize=1)
def words100() -> list[str]:
    return (PACKAGE_DATA / "words100.txt").read_text().split()
