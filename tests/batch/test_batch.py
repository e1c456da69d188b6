"""``tokfst compile-batch`` on the local executor: records, artifacts, resumption, crashes, limits."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import time

import pytest

from tokfst_cli.batch import local, run
from tokfst_cli.batch import task as task_mod
from tokfst_cli.batch.task import Limits

from ..runner import run as cli
from .common import EXPECTED, INPUTS, make_inputs, outcome, records, request


@pytest.fixture(scope="module")
def batch(tmp_path_factory):
    """The mixed batch compiled once by the local executor: (inputs dir, out dir, summary)."""
    d = make_inputs(tmp_path_factory.mktemp("in"))
    out = tmp_path_factory.mktemp("out")
    return d, out, run.run(run.plan(request(d, out)))


def test_every_input_gets_one_record_with_its_status(batch):
    d, out, summary = batch
    got = outcome(out, d)
    assert sorted(got) == sorted(INPUTS)
    assert {name: status for name, (status, _, _) in got.items()} == \
        {name: EXPECTED.get(name, "compiled") for name in INPUTS}
    assert got["bad.re"][1] == 2 and got["big.re"][1] == 3
    assert summary["inputs"] == len(INPUTS) and summary["compiled"] == len(INPUTS) - 2
    assert summary["refused"] == summary["limit"] == 1 and summary["ran"] == len(INPUTS)
    assert summary["median_s"] > 0 and summary["p95_s"] >= summary["median_s"]


def test_records_carry_messages_times_sizes_and_the_artifact_hash(batch):
    d, out, _ = batch
    by_name = {os.path.relpath(r["input"], d): r for r in records(out)}
    assert "max_states 1000000" in by_name["big.re"]["message"]
    assert "unterminated" in by_name["bad.re"]["message"] and "artifact" not in by_name["bad.re"]
    for name, r in by_name.items():
        assert r["times"]["total"] > 0 and r["sizes"]["input_bytes"] == len(INPUTS[name].encode())
        if r["status"] == "compiled":
            data = (out / r["artifact"]).read_bytes()
            assert hashlib.sha256(data).hexdigest() == r["sha256"] and len(data) == r["sizes"]["artifact_bytes"]
            assert r["sizes"]["states"] > 0
    assert by_name["answer.re"]["artifact"] == by_name["same-as-answer.re"]["artifact"]  # content-addressed


def test_an_artifact_is_what_promote_writes(batch, tmp_path):
    d, out, _ = batch
    rec = next(r for r in records(out) if r["input"].endswith("date.re"))
    r = cli("promote", "gpt2", "-f", d / "date.re", tmp_path / "date.fst")
    assert r.rc == 0, r.stderr
    assert (tmp_path / "date.fst").read_bytes() == (out / rec["artifact"]).read_bytes()


def test_a_second_run_compiles_only_what_is_new(batch, tmp_path):
    d, out, _ = batch
    before = {p: p.stat().st_mtime_ns for p in (out / "artifacts").iterdir()}
    lines = len(records(out))
    (d / "words" / "new.re").write_text("[A-Z]{2}[0-9]\n", encoding="utf-8")
    try:
        summary = run.run(run.plan(request(d, out)))
    finally:
        (d / "words" / "new.re").unlink()
    assert summary["ran"] == 1 and summary["kept"] == len(INPUTS) and summary["compiled"] == len(INPUTS) - 1
    assert len(records(out)) == lines + 1 and records(out)[-1]["input"].endswith("new.re")
    assert all(p.stat().st_mtime_ns == t for p, t in before.items())


def test_an_interrupted_run_continues_where_it_stopped(tmp_path):
    d, out = make_inputs(tmp_path / "in"), tmp_path / "out"
    seen = []

    def interrupt(record):
        seen.append(record["input"])
        if len(seen) == 3:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run.run(run.plan(request(d, out)), on_record=interrupt)
    assert [r["input"] for r in records(out)] == seen
    mtimes = {p: p.stat().st_mtime_ns for p in (out / "artifacts").iterdir()}
    done = {r["key"] for r in records(out)}
    p = run.plan(request(d, out))
    summary = run.run(p)
    missing = [t for t in p.tasks if t.key not in done]  # answer.re's twin is kept with it
    assert len(missing) >= len(INPUTS) - 4 and summary["ran"] == len(missing)
    assert summary["kept"] == len(INPUTS) - len(missing) and records(out)[3:][-len(missing):][0]["key"] not in done
    assert sorted(outcome(out, d)) == sorted(INPUTS)
    assert all(p.stat().st_mtime_ns == t for p, t in mtimes.items())
    assert not os.listdir(f"/proc/{os.getpid()}/task") or _children() == []  # no worker left behind


def _children() -> list[int]:
    with open(f"/proc/{os.getpid()}/task/{os.getpid()}/children") as f:
        return [int(x) for x in f.read().split()]


def test_a_worker_killed_by_sigkill_leaves_its_input_crashed(tmp_path):
    d = make_inputs(tmp_path / "in", {"date.re", "answer.re", "words/email.re", "words/hex.re", "point.json"})
    (d / "victim.re").write_text("[a-z]{3}\n", encoding="utf-8")
    out = tmp_path / "out"

    def kill(task, pid):
        if task.input.endswith("victim.re"):
            os.kill(pid, signal.SIGKILL)

    summary = run.run(run.plan(request(d, out)), on_start=kill)
    got = outcome(out, d)
    assert got.pop("victim.re")[:2] == ("crashed", 1)
    assert {s for s, _, _ in got.values()} == {"compiled"} and len(got) == 5
    assert "SIGKILL" in records(out)[[r["input"] for r in records(out)].index(str(d / "victim.re"))]["message"]
    assert summary["crashed"] == 1 and _children() == []
    again = run.run(run.plan(request(d, out)))  # a crashed input is tried again; the others are kept
    assert again["ran"] == 1 and again["compiled"] == 6


def _aborting(real):
    def compile_or_abort(task, model):
        name = os.path.basename(task.input)
        if name == "abort.re":
            os.abort()  # as pynini does on a failed check
        if name == "slow.re":
            time.sleep(60)
        return real(task, model)
    return compile_or_abort


def test_an_input_that_aborts_the_process_is_crashed_and_the_rest_compile(tmp_path, monkeypatch):
    monkeypatch.setattr(task_mod, "_compile", _aborting(task_mod._compile))  # inherited by the forked workers
    d = make_inputs(tmp_path / "in", {"date.re", "answer.re", "words/email.re", "words/hex.re"})
    (d / "abort.re").write_text("[0-9]\n", encoding="utf-8")
    out = tmp_path / "out"
    pids = []
    summary = run.run(run.plan(request(d, out, jobs=1)), on_start=lambda t, pid: pids.append(pid))
    got = outcome(out, d)
    assert got.pop("abort.re")[:2] == ("crashed", 1)
    assert {s for s, _, _ in got.values()} == {"compiled"} and len(got) == 4
    assert "SIGABRT" in [r for r in records(out) if r["input"].endswith("abort.re")][0]["message"]
    assert summary["crashed"] == 1 and len(set(pids)) == 2  # the one worker was replaced after the abort


def test_an_input_past_the_task_timeout_is_stopped(tmp_path, monkeypatch):
    monkeypatch.setattr(task_mod, "_compile", _aborting(task_mod._compile))
    d = make_inputs(tmp_path / "in", {"date.re", "answer.re"})
    (d / "slow.re").write_text("[0-9]\n", encoding="utf-8")
    start = time.monotonic()
    summary = run.run(run.plan(request(d, tmp_path / "out", limits=Limits(timeout=1.0))))
    assert time.monotonic() - start < 20
    got = outcome(tmp_path / "out", d)
    assert got.pop("slow.re")[:2] == ("timeout", 3) and {s for s, _, _ in got.values()} == {"compiled"}
    assert summary["timeout"] == 1 and _children() == []


def test_workers_are_recycled_after_n_inputs(tmp_path, monkeypatch):
    """A worker per input with recycle 1, and none forked after the last input (nothing is left)."""
    d = make_inputs(tmp_path / "in", {"date.re", "answer.re", "words/hex.re"})
    pids, forks = [], []
    spawn = local.Pool._spawn
    monkeypatch.setattr(local.Pool, "_spawn", lambda self: forks.append(1) or spawn(self))
    summary = run.run(run.plan(request(d, tmp_path / "out", jobs=1, recycle=1)),
                      on_start=lambda t, pid: pids.append(pid))
    assert summary["compiled"] == 3 and len(set(pids)) == 3 and len(forks) == 3


def test_the_command_line_writes_results_and_a_json_summary(batch, tmp_path):
    d, _, _ = batch
    r = cli("compile-batch", "gpt2", d / "date.re", d / "words", d / "bad.re", "--out", tmp_path / "o", "--json",
            "--jobs", "2")
    assert r.rc == 1, r.stderr  # one input not compiled
    summary = json.loads(r.stdout)
    assert (summary["inputs"], summary["compiled"], summary["refused"]) == (4, 3, 1)
    assert "1 of 4 inputs not compiled" in r.stderr
    bad = [x for x in records(tmp_path / "o") if x["input"].endswith("bad.re")][0]
    assert bad["exit_code"] == 2 and "(Python re syntax)" in bad["message"]
    r = cli("compile-batch", "gpt2", d / "date.re", "--out", tmp_path / "o")  # kept: nothing runs
    assert r.rc == 0 and "1 inputs (0 run, 1 kept)" in r.stdout


def test_the_command_line_words_limits_with_its_flags_and_refuses_bad_usage(batch, tmp_path):
    d, _, _ = batch
    r = cli("compile-batch", "gpt2", d / "big.re", "--out", tmp_path / "o", "--json")
    assert r.rc == 1 and "--max-states 1000000" in records(tmp_path / "o")[0]["message"]
    r = cli("compile-batch", "gpt2", d / "date.re", "--out", tmp_path / "o", "--address", "tcp://x:1")
    assert r.rc == 2 and "--address" in r.stderr
    r = cli("compile-batch", "gpt2", tmp_path / "missing.re", "--out", tmp_path / "o")
    assert r.rc == 2 and "neither a file nor a directory" in r.stderr
