"""The lazy artifact (``tokfst promote --format lazy``, ``byte_table``): what it loads answers as the
promoted automaton, and the command line's refusals, damage and tokenizer checks.

- for random regexes (GPT-2, Llama-2), the bench regexes and a JSON Schema: ``constraint.load``
  of the artifact gives the masks and finality of ``pipeline.build(...).decoder()`` at every state
  both reach breadth first; text filters (``--ascii``) as promote's own;
- ``tokfst sample`` of it: every sample spells the regex and is accepted; ``tokfst count`` agrees
  with the promoted index's counts;
- the table's byte distances (steering) are the shortest paths to a final state;
- refused by name: options it does not model, a tokenizer that lacks bytes, loading without the
  tokenizer or with another one, a damaged or truncated file.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings

from tokfst_cli import constraint, pipeline
from tokfst_cli.bench.schema_workers import random_text
from tokfst_cli.errors import InputError
from tokfst_cli.filters.compose import Filters
from tokfst_cli.promotion import byte_table, lazy
from tokfst_cli.promotion.lazy import LazyDecoder
from tokfst_cli.schema.compile import compile_schema
from tokfst_cli.text.regex import compile_regex

from .helpers import SIX_REGEXES
from .runner import run
from .test_promote import _patterns
from .walks import accepts, equal_masks

SCHEMAS = Path(__file__).parent / "data" / "schemas"


@pytest.mark.parametrize("tok", ["gpt2", "llama2"])
@given(pattern=_patterns())
@settings(max_examples=15, deadline=None)
def test_artifact_masks_are_the_promoted_ones(tokenizer, tok, pattern):
    model = tokenizer(tok)
    data = lazy.artifact(model, compile_regex(pattern))
    dec = lazy.from_artifact(data, model)
    assert equal_masks(pipeline.build(model, pattern).decoder(), dec, 150) >= 1


def test_cli_artifact_loads_samples_and_counts(tokenizer, tmp_path):
    """promote --format lazy, then constraint.load, sample and count: the promoted automaton's
    masks, samples that spell the regex, the index's counts."""
    model, hf = tokenizer("gpt2"), tokenizer.hf("gpt2")
    for name in ("date", "email", "cities"):
        pattern = SIX_REGEXES[name]
        out = tmp_path / f"{name}.lazy"
        r = run("promote", "gpt2", "-e", pattern, "--format", "lazy", out, "-v")
        assert r.rc == 0 and "lazy artifact" in r.stderr and out.read_bytes().startswith(byte_table.MAGIC), r.stderr
        dec = constraint.load(str(out), model)
        assert isinstance(dec, LazyDecoder)
        equal_masks(pipeline.build(model, pattern).decoder(), dec, 300)
        r = run("sample", "gpt2", out, "-n", "20", "--seed", "3", "--json")
        assert r.rc == 0, r.stderr
        for line in r.stdout.splitlines():
            got = json.loads(line)
            assert re.fullmatch(pattern, got["text"]) and accepts(dec, got["ids"]), got
        if name != "email":  # finite: the whole language counted both ways
            index = tmp_path / f"{name}.json"
            assert run("promote", "gpt2", "-e", pattern, "--format", "index", index).rc == 0
            lazy_count, index_count = run("count", "gpt2", out, "--json"), run("count", "gpt2", index, "--json")
            assert lazy_count.rc == index_count.rc == 0
            assert json.loads(lazy_count.stdout) == json.loads(index_count.stdout)
    assert hf.encode("x", add_special_tokens=False).ids  # the oracle is loaded (no silent skip)


@pytest.mark.parametrize("tok", ["gpt2", "llama2"])
def test_cli_schema_artifact(tokenizer, tmp_path, tok):
    """promote --schema --format lazy: the promoted schema automaton's masks; HF's ids of random
    valid texts are accepted."""
    model, hf = tokenizer(tok), tokenizer.hf(tok)
    path = SCHEMAS / "commitlintrc.json"
    out = tmp_path / "s.lazy"
    r = run("promote", tokenizer.path(tok), "--schema", path, "--format", "lazy", out)
    assert r.rc == 0, r.stderr
    dec = constraint.load(str(out), model)
    compiled = compile_schema(json.loads(path.read_text(encoding="utf-8")))
    promoted = pipeline.build(model, "s", automaton=compiled.automaton, terminals=True).decoder()
    assert equal_masks(promoted, dec, 120) == 120
    if tok == "gpt2":  # Llama-2's normalizer prefixes '▁': its ids spell another text
        texts = [t for t in (random_text(compiled.automaton.fst, seed) for seed in range(5)) if t is not None]
        assert texts
        for text in texts:
            assert accepts(dec, hf.encode(text, add_special_tokens=False).ids), text


def test_cli_text_filter(tokenizer, tmp_path):
    """--ascii applies to the byte DFA: the masks of promote --ascii's automaton."""
    model = tokenizer("gpt2")
    pattern = r"[a-zé]+( [a-zé]+)?"
    out = tmp_path / "a.lazy"
    assert run("promote", "gpt2", "-e", pattern, "--ascii", "--format", "lazy", out).rc == 0
    promoted = pipeline.build(model, pattern, filters=Filters(ascii=True)).decoder()
    dec = constraint.load(str(out), model)
    assert equal_masks(promoted, dec, 200) > 1
    e_acute = tokenizer.hf("gpt2").encode("é", add_special_tokens=False).ids
    assert not dec.mask(dec.initial())[e_acute].any()


