"""``tokfst compile-batch``: parse, run :mod:`tokfst_cli.batch.run`, show the summary
(help: ``helptext.COMPILE_BATCH``)."""

from __future__ import annotations

import contextlib
import os
from enum import Enum
from typing import Optional

import typer

from tokfst_cli.cli.common import Level, LevelOpt, MaxStates, Tokenizer
from tokfst_cli.cli.errors import word
from tokfst_cli.cli.output import OUT
from tokfst_cli.cli.promote import (
    ASCII,
    FUSE_SPACES,
    LITERAL_ASCII,
    MAX_TOKENS,
    NFC,
    NO_BYTE_TOKENS,
    SCRIPTS,
    SYMBOLS,
    WHITESPACE,
    Format,
    Symbols,
    Whitespace,
    _filters,
)
from tokfst_cli.support import guard


class Kind(str, Enum):
    regex = "regex"
    schema = "schema"
    grammar = "grammar"


class Executor(str, Enum):
    local = "local"
    ray = "ray"
    dask = "dask"


def _bytes(size: Optional[str]) -> Optional[int]:
    """--task-memory in bytes (None: no limit); a usage error for what is not a size."""
    try:
        return None if size is None else guard.parse_size(size)
    except ValueError:
        raise typer.BadParameter(f"{size!r} is not a size; e.g. 4G, 500M, 25% or 0 (no limit)",
                                 param_hint="'--task-memory'") from None


INPUTS = typer.Argument(..., metavar="INPUT...", help="Input files, or directories of them (.re regexes, .json JSON "
                                                      "Schemas, .gbnf and .lark grammars; the kind by extension).")
OUT_DIR = typer.Option(..., "--out", "-o", metavar="DIR", help="Where the artifacts (DIR/artifacts/) and "
                                                               "DIR/results.jsonl go; made if missing.")
KIND = typer.Option(None, "--kind", help="Every input (every file of a directory) is of this kind, whatever its "
                                         "extension.")
FORMAT = typer.Option(Format.fst, "--format", help="fst, index or lazy, as promote writes them (an index past "
                                                   "--max-arcs: the factorized form).")
EXECUTOR = typer.Option(Executor.local, "--executor",
                        help="local: a process pool on this machine; ray: Ray (tokfst[ray]); dask: Dask "
                             "distributed (tokfst[dask]).")
JOBS = typer.Option(None, "--jobs", "-j", min=1, metavar="N",
                    help="Worker processes (local), or CPUs of the local Ray or Dask cluster [default: the cores].")
ADDRESS = typer.Option(None, "--address", metavar="ADDR",
                       help="ray, dask: the cluster to use (ray://HOST:10001, tcp://HOST:8786) [default: start one "
                            "on this machine].")
TASK_TIMEOUT = typer.Option(None, "--task-timeout", min=0.001, metavar="SECONDS",
                            help="An input still compiling after SECONDS is stopped (status timeout) [default: no "
                                 "limit].")
TASK_MEMORY = typer.Option(None, "--task-memory", metavar="SIZE",
                           help="An input's compile may use at most SIZE of memory (status limit): 4G, 500M, 25%, "
                                "0 = no limit [default: no limit].")
RECYCLE = typer.Option(1000, "--recycle", min=1, metavar="N", help="local: a worker is replaced after N inputs.")
JSON = typer.Option(False, "--json", help="The summary as one JSON object on stdout instead of a table.")
MAX_ARCS = typer.Option(2_000_000, "--max-arcs", min=1, metavar="N",
                        help="--canonical: refuse a materialized automaton with more arcs (--format index: write "
                             "the factorized form).")


