"""Shared benchmark plumbing: machine facts, versions, timing, and the result document.

A result document (``--json``) is one JSON object:
    format, version     "tokfst-bench", 1
    generator, command  "tokfst <version>", the command line that produced it
    started, elapsed_s  UTC start time (ISO 8601), wall time of the whole run
    machine             cpu_model, nproc, os, python, loadavg_start/_end
    versions            tokfst, pynini, tokenizers, numpy, outlines-core, matplotlib ("not installed" if absent)
    settings            the options in effect (repeat, timeout_s, vocab_sizes, corpus, ...; cold_repeat
                        for promote and maxmatch, regexes when chosen)
    tables              list of tables: {id, title, repeat, columns, rows, notes, inputs, plot}
                        columns: [{key, label, kind}], kind in text|int|float|time|once|ratio|bytes|
                        bool|percent; rows: [{key: value}]; a "time" value is a timing cell (below)
                        over the repeated runs, a "once" value one of a single run (a precomputation)
    checks              list of {name, passed (true|false|null = not run), detail}

A timing cell: {"status": "ok", "median_s", "runs_s": [...]}, {"status": "timeout", "limit_s",
"runs_s"}, {"status": "error", "error"} or {"status": "skipped", "reason"}. Medians are over the
``repeat`` runs (>= 3 by default); "runs_s" lists every run.
"""

from __future__ import annotations

import gc
import importlib.metadata
import os
import platform
import shlex
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from tokfst_cli.errors import InputError
from tokfst_cli.support.meta import __version__
from tokfst_cli.tokenizer import model as tokmod

FORMAT = "tokfst-bench"
VERSION = 1
DISTRIBUTIONS = ("tokfst", "pynini", "tokenizers", "numpy", "outlines-core", "llguidance", "xgrammar", "matplotlib")


# ---- machine and versions ------------------------------------------------------------------
def version_of(dist: str) -> str:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.lower().startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def cpu_count() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def machine_facts() -> dict[str, Any]:
    return {
        "cpu_model": cpu_model(),
        "nproc": cpu_count(),
        "os": f"{platform.system()} {platform.release()} {platform.machine()}",
        "python": platform.python_version(),
        "loadavg_start": [round(x, 2) for x in os.getloadavg()],
    }


def commit() -> str | None:
    """The git commit of the tokfst checkout that runs (``+dirty`` with uncommitted changes), or None
    for an installed package: a results page names the code it measured."""
    root = Path(__file__).resolve().parents[2]
    if not (root / ".git").exists():
        return None
    try:
        head = subprocess.run(["git", "-C", str(root), "rev-parse", "--short=12", "HEAD"], capture_output=True,
                              text=True, timeout=10, check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=10, check=True).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return head + ("+dirty" if dirty else "")


def versions() -> dict[str, str]:
    return {d: version_of(d) for d in DISTRIBUTIONS}


def machine_line(doc: dict) -> str:
    m, v = doc["machine"], doc["versions"]
    return (f"Machine: {m['nproc']} CPUs ({m['cpu_model']}), {m['os']}, Python {m['python']}; "
            f"tokfst {v['tokfst']}, pynini {v['pynini']}, tokenizers {v['tokenizers']}, "
            f"outlines-core {v['outlines-core']}, llguidance {v.get('llguidance', '-')}, "
            f"xgrammar {v.get('xgrammar', '-')}; load average {m['loadavg_start'][0]} at start"
            + (f", {m['loadavg_end'][0]} at end." if "loadavg_end" in m else "."))


# ---- tokenizers -----------------------------------------------------------------------------
FAMILIES = {"bpe": ("BPE", "canonical BPE"), "wordpiece": ("WordPiece", "canonical MaxMatch")}


