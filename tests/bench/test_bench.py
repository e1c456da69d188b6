"""``tokfst bench``: every mode on tiny inputs, the JSON schema, the internal equivalence checks.

The corpus is tests/data/tiny_corpus.txt (a few KB); tokenizers of 300 and 400 tokens are trained
on it, the edit-distance automaton uses 5 words, so each run takes seconds. promote and canonical
run on a 350-token tokenizer trained on it, maxmatch on BERT with three regexes. No timing is
asserted, only shapes, the outcome of bench's own checks, files and error handling.
"""

from __future__ import annotations

import csv
import itertools
import json
import os
import shutil
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pynini
import pytest

from tokfst_cli.bench import corpus as corpus_mod
from tokfst_cli.bench import peers, report
from tokfst_cli.bench.common import FORMAT, VERSION
from tokfst_cli.cli.errors import word
from tokfst_cli.errors import InputError
from tokfst_cli.text import catalogue

from ..conftest import shared
from ..helpers import SIX_REGEXES, accepts
from ..runner import Run, run, tokfst

DATA = Path(__file__).parent.parent / "data"
CORPUS = DATA / "tiny_corpus.txt"
BERT = DATA / "bert-base-uncased.json"
TINY = ["--corpus", str(CORPUS), "--vocab-sizes", "300,400", "--repeat", "3"]
MODES = ["table1", "table2", "paragraph", "peers", "masks"]  # the paper's: what "all" runs
TABLES = {**{m: [m] for m in MODES}, "all": MODES,
          "promote": ["promote_lexicon", "promote", "promote_steps", "promote_cold"],
          "canonical": ["canonical_tokenizers", "canonical"], "maxmatch": ["maxmatch_compile", "maxmatch"]}
KINDS = {"text", "int", "float", "time", "once", "ratio", "bytes", "bool", "percent"}
STATUSES = {"ok", "timeout", "error", "skipped"}


def bench(*args, timeout: int = 300, cwd: Path | None = None) -> Run:
    return tokfst("bench", *args, timeout=timeout, cwd=cwd)


@pytest.fixture(scope="module")
def tiny_tokenizer(tmp_path_factory) -> Path:
    """A 350-token byte-level BPE trained on the tiny corpus, as an extra --tokenizer."""
    path, _ = corpus_mod.train(corpus_mod.load_corpus(str(CORPUS)), 350)
    out = tmp_path_factory.mktemp("tok") / "tiny.json"
    shutil.copy(path, out)
    return out


@pytest.fixture(scope="module")
def runs(tmp_path_factory, tiny_tokenizer):
    """All modes, each alone and together, plus a forced timeout (once for both xdist workers)."""
    return shared(tmp_path_factory, "bench-modes", lambda d: _runs(d, tiny_tokenizer))


