"""Exact counting and uniform draws (tokfst_cli.analysis.counting, ``tokfst count``, ``tokfst sample --uniform``;
issue #14 items 3-4): counts against brute force (random acceptors; the strings of small regexes
enumerated with itertools, HF's encode for canonical sequences, a brute-force segmenter over the
surfaces for agnostic ones), big integers, uniformity (seeded chi-square with a loose bound), the
factorized form expanded through its decoder, and the command line's outputs and errors."""

from __future__ import annotations

import json
import random
import re
from collections import Counter
from itertools import product

import numpy as np
import pynini
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tokfst_cli import constraint, pipeline
from tokfst_cli.analysis import counting, sample
from tokfst_cli.automata.fst_io import write_fst
from tokfst_cli.constraint import FstDecoder
from tokfst_cli.errors import InputError, LimitError
from tokfst_cli.text.regex import compile_regex

from .helpers import finals, segmentations, spell, surface_index, transitions
from .runner import run
from .test_sample import acceptors  # random deterministic acceptors (cycles, dead states)

ALPHABET = "ab "
MAX_CHARS = 8


# ---- random acceptors against brute force --------------------------------------------------------
def accepted(fst: pynini.Fst, max_len: int) -> list[tuple[int, ...]]:
    """Every accepted label sequence of at most max_len labels, by following every path."""
    delta, fin = transitions(fst), finals(fst)
    out, stack = [], [(fst.start(), ())]
    while stack:
        s, seq = stack.pop()
        if s in fin:
            out.append(seq)
        if len(seq) < max_len:
            stack.extend((t, seq + (label,)) for label, t in delta[s].items())
    return out


@given(acceptors())
@settings(max_examples=60, deadline=None)
def test_counts_finiteness_and_longest_against_brute_force(fst_vocab):
    fst, _ = fst_vocab
    n = fst.num_states()
    seqs = accepted(fst, 2 * n)  # an infinite language has a sequence of length n..2n-1
    lengths = Counter(map(len, seqs))
    assert counting.by_length(fst, 2 * n) == [lengths[k] for k in range(2 * n + 1)]
    finite = not any(k >= n for k in lengths)
    assert counting.is_finite(fst) == finite
    assert counting.longest(fst) == (None if not finite else max(lengths, default=-1))
    draw = counting.UniformDraw(fst, n)
    assert draw.total == sum(lengths[k] for k in range(n + 1))
    rng = np.random.default_rng(0)
    within = set(s for s in seqs if len(s) <= n)
    for _ in range(5 if draw.total else 0):
        assert tuple(draw.draw(rng)) in within
    if finite:
        assert counting.UniformDraw(fst).total == len(seqs)
    else:
        with pytest.raises(InputError, match="infinite"):
            counting.UniformDraw(fst)


def test_big_integers_and_the_guard():
    """[a-z]+: 26^k strings of k bytes, past int64; draws with a numpy Generator over a count past
    2^62; a table past MAX_CELLS is refused before it is built."""
    fst = compile_regex("[a-z]+").fst
    counts = counting.by_length(fst, 30)
    assert counts == [0] + [26 ** k for k in range(1, 31)] and counts[30] > 1 << 128
    draw = counting.UniformDraw(fst, 30)
    assert draw.total == sum(26 ** k for k in range(1, 31))
    texts = [bytes(b - 1 for b in draw.draw(np.random.default_rng(s))) for s in range(20)]
    assert all(re.fullmatch(b"[a-z]{1,30}", t) for t in texts)
    assert sum(len(t) == 30 for t in texts) >= 15  # 96% of the strings have 30 letters
    with pytest.raises(LimitError) as e:
        counting.by_length(fst, counting.MAX_CELLS)
    assert e.value.limit == "max_len" and e.value.at_least


def chi_square(counts: Counter, support: int) -> tuple[float, int]:
    n = sum(counts.values())
    expected = n / support
    stat = sum((c - expected) ** 2 / expected for c in counts.values()) + (support - len(counts)) * expected
    return stat, support - 1


