"""``tokfst promote`` on the command line, and what every command shares: output and errors.

Covers: ``promote`` output read back by the OpenFst tools, stdout vs OUT, -e vs -f FILE vs -f -,
symbol table names and labels (checked against HF's vocabulary); the JSON index against its
documented schema and against the .fst of the same arguments; the lexicon cache (reuse, corrupt
entries); bad input (exit code, one stderr line, nothing left behind, tracebacks only with
--debug); no ANSI codes without a terminal or with NO_COLOR.

Which runner (tests/runner.py): the installed console script (``tokfst``, concurrently with
``run_many``) where the test is about the process: TOKFST_CACHE shared by concurrent runs, bad
input whose stderr must be exactly one line (OpenFst's own "ERROR:" lines go to file descriptor 2
and only a subprocess captures them) and free of colour codes as rich decides for a real pipe,
NO_COLOR, a terminal; in process (``run``) for the rest.
"""

from __future__ import annotations

import json
import os
import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import pynini
import pytest
from tokenizers import Tokenizer, models

from tokfst_cli.automata import symbols
from tokfst_cli.decoding import index as index_mod

from ..conftest import TOKENIZER, shared
from ..helpers import SIX_REGEXES
from ..runner import ANSI, SGR, make_env, run, run_many, tokfst_on_a_tty, tool

REAL = ["gpt2", "llama2", "bert"]
TOK_ARG = {t: TOKENIZER.arg(t) for t in REAL}
PATTERN = SIX_REGEXES["date"]


def file_stats(d: Path) -> dict[str, tuple[int, int]]:
    return {p.name: (p.stat().st_ino, p.stat().st_mtime_ns) for p in d.iterdir()}


# --- promote on the real tokenizers -----------------------------------------------------------

@dataclass
class Promoted:
    dir: Path
    cache: Path
    runs: dict
    cold_cache: dict  # cache file stats right after the first runs
    warm_cache: dict  # ... and after all the others

    def fst(self, tok: str) -> Path:
        return self.dir / f"{tok}.fst"

    def index(self, tok: str) -> Path:
        return self.dir / f"{tok}.json"


@pytest.fixture(scope="module")
def promoted(tmp_path_factory) -> Promoted:
    return shared(tmp_path_factory, "cli-promoted", _promoted)


def _promoted(root: Path) -> Promoted:
    cache, d = root / "cli-cache", root / "cli-out"
    cache.mkdir()
    d.mkdir()
    env = make_env(cache)
    regex_file = d / "pattern.txt"
    regex_file.write_text(PATTERN + "\n", encoding="utf-8")
    # Cold cache: one run per tokenizer builds its lexicon.
    runs = run_many({(t, "file"): (("promote", TOK_ARG[t], d / f"{t}.fst", "-e", PATTERN), {"env": env})
                     for t in REAL})
    cold = file_stats(cache)
    jobs = {}
    for t in REAL:
        jobs[(t, "stdout")] = (("promote", TOK_ARG[t], "-e", PATTERN), {"env": env})
        jobs[(t, "dash")] = (("promote", TOK_ARG[t], "-", "-e", PATTERN), {"env": env})
        jobs[(t, "index")] = (("promote", TOK_ARG[t], d / f"{t}.json", "-e", PATTERN, "--format", "index"),
                              {"env": env})
    for t in ("bert",):
        jobs[(t, "-f file")] = (("promote", TOK_ARG[t], "-f", regex_file), {"env": env})
        jobs[(t, "-f -")] = (("promote", TOK_ARG[t], "-f", "-"), {"env": env, "stdin": PATTERN.encode()})
    runs.update(run_many(jobs))
    return Promoted(d, cache, runs, cold, file_stats(cache))


@pytest.mark.parametrize("tok", REAL)
def test_promote_runs_cleanly(promoted, tok):
    for (t, kind), r in promoted.runs.items():
        if t == tok:
            assert r.rc == 0, (kind, r.err)
            assert r.err == b"", kind