def _runs(d: Path, tiny_tokenizer: Path):
    (d / "regexes.txt").write_text("# two patterns\n[0-9]{2}\n(state|token)\n")
    common = [*TINY, "--tokenizer", tiny_tokenizer]
    small = {"table1": ["--words", "5"], "paragraph": ["--trials", "2", "--paragraph-chars", "300"],
             "masks": ["--steps", "4", "-f", d / "regexes.txt"], "peers": ["-e", "[0-9]{4}-[0-9]{2}-[0-9]{2}",
                                                                          "-e", "(Cologne|Berlin|Bonn|Munich)"],
             "table2": []}
    jobs = {m: [m, *common, *small[m], "--json", d / f"{m}.json"] for m in MODES}
    jobs["table1"] += ["--plot", d / "table1.png"]
    jobs["all"] = ["all", *common, "--words", "5", "--trials", "2", "--paragraph-chars", "300", "--steps", "4",
                   "--json", d / "all.json", "--csv", d / "all.csv", "--plot", d / "all.svg"]
    jobs["timeout"] = ["table1", *TINY, "--vocab-sizes", "300", "--words", "5", "--timeout", "0.001",
                       "--json", d / "timeout.json"]
    jobs["promote"] = ["promote", "--tokenizer", tiny_tokenizer, "--named", "date,cities", "--json", d / "promote.json"]
    jobs["promote_warm"] = ["promote", "--tokenizer", tiny_tokenizer, "--tokenizer", "gpt2", "-e", "[0-9]{2}",
                            "--cold-repeat", "0", "--json", d / "promote_warm.json"]
    jobs["canonical"] = ["canonical", "--tokenizer", tiny_tokenizer, "-f", d / "regexes.txt", "--named", "email",
                         "--json", d / "canonical.json"]
    jobs["maxmatch"] = ["maxmatch", "--tokenizer", BERT, "--named", "cities,email", "-e", "[0-9]{2}",
                        "--json", d / "maxmatch.json"]
    jobs["all"] += ["--vocab-sizes", "300"]  # the per-size rows are table1's, table2's and paragraph's own
    # Whole processes: "all" (the console script end to end: exit status, stdout, JSON, CSV, plot)
    # and the forced timeout (a cell's child process killed at its limit). The other modes run in
    # this process meanwhile (the same command lines, without an interpreter start-up each); the
    # environment is taken now, as bench promote points TOKFST_CACHE elsewhere while it runs.
    env = dict(os.environ)
    with ThreadPoolExecutor(2) as pool:
        futures = {k: pool.submit(tokfst, "bench", *jobs.pop(k), env=env, timeout=300) for k in ("all", "timeout")}
        done = {k: run("bench", *args) for k, args in jobs.items()}
        done.update({k: f.result() for k, f in futures.items()})
    return d, done


# ---- the JSON schema ------------------------------------------------------------------------
def check_cell(cell, runs: int = 3) -> None:
    assert isinstance(cell, dict) and cell["status"] in STATUSES, cell
    if cell["status"] == "ok":
        assert isinstance(cell["median_s"], float) and cell["median_s"] >= 0
        assert len(cell["runs_s"]) >= runs and all(isinstance(x, float) for x in cell["runs_s"])
    elif cell["status"] == "timeout":
        assert cell["limit_s"] > 0 and isinstance(cell["runs_s"], list)
    elif cell["status"] == "error":
        assert isinstance(cell["error"], str) and "\n" not in cell["error"]
    else:
        assert isinstance(cell["reason"], str)


def check_value(kind: str, v) -> None:
    if v is None:
        assert kind not in ("text", "int"), "text and int columns are always filled"
        return
    if kind in ("time", "once"):
        check_cell(v, 3 if kind == "time" else 1)
    elif kind in ("int", "bytes"):
        assert isinstance(v, int) and not isinstance(v, bool) and v >= 0
    elif kind in ("ratio", "percent", "float"):
        assert isinstance(v, (int, float)) and not isinstance(v, bool)
    elif kind == "bool":
        assert isinstance(v, bool)
    else:
        assert isinstance(v, str)


def check_schema(doc: dict) -> None:
    assert doc["format"] == FORMAT and doc["version"] == VERSION
    assert doc["generator"].startswith("tokfst ") and doc["command"].startswith("tokfst bench ")
    assert isinstance(doc["started"], str) and doc["elapsed_s"] >= 0
    m = doc["machine"]
    assert m["nproc"] >= 1 and m["cpu_model"] and m["python"] and len(m["loadavg_start"]) == 3
    for dist in ("tokfst", "pynini", "tokenizers", "outlines-core"):
        assert isinstance(doc["versions"][dist], str)
    assert doc["settings"]["repeat"] >= 3
    for t in doc["tables"]:
        assert set(t) >= {"id", "title", "repeat", "columns", "rows", "notes", "inputs", "plot"}
        assert t["repeat"] >= 3 and t["rows"] and all(isinstance(n, str) for n in t["notes"])
        kinds = {}
        for c in t["columns"]:
            assert set(c) == {"key", "label", "kind"} and c["kind"] in KINDS
            kinds[c["key"]] = c["kind"]
        for row in t["rows"]:
            for key, kind in kinds.items():
                if kind in ("text", "int") and key in ("tokenizer", "regex", "vocab"):
                    assert key in row
                if key in row:
                    check_value(kind, row[key])
    for c in doc["checks"]:
        assert set(c) == {"name", "passed", "detail"} and c["passed"] in (True, False, None)


