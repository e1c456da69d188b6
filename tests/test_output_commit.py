"""Exit codes match the disk: ``--timeout`` and the rename of OUT (``support.guard._Commit``).

The rule: once the command's output is renamed into place the run is finished. A time limit
that fires before the rename kills the command (exit 3) and leaves an existing OUT untouched;
one that fires during the rename waits for it; one that fires after it changes nothing (exit 0),
and a command still running ``grace`` seconds after that is stopped with exit 0 (its output is
complete). Deterministic cases run ``guard.run`` on a function that renames at a chosen moment
(the child is forked from this process, so patching ``os.replace`` there patches only the
child); the command line races a timeout near its own run time.
"""

from __future__ import annotations

import hashlib
import os
import signal
import time

import pytest

from tokfst_cli.automata.fst_io import parse_fst
from tokfst_cli.support import files, guard

from .runner import make_env, tokfst

pytestmark = pytest.mark.wallclock  # timing: `make test` runs this module alone, after the parallel part


@pytest.fixture
def out(tmp_path):
    path = tmp_path / "out.bin"
    path.write_bytes(b"old")
    return path


def test_a_limit_before_the_rename_leaves_the_old_file(out):
    def work() -> int:
        def slow(tmp: str) -> None:
            with open(tmp, "wb") as f:
                f.write(b"partial")
            time.sleep(60)
        files._replace(str(out), str(out), slow, final=True)
        return 0

    got = guard.run(work, timeout=0.3, temp_dirs=[str(out.parent)])
    assert (got.code, got.reason, got.written) == (3, "time", False)
    assert out.read_bytes() == b"old" and os.listdir(out.parent) == ["out.bin"]


def test_a_limit_during_the_rename_waits_for_it(out):
    """The timer fires while the child renames (held there 0.6 s, past the 0.2 s limit): the
    parent cannot take the lock, looks again, finds the output in place and lets it finish."""
    def work() -> int:
        real = os.replace

        def slow_replace(a, b):
            time.sleep(0.6)
            real(a, b)
        os.replace = slow_replace  # in the forked child only
        files.write_bytes(out, b"new", final=True)
        return 0

    got = guard.run(work, timeout=0.2, temp_dirs=[str(out.parent)])
    assert (got.code, got.reason, got.written) == (0, None, True)
    assert out.read_bytes() == b"new"


def test_a_limit_right_after_the_rename_changes_nothing(out):
    """The rename at once, then 0.5 s of trailing work (a summary line) across the 0.2 s limit:
    before this rule, exit 3 with the new file in place."""
    def work() -> int:
        files.write_bytes(out, b"new", final=True)
        time.sleep(0.5)
        return 0

    got = guard.run(work, timeout=0.2, temp_dirs=[str(out.parent)])
    assert (got.code, got.reason, got.written) == (0, None, True)
    assert out.read_bytes() == b"new"


def test_a_command_lingering_after_its_output_is_stopped_with_exit_0(out):
    def work() -> int:
        files.write_bytes(out, b"new", final=True)
        time.sleep(60)
        return 0

    start = time.monotonic()
    got = guard.run(work, timeout=0.2, temp_dirs=[str(out.parent)], grace=0.3)
    assert (got.code, got.reason, got.written) == (0, "late", True)
    assert time.monotonic() - start < 5 and out.read_bytes() == b"new"


def test_other_writes_do_not_finish_the_run(out, tmp_path):
    """Only the command's output (``final``) counts: a cache entry written on the way does not."""
    other = tmp_path / "cache.bin"

    def work() -> int:
        files.write_bytes(other, b"entry")
        time.sleep(60)
        return 0

    got = guard.run(work, timeout=0.2, temp_dirs=[str(tmp_path)])
    assert (got.code, got.reason, got.written) == (3, "time", False) and other.read_bytes() == b"entry"


def test_the_lock_excludes_the_parent_and_the_child(tmp_path):
    """The parent holding the lock (it decided to kill) blocks the child's rename; the child
    holding it (renaming) makes the parent wait; the flag says when the output is in place."""
    commit = guard._Commit()
    try:
        assert commit.may_kill() and not commit.done  # the parent keeps the lock from here on
        marker = tmp_path / "renamed"
        pid = os.fork()
        if pid == 0:  # the child: blocks in lockf until killed
            commit.rename(lambda: marker.write_text("x"))
            os._exit(0)
        time.sleep(0.3)
        assert not marker.exists() and os.waitpid(pid, os.WNOHANG) == (0, 0)
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    finally:
        commit.close()

    commit = guard._Commit()
    try:
        pid = os.fork()
        if pid == 0:  # the child renames slowly, holding the lock
            commit.rename(lambda: time.sleep(0.6))
            os._exit(0)
        time.sleep(0.2)
        assert not commit.may_kill()  # busy: the rename is under way
        os.waitpid(pid, 0)
        assert commit.done and not commit.may_kill()  # in place: never killed for the limit
    finally:
        commit.close()


def _sha(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_the_command_line_racing_its_timeout_keeps_exit_code_and_file_in_step(tmp_path):
    """``tokfst --timeout T promote ... OUT`` with T from well below to well above the command's
    own run time (a coarse scan, then a fine one where the outcome turns): each run ends either
    with exit 3 and the old OUT byte for byte, or with exit 0 and the new, complete (sealed,
    verified) OUT; never exit 3 with a new file, never a temporary file left."""
    env = make_env()
    argv = ("promote", "gpt2", "-e", "[0-9]{1,4}(-[0-9]{2})?", "out.fst")
    r = tokfst(*argv, env=env, cwd=tmp_path, timeout=120)
    assert r.rc == 0, r.stderr
    new = _sha(tmp_path / "out.fst")
    old = b"an old output\n"

    def attempt(seconds: float) -> int:
        (tmp_path / "out.fst").write_bytes(old)
        r = tokfst(f"--timeout={seconds:.3f}", *argv, env=env, cwd=tmp_path, timeout=120)
        assert r.rc in (0, 3), r.stderr
        if r.rc == 3:
            assert (tmp_path / "out.fst").read_bytes() == old, r.stderr
            assert "time limit" in r.stderr
        else:
            assert _sha(tmp_path / "out.fst") == new, r.stderr
            parse_fst((tmp_path / "out.fst").read_bytes(), "out.fst")  # the seal verifies
        assert sorted(os.listdir(tmp_path)) == ["out.fst"]
        return r.rc

    coarse = [0.05 * 1.4 ** i for i in range(12)]  # 0.05 s to 2.0 s
    codes = [attempt(t) for t in coarse]
    assert codes[0] == 3 and codes[-1] == 0, codes
    turn = codes.index(0)
    low, high = coarse[turn - 1], coarse[turn]
    for i in range(1, 7):  # around the run time, where the limit meets the rename
        attempt(low + (high - low) * i / 7)
