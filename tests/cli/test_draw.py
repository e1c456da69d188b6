"""``tokfst draw``: Cognetta & Okazaki 2024 Fig. 3 and Fig. 4 as five SVG panels, drawings of a promoted GPT-2
automaton (file and stdin, folded arcs, png), usage errors (the library: tests/test_draw.py).

In process (tests.runner.run), except where the test is about the process: stderr of an unreadable
FST must be one line (OpenFst's own messages go to file descriptor 2, which only a subprocess
captures) and a PATH without graphviz.
"""

from __future__ import annotations

import os
import re
import shutil

import pynini
import pytest

from ..helpers import svg_texts
from ..runner import run, tokfst

PATTERN = "abaabcc"  # Cognetta & Okazaki 2024 Fig. 3
VOCAB = ["a", "b", "c", "ab", "abc", "bc"]
FIG4_VOCAB = ["a", "b", "aa", "ab"]  # Cognetta & Okazaki 2024 Fig. 4


def test_fig3_cli_writes_five_svg_panels(tmp_path):
    r = run("draw", "-e", PATTERN, "--vocab", ",".join(VOCAB), "--stages", str(tmp_path / "fig3.svg"))
    assert r.returncode == 0, r.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == [f"fig3-{k}.svg" for k in "abcde"]
    texts = {k: svg_texts((tmp_path / f"fig3-{k}.svg").read_bytes()) for k in "abcde"}
    assert set(VOCAB) <= set(texts["e"]) and "ε" not in texts["e"]
    assert "ε" in texts["d"] and "b:ab" in texts["c"] and "c:bc" in texts["b"]
    assert any("MIN(PROJ(A" in t for t in texts["e"]) and any(t.startswith("(a)") for t in texts["a"])


def test_fig4_cli_writes_five_svg_panels(tmp_path):
    r = run("draw", "-e", "a(a|b)*b", "--vocab", ",".join(FIG4_VOCAB), "--maxmatch", "--stages",
            str(tmp_path / "fig4.svg"))
    assert r.returncode == 0, r.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == [f"fig4-{k}.svg" for k in "abcde"]
    texts = {k: svg_texts((tmp_path / f"fig4-{k}.svg").read_bytes()) for k in "abcde"}
    assert "φ:ab" in texts["b"] and "a:aa, b:ab" in texts["c"] and "a" not in texts["d"]  # "a" is never greedy
    assert any(t.startswith("(d) MIN(PROJ(A") for t in texts["d"]) and "a" in texts["e"]
    assert 'stroke="red"' in (tmp_path / "fig4-e.svg").read_text()


def test_maxmatch_single_drawings():
    r = run("draw", "--vocab", "a,b,aa,ab", "--maxmatch")
    assert r.returncode == 0 and "φ:aa" in r.out.decode(), r.stderr
    r = run("draw", "-e", "aab", "--vocab", "a,b,aa,ab", "--maxmatch")
    assert r.returncode == 0, r.stderr
    assert re.findall(r'label=(\w+)\]', r.out.decode()) == ["aa", "b"]  # greedy: aa.b, not a.ab


def test_gpt2_promoted_fst_with_max_arcs_and_stdin(tmp_path):
    fst_path = tmp_path / "date.fst"
    r = run("promote", "gpt2", "--no-cache", "-e", "[0-9]{4}-[0-9]{2}", str(fst_path))
    assert r.returncode == 0, r.stderr
    fst = pynini.Fst.read(str(fst_path))
    r = run("draw", "-", "--max-arcs", "5", stdin=fst_path.read_bytes())
    assert r.returncode == 0, r.stderr
    src = r.out.decode("utf-8")
    assert src.startswith("digraph") and "doublecircle" in src
    assert f"+{fst.num_arcs(fst.start()) - 5} more" in src
    assert "more" in src and '[label="-"]' in src  # GPT-2's "-" token, by name
    r = run("draw", str(fst_path), str(tmp_path / "date.png"), "--max-arcs", "5")
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "date.png").read_bytes().startswith(b"\x89PNG")


# --- errors ----------------------------------------------------------------------------------

def test_non_fst_input_is_a_one_line_usage_error(tmp_path):
    bad = tmp_path / "bad.fst"
    bad.write_text("not an fst\n")
    r = tokfst("draw", str(bad), str(tmp_path / "out.svg"))
    assert r.returncode == 2
    lines = r.err.decode().splitlines()
    assert len(lines) == 1 and lines[0].startswith("tokfst: error:") and "Traceback" not in r.err.decode()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.fst"]


@pytest.mark.parametrize("args", [
    ["-e", "ab", "--stages", "x.svg"],  # --stages without --vocab
    ["-e", "ab", "--vocab", "a,b", "--stages"],  # --stages without OUT
    ["-e", "ab", "in.fst", "out.dot"],  # IN together with -e
    ["-e", "ab", "--maxmatch"],  # --maxmatch without --vocab
    [],  # nothing to draw
])
def test_usage_errors_exit_2(tmp_path, monkeypatch, args):
    monkeypatch.chdir(tmp_path)
    r = run("draw", *args)
    assert r.returncode == 2 and len(r.err.decode().splitlines()) == 1, r.stderr
    assert list(tmp_path.iterdir()) == []


def test_missing_dot_binary_names_the_debian_package(tmp_path):
    env = dict(os.environ, PATH=str(tmp_path / "empty"))
    assert shutil.which("dot", path=env["PATH"]) is None
    r = tokfst("draw", "-e", PATTERN, "--vocab", ",".join(VOCAB), "--stages", str(tmp_path / "f.png"), env=env)
    assert r.returncode == 1 and "graphviz" in r.err.decode()
    assert list(tmp_path.iterdir()) == []  # nothing half-written


@pytest.mark.parametrize("tok,text", [("gpt2", "it's  ok"), ("llama2", "The cap")])
def test_pretokenizer_draws_a_o_p_with_hf_boundaries(tok, text, tokenizer):
    """--pretokenizer -e TEXT: A o P is one path; its <w> boundaries are HF's pre-token cuts."""
    from tokenizers import Tokenizer

    path = tokenizer.arg(tok)
    r = run("draw", "--pretokenizer", path, "-e", text, "--format", "dot")
    assert r.rc == 0, r.stderr
    hf = Tokenizer.from_file(str(tokenizer.path(tok)))
    normalized = hf.normalizer.normalize_str(text) if hf.normalizer else text
    pieces = hf.pre_tokenizer.pre_tokenize_str(normalized) if hf.pre_tokenizer else [(normalized, None)]
    assert r.stdout.count("ε:&lt;w&gt;") + r.stdout.count("ε:<w>") == len(pieces) - 1


def test_pretokenizer_refuses_vocab_and_unmodelled_components(tokenizer):
    r = run("draw", "--pretokenizer", "gpt2", "--vocab", "a,b")
    assert r.rc == 2 and "--pretokenizer" in r.stderr and len(r.err_lines) == 1
    bert = run("draw", "--pretokenizer", str(tokenizer.path("bert")))
    assert bert.rc == 2 and "not modelled" in bert.stderr and len(bert.err_lines) == 1