@pytest.mark.parametrize("tok", REAL)
def test_openfst_tools_read_the_output(promoted, tok, tmp_path):
    path = promoted.fst(tok)
    for cmd in (["fstinfo", path], ["fstprint", path], ["fstdraw", path]):
        p = tool(*cmd)
        assert p.returncode == 0, (cmd, p.stderr)
        assert p.stdout.strip(), cmd
    assert b"digraph" in tool("fstdraw", path).stdout


@pytest.mark.parametrize("tok", REAL)
def test_stdout_gets_the_same_bytes(promoted, tok):
    data = promoted.fst(tok).read_bytes()
    assert data
    assert promoted.runs[(tok, "stdout")].out == data
    assert promoted.runs[(tok, "dash")].out == data
    assert not (promoted.dir / "-").exists()


@pytest.mark.parametrize("tok", ["bert"])
def test_regex_file_and_stdin_equal_dash_e(promoted, tok):
    data = promoted.fst(tok).read_bytes()
    assert promoted.runs[(tok, "-f file")].out == data
    assert promoted.runs[(tok, "-f -")].out == data


@pytest.mark.parametrize("tok", REAL)
def test_symbol_tables_are_named_by_fingerprint(promoted, tokenizer, tok):
    model = tokenizer(tok)
    info = tool("fstinfo", promoted.fst(tok)).stdout.decode()
    tables = dict(re.findall(r"^(input|output) symbol table\s+(\S+)$", info, re.M))
    expected = f"tokfst-tokens-{model.fingerprint[:16]}"
    assert tables == {"input": expected, "output": expected}


@pytest.mark.parametrize("tok", REAL)
def test_labels_are_token_ids_plus_one(promoted, tokenizer, tok):
    hf = tokenizer.hf(tok)
    named = tool("fstprint", promoted.fst(tok)).stdout.decode("utf-8").splitlines()
    numeric = tool("fstprint", "--numeric=true", promoted.fst(tok)).stdout.decode().splitlines()
    assert len(named) == len(numeric)
    special = set(hf.get_added_tokens_decoder())
    arcs = 0
    for a, b in zip(named, numeric):
        fa, fb = a.split("\t"), b.split("\t")
        if len(fb) < 3:
            assert fa == fb  # final state lines
            continue
        arcs += 1
        label = int(fb[2])
        assert fb[2] == fb[3]  # an acceptor
        assert label - 1 not in special
        assert symbols.unescape(fa[2]) == hf.id_to_token(label - 1)
    assert arcs > 0


# --- the JSON index ---------------------------------------------------------------------------

def documented_schema() -> dict:
    """{key: description} of the index format, and nested key sets, parsed from index.py's docstring."""
    doc = index_mod.__doc__
    block = doc.split("(JSON):", 1)[1]
    top: dict[str, str] = {}
    for line in block.splitlines():
        if not line.strip():
            continue
        m = re.match(r"^ {4}(\S.*?)\s{2,}(\S.*)$", line)
        assert m, f"unparsable schema line {line!r}"
        for key in m.group(1).split(","):
            top[key.strip()] = m.group(2)
    nested = {}
    for key, desc in top.items():
        if "{" in desc:
            inner = desc[desc.index("{") + 1: desc.rindex("}")]
            nested[key] = (set(re.findall(r'"(\w+)"\s*:', inner)) if '"' in inner
                           else {k.strip() for k in inner.split(",")})
    return {"top": top, "nested": nested}


def test_the_docstring_schema_parses():
    schema = documented_schema()
    assert {"format", "version", "masks", "states", "stats", "tokenizer"} <= set(schema["top"])
    assert {"tokenizer", "states", "stats"} <= set(schema["nested"])


@pytest.mark.parametrize("tok", REAL)
def test_index_follows_the_documented_schema(promoted, tokenizer, tok):
    assert promoted.runs[(tok, "index")].out == b""
    idx = json.loads(promoted.index(tok).read_text(encoding="utf-8"))
    schema = documented_schema()
    assert set(schema["top"]) <= set(idx)
    fmt, version = json.loads("[" + schema["top"]["format"] + "]")
    assert idx["format"] == fmt and idx["version"] == version
    assert set(idx["tokenizer"]) == schema["nested"]["tokenizer"]
    assert set(idx["stats"]) == schema["nested"]["stats"]
    assert all(set(st) == schema["nested"]["states"] for st in idx["states"])
    model, hf = tokenizer(tok), tokenizer.hf(tok)
    assert idx["tokenizer"]["fingerprint"] == model.fingerprint
    assert idx["tokenizer"]["vocab_size"] == hf.get_vocab_size()
    assert idx["regex"] == PATTERN
    assert isinstance(idx["initial"], int) and 0 <= idx["initial"] < len(idx["states"])
    assert idx["finals"] == sorted(set(idx["finals"]))
    for mask in idx["masks"]:
        assert mask == sorted(set(mask))
        assert all(isinstance(t, int) and 0 <= t < hf.get_vocab_size() for t in mask)
    assert all(isinstance(v, int) for v in idx["stats"].values())


