"""The filter flags of ``tokfst promote`` (in process, ``tests/runner.run``): each writes the automaton
the library builds with that filter, which differs from the unfiltered one where the filter bites;
bad input is one line with exit code 2, an emptied language exit code 1."""

from __future__ import annotations

import pynini
import pytest

from tokfst_cli import pipeline
from tokfst_cli.automata.fst_io import read_fst
from tokfst_cli.filters.compose import Filters

from ..conftest import TOKENIZER
from ..runner import run

FLAGS = [  # (tokenizer, regex, flags, Filters, whether the filter changes the automaton)
    ("gpt2", "[a-zα-ω]{1,2}", ["--scripts", "Greek, Han"], Filters(scripts=("Greek", "Han")), True),
    ("gpt2", "[a-zé]{1,3}", ["--ascii"], Filters(ascii=True), True),
    ("llama2", "(e\u0301|é)x", ["--nfc"], Filters(nfc=True), True),
    ("llama2", "(中|켤)", ["--no-byte-tokens"], Filters(no_byte_tokens=True), True),
    ("llama2", "[a-c]{1,2}", ["--literal-ascii"], Filters(literal_ascii=True), True),
    ("gpt2", "[a-c]{1,2}", ["--literal-ascii"], Filters(literal_ascii=True), False),
    ("gpt2", " (America|中)", ["--fuse-spaces"], Filters(fuse_spaces=True), True),
    ("gpt2", " (America|中)", ["--max-tokens", "2"], Filters(max_tokens=2), True),
    ("gpt2", " (America|中)", ["--canonical", "--no-byte-tokens", "--max-tokens", "3"],
     Filters(no_byte_tokens=True, max_tokens=3), False),
]


@pytest.mark.parametrize("name,pattern,flags,filters,changes", FLAGS, ids=[" ".join(f[2]) for f in FLAGS])
def test_each_flag_writes_the_filtered_automaton(tmp_path, name, pattern, flags, filters, changes):
    model = TOKENIZER(name)
    canonical = "--canonical" in flags
    filtered, plain = tmp_path / "filtered.fst", tmp_path / "plain.fst"
    r = run("promote", TOKENIZER.arg(name), filtered, "-e", pattern, *flags)
    assert r.rc == 0 and r.err == b"", r.stderr
    assert run("promote", TOKENIZER.arg(name), plain, "-e", pattern, *(["--canonical"] if canonical else [])).rc == 0
    got = read_fst(str(filtered))
    assert pynini.equivalent(got, pipeline.build(model, pattern, canonical=canonical, filters=filters).fst)
    assert pynini.equivalent(got, read_fst(str(plain))) != changes


def test_an_unknown_script_is_one_line_naming_it(tmp_path):
    r = run("promote", "gpt2", tmp_path / "x.fst", "-e", "[a-z]", "--scripts", "Latin,Klingon")
    assert r.rc == 2 and len(r.err_lines) == 1 and "'Klingon'" in r.stderr and "Greek" in r.stderr
    assert not (tmp_path / "x.fst").exists()


@pytest.mark.parametrize("flags", [["--ascii"], ["--max-tokens", "0"]])
def test_a_filter_that_leaves_nothing_is_one_line_with_exit_1(tmp_path, flags):
    r = run("promote", "gpt2", tmp_path / "x.fst", "-e", "é", *flags)
    assert r.rc == 1 and len(r.err_lines) == 1 and "filters" in r.stderr
