"""Symbol names (tokfst_cli.automata.symbols) and the OpenFst text round trip of a promoted automaton.

OpenFst's text formats split fields on blanks and lines on newlines, so token names are escaped.
``unescape(escape(s)) == s`` must hold for any text, escaped names must be single blank-free
words, and a promoted FST whose tokens contain blanks, backslashes, ``<eps>`` and ``#`` must
survive ``fstprint`` -> ``fstcompile`` unchanged (checked with OpenFst's own ``fstequal``).
"""

from __future__ import annotations

import re
import sys

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from tokfst_cli.automata import symbols
from tokfst_cli.promotion import lexicon
from tokfst_cli.promotion.promote import promote
from tokfst_cli.text.regex import compile_regex
from tokfst_cli.tokenizer.model import from_json

from .runner import tool

# Every code point Python calls whitespace (computed, not listed by hand).
WHITESPACE = [chr(c) for c in range(sys.maxunicode + 1) if chr(c).isspace()]

# Text built from fragments that look like the escape language itself, so that collisions
# between literal text and escapes are actually generated, mixed with arbitrary characters.
_fragments = st.one_of(
    st.characters(exclude_categories=("Cs",)),
    st.sampled_from(WHITESPACE + ["\\", "\\\\", "<", ">", "#", "x", "u", symbols.EPS]),
    st.integers(0, 0xFF).map(lambda c: f"\\x{c:02x}"),
    st.integers(0, 0xFFFF).map(lambda c: f"\\u{c:04x}"),
)
names = st.lists(_fragments, max_size=12).map("".join)


@example("\\u0041")  # a literal backslash-u sequence
@example(symbols.EPS)
@example("")
@given(names)
def test_unescape_inverts_escape(s):
    assert symbols.unescape(symbols.escape(s)) == s


@given(st.text(alphabet=st.characters(exclude_categories=("Cs",)).filter(lambda c: c != "\\")))
@example(symbols.EPS)
@example("")
def test_unescape_inverts_escape_without_backslashes(s):
    # The part of the round trip that does not depend on the \\u bug above.
    assert symbols.unescape(symbols.escape(s)) == s


@example("\u202f")
@example("\u205f")
@given(names.filter(bool))
def test_escaped_names_are_one_blank_free_word(s):
    e = symbols.escape(s)
    assert e
    assert e.split() == [e]


@given(names.filter(bool))
def test_escaped_names_are_non_empty_and_free_of_ascii_blanks(s):
    # What OpenFst itself splits on (fields: space and tab; lines: newline) never occurs.
    e = symbols.escape(s)
    assert e
    assert not set(e) & {" ", "\t", "\n", "\r", "\v", "\f"}


@settings(suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(names, min_size=2, max_size=40, unique=True))
def test_escape_is_injective(sample):
    escaped = [symbols.escape(s) for s in sample]
    assert len(set(escaped)) == len(sample)


def test_escape_is_injective_on_all_single_characters():
    chars = [chr(c) for c in range(sys.maxunicode + 1) if not 0xD800 <= c <= 0xDFFF]
    assert len({symbols.escape(c) for c in chars}) == len(chars)


@pytest.mark.parametrize("name", ["gpt2", "llama2", "bert"])
def test_real_vocabularies_round_trip_and_name_uniquely(tokenizer, name):
    model = tokenizer(name)
    table = symbols.token_table(model)
    seen = set()
    for tid, tok in enumerate(model.tokens):
        sym = table.find(tid + 1)
        assert sym.split() == [sym]
        assert symbols.unescape(sym) == tok
        assert table.find(sym) == tid + 1
        seen.add(sym)
    assert len(seen) == model.vocab_size


# --- OpenFst text round trip of a promoted automaton --------------------------------------

ODD_TOKENS = [" ", "\t", "\n", "\\", "<eps>", "#", "a b", "a\tb", "\n#", "\\\\", "a\\b", "#a", "eps>", "<"]


@pytest.fixture(scope="module")
def odd_promoted(tmp_path_factory):
    chars = sorted({c for t in ODD_TOKENS for c in t} | {"a", "b"})
    vocab = {c: i for i, c in enumerate(chars)}
    for t in ODD_TOKENS:
        vocab.setdefault(t, len(vocab))
    model = from_json({"model": {"type": "BPE", "vocab": vocab, "merges": []}}, source="<odd>")
    alternatives = "|".join(sorted({re.escape(c) for c in chars}))
    automaton = compile_regex(f"({alternatives})*")
    result = promote(model, automaton, lexicon.build(model))
    d = tmp_path_factory.mktemp("odd")
    path = d / "odd.fst"
    result.fst.write(str(path))
    return model, result.fst, d, path