def loose(stat: float, df: int) -> bool:
    """Far above the statistic's mean df (sd sqrt(2 df)): a seeded check that cannot flake."""
    return stat < df + 6 * (2 * df) ** 0.5


def test_uniform_draws_of_a_regex():
    """(a|b){0,3}c?: 30 strings, each drawn about equally often, with both kinds of generator."""
    fst = compile_regex("(a|b){0,3}c?").fst
    draw = counting.UniformDraw(fst)
    assert draw.total == 30 and not draw.budgeted
    for rng in (random.Random(3), np.random.default_rng(3)):
        got = Counter(bytes(b - 1 for b in draw.draw(rng)) for _ in range(3000))
        assert all(re.fullmatch(b"[ab]{0,3}c?", t) for t in got) and len(got) == 30
        assert loose(*chi_square(got, 30))
    short = counting.UniformDraw(fst, 2)  # a bound below the longest: the table of budgets
    assert short.budgeted and short.total == 1 + 3 + 6
    rng = random.Random(1)
    got = Counter(bytes(b - 1 for b in short.draw(rng)) for _ in range(1000))
    assert set(map(len, got)) <= {0, 1, 2} and len(got) == 10 and loose(*chi_square(got, 10))


# ---- regexes: brute force with HF and a segmenter --------------------------------------------------
@st.composite
def small_regexes(draw):
    """An alternation of concatenations of quantified literals over "ab ", strings of <= 8 chars."""
    def atom():
        lit = draw(st.text(ALPHABET, min_size=1, max_size=2))
        q = draw(st.sampled_from(["", "?", "{1,2}", "{0,2}"]))
        return (f"({re.escape(lit)})" if len(lit) > 1 else re.escape(lit)) + q

    alts = ["".join(atom() for _ in range(draw(st.integers(1, 2)))) for _ in range(draw(st.integers(1, 2)))]
    return "(" + "|".join(alts) + ")"


def language(pattern: str) -> list[str]:
    return ["".join(w) for k in range(MAX_CHARS + 1) for w in product(ALPHABET, repeat=k)
            if re.fullmatch(pattern, "".join(w))]


def expected_counts(model, hf, pattern: str, canonical: bool) -> tuple[Counter, Counter]:
    """(sequences by tokens, strings by bytes) by brute force: HF's encode for canonical sequences
    (their strings: what the tokens spell), every segmentation of the text for agnostic ones."""
    texts = language(pattern)
    if canonical:
        seqs = {tuple(hf.encode(t, add_special_tokens=False).ids) for t in texts}
        return Counter(map(len, seqs)), Counter(len(spell(model, list(s))) for s in seqs)
    index = surface_index(model)
    seqs = Counter()
    strings = Counter()
    for t in texts:
        segs = segmentations(t.encode(), index)
        seqs.update(map(len, segs))
        strings[len(t.encode())] += bool(segs)
    return seqs, strings


def check_tally(model, hf, pattern: str, result: pipeline.Result, lex) -> counting.Tally:
    got = counting.tally(result.fst, lex)
    seqs, strings = expected_counts(model, hf, pattern, result.canonical)
    assert got.sequences == [seqs[k] for k in range(len(got.sequences))] and sum(seqs.values()) == sum(got.sequences)
    assert got.strings == [strings[k] for k in range(len(got.strings))]
    assert sum(strings.values()) == sum(got.strings)
    if result.canonical:
        assert sum(got.sequences) == sum(got.strings)  # one tokenization per string
    return got


@given(small_regexes())
@settings(max_examples=15, deadline=None)
def test_counts_of_random_regexes_gpt2(pattern):
    from .conftest import real

    model, lex, hf = real("gpt2")
    for canonical in (False, True):
        check_tally(model, hf, pattern, pipeline.build(model, pattern, canonical=canonical, lexicon=lex), lex)