@lru_cache(maxsize=None)
def load_model(path: str, family: str | None = "bpe"):
    """The TokenizerModel of a tokenizer.json, parsed once per run however many tables use it;
    a one-line InputError when a mode needs another family (``family`` None: any)."""

    model = tokmod.load(path)
    if family is not None and model.family != family:
        raise InputError(f"{path} is a {model.family} tokenizer",
                         f"this benchmark measures {FAMILIES[family][1]}; give a {FAMILIES[family][0]} "
                         "tokenizer.json", hint="bench-family", family=FAMILIES[family][0])
    return model


def load_bpe(path: str):
    return load_model(path, "bpe")


# ---- timing ----------------------------------------------------------------------------------
def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    t = time.perf_counter()
    out = fn()
    return time.perf_counter() - t, out


def collect() -> None:
    """A full garbage collection, then ``gc.freeze()``: the survivors (imported modules, loaded
    tokenizers, compiled engines) move to the permanent generation, so the next collection, and
    the automatic ones inside a timed run, scan only what was made since. With torch imported
    (xgrammar) a full collection costs about 0.2 s; after a freeze, milliseconds."""
    gc.collect()
    gc.freeze()


def repeat(n: int, fn: Callable[[], Any]) -> list[float]:
    """Wall times of n calls (after a garbage collection, so earlier garbage is not billed)."""
    collect()
    return [timed(fn)[0] for _ in range(n)]


def summary(runs: list[float]) -> dict[str, Any]:
    return {"median": statistics.median(runs), "min": min(runs), "max": max(runs), "runs": runs}


def ok(runs: list[float]) -> dict[str, Any]:
    """A timing cell from completed runs (seconds)."""
    return {"status": "ok", "median_s": statistics.median(runs), "runs_s": [float(r) for r in runs]}


def per_unit(cell: dict, units: float) -> dict:
    """A timing cell divided by ``units`` (e.g. seconds per trial from seconds per batch)."""
    if cell.get("status") != "ok":
        return cell
    return ok([r / units for r in cell["runs_s"]])


def timeout(limit: float, runs: list[float] | None = None) -> dict[str, Any]:
    return {"status": "timeout", "limit_s": limit, "runs_s": list(runs or [])}


def error(message: str) -> dict[str, Any]:
    return {"status": "error", "error": message}


def skipped(reason: str) -> dict[str, Any]:
    return {"status": "skipped", "reason": reason}


def median_of(cell: dict | None) -> float | None:
    return cell["median_s"] if isinstance(cell, dict) and cell.get("status") == "ok" else None


def ratio(num: dict | None, den: dict | None) -> float | None:
    a, b = median_of(num), median_of(den)
    return a / b if a is not None and b else None


def tokfst_command() -> list[str]:
    """The ``tokfst`` console script beside this interpreter (else on PATH, else ``python -m``)."""
    exe = Path(sys.executable).with_name("tokfst")
    if exe.exists():
        return [str(exe)]
    found = shutil.which("tokfst")
    return [found] if found else [sys.executable, "-m", "tokfst_cli"]


def run_cold(cmd: list[str], env: dict[str, str], cwd: str) -> float:
    """Wall time of one whole process; RuntimeError (with its stderr) if it fails."""
    t = time.perf_counter()
    p = subprocess.run(cmd, env=env, cwd=cwd, capture_output=True, text=True)
    wall = time.perf_counter() - t
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} exited {p.returncode}: {p.stderr.strip()}")
    return wall


# Runs a command and prints its wall time, exit status and peak RSS (KB). A small launcher of its
# own: a child's ru_maxrss starts from the image it was forked from (here: the benchmark's). On
# the timeout the child's whole process group is killed (tokfst works in a forked child) and the
# status printed is -9.
LAUNCH = ("import os, resource, signal, subprocess, sys, time\nlimit = float(sys.argv[1]) or None\n"
          "t = time.perf_counter()\np = subprocess.Popen(sys.argv[2:], stdin=subprocess.DEVNULL, "
          "stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)\n"
          "try:\n    err = p.communicate(timeout=limit)[1]\n    rc = p.returncode\n"
          "except subprocess.TimeoutExpired:\n    os.killpg(p.pid, signal.SIGKILL)\n"
          "    err, rc = p.communicate()[1], -9\n"
          "wall = time.perf_counter() - t\nsys.stderr.buffer.write(err)\n"
          "print(wall, rc, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n")