def compile_batch_cmd(
    tokenizer: str = Tokenizer, inputs: list[str] = INPUTS, out: str = OUT_DIR, kind: Optional[Kind] = KIND,
    fmt: Format = FORMAT, canonical: bool = typer.Option(False, "--canonical", help="Only canonical token sequences "
                                                                                    "(as promote --canonical)."),
    level: Level = LevelOpt, whitespace: Whitespace = WHITESPACE, max_states: int = MaxStates,
    max_arcs: int = MAX_ARCS, scripts: Optional[str] = SCRIPTS, ascii_only: bool = ASCII, nfc: bool = NFC,
    no_byte_tokens: bool = NO_BYTE_TOKENS, literal_ascii: bool = LITERAL_ASCII, fuse_spaces: bool = FUSE_SPACES,
    max_tokens: Optional[int] = MAX_TOKENS, symbols: Symbols = SYMBOLS, executor: Executor = EXECUTOR,
    jobs: Optional[int] = JOBS,
    address: Optional[str] = ADDRESS, task_timeout: Optional[float] = TASK_TIMEOUT,
    task_memory: Optional[str] = TASK_MEMORY, recycle: int = RECYCLE, as_json: bool = JSON,
) -> None:
    """Compile many regexes, JSON Schemas and grammars into one artifact each, resumably."""
    from tokfst_cli.batch import run  # deferred: start-up: only this path needs it
    from tokfst_cli.batch.task import Limits, Options  # deferred: start-up: only this path needs it

    if address is not None and executor is Executor.local:
        raise typer.BadParameter("--address is for --executor ray or dask", param_hint="'--address'")
    if symbols is not Symbols.full and fmt is not Format.fst:
        raise typer.BadParameter("symbol tables are an .fst's: use --format fst", param_hint="'--symbols'")
    options = Options(canonical, fmt.value, _filters(scripts, ascii_only, nfc, no_byte_tokens, literal_ascii,
                                                     fuse_spaces, max_tokens), max_states, max_arcs, level.value,
                      whitespace.value, symbols.value)
    limits = Limits(task_timeout, _bytes(task_memory))
    req = run.Request(tokenizer, inputs, out, options, kind.value if kind else None, executor.value,
                      jobs or os.cpu_count() or 1, address, limits, recycle, word)
    with OUT.progress("reading the inputs"):
        plan = run.plan(req)
    with _bar(sum(len(g) for g in plan.todo.values())) as advance:
        summary = run.run(plan, on_record=advance)
    if as_json:
        OUT.record(summary)
    else:
        _table(summary)
    failed = summary["inputs"] - summary["compiled"]
    if failed:
        OUT.say(f"tokfst: {failed} of {summary['inputs']} inputs not compiled (see {summary['results']})")
        raise typer.Exit(1)


@contextlib.contextmanager
def _bar(total: int):
    """A progress bar on a terminal (counts per status, rate, ETA): the callback of each record."""
    if not total or OUT.is_quiet() or not OUT.err.is_terminal:
        yield lambda record: None
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn  # deferred: rich

    counts: dict[str, int] = {}
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
               TextColumn("{task.fields[rate]}"), TimeRemainingColumn())
    with Progress(*columns, console=OUT.err, transient=True) as bar:
        task = bar.add_task("compiling", total=total, rate="")

        def advance(record: dict) -> None:
            counts[record["status"]] = counts.get(record["status"], 0) + 1
            speed = bar.tasks[0].speed
            bar.update(task, advance=1, description=" ".join(f"{s} {n}" for s, n in counts.items()),
                       rate=f"{speed:.1f}/s" if speed else "")

        yield advance


def _table(summary: dict) -> None:
    """The summary as rich tables on stdout: counts and times, then the slowest inputs."""
    from rich.console import Console  # deferred: rich only where something is shown
    from rich.table import Table  # deferred: rich only where something is shown

    console = Console(highlight=False)
    counts = Table(title=f"compile-batch: {summary['inputs']} inputs ({summary['ran']} run, {summary['kept']} kept)")
    keys = ("compiled", "refused", "limit", "timeout", "crashed")
    for k in (*keys, "median", "p95", "wall"):
        counts.add_column(k, justify="right")
    ms = [f"{summary[k] * 1000:.1f} ms" if summary[k] is not None else "-" for k in ("median_s", "p95_s")]
    counts.add_row(*(str(summary[k]) for k in keys), *ms, f"{summary['wall_s']:.1f} s")
    console.print(counts)
    if summary["slowest"]:
        slow = Table(title="slowest inputs")
        for k in ("input", "status", "time"):
            slow.add_column(k, justify="right" if k == "time" else "left")
        for r in summary["slowest"]:
            slow.add_row(r["input"], r["status"], f"{r['seconds'] * 1000:.1f} ms")
        console.print(slow)
    console.print(f"results: {summary['results']}")
