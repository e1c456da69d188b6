"""Bad-input battery, paths: odd files as every path argument, and where outputs go.

Path arguments (TOKENIZER, IN, OUT, --artifact, -f) given a directory, a read-only directory,
/dev/null or a FIFO: a one-line error with exit 2, or, where the path is usable (a FIFO with a
writer, /dev/null as an empty input or a sink), the ordinary result. Outputs: ``-`` and
``/dev/stdout`` are stdout (``/dev/stdout`` piped into ``fstprint`` works and stays a symlink);
a symlink OUT is followed (its target replaced atomically, the link kept); a FIFO, /dev/null
and other devices are written in place, never renamed over; a regular file keeps its mode.

In process (tests.runner.run) where only the command's behaviour matters; the installed script
(tests.runner.tokfst) for FIFOs (a thread on the other end) and /dev/stdout in a real pipe.
"""

from __future__ import annotations

import errno
import json
import os
import stat
import subprocess
import threading
import time
from pathlib import Path

import pytest

from ..runner import TOKFST, make_env, run, tokfst, tool
from .test_battery import BASES

PATTERN = "(ab|c)+"


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("paths")
    (d / "bpe.json").write_text(json.dumps(BASES["bpe"]))
    (d / "pattern.txt").write_text(PATTERN + "\n")
    (d / "ids.txt").write_text("0\n1 0\n")
    (d / "dir").mkdir()
    (d / "ro").mkdir()
    (d / "ro").chmod(0o555)
    r = run("compile-bpe", d / "bpe.json", d / "a.bpe")
    assert r.rc == 0, r.err
    r = run("promote", d / "bpe.json", d / "ref.fst", "-e", PATTERN)
    assert r.rc == 0, r.err
    return {"dir": d / "dir", "ro": d / "ro", "tok": d / "bpe.json", "pattern": d / "pattern.txt",
            "ids": d / "ids.txt", "artifact": d / "a.bpe", "ref": d / "ref.fst", "root": d}


def argv(arg: str, value, f: dict, out: Path) -> tuple:
    """A command with ``value`` as its ``arg`` and good values elsewhere."""
    if arg == "TOKENIZER":
        return ("promote", value, out, "-e", PATTERN)
    if arg == "IN":
        return ("canonical-check", f["tok"], value)
    if arg == "draw IN":
        return ("draw", value, out)
    if arg == "OUT":
        return ("promote", f["tok"], value, "-e", PATTERN)
    if arg == "--artifact":
        return ("canonical-check", f["tok"], f["ids"], "--artifact", value)
    if arg == "-f":
        return ("promote", f["tok"], out, "-f", value)
    raise AssertionError(arg)


ARGS = ("TOKENIZER", "IN", "draw IN", "OUT", "--artifact", "-f")
# what /dev/null gives each argument: an empty input (refused, or no lines at all) or a sink
DEV_NULL = {"TOKENIZER": 2, "IN": 0, "draw IN": 2, "OUT": 0, "--artifact": 2, "-f": 2}


@pytest.mark.parametrize("arg", ARGS)
@pytest.mark.parametrize("kind", ["dir", "ro"])
def test_a_directory_as_each_path(files, tmp_path, arg, kind):
    out = tmp_path / "out.fst"
    r = run(*argv(arg, files[kind], files, out))
    assert r.rc == 2, r.err
    assert len(r.err_lines) == 1 and r.err_lines[0].startswith("tokfst: error: "), r.err_lines
    assert str(files[kind]) in r.err_lines[0] and "internal" not in r.err_lines[0]
    assert r.out == b"" and not out.exists() and list(files[kind].iterdir()) == []


@pytest.mark.parametrize("arg", ARGS)
def test_dev_null_as_each_path(files, tmp_path, arg):
    out = tmp_path / "out.fst"
    r = run(*argv(arg, "/dev/null", files, out))
    assert r.rc == DEV_NULL[arg], r.err
    if r.rc:
        assert len(r.err_lines) == 1 and "/dev/null" in r.err_lines[0], r.err_lines
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)
    assert list(tmp_path.iterdir()) == []