@pytest.mark.parametrize("pattern", ["(ab|b a?)", "( a|b){1,2}(ab)?", "(a b|ba){0,2}"])
def test_counts_of_regexes_llama2(tokenizer, pattern):
    """Llama-2: canonical strings start with the space of the ▁ the normalizer prepends."""
    model, lex, hf = tokenizer("llama2"), tokenizer.lexicon("llama2"), tokenizer.hf("llama2")
    agnostic = check_tally(model, hf, pattern, pipeline.build(model, pattern, lexicon=lex), lex)
    canonical = check_tally(model, hf, pattern, pipeline.build(model, pattern, canonical=True), lex)
    assert sum(canonical.strings) == sum(agnostic.strings) == len(language(pattern))
    assert sum(agnostic.sequences) > sum(canonical.sequences)


def test_factorized_counts_equal_materialized(tokenizer):
    """The factorized form expanded through its decoder counts as the materialized automaton; past
    max_arcs it is refused."""
    model, lex = tokenizer("gpt2"), tokenizer.lexicon("gpt2")
    pattern = "(Bonn|Berlin) [0-9]{1,2}"
    materialized = pipeline.build(model, pattern, canonical=True)
    lazy = pipeline.build(model, pattern, canonical=True, limits=pipeline.Limits(max_arcs=1))
    assert not lazy.materialized
    assert counting.tally(counting.explore(lazy.decoder()), lex) == counting.tally(materialized.fst, lex)
    with pytest.raises(LimitError):
        counting.explore(lazy.decoder(), max_arcs=5)


# ---- uniform strings ----------------------------------------------------------------------------------
def test_uniform_strings_and_their_paths(tokenizer):
    """Agnostic GPT-2 "(Bonn|Berlin|Munich)[0-9]?": strings drawn about equally often although their
    numbers of tokenizations differ; for one string, its paths drawn about equally often."""
    model, lex, hf = tokenizer("gpt2"), tokenizer.lexicon("gpt2"), tokenizer.hf("gpt2")
    fst = pipeline.build(model, "(Bonn|Berlin|Munich)[0-9]?", lexicon=lex).fst
    how = sample.sampler(FstDecoder(fst, model.vocab_size), uniform="strings", model=model)
    assert how.uniform and how.count() == 33
    rng = np.random.default_rng(5)
    drawn = [how.draw(rng) for _ in range(3300)]
    texts = Counter(hf.decode(ids) for ids in drawn)
    assert len(texts) == 33 and all(re.fullmatch("(Bonn|Berlin|Munich)[0-9]?", t) for t in texts)
    assert loose(*chi_square(texts, 33))
    paths = segmentations(b"Berlin", surface_index(model))
    spelled = counting.spelling(fst, lex)
    one = counting.UniformDraw(counting.spellings(spelled, [b + 1 for b in b"Berlin"]))
    assert one.total == len(paths) > 5
    got = Counter(tuple(x - 1 for x in one.draw(rng)) for _ in range(60 * len(paths)))
    assert set(got) == paths and loose(*chi_square(got, len(paths)))


# ---- the command line ------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def artifacts(tmp_path_factory, tokenizer):
    d = tmp_path_factory.mktemp("count")
    model = tokenizer("gpt2")
    write_fst(str(d / "cities.fst"), pipeline.build(model, "(Cologne|Berlin|Bonn|Munich)").fst)
    (d / "cities.json").write_text(json.dumps(pipeline.build(model, "(Cologne|Berlin|Bonn|Munich)",
                                                             canonical=True).index()))
    write_fst(str(d / "digits.fst"), pipeline.build(model, "[0-9]+").fst)
    lazy = pipeline.build(model, "[0-9]{2}-[0-9]", canonical=True, limits=pipeline.Limits(max_arcs=1))
    (d / "lazy.tfz").write_bytes(lazy.to_bytes())
    return d


