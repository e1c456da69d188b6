"""Bad input and edge cases found by an adversarial audit of the command line (2026-11-28).

Each test fails on the code before its fix:

* a tokenizer.json whose Precompiled charsmap Hugging Face cannot parse: HF's Rust code panics
  (a BaseException, its message printed by Rust itself); now one line, exit 2;
* a BPE tokenizer without merges (HF loads it: every word in single characters) crashed;
* canonical-check split lines at every ``str.splitlines`` separator (\\v, U+2028, ...), so its
  verdicts were no longer the input's lines, and read stdin in the locale's encoding;
* canonical-check called WordPiece sequences with BERT's added tokens non-canonical, HF's own
  output among them, and ``promote --canonical`` of a WordPiece tokenizer ignored them;
* count, inspect and sample read an ``.fst`` built for another tokenizer;
* draw and inspect with -e overwrote an automaton named as their one path (OUT);
* usage errors took four lines (click's usage block).
"""

from __future__ import annotations

import json
import shutil

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tokfst_cli.analysis import check
from tokfst_cli.errors import InputError
from tokfst_cli.tokenizer import model as tokmod

from ..runner import make_env, run, tokfst

SPECIALS = ["[CLS]", "[SEP]", "[MASK]", "[PAD]", "[UNK]"]
PIECES = ["the", "cat", "un", "aff", "able", "ing", " ", "  ", ",", ".", "é", "中", "x", "1", "\n", "\t", *SPECIALS]


def _edited(tokenizer, name: str, path, edit) -> str:
    data = json.loads(tokenizer.path(name).read_text(encoding="utf-8"))
    edit(data)
    path.write_text(json.dumps(data), encoding="utf-8")
    return str(path)


# ---- tokenizer.json that HF cannot parse, or parses into something degenerate ------------------
def test_a_charsmap_hf_cannot_parse_is_one_line_not_a_rust_panic(tokenizer, tmp_path):
    bad = _edited(tokenizer, "llama2", tmp_path / "bad.json",
                  lambda d: d.update(normalizer={"type": "Precompiled", "precompiled_charsmap": ""}))
    for args in (("compile-bpe", bad, tmp_path / "o.bpe"), ("canonical-check", bad)):
        r = tokfst(*args, stdin="450\n", env=make_env(RUST_BACKTRACE="1"))
        assert r.rc == 2 and len(r.err_lines) == 1, r.stderr
        assert "normalizer (Precompiled)" in r.stderr and "panicked" not in r.stderr
    assert not (tmp_path / "o.bpe").exists()


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(texts=st.lists(st.text(st.sampled_from("ab cd\u00e9\u4e2d1!\n"), max_size=12), min_size=1, max_size=5))
def test_a_bpe_without_merges_checks_as_hf_encodes(tokenizer, tmp_path_factory, texts):
    """No merges: HF spells every word in single characters (byte fallback for the rest)."""
    d = tmp_path_factory.mktemp("nomerges")
    path = _edited(tokenizer, "llama2", d / "tok.json", lambda data: data["model"].update(merges=[]))
    from tokenizers import Tokenizer

    hf = Tokenizer.from_file(path)
    lines = [t.replace("\n", " ") for t in texts]
    r = run("canonical-check", path, "--input", "text", "--json", stdin="\n".join(lines) + "\n")
    assert r.rc == 0, r.stderr
    got = [json.loads(x) for x in r.stdout.splitlines()]
    assert [g["tokens"] for g in got] == [hf.encode(t, add_special_tokens=False).ids for t in lines]
    assert all(g["canonical"] for g in got)


# ---- canonical-check: lines --------------------------------------------------------------------
SEPARATORS = ["\x0b", "\x0c", "\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\u2029", "\r"]


@pytest.mark.parametrize("sep", SEPARATORS)
def test_check_reads_one_line_per_line_feed(tokenizer, sep):
    lines = [f"a{sep}b", "c"]
    r = run("canonical-check", "gpt2", "--input", "text", "--json", stdin="\n".join(lines) + "\r\n")
    hf = tokenizer.hf("gpt2")
    got = [json.loads(x) for x in r.stdout.splitlines()]
    assert r.rc == 0 and [g["line"] for g in got] == [1, 2]
    assert [g["tokens"] for g in got] == [hf.encode(t, add_special_tokens=False).ids for t in lines]


