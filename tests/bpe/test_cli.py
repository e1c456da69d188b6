"""The command line on BPE tokenizers: ``canonical-check`` against HF's BPE model,
``promote --canonical`` with every method and form, ``compile-bpe --form fst|gadgets``.

Run in process (:func:`tests.runner.run`); OpenFst's own tools read the files written.
"""

from __future__ import annotations

import json

import pynini
import pytest

from tokfst_cli.bpe import factorized, implicit
from tokfst_cli.tokenizer.reference import HfReference

from ..helpers import SIX_REGEXES
from ..runner import run, tool
from .common import REAL, compiled, sequences, synthetic_tokenizer


@pytest.mark.parametrize("name", REAL)
def test_canonical_check_cli_agrees(tmp_path, tokenizer, name):
    model, imp, hf = compiled(name)
    seqs = sequences(name, 600, seed=9)
    src = tmp_path / "seqs.txt"
    src.write_text("\n".join(" ".join(map(str, s)) for s in seqs) + "\n")
    art = tmp_path / "a.bpe"
    art.write_bytes(implicit.to_bytes(imp))
    path = tokenizer.path(name)
    r = run("canonical-check", path, src, "--json", "--artifact", art, "--level", "model")
    recs = [json.loads(line) for line in r.out.decode().splitlines()]
    expected = [[t.id for t in hf.model.tokenize("".join(model.tokens[t] for t in s))] == s for s in seqs]
    assert [x["canonical"] for x in recs] == expected
    assert r.returncode == (0 if all(expected) else 1)
    for x, s in zip(recs, seqs):
        if not x["canonical"]:
            assert x["canonical_tokens"] == [t.id for t in hf.model.tokenize("".join(model.tokens[t] for t in s))]
    ok = [s for s, e in zip(seqs, expected) if e]
    src.write_text("\n".join(" ".join(map(str, s)) for s in ok) + "\n")
    r = run("canonical-check", path, src, "-q", "--artifact", art, "--level", "model")
    assert r.returncode == 0 and r.out.decode() == ""


def test_canonical_check_errors(tmp_path, tokenizer):
    bad = tmp_path / "x.txt"
    bad.write_text("1 2 notanid\n")
    r = run("canonical-check", "gpt2", bad)
    assert r.returncode == 2 and "line 1" in r.err.decode() and len(r.err.decode().strip().splitlines()) == 1
    nfkc = tmp_path / "nfkc.json"  # a WordPiece pipeline tokfst does not model
    nfkc.write_text(json.dumps({**json.loads(tokenizer.path("bert").read_text()), "normalizer": {"type": "NFKC"}}))
    good = tmp_path / "ok.txt"
    good.write_text("1 2\n")
    r = run("canonical-check", nfkc, good)
    assert r.returncode == 2 and "not modelled" in r.err.decode() and len(r.err.decode().strip().splitlines()) == 1


def test_cli_methods_and_forms_agree(tmp_path):
    """promote --canonical --method implicit|precomputed|gadgets and compile-bpe --form fst|gadgets."""
    path = synthetic_tokenizer(tmp_path, False)
    fsts = {}
    for method in ("implicit", "precomputed", "gadgets"):
        out = tmp_path / f"{method}.fst"
        r = run("promote", path, "-e", "(ab|ba)+c?", "--canonical", "--method", method, out, "--level", "model")
        assert r.returncode == 0, r.stderr
        fsts[method] = pynini.Fst.read(str(out))
    assert pynini.equivalent(fsts["implicit"], fsts["precomputed"])
    assert pynini.equivalent(fsts["implicit"], fsts["gadgets"])
    for method in ("implicit", "precomputed"):  # the pipeline level (the default); gadgets are model-level only
        out = tmp_path / f"{method}-pipeline.fst"
        r = run("promote", path, "-e", "(ab|ba)+(ca)?", "--canonical", "--method", method, out)
        assert r.returncode == 0, r.stderr
        fsts[method] = pynini.Fst.read(str(out))
    assert pynini.equivalent(fsts["implicit"], fsts["precomputed"])
    # no pre-tokenizer: the space reaches the model, which has no token for it (HF: "ab c" -> ab [UNK] c)
    r = run("promote", path, "-e", "(ab|ba)+( c)?", "--canonical", out)
    assert r.returncode == 2 and "' ' (U+0020)" in r.stderr and "'[UNK]'" in r.stderr, r.stderr
    r = run("promote", path, "-e", "ab", "--canonical", "--method", "gadgets", out)
    assert r.returncode == 2 and "--level model" in r.err.decode()
    for form in ("fst", "gadgets"):
        r = run("compile-bpe", path, tmp_path / f"a-{form}.fst", "--form", form)
        assert r.returncode == 0, r.stderr
    assert pynini.equivalent(pynini.Fst.read(str(tmp_path / "a-fst.fst")),
                             pynini.Fst.read(str(tmp_path / "a-gadgets.fst")))


def test_cli_canonical_forms(tmp_path, tokenizer):
    gpt2 = tokenizer.path("gpt2")
    out = tmp_path / "d.fst"
    r = run("promote", gpt2, "-e", SIX_REGEXES["date"], "--canonical", out)
    assert r.returncode == 0, r.stderr
    r = tool("fstinfo", out)
    assert r.returncode == 0
    fac = tmp_path / "e.fac"
    r = run("promote", gpt2, "-e", SIX_REGEXES["email"], "--canonical", "--format", "index", fac)
    assert r.returncode == 0 and "factorized" in r.err.decode()
    model, imp, _ = compiled("gpt2")
    fz = factorized.load(str(fac), model)
    ref = HfReference(model)
    state = fz.initial()
    for t in ref.tokenize_text("john.doe@example.com"):
        state = fz.advance(state, t)
    assert fz.is_final(state)
    bad = tmp_path / "bad.fst"
    r = run("promote", gpt2, "-e", "[a-z]+", "--canonical", bad, "--max-arcs", "50000")
    assert r.returncode == 3 and "--format index" in r.err.decode() and not bad.exists()
    r = run("promote", tokenizer.path("bert"), "-e", "abc", "--canonical", "--method", "gadgets", bad)
    assert r.returncode == 2 and "not for wordpiece" in r.err.decode() and not bad.exists()
    trunc = tmp_path / "t.fac"
    trunc.write_bytes(fac.read_bytes()[:-100])
    with pytest.raises(Exception, match="damaged|truncated"):
        factorized.load(str(trunc), model)