def test_index_has_no_undocumented_keys(promoted):
    idx = json.loads(promoted.index("bert").read_text(encoding="utf-8"))
    assert set(idx) == set(documented_schema()["top"])


@pytest.mark.parametrize("tok", REAL)
def test_index_agrees_with_the_fst(promoted, tok):
    idx = json.loads(promoted.index(tok).read_text(encoding="utf-8"))
    fst = pynini.Fst.read(str(promoted.fst(tok)))
    zero = pynini.Weight.zero(fst.weight_type())
    assert len(idx["states"]) == fst.num_states()
    assert idx["initial"] == fst.start()
    assert idx["finals"] == [s for s in fst.states() if fst.final(s) != zero]
    for s in fst.states():
        arcs = sorted((a.ilabel - 1, a.nextstate) for a in fst.arcs(s))
        st = idx["states"][s]
        assert idx["masks"][st["mask"]] == [t for t, _ in arcs], s
        assert st["next"] == [n for _, n in arcs], s
    # stats, recomputed from the masks and states alone
    per_state = Counter(tuple(idx["masks"][st["mask"]]) for st in idx["states"])
    assert len(per_state) == len(idx["masks"])  # one mask per distinct set
    assert idx["stats"] == {
        "states": fst.num_states(),
        "arcs": sum(fst.num_arcs(s) for s in fst.states()),
        "masks": len(per_state),
        "states_in_shared_masks": sum(n for n in per_state.values() if n > 1),
        "single_token_states": sum(1 for st in idx["states"] if len(st["next"]) == 1),
        "final_only_states": sum(1 for st in idx["states"] if not st["next"]),
    }
    assert idx["stats"]["states_in_shared_masks"] > 0  # the date regex really shares masks


# --- the lexicon cache ------------------------------------------------------------------------

def test_lexicon_cache_is_written_once_and_reused(promoted, tokenizer):
    fingerprints = {t: tokenizer(t).fingerprint for t in REAL}
    names = sorted(n for n in promoted.cold_cache if "-tokenizer-" not in n)  # (large tokenizer.json files kept read)
    assert len(names) == len(REAL)  # one lexicon per tokenizer, no temp files
    for t, fp in fingerprints.items():
        assert sum(fp in n for n in names) == 1, t
    # Eleven more runs later, the entries are the very same files (not rewritten).
    assert promoted.warm_cache == promoted.cold_cache


@pytest.mark.parametrize("tok, extra", [("bert", ()), ("gpt2", ("--fuse-spaces", "--scripts", "Latin"))],
                         ids=["lexicon", "filters"])
def test_no_cache_writes_no_cache_file(tmp_path, monkeypatch, tok, extra):
    """--no-cache: nothing read or written, the filters' automata included."""
    cache = tmp_path / "cache"
    monkeypatch.setenv("TOKFST_CACHE", str(cache))  # read when the cache is used, so in process too
    r = run("promote", TOK_ARG[tok], tmp_path / "x.fst", "-e", "ab+", "--no-cache", *extra)
    assert r.rc == 0, r.err
    assert not cache.exists() or not list(cache.iterdir())


DAMAGE = ("garbage", "empty", "truncated")


