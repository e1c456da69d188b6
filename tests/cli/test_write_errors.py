"""Write errors are worded, never "internal error": "no space left on device writing OUT" (exit 1).

A full device (``/dev/full``) as OUT and under stdout, in the installed script, supervised and
not (a command's last buffered line fails only when stdout is flushed); the other failures of a
write (a quota, a read-only file system, a permission) by making the system calls fail in
process; a closed pipe ends the command quietly, as before.
"""

from __future__ import annotations

import errno
import os
import subprocess

import pytest

from tokfst_cli.support import files

from ..runner import TOKFST, make_env, run

needs_dev_full = pytest.mark.skipif(not os.path.exists("/dev/full"), reason="no /dev/full")


def stdout_to_dev_full(*args: str, cwd, stdin: bytes = b"hello world\n", **env: str) -> subprocess.CompletedProcess:
    with open("/dev/full", "wb") as full:
        return subprocess.run([str(TOKFST), *args], stdout=full, stderr=subprocess.PIPE, env=make_env(**env),
                              cwd=cwd, timeout=120, input=stdin)


@needs_dev_full
def test_a_full_device_as_out(tmp_path):
    r = stdout_to_dev_full("promote", "gpt2", "-e", "ab", "/dev/full", cwd=tmp_path)
    err = r.stderr.decode()
    assert r.returncode == 1 and err == ("tokfst: error: no space left on device writing /dev/full; free some "
                                         "space, or write elsewhere\n"), err


@needs_dev_full
@pytest.mark.parametrize("args", [
    ("promote", "gpt2", "-e", "ab", "--format", "index"),  # data written at once
    ("--version",),  # a line of text
    ("encode", "gpt2"),
    ("--timeout", "60", "encode", "gpt2"),  # in the supervised child
    ("--timeout", "60", "canonical-check", "gpt2"),  # lines, flushed at the end
])
def test_a_full_device_under_stdout(tmp_path, args):
    r = stdout_to_dev_full(*args, cwd=tmp_path, stdin=b"464 3290\n" if "canonical-check" in args else b"hello world\n")
    err = r.stderr.decode()
    assert r.returncode == 1 and err.count("\n") == 1, err
    assert err.startswith("tokfst: error: no space left on device writing standard output; "), err


@needs_dev_full
def test_a_full_device_under_stdout_unsupervised(tmp_path):
    """Without the supervisor the interpreter's exit would flush last: the command flushes first."""
    r = stdout_to_dev_full("canonical-check", "gpt2", cwd=tmp_path, stdin=b"464 3290\n", TOKFST_NO_GUARD="1")
    assert r.returncode == 1 and r.stderr.decode() == ("tokfst: error: no space left on device writing standard "
                                                        "output; free some space, or write elsewhere\n")


def test_a_closed_pipe_ends_quietly(tmp_path):
    r, w = os.pipe()
    os.close(r)
    try:
        p = subprocess.run([str(TOKFST), "promote", "gpt2", "-e", "ab", "--format", "index"], stdout=w,
                           stderr=subprocess.PIPE, env=make_env(), cwd=tmp_path, timeout=120)
    finally:
        os.close(w)
    assert p.returncode == 1 and p.stderr == b""


def failing(monkeypatch, name: str, code: int) -> None:
    """Make ``os.<name>`` (``tempfile.mkstemp`` for "mkstemp") fail with ``code``."""
    def fail(*a, **k):
        raise OSError(code, os.strerror(code))
    if name == "mkstemp":
        monkeypatch.setattr(files.tempfile, "mkstemp", fail)
    else:
        monkeypatch.setattr(files.os, name, fail)


@pytest.mark.parametrize("name,code,rc,words", [
    ("replace", errno.ENOSPC, 1, "no space left on device writing {out}; free some space"),
    ("replace", errno.EDQUOT, 1, "disk quota exceeded writing {out}; free some space"),
    ("replace", errno.EIO, 1, "input/output error writing {out}; check the device"),
    ("chmod", errno.EROFS, 1, "cannot write {out}: Read-only file system"),
    ("mkstemp", errno.ENOSPC, 1, "no space left on device writing {out}"),
    ("mkstemp", errno.EROFS, 2, "cannot write {out}: Read-only file system; check that its directory"),
    ("mkstemp", errno.EACCES, 2, "cannot write {out}: Permission denied; check that its directory"),
])
def test_each_write_error_is_one_worded_line(tmp_path, monkeypatch, name, code, rc, words):
    """A path that cannot take a file at all (read-only, no permission: found before any byte is
    written) is exit 2 as before; a write that fails on the way (no room, I/O) is exit 1. The
    old file stays untouched and no temporary file is left."""
    out = tmp_path / "out.fst"
    out.write_bytes(b"old")
    failing(monkeypatch, name, code)
    r = run("promote", "gpt2", "-e", "ab", out)
    assert r.rc == rc and r.err_lines == [r.err_lines[0]], r.err_lines
    assert r.err_lines[0].startswith("tokfst: error: " + words.format(out=out)), r.err_lines
    assert "internal" not in r.stderr and out.read_bytes() == b"old" and os.listdir(tmp_path) == ["out.fst"]