def test_python_text_filters(tokenizer):
    """constraint.lazy(..., filters=): text filters restrict the byte DFA (the promoted masks);
    token filters are refused by name (but max_tokens, which counts the lazy decoder's tokens:
    tests/test_serving_batch.py)."""
    model = tokenizer("gpt2")
    pattern = r"[a-zα-ω]+( [a-zα-ω]+)?"
    for filters in (Filters(ascii=True), Filters(scripts=("Greek",))):
        dec = constraint.lazy(model, pattern, filters=filters)
        assert equal_masks(pipeline.build(model, pattern, filters=filters).decoder(), dec, 200) > 1
    for filters in (Filters(fuse_spaces=True), Filters(no_byte_tokens=True, max_tokens=3)):
        with pytest.raises(InputError, match="text filters only") as e:
            constraint.lazy(model, pattern, filters=filters)
        assert e.value.hint == "lazy-filters"


@given(pattern=_patterns())
@settings(max_examples=30, deadline=None)
def test_distances_are_shortest_paths(pattern):
    """ByteTable.distances (the lazy form's steering) is the fewest bytes to a final state: a
    Bellman-Ford over the table's transitions agrees."""
    table = byte_table.of_automaton(compile_regex(pattern))
    n, delta = table.states, table.delta
    dist = np.where(table.final, 0, 1 << 30)
    for _ in range(n + 1):
        via = np.where(delta[:n] < n, dist[np.minimum(delta[:n], n - 1)] + 1, 1 << 30).min(axis=1)
        step = np.minimum(dist, via)
        if (step == dist).all():
            break
        dist = step
    assert (table.distances() == dist).all() and (dist < 1 << 30).all()


def test_ends_are_advance(tokenizer):
    """LazyDecoder.ends (all tokens at once) is advance per token, -1 where refused."""
    model = tokenizer("gpt2")
    dec = constraint.lazy(model, SIX_REGEXES["email"])
    toks = np.arange(model.vocab_size)
    for state in (dec.initial(), dec.advance(dec.initial(), int(np.flatnonzero(dec.mask(dec.initial()))[0]))):
        ends = dec.ends(state, toks)
        allowed = dec.mask(state)
        assert ((ends >= 0) == allowed).all()
        for t in np.flatnonzero(allowed)[::97].tolist():
            assert ends[t] == dec.advance(state, t)


def test_cli_refusals(tokenizer, tmp_path):
    out = tmp_path / "x.lazy"
    for extra, named in ((["--canonical"], "--canonical"), (["--max-tokens", "3"], "--max-tokens"),
                         (["--fuse-spaces"], "--fuse-spaces"), (["--terminals"], "--terminals")):
        r = run("promote", "gpt2", "-e", "[a-z]+", "--format", "lazy", *extra, out)
        assert r.rc == 2 and named in r.stderr and "--format index" in r.stderr and len(r.err_lines) == 1, r.stderr
        assert not out.exists()
    r = run("promote", tokenizer.path("bert"), "-e", "[a-z]+", "--format", "lazy", out)
    assert r.rc == 2 and "every single byte" in r.stderr and not out.exists()
    r = run("promote", "gpt2", "-e", "a(?P<TEXT_TOKEN>)", "--format", "lazy", out)
    assert r.rc == 2 and "token-level groups" in r.stderr and not out.exists()


def test_load_refusals(tokenizer, tmp_path):
    """Loading needs the tokenizer it was built for; a damaged or truncated file is refused."""
    model = tokenizer("gpt2")
    data = lazy.artifact(model, compile_regex(SIX_REGEXES["date"]))
    path = tmp_path / "d.lazy"
    path.write_bytes(data)
    with pytest.raises(InputError, match="is a lazy artifact") as e:
        constraint.load(str(path))
    assert e.value.fix == "load it with its tokenizer"
    with pytest.raises(InputError, match="another tokenizer"):
        constraint.load(str(path), tokenizer("llama2"))
    for bad in (data[:-5], data[:-20] + bytes(20), data[:40]):
        path.write_bytes(bad)
        with pytest.raises(InputError, match="damaged|truncated"):
            constraint.load(str(path), model)
    r = run("sample", "gpt2", path)
    assert r.rc == 2 and len(r.err_lines) == 1
    path.write_bytes(data)
    assert run("sample", "gpt2", path, "-n", "2").rc == 0


def test_bench_ready_lazy_file(tokenizer, tmp_path):
    """bench ready's "tokfst lazy file" engine: the artifact through a file gives the promoted first mask."""
    from tokfst_cli.bench.ready import tokfst_lazy_file
    from tokfst_cli.decoding.matcher import pack

    model = tokenizer("gpt2")
    for name in ("date", "cities"):
        dec = pipeline.build(model, SIX_REGEXES[name]).decoder()
        got = tokfst_lazy_file(model, SIX_REGEXES[name], str(tmp_path / "r.lazy"))
        assert (got == pack(dec.mask(dec.initial()))).all()


def test_payload_longer_than_its_header_says():
    """A payload that inflates past the size its header promises is refused as damaged (it is
    inflated only up to that size), with valid checksums around it."""
    import zlib

    from tokfst_cli.support.files import pack

    header = {"format": byte_table.FORMAT, "version": byte_table.VERSION, "fingerprint": "x", "source": "s",
              "start": 0, "states": 1, "classes": 1}
    payload = zlib.compress(bytes(50 << 20), 9)
    data = pack(byte_table.MAGIC, {**header, "payload_bytes": len(payload)}, payload)
    with pytest.raises(InputError, match="damaged .payload size"):
        byte_table.from_bytes(data)