def test_cli_count(tokenizer, artifacts):
    model, lex = tokenizer("gpt2"), tokenizer.lexicon("gpt2")
    r = run("count", "gpt2", artifacts / "cities.fst", "--json")
    assert r.rc == 0 and r.err == b""
    obj = json.loads(r.stdout)
    assert set(obj) == {"max_len", "sequences", "strings", "cut_at_max_len"} and obj["max_len"] is None
    assert obj["cut_at_max_len"] is False  # a finite automaton is counted whole
    for part in ("sequences", "strings"):
        assert set(obj[part]) == {"by_length", "total", "finite", "longest"} and obj[part]["finite"]
        assert all(type(x) is int for x in obj[part]["by_length"]) and obj[part]["total"] == sum(obj[part]["by_length"])
    expected = counting.tally(constraint.load(str(artifacts / "cities.fst"), model).fst, lex)
    assert obj == expected.to_json() and obj["strings"]["total"] == 4
    r = run("count", "gpt2", artifacts / "cities.json")  # the table: canonical, as many sequences as strings
    rows = [line.split() for line in r.stdout.splitlines()]
    assert r.rc == 0 and rows[0] == ["length", "sequences", "strings"] and rows[-2] == ["total", "4", "4"]
    r = run("count", "gpt2", artifacts / "digits.fst", "--max-len", "30", "--json")  # past int64, written in full
    obj = json.loads(r.stdout)
    assert obj["strings"]["by_length"][30] == 10 ** 30 and not obj["sequences"]["finite"]
    assert obj["sequences"]["longest"] is None and obj["sequences"]["by_length"][30] > 1 << 64
    r = run("count", "gpt2", artifacts / "lazy.tfz", "--json")  # factorized: expanded through the decoder
    obj = json.loads(r.stdout)
    assert r.rc == 0 and obj["sequences"]["total"] == obj["strings"]["total"] == 1000


def test_cli_count_errors(artifacts, tmp_path):
    out = tmp_path / "counts.txt"
    r = run("count", "gpt2", artifacts / "digits.fst", out)  # infinite, no --max-len
    assert r.rc == 2 and len(r.err_lines) == 1 and "infinite" in r.stderr and "--max-len" in r.stderr
    assert not out.exists()
    r = run("count", "gpt2", artifacts / "digits.fst", "--max-len", "100000000")
    assert r.rc == 3 and len(r.err_lines) == 1 and "--max-len" in r.stderr and "Traceback" not in r.stderr
    r = run("count", "gpt2", artifacts / "lazy.tfz", "--max-arcs", "3")
    assert r.rc == 3 and len(r.err_lines) == 1 and "--max-arcs" in r.stderr
    r = run("count", "gpt2", tmp_path / "missing.fst")
    assert r.rc == 2 and len(r.err_lines) == 1


def test_cli_sample_uniform(tokenizer, artifacts):
    hf = tokenizer.hf("gpt2")
    r = run("sample", "gpt2", artifacts / "cities.fst", "-n", "40", "--seed", "2", "--uniform", "strings")
    ids = [list(map(int, line.split())) for line in r.stdout.splitlines()]
    assert r.rc == 0 and len(ids) == 40 and {hf.decode(x) for x in ids} == {"Cologne", "Berlin", "Bonn", "Munich"}
    r = run("sample", "gpt2", artifacts / "digits.fst", "-n", "5", "--uniform", "strings", "--max-len", "3",
            "--output", "text")
    assert r.rc == 0 and all(re.fullmatch("[0-9]{1,3}", t) for t in r.stdout.splitlines())
    r = run("sample", "gpt2", artifacts / "lazy.tfz", "-n", "5", "--uniform", "paths", "--seed", "1")
    texts = [hf.decode(list(map(int, line.split()))) for line in r.stdout.splitlines()]
    assert r.rc == 0 and all(re.fullmatch("[0-9]{2}-[0-9]", t) for t in texts)
    r = run("sample", "gpt2", artifacts / "cities.fst", "--max-len", "3")  # bytes bound only for strings
    assert r.rc == 2 and len(r.err_lines) == 1 and "--uniform strings" in r.stderr
    r = run("sample", "gpt2", artifacts / "cities.fst", "--uniform", "strings", "--max-len", "3")  # no city that short
    assert r.rc == 2 and len(r.err_lines) == 1 and "--max-len" in r.stderr