@pytest.fixture(scope="module")
def damaged(promoted, tmp_path_factory, tokenizer):
    """Promote BERT once per kind of damage done to its cached lexicon."""
    fp = tokenizer("bert").fingerprint
    (good,) = [p for p in promoted.cache.iterdir() if fp in p.name]
    data = good.read_bytes()
    jobs, dirs = {}, {}
    for damage in DAMAGE:
        d = dirs[damage] = tmp_path_factory.mktemp(f"damaged-{damage}")
        (d / "cache").mkdir()
        bad = {"garbage": os.urandom(4096), "empty": b"", "truncated": data[: len(data) // 2]}[damage]
        (d / "cache" / good.name).write_bytes(bad)
        jobs[damage] = (("promote", TOK_ARG["bert"], d / "out.fst", "-e", PATTERN), {"env": make_env(d / "cache")})
    return good, dirs, run_many(jobs)


@pytest.mark.parametrize("damage", DAMAGE)
def test_corrupt_cache_entry_is_rebuilt_silently(promoted, damaged, damage):
    good, dirs, runs = damaged
    r, d = runs[damage], dirs[damage]
    assert r.rc == 0, r.err
    assert r.err == b""  # in particular no OpenFst "ERROR: ..." lines
    assert (d / "out.fst").read_bytes() == promoted.fst("bert").read_bytes()
    # The entry was rebuilt: a readable FST equal to the good one, and nothing else was left.
    entry = d / "cache" / good.name
    assert tool("fstequal", entry, good).returncode == 0
    assert sorted(p.name for p in (d / "cache").iterdir() if "-tokenizer-" not in p.name) == [good.name]


# --- bad input --------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def inputs(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("inputs")
    letters = [chr(c) for c in range(ord("a"), ord("z") + 1)] + list("0123456789-")
    vocab = {c: i for i, c in enumerate(letters)}
    vocab.update({"ab": len(vocab), "abc": len(vocab) + 1})
    small = Tokenizer(models.BPE(vocab, [("a", "b"), ("ab", "c")]))
    (d / "small.json").write_text(small.to_str(), encoding="utf-8")
    (d / "bad.json").write_text('{"model": {"type": "BPE",', encoding="utf-8")
    (d / "unigram.json").write_text(Tokenizer(models.Unigram([("a", -1.0), ("b", -2.0)], 0)).to_str(),
                                    encoding="utf-8")
    (d / "empty.txt").write_text("", encoding="utf-8")
    (d / "pattern.txt").write_text("ab", encoding="utf-8")
    return d


# name: (args after "promote" with {i} = inputs dir, expected exit code, text naming the problem)
BAD = {
    "missing tokenizer": (["{i}/nope.json", "-e", "ab"], 2, "nope.json"),
    "invalid json": (["{i}/bad.json", "-e", "ab"], 2, "bad.json"),
    "unigram": (["{i}/unigram.json", "-e", "ab"], 2, "Unigram"),
    "bad regex syntax": (["{i}/small.json", "-e", "(ab"], 2, "(ab"),
    "backreference": (["{i}/small.json", "-e", r"(a)\1"], 2, r"(a)\\1"),
    "lookbehind": (["{i}/small.json", "-e", "(?<=a)b"], 2, "(?<=a)b"),
    "both -e and -f": (["{i}/small.json", "-e", "ab", "-f", "{i}/pattern.txt"], 2, "-e"),
    "neither -e nor -f": (["{i}/small.json"], 2, "-e"),
    "empty regex file": (["{i}/small.json", "-f", "{i}/empty.txt"], 2, "empty.txt"),
    "empty language": ([TOK_ARG["bert"], "-e", "John"], 1, "John"),
    "max-states": (["{i}/small.json", "--max-states", "2", "-e", "[a-z]{3}-[0-9]{3}"], 3, "max-states"),
}


# Also run with --format index (the other writer): input, runtime and limit errors.
INDEX_TOO = ("invalid json", "lookbehind", "empty language", "max-states")


@pytest.fixture(scope="module")
def bad_runs(tmp_path_factory, inputs, promoted):
    env = make_env(promoted.cache)  # warm: BERT's lexicon is cached
    jobs, dirs = {}, {}
    for name, (args, _, _) in BAD.items():
        variants = ((False, "fst"), (True, "fst")) + (((False, "index"),) if name in INDEX_TOO else ())
        for debug, fmt in variants:
            out = tmp_path_factory.mktemp("bad")
            dirs[(name, debug, fmt)] = out
            argv = (["--debug"] if debug else []) + ["promote"] + [a.replace("{i}", str(inputs)) for a in args]
            argv += [str(out / "result.out"), "--format", fmt]
            jobs[(name, debug, fmt)] = (argv, {"env": env, "cwd": out})
    return run_many(jobs), dirs


@pytest.mark.parametrize("name,fmt", [(n, "fst") for n in BAD] + [(n, "index") for n in INDEX_TOO])
def test_bad_input_one_line_exit_code_nothing_written(bad_runs, name, fmt):
    runs, dirs = bad_runs
    _, code, needle = BAD[name]
    r = runs[(name, False, fmt)]
    assert r.rc == code, r.err
    assert r.out == b""
    assert len(r.err_lines) == 1, r.err_lines
    line = r.err_lines[0]
    assert line.startswith("tokfst") and needle in line
    assert "Traceback" not in line
    assert not ANSI.search(r.err)
    assert list(dirs[(name, False, fmt)].iterdir()) == []  # no OUT, no temp file


@pytest.mark.parametrize("name", list(BAD))
def test_debug_shows_a_traceback(bad_runs, name):
    runs, dirs = bad_runs
    plain, debug = runs[(name, False, "fst")], runs[(name, True, "fst")]
    assert debug.rc == plain.rc
    assert "Traceback (most recent call last)" in debug.err.decode()
    assert debug.err_lines[-1] == plain.err_lines[0]
    assert list(dirs[(name, True, "fst")].iterdir()) == []


def test_existing_out_is_untouched_on_error(inputs, tmp_path, monkeypatch):
    out = tmp_path / "keep.fst"
    out.write_bytes(b"previous contents")
    before = out.stat().st_ino
    monkeypatch.chdir(tmp_path)
    r = run("promote", inputs / "small.json", out, "--max-states", "2", "-e", "[a-z]{3}-[0-9]{3}")
    assert r.rc == 3 and len(r.err_lines) == 1
    assert out.read_bytes() == b"previous contents" and out.stat().st_ino == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["keep.fst"]


def test_missing_out_directory_is_not_created_on_error(inputs, tmp_path):
    r = run("promote", inputs / "small.json", tmp_path / "new" / "x.fst", "-e", "(?<=a)b")
    assert r.rc == 2
    assert not (tmp_path / "new").exists()


# --- colour -----------------------------------------------------------------------------------

def test_no_ansi_codes_on_a_pipe(inputs, tmp_path, promoted):
    # (Every bad-input run above is also checked for ANSI codes without NO_COLOR.)
    env = make_env(promoted.cache, TERM="xterm-256color")
    small = inputs / "small.json"
    jobs = {
        ("non-tty", "verbose"): (("promote", small, tmp_path / "v.fst", "-e", "ab+", "-v"), {"env": env}),
        ("non-tty", "usage"): (("promote",), {"env": env}),
        ("NO_COLOR", "verbose"): (("promote", small, tmp_path / "w.fst", "-e", "ab+", "-v"),
                                  {"env": {**env, "NO_COLOR": "1"}}),
        ("NO_COLOR", "error"): (("promote", small, "-e", "(?<=a)b"), {"env": {**env, "NO_COLOR": "1"}}),
    }
    runs = run_many(jobs)
    for k, r in runs.items():
        assert r.rc == (0 if k[1] == "verbose" else 2), (k, r.err)
        assert r.err, k  # there is something to check
        assert not ANSI.search(r.err), (k, r.err)


def test_no_color_on_a_terminal(inputs, promoted):
    args = ("promote", inputs / "small.json", "-e", "[0-9]{3}", "-v", "--format", "index")
    env = make_env(promoted.cache, TERM="xterm-256color", TOKFST_PROGRESS_DELAY="0")
    r = tokfst_on_a_tty(*args, env=env)
    rc, coloured = r.rc, r.err
    assert rc == 0
    assert SGR.search(coloured)  # control: on a terminal the spinner is coloured ...
    r = tokfst_on_a_tty(*args, env={**env, "NO_COLOR": "1"})
    rc, plain = r.rc, r.err
    assert rc == 0 and b"states" in plain
    assert not SGR.search(plain)  # ... and NO_COLOR removes every colour code