def test_check_refuses_stdin_that_is_not_utf8(tmp_path):
    for args in (("--input", "text"), ("--input", "text", "-")):
        r = tokfst("canonical-check", "gpt2", *args, stdin=b"hello\ncaf\xe9\n")
        assert r.rc == 2 and r.err_lines == ["tokfst: error: cannot read stdin: 'utf-8' codec can't decode byte "
                                             "0xe9 in position 9: invalid continuation byte; give a readable UTF-8 "
                                             "file"], r.stderr


# ---- WordPiece: added tokens ---------------------------------------------------------------------
@settings(max_examples=60, deadline=None)
@given(parts=st.lists(st.sampled_from(PIECES), max_size=10))
def test_wordpiece_check_accepts_hf_output_with_added_tokens(tokenizer, parts):
    text = "".join(parts)
    ids = tokenizer.hf("bert").encode(text, add_special_tokens=False).ids
    checker = check.Checker(tokenizer("bert"), parse_line=lambda line, n: list(map(int, line.split())))
    (v,) = checker.check([" ".join(map(str, ids))])
    assert v.offence is None, (text, ids, v.offence)


def test_wordpiece_check_rejects_an_added_token_inside_a_word(tokenizer):
    """Between a word's pieces an added token leaves a ## piece at the start of a segment."""
    hf, model = tokenizer.hf("bert"), tokenizer("bert")
    word = hf.encode("unaffable", add_special_tokens=False).ids
    assert len(word) > 1 and model.tokens[word[1]].startswith("##")
    mask = model.token_id("[MASK]")
    seq = [word[0], mask, *word[1:]]
    checker = check.Checker(model, parse_line=lambda line, n: list(map(int, line.split())))
    (v,) = checker.check([" ".join(map(str, seq))])
    assert v.offence is not None and v.offence[0] == 2
    assert hf.encode(hf.decode(seq, skip_special_tokens=False), add_special_tokens=False).ids != seq


def test_wordpiece_added_tokens_the_check_does_not_model_are_refused(tokenizer, tmp_path):
    def add(data):
        data["added_tokens"].append({"id": 30522, "content": "hello world", "single_word": False, "lstrip": False,
                                     "rstrip": False, "normalized": True, "special": False})
    path = _edited(tokenizer, "bert", tmp_path / "bert.json", add)
    r = run("canonical-check", path, stdin="30522\n")
    assert r.rc == 2 and "'hello world'" in r.stderr and len(r.err_lines) == 1
    r = run("promote", path, "-e", "the cat", "--canonical", "--format", "index")
    assert r.rc == 2 and "normalized text" in r.stderr and "drop --canonical" in r.stderr


def test_wordpiece_promotion_refuses_text_with_an_added_token(tokenizer):
    args = ("promote", tokenizer.arg("bert"), "-e", r"the \[MASK\] sat", "--canonical", "--format", "index")
    r = run(*args, "--special-text", "refuse")
    assert r.rc == 2 and r.err_lines == ["tokfst: error: the regex can match text containing the added token "
                                         "'[MASK]', which the tokenizer splits out before preprocessing; exclude "
                                         "that text from the regex"]
    r = run(*args)  # by default a special token's text is left out: here, every text
    assert r.rc == 1 and r.err_lines == ["tokfst: error: every text of the \\[MASK\\] sat contains a special token "
                                         "([MASK]); allow text without it, or give --special-text refuse to see the "
                                         "refusal"]


# ---- artifacts of another tokenizer; automata as OUT ---------------------------------------------
@pytest.fixture(scope="module")
def llama_fst(tmp_path_factory, tokenizer):
    out = tmp_path_factory.mktemp("fst") / "cities.fst"
    assert run("promote", tokenizer.arg("llama2"), "-e", "(Cologne|Berlin|Bonn)", out).rc == 0
    return out


@pytest.mark.parametrize("cmd", ["count", "inspect", "sample"])
def test_an_fst_of_another_tokenizer_is_refused(llama_fst, cmd):
    r = run(cmd, "gpt2", llama_fst)
    llama, gpt2 = tokmod.load("tests/data/llama2.json"), tokmod.load("gpt2")
    assert r.rc == 2 and r.err_lines == [  # both tokenizers named: the artifact's by fingerprint, the one given
        f"tokfst: error: {llama_fst} was built for another tokenizer (fingerprint {llama.fingerprint[:12]}), not "
        f"for {gpt2.source} (fingerprint {gpt2.fingerprint[:12]}); load it with the tokenizer it was built for, or "
        "rebuild it for this one"]


