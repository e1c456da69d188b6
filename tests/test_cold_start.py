"""What a process keeps in the cache so that a canonical constraint on a large vocabulary starts
fast: a large tokenizer.json as read (by its bytes), the implicit A_BPE's classes; and the
BANNED rows a small constraint reads off the rectangles instead of building every row. Each
must equal what is made from scratch."""

from __future__ import annotations

import dataclasses
import random

import numpy as np

from tokfst_cli.bpe import implicit
from tokfst_cli.bpe import rows as rowmod
from tokfst_cli.support import cache
from tokfst_cli.tokenizer import model as tokmod

from .conftest import TOKENIZERS


def fields(m: tokmod.TokenizerModel) -> dict:
    return {f.name: getattr(m, f.name) for f in dataclasses.fields(m)}


def test_a_large_tokenizer_is_read_back_from_the_cache_as_it_was_read(tmp_path, monkeypatch):
    monkeypatch.setenv("TOKFST_CACHE", str(tmp_path / "cache"))
    path = TOKENIZERS["llama2"]
    assert path.stat().st_size >= tokmod.KEPT_FROM
    first = tokmod.load(str(path))
    (entry,) = [e for e in cache.entries() if e.kind == "tokenizer"]
    again = tokmod.load(str(path))
    assert fields(again) == fields(first)
    copy = tmp_path / "elsewhere.json"
    copy.write_bytes(path.read_bytes())
    assert tokmod.load(str(copy)).source == str(copy)  # the same bytes: the entry, with this source
    entry.path.write_bytes(entry.path.read_bytes()[:-40] + b"x" * 40)  # damaged: read from the JSON again
    assert fields(tokmod.load(str(path))) == fields(first)
    edited = tmp_path / "edited.json"
    edited.write_bytes(path.read_bytes().replace(b'"byte_fallback": true', b'"byte_fallback": false'))
    assert tokmod.load(str(edited)).options["byte_fallback"] is False  # other bytes: another entry


def test_banned_rows_read_off_the_rectangles_equal_the_rows(tokenizer):
    imp = implicit.load_or_compile(tokenizer("gpt2"))
    fresh = implicit.ImplicitBpe(**{f.name: getattr(imp, f.name) for f in dataclasses.fields(imp)
                                    if f.name != "derived"})
    rows = imp._rows()
    rng = random.Random(3)
    nright = int(imp.rpos.max()) + 1
    for ru in rng.sample(range(nright), implicit.ROW_QUERIES):
        assert np.array_equal(fresh.banned_positions(ru), np.sort(rowmod.row_positions(rows, ru)))
    assert "rows" not in fresh.derived  # read off the rectangles so far
    fresh.banned_positions(0)
    assert "rows" in fresh.derived


def test_cached_classes_equal_the_classes_made_again(tokenizer, tmp_path, monkeypatch):
    imp = implicit.load_or_compile(tokenizer("llama2"))
    kept = imp.classes()
    monkeypatch.setenv("TOKFST_CACHE", str(tmp_path / "empty"))
    fresh = implicit.ImplicitBpe(**{f.name: getattr(imp, f.name) for f in dataclasses.fields(imp)
                                    if f.name != "derived"})
    assert np.array_equal(fresh.classes(), kept)
    assert [e.kind for e in cache.entries()] == ["bpe-classes"]
