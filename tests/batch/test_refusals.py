"""``tokfst compile-batch``: an input that cannot be read, or one past ``--task-memory``, is that
input's status (refused, limit); the other inputs compile."""

from __future__ import annotations

import os

import pytest

from tokfst_cli.batch import inputs, run
from tokfst_cli.batch import task as task_mod
from tokfst_cli.support import guard

from ..runner import run as cli
from .common import make_inputs, outcome, records, request

GOOD = {"date.re", "answer.re", "words/hex.re"}


def test_unreadable_inputs_are_refused_and_the_batch_goes_on(tmp_path, monkeypatch):
    d = make_inputs(tmp_path / "in", GOOD)
    (d / "latin1.re").write_bytes("caf\u00e9|th\u00e9\n".encode("latin-1"))
    (d / "gone.re").write_text("[a-z]\n", encoding="utf-8")
    locked = os.geteuid() != 0  # root reads a file whatever its mode
    if locked:
        (d / "locked.re").write_text("[a-z]{2}\n", encoding="utf-8")
        (d / "locked.re").chmod(0)
    real = inputs.find

    def find_then_remove(*args, **kw):  # the file goes away after it was found, before it is read
        found = real(*args, **kw)
        (d / "gone.re").unlink()
        return found

    monkeypatch.setattr(inputs, "find", find_then_remove)
    out = tmp_path / "out"
    summary = run.run(run.plan(request(d, out)))
    got = outcome(out, d)
    assert {name: got[name][:2] for name in GOOD} == {name: ("compiled", 0) for name in GOOD}
    assert got["latin1.re"][:2] == got["gone.re"][:2] == ("refused", 2)
    by_name = {os.path.basename(r["input"]): r for r in records(out)}
    assert "cannot read input" in by_name["latin1.re"]["message"] and "not UTF-8" in by_name["latin1.re"]["message"]
    assert "No such file" in by_name["gone.re"]["message"] and "artifact" not in by_name["gone.re"]
    if locked:
        assert got["locked.re"][:2] == ("refused", 2) and "Permission denied" in by_name["locked.re"]["message"]
    assert summary["refused"] == 2 + locked and summary["compiled"] == len(GOOD)

    monkeypatch.setattr(inputs, "find", real)
    (d / "latin1.re").write_text("caf\u00e9|th\u00e9\n", encoding="utf-8")  # fixed: a new key, compiled
    again = run.run(run.plan(request(d, out)))
    assert again["ran"] == 1 + locked and outcome(out, d)["latin1.re"][:2] == ("compiled", 0)


def _hog(real):
    def compile_or_hog(task, model):
        if os.path.basename(task.input) == "hog.re":
            grabbed = [bytearray(64 << 20) for _ in range(48)]  # 3 GiB, well past the cap
            return len(grabbed)
        return real(task, model)
    return compile_or_hog


def test_an_input_past_the_task_memory_is_a_limit_and_the_rest_compile(tmp_path, monkeypatch):
    monkeypatch.setattr(task_mod, "_compile", _hog(task_mod._compile))  # inherited by the forked workers
    d = make_inputs(tmp_path / "in", GOOD)
    (d / "hog.re").write_text("[0-9]{2}\n", encoding="utf-8")
    task_mod.prepare("gpt2", task_mod.Options())  # what the workers inherit, counted against their memory
    huge = 1 << 40
    counted = huge - (guard._address_space_cap(huge) - guard._address_space_cap(0))  # resident + writable
    r = cli("compile-batch", "gpt2", d, "--out", tmp_path / "out", "--jobs", "2", "--json",
            "--task-memory", f"{(counted >> 20) + 768}M")
    assert r.rc == 1, r.stderr
    got = outcome(tmp_path / "out", d)
    assert got.pop("hog.re")[:2] == ("limit", 3)
    assert {s for s, _, _ in got.values()} == {"compiled"} and len(got) == len(GOOD)
    hog = next(x for x in records(tmp_path / "out") if x["input"].endswith("hog.re"))
    assert hog["message"].startswith("memory limit") and "artifact" not in hog


@pytest.mark.parametrize("size", ["lots", "-1G"])
def test_a_task_memory_that_is_not_a_size_is_a_usage_error(size, tmp_path):
    d = make_inputs(tmp_path / "in", {"date.re"})
    r = cli("compile-batch", "gpt2", d, "--out", tmp_path / "out", "--task-memory", size)
    assert r.rc == 2 and "--task-memory" in r.stderr