def load(d: Path, name: str) -> dict:
    return json.loads((d / f"{name}.json").read_text())


@pytest.mark.parametrize("mode", list(TABLES))
def test_every_mode_runs_and_writes_valid_json(runs, mode):
    d, done = runs
    r = done[mode]
    assert r.returncode == 0, r.stderr
    assert "Traceback" not in r.stderr
    doc = load(d, mode)
    check_schema(doc)
    ids = [t["id"] for t in doc["tables"]]
    assert ids == TABLES[mode]
    assert doc["mode"] == mode
    # stdout (not a terminal): Markdown tables stating machine, versions, repetitions, command
    assert "Machine: " in r.stdout and "pynini 2.1.7" in r.stdout and "medians of 3 runs" in r.stdout
    assert "Command: `tokfst bench " in r.stdout and "| --- |" in r.stdout


@pytest.mark.parametrize("mode", list(TABLES))
def test_internal_checks_pass(runs, mode):
    d, _ = runs
    checks = load(d, mode)["checks"]
    assert checks
    failed = [c for c in checks if c["passed"] is False]
    assert not failed, failed
    not_run = [c for c in checks if c["passed"] is None]
    if peers.outlines_module() is not None:
        assert not not_run, not_run


def test_table1_eq4_eq5_implicit_equivalent(runs):
    d, _ = runs
    doc = load(d, "table1")
    rows = doc["tables"][0]["rows"]
    assert [r["vocab"] for r in rows] == [300, 400]
    for r in rows:
        assert r["equivalent"] is True
        for key in ("eq4", "eq5", "implicit_cold", "implicit_warm", "eq5_precompute", "implicit_precompute"):
            assert r[key]["status"] == "ok", (key, r[key])
        assert len({(s["states"], s["arcs"]) for s in r["sizes"].values()}) == 1  # minimal: same size
    names = [c["name"] for c in doc["checks"]]
    assert names == ["table1 vocab 300: Eq. 4 = Eq. 5 = implicit", "table1 vocab 400: Eq. 4 = Eq. 5 = implicit"]
    inputs = doc["tables"][0]["inputs"]
    assert len(inputs["words"]) == 5 and inputs["automaton_states"] > 0 and inputs["automaton_arcs"] > 0


def test_paragraph_automaton_equals_hf(runs):
    d, _ = runs
    t = load(d, "paragraph")["tables"][0]
    assert [r["tokenizer"] for r in t["rows"]] == ["corpus-300", "corpus-400", "tiny"]
    assert all(r["equal"] is True and r["tokens"] > 0 for r in t["rows"])
    assert 150 <= t["inputs"]["chars"] <= 600
    assert all(r["eq5"]["status"] == "ok" for r in t["rows"])  # A_BPE fits for tiny vocabularies


def test_table2_sizes(runs):
    d, _ = runs
    rows = load(d, "table2")["tables"][0]["rows"]
    assert [r["tokenizer"] for r in rows] == ["corpus-300", "corpus-400", "tiny"]
    for r in rows:
        assert r["explicit_how"] == "written"
        assert r["explicit_bytes"] > r["seed_bytes"] and r["explicit_bytes"] > r["tokfst_bytes"]
        assert r["seed_arcs"] >= r["vocab"] - 1 and r["tokfst_arcs"] >= 0 and r["states"] >= 2


