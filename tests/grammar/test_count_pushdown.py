"""``tokfst count`` of a grammar with a stack (``counting.tally_decoder``: the decoder expanded
breadth first to --max-len tokens): counts by length against brute force — every string over
the grammar's characters up to the length, kept where lark's LALR parser accepts it, and every
segmentation of each into the tokenizer's tokens — on GPT-2 and Llama-2; the command line's
table, JSON and refusal."""

from __future__ import annotations

import json
from collections import Counter
from itertools import product

import pytest
from lark import Lark
from lark.exceptions import LarkError

from tokfst_cli.analysis import counting
from tokfst_cli.grammar.load import compile_grammar
from tokfst_cli.grammar.pushdown import Pushdown
from tokfst_cli.promotion.stack import PushdownDecoder

from ..helpers import surface_index
from ..runner import run
from .test_pushdown import Prefixes

# self-embedding, so each needs a stack; small alphabets so that brute force is cheap
GRAMMARS = {
    "nest": ('start: s\ns: "(" s ")" | "x"\n', "()x"),
    "lists": ('start: l\nl: "[" [l ("," l)*] "]"\n', "[],"),
    "sums": ('start: e\ne: e "+" t | t\nt: "(" e ")" | "1"\n', "()+1"),
}


def brute(grammar: str, chars: str, pieces: dict, max_len: int) -> tuple[list[int], list[int]]:
    """Sequences of each token count (every token sequence whose text stays a viable prefix, fed to
    lark's LALR parser a character at a time) and strings of each byte length (every string over
    ``chars``, parsed whole), 0..max_len."""
    oracle, seqs, strings = Prefixes(grammar), Counter(), Counter()

    def extend(parsers: list, k: int) -> None:
        seqs[k] += oracle.ends(parsers)
        if k < max_len:
            for surface, ids in pieces.items():
                nxt = oracle.feed(parsers, surface)
                if nxt:
                    for _ in ids:
                        extend(nxt, k + 1)

    extend(oracle.start(), 0)
    parser = Lark(grammar, parser="lalr")
    for n in range(max_len + 1):
        for letters in product(chars, repeat=n):
            try:
                parser.parse("".join(letters))
            except LarkError:
                continue
            strings[n] += 1
    return [seqs[k] for k in range(max_len + 1)], [strings[k] for k in range(max_len + 1)]


@pytest.mark.parametrize("tok", ["gpt2", "llama2"])
@pytest.mark.parametrize("name", sorted(GRAMMARS))
def test_counts_up_to_max_len_equal_brute_force(name, tok, tokenizer):
    text, chars = GRAMMARS[name]
    pdt = compile_grammar(text, "lark")
    assert isinstance(pdt, Pushdown)
    model = tokenizer(tok)
    pieces = {s: ids for s, ids in surface_index(model).items() if set(s.decode("latin-1")) <= set(chars)}
    max_len = 5
    got = counting.tally_decoder(PushdownDecoder(model, pdt), tokenizer.lexicon(tok), max_len)
    seqs, strings = brute(text, chars, pieces, max_len)
    assert got.sequences == seqs and got.strings == strings
    assert sum(seqs) > sum(strings) > 0  # several tokenizations per string: an agnostic count
    # each language is infinite: never called finite; "nest" has no cycle within 6 tokens (every
    # "(" pushes), so its cut exploration says it does not know; "lists" comes back to a state
    assert got.longest_sequence is None and got.to_json()["sequences"]["finite"] is not True
    if name == "nest":
        assert got.stopped and got.unknown and got.to_json()["sequences"]["finite"] is None


def test_a_cycle_in_the_explored_part_shows_the_language_infinite(tokenizer):
    """Right-linear repetition inside a rule with a stack: the states within a few tokens already
    hold a cycle ("1+1+..." returns to the same configuration), so "infinite" is known."""
    pdt = compile_grammar('start: e\ne: t ("+" t)*\nt: "(" e ")" | "1"\n', "lark")
    got = counting.tally_decoder(PushdownDecoder(tokenizer("gpt2"), pdt), tokenizer.lexicon("gpt2"), 5)
    doc = got.to_json()
    assert got.stopped and not got.unknown and got.longest_sequence is None and doc["sequences"]["finite"] is False
    assert doc["cut_at_max_len"] is True  # stopped at 5 tokens, and infinite all the same


def test_cli_counts_a_pdt_and_needs_max_len(tmp_path):
    g = tmp_path / "nest.lark"
    g.write_text(GRAMMARS["nest"][0])
    fst = tmp_path / "nest.fst"
    r = run("promote", "gpt2", "--grammar", g, fst)
    assert r.rc == 0, r.stderr
    r = run("count", "gpt2", fst)
    assert r.rc == 2 and "pushdown" in r.stderr and "--max-len" in r.stderr and len(r.stderr.splitlines()) == 1
    r = run("count", "gpt2", fst, "--max-len", "5", "--json")
    assert r.rc == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["cut_at_max_len"] is True and doc["strings"]["by_length"] == [0, 1, 0, 1, 0, 1]
    r = run("count", "gpt2", fst, "--max-len", "5")
    assert r.rc == 0 and r.stdout.splitlines()[-1].split() == ["longest", ">", "5?", ">", "5?"]


def test_inspect_a_pdt_within_max_len(tmp_path, tokenizer):
    """``tokfst inspect`` of a grammar's PDT: refused without --max-len; with it, the structure of
    the decoder's states within N tokens, the same acceptor ``count`` counts."""
    from tokfst_cli.analysis import inspection

    g = tmp_path / "nest.lark"
    g.write_text(GRAMMARS["nest"][0])
    fst = tmp_path / "nest.fst"
    assert run("promote", "gpt2", "--grammar", g, fst).rc == 0
    r = run("inspect", "gpt2", fst)
    assert r.rc == 2 and "--max-len" in r.stderr and len(r.stderr.splitlines()) == 1
    r = run("inspect", "gpt2", fst, "--max-len", "4", "--json")
    assert r.rc == 0, r.stderr
    doc = json.loads(r.stdout)
    acc, cut = counting.acceptor(PushdownDecoder(tokenizer("gpt2"), compile_grammar(GRAMMARS["nest"][0], "lark")),
                                 max_len=4)
    assert cut and doc["within_tokens"] == 4 and doc["automata"]["artifact"] == inspection.structure(acc)
    assert doc["automata"]["artifact"]["finals"] > 0
    r = run("inspect", "gpt2", fst, "--max-len", "4")
    assert r.rc == 0 and r.stdout.splitlines()[-1] == "pushdown: the decoder's states within 4 tokens of the start"
