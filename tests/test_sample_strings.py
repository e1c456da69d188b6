"""``sample --uniform strings`` without A o T where it is not needed (tokfst_cli.analysis.strings).

* the single-byte-token surface equals the general one (A o T projected, determinized) whenever
  :func:`strings.single_bytes_suffice` says so: hypothesis regexes over GPT-2 and Llama-2,
  agnostic (where it must say so) and canonical (where it may not); a token budget takes the
  general way (same count);
* :func:`strings.draw_spelling` draws every token path of a string, uniformly (chi-square), and
  only paths the decoder accepts, through mask/advance (an artifact with terminal labels too);
* the command line on a JSON Schema artifact with terminal labels, which was refused past
  --max-arcs before: strings of the schema, one line each; the progress line on a terminal only.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path

import numpy as np
import pynini
from hypothesis import given, settings

from tokfst_cli import pipeline
from tokfst_cli.analysis import counting, sample, strings
from tokfst_cli.constraint import FstDecoder
from tokfst_cli.filters.compose import Filters

from .helpers import segmentations, surface_index
from .runner import make_env, run, tokfst, tokfst_on_a_tty
from .test_counting import chi_square, loose, small_regexes


def _decoder(model, result) -> FstDecoder:
    return FstDecoder(result.fst, model.vocab_size, model if result.terminals else None)


@settings(max_examples=8, deadline=None)
@given(pattern=small_regexes())
def test_single_byte_surface_is_the_surface(tokenizer, pattern: str) -> None:
    for name in ("gpt2", "llama2"):
        model, lex = tokenizer(name), tokenizer.lexicon(name)
        spelling = strings.Spelling(lex, model.surfaces)
        for canonical in (False, True):
            result = pipeline.build(model, pattern, canonical=canonical, lexicon=None if canonical else lex)
            decoder = _decoder(model, result)
            general = counting.surface(counting.spelling(result.fst, lex))
            suffices = strings.single_bytes_suffice(decoder, spelling, counting.MAX_ARCS)
            assert suffices or canonical  # an agnostic automaton over a tokenizer spelling every byte
            if suffices:
                fast = strings.byte_surface(decoder, spelling, 10_000)
                assert pynini.equivalent(fast, general)


def test_draw_spelling_is_uniform_over_paths(tokenizer) -> None:
    model, lex = tokenizer("gpt2"), tokenizer.lexicon("gpt2")
    result = pipeline.build(model, "(Bonn|Berlin|Munich)[0-9]?", lexicon=lex)
    decoder, spelling = _decoder(model, result), strings.Spelling(lex, model.surfaces)
    paths = segmentations(b"Berlin", surface_index(model))
    rng = np.random.default_rng(3)
    got = Counter(tuple(strings.draw_spelling(decoder, spelling, [b + 1 for b in b"Berlin"], rng))
                  for _ in range(60 * len(paths)))
    assert set(got) == paths and len(paths) > 5 and loose(*chi_square(got, len(paths)))


def test_terminal_labels_sampled_without_expansion(tokenizer) -> None:
    """A quoted string with terminal labels: drawn strings match, their paths are accepted."""
    model, hf = tokenizer("gpt2"), tokenizer.hf("gpt2")
    result = pipeline.build(model, '"[^"\\\\]*"', terminals=True)
    assert result.terminals
    how = sample.sampler(_decoder(model, result), uniform="strings", model=model, max_len=6)
    rng = np.random.default_rng(0)
    for _ in range(20):
        ids = how.draw(rng)
        assert re.fullmatch('"[^"\\\\]*"', hf.decode(ids)) and len(hf.decode(ids).encode()) <= 6


def test_cli_schema_with_terminals(tmp_path: Path) -> None:
    schema = tmp_path / "s.json"
    schema.write_text(json.dumps({"type": "object", "required": ["name", "age"], "additionalProperties": False,
                                  "properties": {"name": {"type": "string", "maxLength": 6},
                                                 "age": {"type": "integer", "minimum": 0, "maximum": 120}}}))
    assert run("promote", "gpt2", "--schema", schema, tmp_path / "s.fst").rc == 0
    r = run("sample", "gpt2", tmp_path / "s.fst", "-n", "4", "--uniform", "strings", "--output", "text", "--seed", "1")
    assert r.rc == 0, r.stderr
    for line in r.stdout.splitlines():
        obj = json.loads(line)
        assert set(obj) == {"name", "age"} and 0 <= obj["age"] <= 120 and len(obj["name"]) <= 6


def test_progress_on_a_terminal_only(tmp_path: Path) -> None:
    assert run("promote", "gpt2", "-e", '"[a-z]*"', tmp_path / "q.fst").rc == 0
    args = ("sample", "gpt2", tmp_path / "q.fst", "-n", "2", "--uniform", "strings", tmp_path / "out.txt")
    r = tokfst_on_a_tty(*args, env=make_env(TERM="xterm-256color", TOKFST_PROGRESS_DELAY="0", NO_COLOR="1"))
    shown = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", r.stderr)
    assert r.rc == 0 and "sampling — " in shown, shown
    r = tokfst(*args, env=make_env(TOKFST_PROGRESS_DELAY="0"))
    assert r.rc == 0 and r.err == b""  # no terminal: no progress line


def test_token_budget_takes_the_general_way(tokenizer) -> None:
    """[0-9]{1,3} within 2 tokens: a budget breaks single-byte paths (3 digits need 3 tokens)."""
    model, lex = tokenizer("gpt2"), tokenizer.lexicon("gpt2")
    decoder = pipeline.build(model, "[0-9]{1,3}", lexicon=lex, filters=Filters(max_tokens=2)).decoder()
    spelling = strings.Spelling(lex, model.surfaces)
    assert not strings.single_bytes_suffice(decoder, spelling, counting.MAX_ARCS)
    how = sample.sampler(decoder, uniform="strings", model=model)
    general = counting.surface(counting.spelling(counting.explore(decoder), lex))
    assert how.count() == counting.UniformDraw(general).total > 110
    rng = np.random.default_rng(1)
    assert all(len(how.draw(rng)) <= 2 for _ in range(30))
