"""One batch: find the inputs, skip those with a result under their key, run the rest, record.

:func:`plan` reads the inputs and ``OUT/results.jsonl`` before anything runs (InputError for a
missing input or tokenizer). :func:`run` sends the inputs still to do to an executor (``local``,
``ray``, ``dask``) and, as each finishes, writes its artifact atomically to
``OUT/artifacts/KEY.SUFFIX`` and appends its record to ``OUT/results.jsonl`` (one JSON line:
``input``, ``kind``, ``key``, ``status``, ``exit_code``, ``message``, ``times``, ``sizes``,
``artifact`` and ``sha256`` when compiled). The file is a log: an interrupted run leaves the
records of the inputs finished, and the next run with the same key (tokenizer, input bytes,
options, version) keeps those that are ``compiled`` (its artifact still there), ``refused`` or
``limit``, and runs the others again (``timeout``, ``crashed``, missing). Inputs with the same
key are compiled once; an input that could not be read is recorded ``refused`` (exit code 2) and
the batch goes on. :func:`summary` counts the statuses and gives the median, p95 and
slowest inputs of the inputs' compile times.
"""

from __future__ import annotations

import json
import os
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from tokfst_cli.batch import inputs
from tokfst_cli.batch import task as task_mod
from tokfst_cli.batch.local import RECYCLE, Pool
from tokfst_cli.batch.task import ARTIFACTS, STATUSES, Limits, Options, Task
from tokfst_cli.errors import InputError

RESULTS = "results.jsonl"
KEPT = ("compiled", "refused", "limit")  # statuses a later run keeps; the others are tried again
EXECUTORS = ("local", "ray", "dask")


@dataclass
class Request:
    """A batch as asked for; ``word`` words a library error (the command line names its flags)."""

    tokenizer: str
    inputs: list[str]
    out: str
    options: Options = Options()
    kind: str | None = None
    executor: str = "local"
    jobs: int = field(default_factory=lambda: os.cpu_count() or 1)
    address: str | None = None
    limits: Limits = Limits()
    recycle: int = RECYCLE
    word: Callable | None = None


@dataclass
class Plan:
    request: Request
    tasks: list[Task]  # every input, in order
    kept: dict[str, dict[str, dict]]  # key -> input -> the record a previous run left (status in KEPT)
    todo: dict[str, list[Task]]  # key -> the inputs of that key still to run, in order


def previous(out: Path) -> dict[str, dict[str, dict]]:
    """key -> input -> the last record of ``OUT/results.jsonl`` with a status to keep (and its artifact)."""
    path, got = out / RESULTS, {}
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        return {}
    except (OSError, UnicodeDecodeError) as e:
        raise InputError(f"cannot read {path}: {getattr(e, 'strerror', None) or e}", "give a writable new DIR")
    for line in lines:
        try:
            rec = json.loads(line)
            k, status = rec["key"], rec["status"]
        except (ValueError, KeyError, TypeError):  # a line cut by an interruption
            continue
        if status in KEPT and (status != "compiled" or (out / rec.get("artifact", "\0")).is_file()):
            got.setdefault(k, {})[rec.get("input")] = rec
        else:
            got.pop(k, None)
    return got


def plan(req: Request) -> Plan:
    """The inputs, their keys, and which of them a previous run already did."""
    from tokfst_cli.tokenizer.model import load  # deferred: start-up: only this path needs it

    if req.executor not in EXECUTORS:
        raise InputError(f"executor {req.executor!r} is not known", f"give one of {', '.join(EXECUTORS)}")
    out = Path(req.out)
    if out.exists() and not out.is_dir():
        raise InputError(f"the output {req.out} is not a directory", "give a directory (made if missing)")
    files = inputs.find(req.inputs, req.kind, skip=out)
    model = load(req.tokenizer)
    tasks = inputs.tasks(files, req.tokenizer, model.fingerprint, req.options, req.word)
    kept = previous(out)
    todo: dict[str, list[Task]] = {}
    for t in tasks:
        if t.key not in kept:
            todo.setdefault(t.key, []).append(t)
    return Plan(req, tasks, kept, todo)


def _executor(req: Request, tasks: list[Task], on_start, out: Path):
    """Each task's (task, record, artifact bytes): the unreadable ones refused here, the others run."""
    for t in tasks:
        if t.refusal:
            yield t, task_mod.failed(t, "refused", t.refusal, InputError.exit_code), None
    tasks = [t for t in tasks if not t.refusal]
    if tasks:
        yield from _run(req, tasks, on_start, out)


def _run(req: Request, tasks: list[Task], on_start, out: Path):
    if req.executor == "ray":
        from tokfst_cli.batch.remote import ray_run  # deferred: start-up: only this path needs it

        return ray_run(tasks, req.jobs, req.limits, req.address)
    if req.executor == "dask":
        from tokfst_cli.batch.remote import dask_run  # deferred: start-up: only this path needs it

        return dask_run(tasks, req.jobs, req.limits, req.address)
    return Pool(req.jobs, req.limits, req.recycle, on_start, out).run(tasks)


def run(p: Plan, on_record: Callable[[dict], None] | None = None,
        on_start: Callable[[Task, int], None] | None = None) -> dict:
    """Run what is to do, write artifacts and records, and return the :func:`summary`."""
    out = Path(p.request.out)
    (out / ARTIFACTS).mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    records: dict[str, dict] = {}
    with open(out / RESULTS, "a", encoding="utf-8") as log:
        for t in p.tasks:  # an input new to a key kept from before gets its own line
            if t.key in p.kept:
                rec = p.kept[t.key].get(t.input)
                records[t.input] = rec or _append(log, {**next(iter(p.kept[t.key].values())), "input": t.input})
        first = [group[0] for group in p.todo.values()]
        for t, rec, data in _executor(p.request, first, on_start, out):
            if data is not None:
                rec = task_mod.store(out, rec, data)
            for same in p.todo[t.key]:
                records[same.input] = _append(log, {**rec, "input": same.input})
                if on_record is not None:
                    on_record(records[same.input])
    ran = sum(len(g) for g in p.todo.values())
    return summary([records[t.input] for t in p.tasks if t.input in records], ran,
                   time.perf_counter() - start, p.request)


def _append(log, rec: dict) -> dict:
    log.write(json.dumps(rec, ensure_ascii=False, sort_keys=True) + "\n")
    log.flush()
    return rec


def summary(records: list[dict], ran: int, wall: float, req: Request, slowest: int = 5) -> dict:
    """Counts per status, the median and p95 of the compiled inputs' times, the slowest inputs."""
    counts = {s: sum(r["status"] == s for r in records) for s in STATUSES}
    times = sorted(r["times"]["total"] for r in records if r["status"] == "compiled")
    slow = sorted(records, key=lambda r: -r["times"]["total"])[:slowest]
    return {"inputs": len(records), **counts, "ran": ran, "kept": len(records) - ran, "wall_s": round(wall, 3),
            "per_second": round(ran / wall, 2) if wall > 0 and ran else None,
            "median_s": round(statistics.median(times), 6) if times else None,
            "p95_s": round(times[min(len(times) - 1, int(0.95 * len(times)))], 6) if times else None,
            "slowest": [{"input": r["input"], "status": r["status"], "seconds": r["times"]["total"]} for r in slow],
            "executor": req.executor, "jobs": req.jobs, "out": str(req.out),
            "results": str(Path(req.out) / RESULTS)}