def test_an_fst_of_its_own_tokenizer_still_loads(llama_fst, tokenizer):
    assert run("count", tokenizer.arg("llama2"), llama_fst).rc == 0


def test_the_python_api_refuses_it_too(llama_fst, tokenizer):
    from tokfst_cli import constraint

    with pytest.raises(InputError, match="another tokenizer"):
        constraint.load(str(llama_fst), tokenizer("gpt2"))


@pytest.mark.parametrize("args", [("draw", "{}", "-e", "ab"), ("draw", "{}", "--vocab", "a,b"),
                                  ("inspect", "gpt2", "{}", "-e", "a")])
def test_an_automaton_is_not_overwritten_as_out(llama_fst, tmp_path, args):
    victim = tmp_path / "victim.fst"
    shutil.copy(llama_fst, victim)
    r = run(*(str(victim) if a == "{}" else a for a in args))
    assert r.rc == 2 and len(r.err_lines) == 1 and "is an automaton" in r.stderr
    assert victim.read_bytes() == llama_fst.read_bytes()


def test_a_drawing_may_replace_a_drawing(tmp_path):
    out = tmp_path / "ab.dot"
    out.write_text("digraph {}\n")
    assert run("draw", "-e", "ab", out).rc == 0 and "digraph" in out.read_text()


@pytest.mark.parametrize("args", [("--max-memory", "abc", "doctor"), ("promote", "gpt2", "-e", "a", "--max-arcs", "0"),
                                  ("promot",), ("promote",), (), ("cache",)])
def test_usage_errors_are_one_line(args):
    r = run(*args)
    assert r.rc == 2 and len(r.err_lines) == 1 and r.stderr.startswith("tokfst: error: ") and "-h'" in r.stderr
    if not args:  # bare tokfst: a short usage naming the commands, not the whole help
        assert "no command given" in r.stderr and "encode" in r.stderr and "Options:" not in r.stderr


# ---- regexes interegular reads otherwise than Python's re ----------------------------------------
@pytest.mark.parametrize("pattern", ["a{2,1}", "a**", "[^]", "[]", "a+*", "(ab"])
def test_what_python_re_rejects_is_an_invalid_regex(pattern):
    with pytest.raises(__import__("re").error) as e:
        __import__("re").compile(pattern)
    r = run("promote", "gpt2", "-e", pattern, "--format", "index")
    assert r.rc == 2 and r.err_lines == [f"tokfst: error: invalid regex {pattern!r}: {e.value.msg} at position "
                                         f"{e.value.pos}; fix the pattern (Python re syntax)"]


@pytest.mark.parametrize("pattern,what", [("a*+a", "possessive quantifiers"), ("x(?:ab|a)++b", "possessive"),
                                          ("(?>a|ab)c", "atomic groups"), ("(?#note)a", "comments"),
                                          ("(?m)a", "MULTILINE")])
def test_constructs_tokfst_does_not_model_are_refused_by_name(pattern, what):
    r = run("promote", "gpt2", "-e", pattern, "--format", "index")
    assert r.rc == 2 and len(r.err_lines) == 1 and what in r.stderr, r.stderr


@pytest.mark.parametrize("pattern", ["a*?b", r"\{x\}", "[(?#]", "a{2}b{1,3}", "(a|b)+?c"])
def test_lookalikes_still_compile(pattern):
    assert run("promote", "gpt2", "-e", pattern, "--format", "index").rc == 0


def test_a_regex_file_keeps_its_carriage_returns(tmp_path):
    path = tmp_path / "cr.re"
    path.write_bytes(b"a\rb\n")
    r = run("promote", "gpt2", "-f", path, "--format", "index")
    assert r.rc == 0 and json.loads(r.out)["regex"] == "a\rb"


def test_an_error_quotes_a_long_pattern_cut(tmp_path):
    """A schema's 1e308 bound is a regex of thousands of characters; the message stays short."""
    path = tmp_path / "big.json"
    path.write_text('{"type": "integer", "minimum": 0, "maximum": 1e308}')
    r = run("promote", "gpt2", "--schema", path, "--format", "index")
    assert r.rc in (2, 3) and len(r.err_lines) == 1 and len(r.stderr) < 400, r.stderr