def test_peers_and_masks_use_the_given_regexes(runs):
    d, _ = runs
    p = load(d, "peers")["tables"][0]
    assert [r["regex"] for r in p["rows"]] == ["[0-9]{4}-[0-9]{2}-[0-9]{2}", "(Cologne|Berlin|Bonn|Munich)"]
    for r in p["rows"]:
        assert r["start_canonical"] <= r["start_agnostic"]
        assert r["noncanonical_agnostic"] == r["start_agnostic"] - r["start_canonical"]
        assert r["form"] in ("materialized", "factorized")
    m = load(d, "masks")["tables"][0]  # the --tokenizer only, walks cut at --steps 4
    assert {(r["tokenizer"], r["regex"]) for r in m["rows"]} == {("tiny", "[0-9]{2}"), ("tiny", "(state|token)")}
    for r in m["rows"]:  # tokfst's engines follow the whole walk (a peer's narrower mask may stop it)
        if r["engine"] == "tokfst index" or (r["engine"].startswith("tokfst canonical") and r["steps"]):
            assert 1 <= r["steps"] <= 5 and r["walk"] in ("complete", "truncated (--steps)"), r
            assert r["agree"] is (None if r["engine"] == "tokfst index" else True)  # canonical within agnostic


def test_default_regex_set_in_all(runs):
    d, _ = runs
    doc = load(d, "all")
    regexes = [r["regex"] for r in doc["tables"][MODES.index("peers")]["rows"]]
    assert regexes == ["decimal", "json", "date", "email", "cities", "words100", "pokedex"]


def test_timeout_reports_over_t(runs):
    d, done = runs
    r = done["timeout"]
    assert r.returncode == 0, r.stderr
    assert ">0.001 s" in r.stdout
    row = load(d, "timeout")["tables"][0]["rows"][0]
    assert row["eq4"]["status"] == "timeout" and row["eq4"]["limit_s"] == 0.001
    for key, pre in (("eq5", "eq5_precompute"), ("implicit_cold", "implicit_precompute")):
        # the child's start-up alone takes longer: the precomputation times out, its runs are skipped
        assert row[pre]["status"] == "timeout" and row[key]["status"] == "skipped"
    assert row["equivalent"] is None


