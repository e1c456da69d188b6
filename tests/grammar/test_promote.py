"""Grammars through the whole pipeline on real tokenizers: walks led by tokfst's masks give texts Lark's
parser accepts; canonical walks re-encode to themselves with Hugging Face; Hugging Face's encoding of
a derived text is accepted; and the command line and the Python API read .gbnf and .lark files."""

from __future__ import annotations

import random

import lark
import numpy as np
import pytest

import tokfst_cli as tokfst
from tokfst_cli import pipeline
from tokfst_cli.analysis.steering import token_steering
from tokfst_cli.grammar.load import compile_grammar

from ..runner import run
from ..walks import accepts

CSV = r'''
start: "id,name\n" row+
row: ID "," NAME "\n"
ID: /[1-9][0-9]{0,2}/
NAME: /[A-Z][a-z]{0,6}/
'''
CSV_GBNF = 'root ::= "id,name\\n" row+\nrow ::= [1-9] [0-9]{0,2} "," [A-Z] [a-z]{0,6} "\\n"\n'


def walk(dec, rng: random.Random, random_len: int = 12, finish_len: int = 120) -> list[int]:
    """A random mask-following walk, completed toward a final state (no empty mask on the way)."""
    closer, ids, state = token_steering(dec), [], dec.initial()
    for i in range(random_len + finish_len):
        toks = np.flatnonzero(dec.mask(state))
        assert len(toks) or dec.is_final(state), "dead end"
        if dec.is_final(state) and (i >= random_len or not len(toks) or rng.random() < 0.3):
            return ids
        pool = toks if i < random_len else closer(state, toks)
        ids.append(int(pool[rng.randrange(len(pool))]))
        state = dec.advance(state, ids[-1])
    raise AssertionError("no final state")


@pytest.mark.parametrize("name", ["gpt2", "llama2"])
@pytest.mark.parametrize("canonical", [False, True], ids=["agnostic", "canonical"])
def test_walks_spell_texts_of_the_grammar(tokenizer, name, canonical):
    model, hf = tokenizer(name), tokenizer.hf(name)
    parser = lark.Lark(CSV, parser="earley", lexer="dynamic_complete")
    result = pipeline.build(model, "csv", automaton=compile_grammar(CSV, "lark"), canonical=canonical)
    dec = result.decoder()
    rng = random.Random(7)
    for _ in range(15):
        ids = walk(dec, rng)
        text = hf.decode(ids, skip_special_tokens=False)
        parser.parse(text)  # raises if the text is not in the grammar's language
        if canonical:
            assert hf.encode(text, add_special_tokens=False).ids == ids, text
    if canonical or name == "gpt2":  # Llama-2's encode prepends a space the agnostic automaton does not spell
        for text in ["id,name\n1,A\n", "id,name\n42,Bob\n7,Zed\n"]:
            assert accepts(dec, hf.encode(text, add_special_tokens=False).ids), text


def test_gbnf_and_lark_spell_the_same_language(tokenizer):
    a = compile_grammar(CSV, "lark").fst
    b = compile_grammar(CSV_GBNF, "gbnf").fst
    import pynini

    assert pynini.equivalent(a.copy().rmepsilon(), b.copy().rmepsilon())


def test_python_api_lazy_and_facade(tokenizer):
    model = tokenizer("gpt2")
    dec = tokfst.lazy(model, grammar=CSV, grammar_format="lark")
    hf = tokenizer.hf("gpt2")
    assert accepts(dec, hf.encode("id,name\n5,Ann\n", add_special_tokens=False).ids)
    assert not accepts(dec, hf.encode("id,name\n05,Ann\n", add_special_tokens=False).ids)
    assert tokfst.compile_grammar(CSV_GBNF).fst.num_states() > 0


def test_cli_promotes_gbnf_and_lark_files(tmp_path, tokenizer):
    g = tmp_path / "csv.gbnf"
    g.write_text(CSV_GBNF)
    out = tmp_path / "csv.json"
    r = run("promote", "gpt2", "--grammar", str(g), "--canonical", "--format", "index", str(out))
    assert r.rc == 0, r.stderr
    assert out.stat().st_size > 0
    lk = tmp_path / "csv.lark"
    lk.write_text(CSV)
    r = run("promote", "gpt2", "--grammar", str(lk), str(tmp_path / "csv.fst"))
    assert r.rc == 0, r.stderr


@pytest.mark.parametrize("content, args, words", [
    ('root ::= e\ne ::= "(" e ")" | "x"\n', ("--canonical",), "needs a stack"),
    ('root ::= x\n', (), "not defined"),
    ('root ::= "a"\n', ("-e", "a"), "give one of"),
    ('start: "a"\n', (), "neither .gbnf nor .lark"),
    ("root ::= " + "(" * 3000 + '"a"' + ")" * 3000 + "\n", (), "nests its groups too deeply"),
])
def test_cli_refuses_with_one_line(tmp_path, content, args, words):
    name = "g.txt" if "neither" in words else "g.gbnf"
    g = tmp_path / name
    g.write_text(content)
    out = tmp_path / "out.fst"
    r = run("promote", "gpt2", "--grammar", str(g), *args, str(out))
    assert r.rc == 2 and len(r.err_lines) == 1 and words in r.stderr, r.stderr
    assert not out.exists()