def test_out_in_a_read_only_or_missing_place(files, tmp_path):
    for out in (files["tok"] / "x.fst", Path("/proc/version/x.fst")):  # below a file: ENOTDIR
        r = run("promote", files["tok"], out, "-e", PATTERN)
        assert r.rc == 2 and len(r.err_lines) == 1 and "cannot write" in r.err_lines[0], r.err_lines
    if os.geteuid() == 0:
        return  # root writes into a read-only directory
    r = run("promote", files["tok"], files["ro"] / "x.fst", "-e", PATTERN)
    assert r.rc == 2 and "Permission denied" in r.err_lines[0]
    assert list(files["ro"].iterdir()) == []


def test_a_full_device_is_a_one_line_runtime_error(files):
    if not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full")
    r = run("promote", files["tok"], "/dev/full", "-e", PATTERN)
    assert r.rc == 1 and len(r.err_lines) == 1 and "no space left on device writing /dev/full" in r.err_lines[0], \
        r.err_lines
    assert stat.S_ISCHR(os.stat("/dev/full").st_mode)


# --- FIFOs ------------------------------------------------------------------------------------

class FifoEnd(threading.Thread):
    """The other end of a FIFO: writes ``data`` to it, or (data None) reads it all into ``got``."""

    def __init__(self, path: Path, data: bytes | None = None):
        super().__init__(daemon=True)
        self.path, self.data, self.got = path, data, b""
        self.start()

    def run(self) -> None:
        if self.data is None:
            with open(self.path, "rb") as f:  # blocks until the writer opens
                self.got = f.read()
            return
        deadline = time.monotonic() + 60
        while True:  # wait for the reader without blocking forever
            try:
                fd = os.open(self.path, os.O_WRONLY | os.O_NONBLOCK)
                break
            except OSError as e:
                if e.errno != errno.ENXIO or time.monotonic() > deadline:
                    return
                time.sleep(0.01)
        os.set_blocking(fd, True)
        try:
            os.write(fd, self.data)
        except BrokenPipeError:
            pass
        finally:
            os.close(fd)

    def finish(self) -> None:
        """Join; a reader still waiting for a writer gets EOF."""
        if self.data is None and self.is_alive():
            try:
                os.close(os.open(self.path, os.O_WRONLY | os.O_NONBLOCK))
            except OSError:
                pass
        self.join(30)
        assert not self.is_alive()


INPUTS = {"TOKENIZER": "tok", "IN": "ids", "draw IN": "ref", "--artifact": "artifact", "-f": "pattern"}


@pytest.mark.parametrize("arg", list(INPUTS))
def test_a_fifo_as_each_input(files, tmp_path, arg):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    end = FifoEnd(fifo, files[INPUTS[arg]].read_bytes())
    out = tmp_path / "out.fst"
    r = tokfst(*argv(arg, fifo, files, out), env=make_env(files["root"] / "cache"), timeout=120)
    end.finish()
    assert r.rc == 0, r.err
    if arg in ("TOKENIZER", "-f"):
        assert out.read_bytes() == files["ref"].read_bytes()
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)