def test_csv_and_plots(runs):
    d, done = runs
    with open(d / "all.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    doc = load(d, "all")
    assert len(rows) == sum(len(t["rows"]) for t in doc["tables"])
    assert [k for k, _ in itertools.groupby(r["table"] for r in rows)] == MODES
    t1 = [r for r in rows if r["table"] == "table1"]
    assert all(float(r["eq4"]) > 0 for r in t1)
    assert (d / "all.svg").read_text().lstrip().startswith("<?xml")
    assert (d / "table1.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert not list(d.glob(".*.tmp"))  # atomic writes leave nothing behind


# ---- bad input: one line on stderr, exit 2 ----------------------------------------------------
@pytest.mark.parametrize("args, fragment", [
    (["table1", "--corpus", "/nonexistent/corpus"], "corpus not found"),
    (["table1", "--corpus", str(CORPUS), "--vocab-sizes", "100"], "above 256"),
    (["table1", "--corpus", str(CORPUS), "--vocab-sizes", "x"], "not a list of integers"),
    (["table1", "--corpus", str(CORPUS), "--vocab-sizes", "300", "--words", "100000"], "distinct words"),
    (["table2", "--corpus", str(CORPUS), "--plot", "out.pdf"], ".svg or .png"),
    (["table1", "--corpus", str(CORPUS), "--methods", "eq4,eq6"], "unknown method eq6"),
    (["peers", "--plot", "out.svg"], "no scaling table"),
    (["peers", "-e", "(a"], "regex"),
    (["peers", "--tokenizer", "/nonexistent.json"], "tokenizer file not found"),
    (["peers", "-e", "[0-9]{2}", "--json", "."], "json output . is a directory; give a file name to --json"),
    (["table2", "--corpus", str(CORPUS), "--csv", "."], "csv output . is a directory"),
    (["table1", "--corpus", str(CORPUS), "--timeout", "inf"], "finite"),
    (["promote", "--plot", "out.svg"], "no scaling table"),
    (["promote", "--named", "date,nosuch"], "no regex named 'nosuch'"),
    (["canonical", "--tokenizer", str(BERT)], "is a wordpiece tokenizer; give a BPE tokenizer.json with --tokenizer"),
    (["maxmatch"], "is a bpe tokenizer; give a WordPiece tokenizer.json with --tokenizer"),
    (["maxmatch", "--tokenizer", str(BERT), "-e", "(a"], "regex"),
])
def test_bad_input_one_line_exit_2(args, fragment, tmp_path, monkeypatch):
    """In process (the refusals come before any work; the whole program's one-line contract is
    what assert_usage_error checks on the other cases, as a subprocess)."""
    monkeypatch.chdir(tmp_path)
    r = run("bench", *args)
    assert r.returncode == 2, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and fragment in lines[0] and lines[0].startswith("tokfst: error: "), r.stderr
    assert r.stdout == ""
    assert not list(tmp_path.iterdir())


def assert_usage_error(args, fragment: str, cwd: Path, timeout: int = 60) -> None:
    r = bench(*args, timeout=timeout, cwd=cwd)
    assert r.returncode == 2, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and fragment in lines[0] and lines[0].startswith("tokfst: error: "), r.stderr
    assert r.stdout == ""


def test_bad_tokenizer_or_corpus_refused_up_front(tmp_path):
    """A malformed --tokenizer or a corpus without a prose paragraph stops the run before any table."""
    bad = tmp_path / "bad.json"
    bad.write_text('{"model": ')
    (tmp_path / "out").mkdir()
    flat = tmp_path / "flat.txt"
    flat.write_text("words but no sentence\n\nnor here\n")  # no prose paragraph (capital ... period)
    out = tmp_path / "out" / "r.json"
    assert_usage_error(["paragraph", "--corpus", CORPUS, "--tokenizer", bad, "--json", out], "cannot read tokenizer",
                       tmp_path / "out")
    assert_usage_error(["all", "--corpus", flat, "--tokenizer", "gpt2", "--json", out], "no prose paragraph",
                       tmp_path / "out")
    assert not list((tmp_path / "out").iterdir())


def test_tokenizer_hf_cannot_read_is_one_line(tmp_path, tiny_tokenizer):
    """HF cannot read it (unknown pre-tokenizer): tokfst's reader, which asks HF's parser, says so in one line."""
    data = json.loads(tiny_tokenizer.read_text())
    data["pre_tokenizer"] = {"type": "NoSuchPreTokenizer"}
    odd = tmp_path / "odd.json"
    odd.write_text(json.dumps(data))
    (tmp_path / "out").mkdir()
    assert_usage_error(["paragraph", *TINY, "--vocab-sizes", "300", "--trials", "2", "--paragraph-chars", "300",
                        "--tokenizer", odd, "--json", tmp_path / "out" / "r.json"], "cannot read the pre-tokenizer",
                       tmp_path / "out", timeout=300)
    assert not list((tmp_path / "out").iterdir())


def test_repeat_below_three_is_a_usage_error():
    r = run("bench", "table2", "--repeat", "2")
    assert r.returncode == 2 and "--repeat" in r.stderr


def test_missing_default_corpus_names_the_fix(monkeypatch, tmp_path):
    """The library names no flag; the command line adds it."""
    monkeypatch.setattr(corpus_mod, "DEFAULT_CORPUS", str(tmp_path / "absent"))
    with pytest.raises(InputError) as e:
        corpus_mod.load_corpus(None)
    assert "apt-get install python3.11-doc" in e.value.one_line() and "--" not in e.value.one_line()
    assert "apt-get install python3.11-doc" in word(e.value) and "--corpus" in word(e.value)


# ---- the inputs ---------------------------------------------------------------------------------
def levenshtein(a: str, b: str) -> int:
    prev = list(range(len(b) + 1))
    for i, x in enumerate(a, 1):
        cur = [i]
        for j, y in enumerate(b, 1):
            cur.append(min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (x != y)))
        prev = cur
    return prev[-1]


def test_edit_distance_one_automaton():
    words, sigma = ["ab", "ba", "c"], list("abc")
    fst = corpus_mod.edit_distance_one(words, sigma).fst
    for n in range(5):
        for s in map("".join, itertools.product(sigma, repeat=n)):
            want = min(levenshtein(s, w) for w in words) <= 1
            assert accepts(fst, [b + 1 for b in s.encode()]) == want, s
    assert fst.properties(pynini.I_DETERMINISTIC, True) == pynini.I_DETERMINISTIC


def test_words_and_paragraph_are_deterministic():
    c = corpus_mod.load_corpus(str(CORPUS))
    assert corpus_mod.draw_words(c, 5) == corpus_mod.draw_words(c, 5)
    assert len(set(corpus_mod.draw_words(c, 20))) == 20
    p = corpus_mod.paragraph(c, 300)
    assert p[0].isupper() and p.endswith(".") and "\n" not in p


def test_peer_columns_say_when_outlines_is_missing(monkeypatch, tiny_tokenizer):
    monkeypatch.setattr(peers, "outlines_module", lambda: None)
    res = peers.peers_table([("tiny", str(tiny_tokenizer), False)], {"date": "[0-9]{2}"}, 3, lambda m: None)
    row = res.tables[0].rows[0]
    assert row["outlines"]["status"] == "skipped" and "pip install" in row["outlines"]["reason"]
    assert row["agnostic"]["status"] == "ok" and res.checks[0]["passed"] is None
    assert any("not installed" in n for n in res.tables[0].notes)


def test_formatting():
    assert report.fmt_seconds(12.34) == "12.3 s" and report.fmt_seconds(0.0042) == "4.2 ms"
    assert report.fmt_seconds(3e-8) == "30 ns"
    assert report.fmt_cell({"status": "timeout", "limit_s": 600.0}) == ">600 s"
    assert report.fmt({"r": 12345.6}, "r", "ratio") == "12,346x"


# ---- promote, canonical, maxmatch ---------------------------------------------------------------
def test_promote_warm_cold_sizes_and_breakdown(runs):
    d, _ = runs
    doc = load(d, "promote")
    lex, main, steps, cold = doc["tables"]
    assert [r["tokenizer"] for r in lex["rows"]] == ["tiny"]
    assert lex["rows"][0]["lexicon_states"] > 0 and lex["rows"][0]["lexicon_arcs"] >= 350
    assert [r["regex"] for r in main["rows"]] == ["date", "cities"]
    for r in main["rows"]:
        assert r["pattern"] == SIX_REGEXES[r["regex"]]
        assert r["states"] == r["peer_states"] and r["arcs"] == r["peer_arcs"] and r["peer_equivalent"] is True
        assert r["masks"] <= r["states"] and r["shared"] <= r["states"]
        assert r["cold"]["status"] == "ok" and len(r["cold"]["runs_s"]) == 3
        assert r["cold_empty"]["status"] == "ok" and isinstance(r["cold_ok"], bool)
    assert [r["regex"] for r in steps["rows"]] == ["date", "cities"]
    assert all(r["walk"]["status"] == "ok" and r["walk"]["median_s"] > 0 for r in steps["rows"])
    assert all(lex_row["trie"]["status"] == "ok" for lex_row in lex["rows"])
    assert len(cold["rows"]) == 2 and cold["rows"][0]["regex"] in ("date", "cities")
    assert cold["rows"][1]["regex"] == "(yes|no) --canonical"  # a BPE tokenizer: the canonical start too
    assert cold["rows"][1]["canonicalize"]["median_s"] > 0 and cold["rows"][0]["canonicalize"]["median_s"] == 0
    names = [c["name"] for c in doc["checks"]]
    assert len(names) == 6 and all(c["passed"] is True for c in doc["checks"])
    assert doc["settings"]["cold_repeat"] == 3
    assert any(n.startswith("Targets: warm") for n in main["notes"])


def test_promote_without_cold_runs(runs):
    d, _ = runs
    doc = load(d, "promote_warm")
    assert [t["id"] for t in doc["tables"]] == ["promote_lexicon", "promote", "promote_steps"]
    rows = doc["tables"][1]["rows"]
    assert [(r["tokenizer"], r["regex"]) for r in rows] == [("tiny", "[0-9]{2}"), ("gpt2", "[0-9]{2}")]
    assert all(r["cold"]["status"] == "skipped" and "cold_ok" not in r for r in rows)
    assert doc["settings"]["regexes"] == {"[0-9]{2}": "[0-9]{2}"}


def test_canonical_compile_check_and_regexes(runs):
    d, _ = runs
    toks, regs = load(d, "canonical")["tables"]
    row = toks["rows"][0]
    assert row["tokenizer"] == "tiny" and row["vocab"] == 350 and row["artifact_bytes"] > 0 and row["states"] >= 2
    assert row["check"]["status"] == "ok" and row["hf_check"]["status"] == "ok"
    assert [r["regex"] for r in regs["rows"]] == ["email", "[0-9]{2}", "(state|token)"]
    for r in regs["rows"]:
        assert r["form"] in ("materialized", "factorized")
        assert (r["form"] == "materialized") == (r["materialized"]["status"] == "ok") == ("states" in r)
        assert r["factorized"]["status"] == "ok" and r["mask"]["status"] == "ok"
    checks = load(d, "canonical")["checks"]
    assert [c["name"] for c in checks] == ["canonical tiny: banned pairs = HF's model.tokenize on 100,000 pairs"]


def test_compile_mode_times_processes_and_stages(tmp_path, tiny_tokenizer):
    """bench compile: whole compile-bpe processes (time, peak RSS, artifact) and the stages (the bench
    itself in this process: what is timed is its compile-bpe processes)."""
    r = run("bench", "compile", "--tokenizer", tiny_tokenizer, "--tokenizer", "gpt2", "--json", tmp_path / "c.json")
    assert r.returncode == 0, r.err
    doc = json.loads((tmp_path / "c.json").read_text())
    check_schema(doc)
    main, stages = doc["tables"]
    assert [t["id"] for t in doc["tables"]] == ["compile", "compile_stages"]
    assert [row["tokenizer"] for row in main["rows"]] == ["tiny", "gpt2"]
    gpt2 = main["rows"][1]
    assert gpt2["vocab"] == 50257 and gpt2["merges"] == 50000 and gpt2["out_of_order"] == 0
    assert gpt2["rss"] > 10 << 20 and 100_000 < gpt2["bytes"] < 8 << 20 and gpt2["states"] == 14411
    assert len(gpt2["time"]["runs_s"]) == 3 and gpt2["targets"] in ("met", "missed")
    assert all(stages["rows"][1][k]["status"] == "ok" for k in ("load", "traces", "rows", "total"))


def test_maxmatch_product_equals_composition(runs):
    d, _ = runs
    doc = load(d, "maxmatch")
    comp, regs = doc["tables"]
    row = comp["rows"][0]
    assert row["tokenizer"] == "bert-base-uncased" and row["vocab"] == 30522
    assert row["states"] > 0 and row["arcs"] > row["states"] and row["compile"]["status"] == "ok"
    by = {r["regex"]: r for r in regs["rows"]}
    assert list(by) == ["cities", "email", "[0-9]{2}"]
    assert by["email"]["form"] == "factorized" and by["email"]["mask_tokens"] > 1000
    for name in ("cities", "[0-9]{2}"):
        assert by[name]["form"] == "materialized" and by[name]["equal"] is True
    assert 0 < by["cities"]["mask_tokens"] < 100
    names = [c["name"] for c in doc["checks"]]
    assert names[0].startswith("maxmatch bert-base-uncased: the CLI's T_Aho") and len(names) == 3


def test_catalogue_is_the_one_regex_set():
    assert SIX_REGEXES == catalogue.FOUNDATION
    assert list(catalogue.six()) == ["decimal", "json", "date", "email", "cities", "words100"]
    assert list(catalogue.default_set()) == list(catalogue.six()) + ["pokedex"]
    assert list(catalogue.maxmatch_set()) == list(catalogue.six()) + ["words4", "punct", "accents"]
    assert catalogue.six()["words100"] == "(" + "|".join(catalogue.words100()) + ")"
    assert len(set(catalogue.words100())) == 100



def test_check_mode_streams_and_switches(tmp_path, tiny_tokenizer):
    """bench check on 50 generated lines and a 1 MB input: canonical-check vs HF, peak RSS, and the
    WordPiece promotion (one small regex on BERT, so that its BFS finishes quickly). The bench runs in
    this process (the canonical-check and promote processes it times are processes of their own)."""
    out = tmp_path / "check.json"
    r = run("bench", "check", "--tokenizer", tiny_tokenizer, "--tokenizer", BERT, "--lines", "50", "--rss-mb", "1",
            "-e", "[a-z]{1,2}", "--json", out)
    assert r.returncode == 0, r.stderr
    doc = json.loads(out.read_text())
    check_schema(doc)
    assert [t["id"] for t in doc["tables"]] == ["check", "check_rss", "check_promote"]
    tp, mem, wp = doc["tables"]
    assert [row["tokenizer"] for row in tp["rows"]] == ["tiny", "bert-base-uncased"]
    for row in tp["rows"]:
        assert row["lines"] == 50 and row["tokfst"]["status"] == "ok" and row["hf_cold"]["status"] == "ok"
        assert row["ratio_cold"] > 0 and row["ratio_work"] is not None
    assert [(row["tokenizer"], row["input_mb"]) for row in mem["rows"]] == [("tiny", 1), ("bert-base-uncased", 1)]
    assert all(row["rss"] > 10_000_000 and row["input_bytes"] >= 990_000 and row["canonical"] for row in mem["rows"])
    assert [(row["regex"], row["form"]) for row in wp["rows"]] == [("[a-z]{1,2}", "materialized")]
    assert doc["settings"]["lines"] == 50 and doc["settings"]["rss_mb"] == [1]
    assert doc["checks"] and all(c["passed"] is True for c in doc["checks"])


@pytest.mark.parametrize("each_step", [False, True])
def test_masks_walk_evicts_caches_before_every_step_on_request(monkeypatch, each_step):
    """--evict-each-step: the 64 MB read comes before every fill after the first (the walk's own
    read covers that one), never inside the timed fill; without it, never within a walk."""
    import numpy as np

    from tokfst_cli.bench import engines, masks

    log = []
    monkeypatch.setattr(masks, "evict", lambda: log.append("evict") or 0)

    def fill():
        log.append("fill")
        return np.full(2, 0xFFFFFFFF, np.uint32)

    session = engines.Session(fill, lambda token: log.append("accept") or True, lambda: True)
    run = masks.run_walk(session, [3, 5, 7], each_step=each_step)
    assert run.stop is None and len(run.mask_ns) == 4
    fills = [i for i, e in enumerate(log) if e == "fill"]
    evicted = [log[i - 1] == "evict" for i in fills]
    assert evicted == ([False, True, True, True] if each_step else [False] * 4)
    assert log.count("evict") == (3 if each_step else 0)
