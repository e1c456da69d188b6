"""``tokfst bench schemas`` and its corpus, tests/data/schemas (SchemaStore, Apache-2.0).

* the bench on four small corpus files and a schema over a limit, peers included (they are installed: an import failure
  fails the test): every status is the one compile_schema, pipeline.build and each peer give
  when called directly; sizes are the automaton's own; the summary counts the rows;
* the workers' failure paths: a stage past its time limit, a worker out of memory at its cap, a
  set-up that fails; each later file still runs in a fresh worker;
* the command line: the subcommand, its DIR, JSON on stdout;
* the corpus: provenance of every file, and compile_schema on every file of at most
  ``CORPUS_BYTES`` bytes (the larger ones take minutes or exhaust memory: the bench measures
  them, in workers) ends compiled, refused by name (InputError) or over a limit (LimitError).
"""

from __future__ import annotations

import functools
import json
import re
import shutil
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tokfst_cli import pipeline
from tokfst_cli.bench import schema_workers, schemas
from tokfst_cli.bench.engines import PEERS, XGRAMMAR
from tokfst_cli.errors import InputError, LimitError
from tokfst_cli.schema.compile import compile_schema
from tokfst_cli.text.regex import compile_regex
from tokfst_cli.tokenizer import model as tokmod

from ..runner import run
from .workers import SlowEngine

CORPUS = Path(__file__).parent.parent / "data" / "schemas"
SMALL = ["emmet.json", "jsinspectrc.json", "pattern.json", "rc3-auth-0.0.3.json"]  # 1-3 KB each
OVER = {"type": "number", "multipleOf": 0.123456789}  # a digit automaton of 1.4e9 states: LimitError
CORPUS_BYTES = 10_000  # 27 of the 66 files; all of them: about 10 min, and some exhaust memory
# the peers of the test extras (pyproject: test); xgrammar needs torch and triton, so it is in the bench extras
# only and measured by the bench run in the README, not here
TESTED_PEERS = tuple(p for p in PEERS if p != XGRAMMAR)


def _dir(tmp_path: Path, names: list[str]) -> Path:
    d = tmp_path / "schemas"
    d.mkdir()
    for n in names:
        shutil.copy(CORPUS / n, d / n)
    return d


def _direct(doc, model, lex) -> dict:
    """What tokfst's library says of a schema, called directly."""
    try:
        compiled = compile_schema(doc)
    except InputError as e:
        return {"status": "refused", "refusal": {"hint": e.hint, **{k: str(v) for k, v in e.data.items()}}}
    except LimitError:
        return {"status": "limit", "stage": "compile"}
    a = compiled.automaton
    try:
        fst = pipeline.build(model, a.pattern, automaton=a, lexicon=lex, terminals=True).fst
    except LimitError:
        return {"status": "limit", "stage": "promotion", "byte_states": a.fst.num_states()}
    arcs = [fst.num_arcs(s) for s in fst.states()]
    return {"status": "compiled", "byte_states": a.fst.num_states(), "states": fst.num_states(), "arcs": sum(arcs),
            "max_out": max(arcs)}


@pytest.fixture(scope="module")
def bench(tmp_path_factory):
    d = _dir(tmp_path_factory.mktemp("bench"), SMALL)
    (d / "zz-over.json").write_text(json.dumps(OVER))
    return d, schemas.schemas_table(schemas.Request(str(d), ["gpt2"], peers=TESTED_PEERS), lambda _: None)


def test_rows_agree_with_the_library(bench, tokenizer):
    d, res = bench
    table, summary, ratios = res.tables
    assert [r["schema"] + ".json" for r in table.rows] == sorted(SMALL) + ["zz-over.json"]
    model, lex = tokenizer("gpt2"), tokenizer.lexicon("gpt2")
    for row in table.rows:
        want = _direct(json.loads((d / f"{row['schema']}.json").read_text()), model, lex)
        got = {k: row[k] for k in want}
        assert got == want, row
        assert ((row["compile"] or {}).get("status") == "ok") is ("byte_states" in want)
        if "byte_states" in want:  # compiled to bytes: the lazy decoder ran, whether promotion fits or not
            assert row["lazy"]["status"] == row["lazy_mask"]["status"] == "ok" and row["lazy_accepted"] is True
            assert row["lazy_load"]["status"] == "ok" and row["lazy_load_same"] is True and row["lazy_bytes"] > 0
        if want["status"] == "compiled":
            assert row["promote"]["status"] == row["mask"]["status"] == row["load"]["status"] == "ok"
            assert row["steps"] >= 2 and row["walk_accepted"] is True
    statuses = {r["schema"]: r["status"] for r in table.rows}
    assert set(statuses.values()) == {"compiled", "refused", "limit"}
    assert res.checks and all(c["passed"] for c in res.checks)


