"""Durations in messages are printed as given: ``--timeout 0.6`` is "0.6 s", not "1 s".

In process, the supervisor's outcome is stubbed (``guard.run``) to word each ending; one real
run of the installed script is stopped by a tiny limit.
"""

from __future__ import annotations

import sys

import pytest

from tokfst_cli.cli import app
from tokfst_cli.support import guard

from ..runner import make_env, tokfst


def ended(monkeypatch, capsys, argv: list[str], outcome: guard.Outcome) -> tuple[int, str]:
    """main() under the supervisor, with ``outcome`` as how the child ended: (exit code, stderr)."""
    monkeypatch.setattr(app.guard, "run", lambda *a, **k: outcome)
    monkeypatch.setitem(app.STATE, "max_memory", app.STATE.get("max_memory"))  # main() sets it
    monkeypatch.setattr(sys, "argv", ["tokfst", *argv])
    with pytest.raises(SystemExit) as e:
        app.main(supervise=True)
    return e.value.code, capsys.readouterr().err


@pytest.mark.parametrize("given", ["0.6", "0.60", "2", "1.25", "1e-1"])
def test_the_time_limit_is_printed_as_given(monkeypatch, capsys, given):
    code, err = ended(monkeypatch, capsys, ["--timeout", given, "promote", "gpt2", "-e", "a", "x.fst"],
                      guard.Outcome(code=3, reason="time", stage="S: promotion", elapsed=float(given) + 0.04))
    assert code == 3
    assert f"still running after {given} s (--timeout {given})" in err and err.count("\n") == 1, err


def test_the_equals_form_is_printed_as_given(monkeypatch, capsys):
    code, err = ended(monkeypatch, capsys, ["--timeout=0.6", "promote", "gpt2", "-e", "a", "x.fst"],
                      guard.Outcome(code=3, reason="time", elapsed=0.63))
    assert code == 3 and "after 0.6 s (--timeout 0.6)" in err and "tokfst promote" in err, err


def test_a_limit_after_the_output_is_a_warning_with_exit_0(monkeypatch, capsys):
    code, err = ended(monkeypatch, capsys, ["--timeout", "0.6", "promote", "gpt2", "-e", "a", "x.fst"],
                      guard.Outcome(code=0, reason="late", written=True))
    assert code == 0 and err.startswith("tokfst: warning: time limit: --timeout 0.6 came after the output was "
                                        "written") and err.count("\n") == 1, err


def test_a_real_run_stopped_by_a_tiny_limit(tmp_path):
    r = tokfst("--timeout", "0.05", "promote", "gpt2", "-e", "[0-9]{1,3}", "x.fst", env=make_env(), cwd=tmp_path)
    assert r.rc == 3 and len(r.err_lines) == 1, r.stderr
    assert "still running after 0.05 s (--timeout 0.05)" in r.stderr and not list(tmp_path.iterdir())