def test_a_fifo_as_out_is_written_in_place(files, tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    end = FifoEnd(fifo)
    r = tokfst("promote", files["tok"], fifo, "-e", PATTERN, env=make_env(files["root"] / "cache"), timeout=120)
    end.finish()
    assert r.rc == 0 and r.err == b"", r.err
    assert end.got == files["ref"].read_bytes()
    assert stat.S_ISFIFO(os.stat(fifo).st_mode) and sorted(p.name for p in tmp_path.iterdir()) == ["fifo"]


def test_dev_stdout_into_fstprint(files, tmp_path):
    """The issue's pipeline: `tokfst promote ... /dev/stdout | fstprint` (and '-')."""
    env = make_env(files["root"] / "cache")
    for out in ("/dev/stdout", "-"):
        producer = subprocess.Popen([str(TOKFST), "promote", str(files["tok"]), out, "-e", PATTERN],
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
        printed = subprocess.run(["fstprint"], stdin=producer.stdout, capture_output=True, timeout=120)
        producer.stdout.close()
        assert producer.wait(120) == 0, producer.stderr.read()
        assert printed.returncode == 0 and printed.stdout.count(b"\n") > 3, printed.stderr
        assert printed.stdout == tool("fstprint", files["ref"]).stdout
    assert os.path.islink("/dev/stdout")


def test_dev_stdout_to_a_file_keeps_the_shell_redirection(files, tmp_path):
    """stdout redirected to a file (>> appends): /dev/stdout is the descriptor, not a path to replace."""
    log = tmp_path / "log"
    log.write_bytes(b"before\n")
    with open(log, "ab") as f:
        p = subprocess.run([str(TOKFST), "promote", str(files["tok"]), "/dev/stdout", "-e", PATTERN], stdout=f,
                           stderr=subprocess.PIPE, env=make_env(files["root"] / "cache"), timeout=120)
    assert p.returncode == 0, p.stderr
    assert log.read_bytes() == b"before\n" + files["ref"].read_bytes()


# --- symlinks and regular files ------------------------------------------------------------------

def test_a_symlink_out_keeps_its_link(files, tmp_path):
    (tmp_path / "real").mkdir()
    (tmp_path / "links").mkdir()
    target = tmp_path / "real" / "x.fst"
    target.write_bytes(b"old")
    link = tmp_path / "links" / "x.fst"
    link.symlink_to("../real/x.fst")
    chain = tmp_path / "links" / "chain.fst"
    chain.symlink_to("x.fst")
    before = target.stat().st_ino
    for out in (link, chain):
        r = run("promote", files["tok"], out, "-e", PATTERN)
        assert r.rc == 0, r.err
        assert os.readlink(link) == "../real/x.fst" and os.readlink(chain) == "x.fst"
        assert target.read_bytes() == files["ref"].read_bytes()
        assert target.stat().st_ino != before  # replaced by a rename, not rewritten in place
        before = target.stat().st_ino
    assert sorted(p.name for p in (tmp_path / "real").iterdir()) == ["x.fst"]  # no temporary file
    assert sorted(p.name for p in (tmp_path / "links").iterdir()) == ["chain.fst", "x.fst"]


def test_a_dangling_symlink_creates_its_target(files, tmp_path):
    link = tmp_path / "l.fst"
    link.symlink_to("t.fst")
    assert run("promote", files["tok"], link, "-e", PATTERN).rc == 0
    assert link.is_symlink() and (tmp_path / "t.fst").read_bytes() == files["ref"].read_bytes()


def test_a_symlink_to_a_directory_or_device(files, tmp_path):
    (tmp_path / "d").mkdir()
    (tmp_path / "to-dir").symlink_to("d")
    r = run("promote", files["tok"], tmp_path / "to-dir", "-e", PATTERN)
    assert r.rc == 2 and "is a directory" in r.err_lines[0]
    (tmp_path / "to-null").symlink_to("/dev/null")
    assert run("promote", files["tok"], tmp_path / "to-null", "-e", PATTERN).rc == 0
    assert (tmp_path / "to-null").is_symlink() and stat.S_ISCHR(os.stat("/dev/null").st_mode)


def test_a_replaced_file_keeps_its_mode(files, tmp_path):
    out = tmp_path / "x.fst"
    out.write_bytes(b"old")
    out.chmod(0o640)
    assert run("promote", files["tok"], out, "-e", PATTERN).rc == 0
    assert stat.S_IMODE(out.stat().st_mode) == 0o640
    new = tmp_path / "new.fst"
    assert run("promote", files["tok"], new, "-e", PATTERN).rc == 0
    assert stat.S_IMODE(new.stat().st_mode) == 0o666 & ~_umask()


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def test_binary_output_refused_for_a_terminal_path(files, tmp_path):
    """A binary FST is refused for /dev/stdout on a terminal as for stdout itself."""
    import pty

    master, slave = pty.openpty()
    try:
        p = subprocess.run([str(TOKFST), "promote", str(files["tok"]), "/dev/stdout", "-e", PATTERN], stdout=slave,
                           stderr=subprocess.PIPE, env=make_env(files["root"] / "cache"), timeout=120)
    finally:
        os.close(slave)
        os.close(master)
    assert p.returncode == 2 and b"terminal" in p.stderr