def test_peers_ran_and_agree_with_direct_calls(bench):
    import llguidance  # noqa: F401 - the peers are installed: a failing import fails the test
    import outlines_core  # noqa: F401

    d, res = bench
    table = res.tables[0]
    assert set(table.inputs["setup_s"]["gpt2"]) == {"tokfst", *TESTED_PEERS}
    for peer in TESTED_PEERS:
        compile_text = schema_workers.peer_compiler(peer, str(tokmod.resolve_path("gpt2")))
        for row in table.rows:
            try:
                compile_text((d / f"{row['schema']}.json").read_text())
                want = "compiled"
            except Exception:  # noqa: BLE001 - any failure of the peer is its "error"
                want = "error"
            assert row[f"{peer}_status"] == want, (peer, row["schema"], row.get(f"{peer}_detail"))
            assert (row[peer]["status"] == "ok") is (want == "compiled")
        assert any(r[f"{peer}_status"] == "compiled" for r in table.rows), peer


def test_summary_counts_the_rows(bench):
    _, res = bench
    table, summary, ratios = res.tables
    rows = table.rows
    by_engine = {r["engine"]: r for r in summary.rows}
    tokens = by_engine["tokfst schema -> tokens"]
    counted = {s: sum(r["status"] == s for r in rows) for s in schemas.STATUSES}
    assert {s: tokens[s] for s in schemas.STATUSES} == counted
    nbytes = by_engine["tokfst schema -> bytes"]
    assert nbytes["compiled"] == sum(r["compile"] is not None and r["compile"]["status"] == "ok" for r in rows)
    assert by_engine["tokfst schema -> lazy"]["compiled"] == sum(
        (r["lazy"] or {}).get("status") == "ok" for r in rows) == nbytes["compiled"]
    assert by_engine["tokfst lazy artifact -> ready"]["compiled"] == sum(
        (r["lazy_load"] or {}).get("status") == "ok" for r in rows) == nbytes["compiled"]
    for peer in TESTED_PEERS:
        assert by_engine[peer]["schemas"] == len(rows)
        assert by_engine[peer]["compiled"] == sum(r[f"{peer}_status"] == "compiled" for r in rows)
        both = [q for q in ratios.rows if q["peer"] == peer and q["tokfst"] == "tokfst schema -> bytes"]
        assert both[0]["both"] == sum(r[f"{peer}_status"] == "compiled" and r["compile"] is not None
                                      and r["compile"]["status"] == "ok" for r in rows)
    for s in summary.rows:
        if s["compiled"]:
            assert s["median"]["median_s"] <= s["p95"]["median_s"]


LONG = r'\["[a-zé€😀]{4100,}"(,([0-9]+|"[a-z]*"))*\]'  # every text is longer than MAX_BYTES


@functools.cache
def _long_dfa():
    return compile_regex(LONG).fst


@settings(max_examples=10, deadline=None)
@given(seed=st.integers(0, 2**32 - 1))
def test_a_steered_text_ends_where_uniform_texts_run_too_long(seed):
    """The walk's text when no uniform draw fits MAX_BYTES: a text of the DFA all the same."""
    fst = _long_dfa()
    assert schema_workers.random_text(fst, seed) is None
    assert re.fullmatch(LONG, schema_workers.steered_text(fst, seed))