def launch(cmd: list[str], cwd: str, timeout: float | None = None) -> tuple[float, int, int, str]:
    """(wall seconds, exit status (-9: killed at ``timeout``), peak RSS in bytes, stderr) of one
    whole process, its output discarded."""
    p = subprocess.run([sys.executable, "-c", LAUNCH, str(timeout or 0), *cmd], cwd=cwd, capture_output=True,
                       text=True)
    try:
        wall, rc, rss = p.stdout.split()
    except ValueError:
        raise RuntimeError(f"{' '.join(cmd)}: the launcher failed: {p.stderr.strip()}") from None
    return float(wall), int(rc), int(rss) * 1024, p.stderr  # Linux: kilobytes


@contextmanager
def private_cache(path: str) -> Iterator[None]:
    """TOKFST_CACHE set to ``path`` for this process and its children, restored afterwards."""
    saved = os.environ.get("TOKFST_CACHE")
    os.environ["TOKFST_CACHE"] = path
    try:
        yield
    finally:
        if saved is None:
            os.environ.pop("TOKFST_CACHE", None)
        else:
            os.environ["TOKFST_CACHE"] = saved


def measure(n: int, fn: Callable[[], Any], warmup: bool = False) -> tuple[dict, Any]:
    """n timed runs of fn as a cell, and fn's last result."""
    out = fn() if warmup else None
    collect()
    runs = []
    for _ in range(n):
        t, out = timed(fn)
        runs.append(t)
    return ok(runs), out


# ---- the document ----------------------------------------------------------------------------
@dataclass
class Table:
    id: str
    title: str
    repeat: int
    columns: list[tuple[str, str, str]]  # (key, label, kind)
    rows: list[dict] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    inputs: dict = field(default_factory=dict)
    plot: dict | None = None  # {"x": key, "y": [keys], "ylabel": str, "log": bool, "where": key}

    def to_json(self) -> dict:
        return {"id": self.id, "title": self.title, "repeat": self.repeat,
                "columns": [{"key": k, "label": lab, "kind": kind} for k, lab, kind in self.columns],
                "rows": self.rows, "notes": self.notes, "inputs": self.inputs, "plot": self.plot}


@dataclass
class Results:
    """What a mode returns: tables and the outcome of its internal equivalence checks."""

    tables: list[Table] = field(default_factory=list)
    checks: list[dict] = field(default_factory=list)

    def check(self, name: str, passed: bool | None, detail: str = "") -> None:
        self.checks.append({"name": name, "passed": passed, "detail": detail})

    def extend(self, other: Results) -> None:
        self.tables += other.tables
        self.checks += other.checks


def document(mode: str, settings: dict, results: Results, started: float, machine: dict) -> dict:
    machine = {**machine, "loadavg_end": [round(x, 2) for x in os.getloadavg()]}
    return {
        "format": FORMAT, "version": VERSION, "generator": f"tokfst {__version__}",
        "mode": mode, "command": command_line(),
        "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started)),
        "elapsed_s": round(time.time() - started, 3),
        "machine": machine, "versions": versions(), "commit": commit(), "settings": settings,
        "tables": [t.to_json() for t in results.tables], "checks": results.checks,
    }


def command_line() -> str:
    argv = list(sys.argv)
    argv[0] = "tokfst" if Path(argv[0]).name in ("tokfst", "__main__.py") else argv[0]
    return " ".join(shlex.quote(a) for a in argv)


class Progress:
    """Progress lines through ``say`` (the CLI's stderr writer), when ``on``."""

    def __init__(self, on: bool, say: Callable[[str], None]):
        self.on, self.say = on, say
        self.t0 = time.perf_counter()

    def __call__(self, message: str) -> None:
        if self.on:
            self.say(f"tokfst bench [{time.perf_counter() - self.t0:7.1f} s] {message}")