def test_odd_tokens_all_appear_in_the_promoted_fst(odd_promoted):
    model, fst, _, _ = odd_promoted
    labels = {arc.ilabel for s in fst.states() for arc in fst.arcs(s)}
    assert labels == {tid + 1 for tid, _ in model.lexicon_items()}
    assert {model.tokens[x - 1] for x in labels} >= set(ODD_TOKENS)


@pytest.mark.parametrize("acceptor", [False, True], ids=["transducer-text", "acceptor-text"])
def test_fstprint_fstcompile_round_trip(odd_promoted, acceptor):
    model, fst, d, path = odd_promoted
    syms = d / "tokens.syms"
    r = tool("fstsymbols", f"--save_isymbols={syms}", str(path), str(d / "ignored.fst"))
    assert r.returncode == 0, r.stderr
    # The exported table names every token by its escaped, blank-free name.
    lines = syms.read_text(encoding="utf-8").splitlines()
    assert len(lines) == model.vocab_size + 1
    by_label = {}
    for line in lines:
        name, key = line.split("\t")
        assert name.split() == [name]
        by_label[int(key)] = name
    assert by_label[0] == symbols.EPS
    assert {k: symbols.unescape(v) for k, v in by_label.items() if k} == {
        i + 1: t for i, t in enumerate(model.tokens)}

    flag = ["--acceptor"] if acceptor else []
    printed = tool("fstprint", *flag, str(path))
    assert printed.returncode == 0, printed.stderr
    text = printed.stdout.decode("utf-8")
    # Every line is a final state (1 field) or an arc with 3 (acceptor) or 4 fields: no name
    # was split apart by a blank.
    assert {len(line.split("\t")) for line in text.splitlines()} == {1, 3 if acceptor else 4}
    assert all(len(line.split()) == len(line.split("\t")) for line in text.splitlines())
    (d / "odd.txt").write_text(text, encoding="utf-8")
    osyms = [] if acceptor else [f"--osymbols={syms}"]
    back = d / f"back-{acceptor}.fst"
    r = tool("fstcompile", *flag, f"--isymbols={syms}", *osyms, "--keep_isymbols", "--keep_osymbols",
             str(d / "odd.txt"), str(back))
    assert r.returncode == 0, r.stderr
    r = tool("fstequal", str(path), str(back))
    assert r.returncode == 0, r.stderr

    # fstequal ignores symbol tables: compare the kept input table too.
    back_syms = d / f"back-{acceptor}.syms"
    r = tool("fstsymbols", f"--save_isymbols={back_syms}", str(back), str(d / "ignored2.fst"))
    assert r.returncode == 0, r.stderr
    assert back_syms.read_text(encoding="utf-8").splitlines() == lines

    # Control: the comparison does notice a missing arc.
    arc_lines = [ln for ln in text.splitlines() if len(ln.split()) > 2]
    assert arc_lines
    cut = d / "cut.txt"
    cut.write_text("\n".join(ln for ln in text.splitlines() if ln != arc_lines[-1]) + "\n", encoding="utf-8")
    cut_fst = d / "cut.fst"
    r = tool("fstcompile", *flag, f"--isymbols={syms}", *osyms, str(cut), str(cut_fst))
    assert r.returncode == 0, r.stderr
    assert tool("fstequal", str(path), str(cut_fst)).returncode != 0


def test_token_names_are_unique_with_id_gaps(tmp_path):
    # id 1 is a gap in the id space; id 2 is a token whose text is the gap's placeholder name.
    model = from_json({"model": {"type": "BPE", "vocab": {"a": 0, "<no-token-1>": 2}, "merges": []}})
    assert model.tokens[1] == ""
    table = symbols.token_table(model)
    names = [table.find(i + 1) for i in range(model.vocab_size)]
    assert symbols.unescape(names[2]) == "<no-token-1>"
    assert len(set(names)) == model.vocab_size
    # The consequence: an automaton using the token cannot be printed.
    fst = promote(model, compile_regex("a<no-token-1>"), lexicon.build(model)).fst
    fst.write(str(tmp_path / "gap.fst"))
    assert tool("fstprint", str(tmp_path / "gap.fst")).returncode == 0