# ---- failure paths ----------------------------------------------------------------------------------
def test_a_stage_past_its_limit_is_a_timeout_and_the_next_file_runs(tmp_path):
    files = [tmp_path / n for n in ("a.json", "slow.json", "z.json")]
    rows, setup = schema_workers.run_engine("tokfst", "gpt2", files, 1, 4.0, lambda _: None, work=SlowEngine)
    assert setup == 0.0
    assert {n: r["status"] for n, r in rows.items()} == {"a.json": "compiled", "slow.json": "timeout",
                                                         "z.json": "compiled"}
    assert rows["slow.json"]["stage"] == "compile"


def test_a_failed_set_up_fails_every_file(tmp_path):
    files = [tmp_path / "a.json", tmp_path / "b.json"]
    rows, setup = schema_workers.run_engine("no-such-engine", "gpt2", files, 1, 60.0, lambda _: None)
    assert setup is None and set(rows) == {"a.json", "b.json"}
    assert all(r["status"] == "error" and r["stage"] == "setup" for r in rows.values())


def test_a_worker_out_of_memory_is_memory(tmp_path, monkeypatch):
    """Capped at 4 MB more than after its set-up, a worker cannot promote rc3-auth (OpenFst's
    allocation fails and the worker dies, or Python raises MemoryError); the next file runs in a
    fresh worker. The refusals need no memory."""
    d = _dir(tmp_path, ["pattern.json", "rc3-auth-0.0.3.json", "renovate.json"])
    monkeypatch.setattr(schema_workers, "MAX_MEMORY", 4 << 20)
    # an empty cache of its own: with the shared one warmed by other test files (make test), the
    # worker read what it would build and fit in the margin, so the outcome hung on test order
    monkeypatch.setenv("TOKFST_CACHE", str(tmp_path / "cache"))
    rows, _ = schema_workers.run_engine("tokfst", "gpt2", sorted(d.iterdir()), 1, 120.0, lambda _: None)
    assert {n: r["status"] for n, r in rows.items()} == {"pattern.json": "refused", "rc3-auth-0.0.3.json": "memory",
                                                         "renovate.json": "refused"}


# ---- the command line ---------------------------------------------------------------------------------
def test_cli_schemas_json(tmp_path):
    d = _dir(tmp_path, ["pattern.json", "rc3-auth-0.0.3.json", "emmet.json"])
    r = run("bench", "schemas", str(d), "--no-peers", "--limit", "2", "--json", "-")
    assert r.rc == 0, r.stderr
    doc = json.loads(r.out)
    assert doc["mode"] == "schemas" and doc["settings"]["repeat"] == 1 and doc["settings"]["peers"] is False
    (table, summary) = doc["tables"]
    assert [row["schema"] for row in table["rows"]] == ["emmet", "pattern"]
    assert [row["status"] for row in table["rows"]] == ["refused", "refused"]
    assert not any(c["key"] in PEERS for c in table["columns"])


@pytest.mark.parametrize("args, word", [(["schemas"], "DIR"), (["table2", "somewhere"], "DIR"),
                                        (["schemas", "/nonexistent-dir"], "not a directory")])
def test_cli_usage_errors(args, word):
    r = run("bench", *args)
    assert r.rc == 2 and word in r.stderr and "Traceback" not in r.stderr


# ---- the corpus ---------------------------------------------------------------------------------------
def test_the_corpus_and_its_provenance():
    files = sorted(CORPUS.glob("*.json"))
    readme = (CORPUS / "README.md").read_text()
    assert len(files) >= 60 and (CORPUS / "LICENSE").read_text().lstrip().startswith("Apache License")
    assert sum(p.stat().st_size for p in files) < 4_000_000
    for p in files:
        assert f"| `{p.name}` | {p.stat().st_size:,} | `src/schemas/json/{p.name}` |" in readme
        json.loads(p.read_text(encoding="utf-8"))


@pytest.mark.parametrize("path", [p for p in sorted(CORPUS.glob("*.json")) if p.stat().st_size <= CORPUS_BYTES],
                         ids=lambda p: p.stem)
def test_corpus_schema_compiles_or_is_refused_by_name(path):
    doc = json.loads(path.read_text(encoding="utf-8"))
    try:
        compiled = compile_schema(doc)
    except InputError as e:
        assert e.hint and e.hint.startswith("schema-"), e.one_line()
        return
    except LimitError as e:
        assert e.limit and e.bound, e.one_line()
        return
    assert compiled.automaton.fst.num_states() > 0
