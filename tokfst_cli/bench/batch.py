"""``tokfst bench batch``: ``tokfst compile-batch`` on many small regexes (:mod:`tokfst_cli.batch`).

``--batch-inputs`` N (default 1,000) small regexes (seeded: the same every run; each its own
bytes, so no two share a key) as ``.re`` files, on the first --tokenizer:

* in-process: :func:`tokfst_cli.batch.task.execute` of every input, one after another, in this
  (warm) process: the compile itself, serialization included;
Artifacts are written with compact symbol tables (:data:`OPTIONS`), in every way alike.

* compile-batch, jobs 1 and jobs 2: the local executor over all N into an empty DIR (plan:
  reading and hashing the inputs, loading the tokenizer; run: the pool's start, the compiles,
  the writes), the runs alternated (1, 2, 1, 2, ...); the overhead per input is (jobs-1 wall -
  in-process total) / N, the speed-up the median of the pairs' jobs-1 wall over jobs-2 wall;
* kept: the same batch again into the jobs-1 DIR (every result kept, nothing compiled);
* process per input: ``tokfst promote TOKENIZER -f FILE OUT.fst``, a whole process per input,
  on the first 30 inputs: the old way.

Targets: at most 20 ms of overhead per input; at least 1.8x from one worker to two. Checks: every
input compiles, and the artifacts' hashes are the same in-process, with one worker and two.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from tokfst_cli.batch.task import Options
from tokfst_cli.bench import common
from tokfst_cli.bench.common import Results, Table

SAMPLE = 30  # inputs compiled by a whole promote process each
# compact symbol tables (--symbols compact): with full ones 1,000 GPT-2 artifacts are 2 GB of the
# same vocabulary, and the disk, not the pool, sets the pace of two workers
OPTIONS = Options(symbols="compact")
TARGETS = {"overhead_s": 0.020, "speedup": 1.8}
WORDS = ("alpha", "beta", "gamma", "delta", "omega", "kappa", "sigma", "theta", "zeta", "iota")
TEMPLATES = ("{w}-[0-9]{{{k}}}", "({w}|{v})[a-z]{{1,{k}}}", "[A-Z]{w}[0-9]{{{k}}}", "{w}_{v}(_[0-9]){{0,{k}}}",
             "[0-9]{{4}}-{w}-[0-9]{{{k}}}", "({w} )?{v}[.!?]{{0,{k}}}")


def regexes(n: int, seed: int = 0) -> list[str]:
    """``n`` small distinct regexes (seeded)."""
    rng, out = random.Random(seed), []
    for i in range(n):
        w, v = rng.sample(WORDS, 2)
        out.append(rng.choice(TEMPLATES).format(w=w, v=v, k=rng.randint(1, 4)) + f"#{i}")
    return out


def _batch(files: Path, out: Path, tokenizer: str, jobs: int) -> tuple[float, float, dict, dict[str, str]]:
    """(plan seconds, run seconds, summary, input -> sha256) of one compile-batch run."""
    from tokfst_cli.batch import run  # deferred: start-up: only this path needs it

    t0 = time.perf_counter()
    p = run.plan(run.Request(tokenizer, [str(files)], str(out), OPTIONS, jobs=jobs))
    t1 = time.perf_counter()
    summary = run.run(p)
    t2 = time.perf_counter()
    hashes = {}
    for line in (out / run.RESULTS).read_text(encoding="utf-8").splitlines():
        rec = json.loads(line)
        hashes[Path(rec["input"]).name] = rec.get("sha256") or rec["status"]
    return t1 - t0, t2 - t1, summary, hashes


def _in_process(files: Path, tokenizer: str) -> tuple[float, list[float], dict[str, str]]:
    """(total seconds, per-input seconds, input -> sha256) of execute() in this warm process."""
    from tokfst_cli.batch import inputs, task  # deferred: start-up: only this path needs it
    from tokfst_cli.tokenizer.model import load  # deferred: start-up: only this path needs it

    opts = OPTIONS
    tasks = inputs.tasks(inputs.find([str(files)]), tokenizer, load(tokenizer).fingerprint, opts)
    task.prepare(tokenizer, opts)
    times, hashes = [], {}
    common.collect()
    start = time.perf_counter()
    for t in tasks:
        t0 = time.perf_counter()
        rec, data = task.execute(t)
        times.append(time.perf_counter() - t0)
        hashes[Path(t.input).name] = hashlib.sha256(data).hexdigest() if data is not None else rec["status"]
    return time.perf_counter() - start, times, hashes


def _processes(files: list[Path], tokenizer: str, d: str) -> list[float]:
    """Wall seconds of a whole ``tokfst promote -f FILE OUT`` process per file."""
    return [common.run_cold(common.tokfst_command() + ["promote", tokenizer, "-f", str(f), "--symbols", "compact",
                                                       os.path.join(d, "x.fst")],
                            dict(os.environ), d) for f in files]


def batch_table(tokenizers: list[tuple[str, str, bool]], n: int, repeat: int, progress) -> Results:
    name, tokenizer, _ = tokenizers[0]
    res = Results()
    with tempfile.TemporaryDirectory(prefix="tokfst-bench-batch-") as d:
        files = Path(d, "in")
        files.mkdir()
        for i, pattern in enumerate(regexes(n)):
            (files / f"r{i:05d}.re").write_text(pattern + "\n", encoding="utf-8")
        progress(f"batch: {name}: {n} regexes in-process, {repeat} time(s)")
        runs = [_in_process(files, tokenizer) for _ in range(repeat)]
        inproc = statistics.median(r[0] for r in runs)
        got = {"in-process": runs[-1][2]}
        walls: dict[int, list[tuple[float, float]]] = {1: [], 2: []}
        for k in range(repeat):  # one worker, two, one, two, ...: a drift of the machine's speed hits both alike
            for jobs in (1, 2):
                progress(f"batch: {name}: compile-batch --jobs {jobs}, run {k + 1} of {repeat}")
                plan_s, run_s, summary, got[f"jobs {jobs}"] = _batch(files, Path(d, f"out-{jobs}-{k}"), tokenizer,
                                                                     jobs)
                walls[jobs].append((plan_s, run_s))
                if (jobs, k) != (1, 0):  # 2 MB per GPT-2 .fst (its symbol tables): keep only the DIR rerun below
                    shutil.rmtree(Path(d, f"out-{jobs}-{k}"))
                res.check(f"batch {name} jobs {jobs}: every input compiled", summary["compiled"] == n,
                          f"{summary['compiled']} of {n}")
        progress(f"batch: {name}: the same batch again, every result kept")
        kept_plan, kept_run, _, _ = _batch(files, Path(d, "out-1-0"), tokenizer, 1)
        progress(f"batch: {name}: a tokfst promote process per input, {SAMPLE} inputs")
        cold = _processes(sorted(files.iterdir())[:SAMPLE], tokenizer, d)
    res.check(f"batch {name}: the same artifacts in-process, with one worker and with two",
              got["in-process"] == got["jobs 1"] == got["jobs 2"])
    res.tables.append(_table(name, n, repeat, inproc, runs[-1][1], walls, (kept_plan, kept_run), cold))
    return res


def speedup(walls: dict) -> float:
    """The median over the alternated pairs of runs of (one worker's wall / two workers')."""
    return statistics.median((p1 + r1) / (p2 + r2) for (p1, r1), (p2, r2) in zip(walls[1], walls[2]))


def _pool_row(jobs: int, walls: dict, n: int, inproc: float, process: float) -> dict:
    wall = statistics.median(p + r for p, r in walls[jobs])
    return {"way": "compile-batch (local)", "jobs": jobs, "wall": common.ok([p + r for p, r in walls[jobs]]),
            "plan": common.ok([p for p, _ in walls[jobs]]), "per_input": wall / n,
            "overhead": (wall - inproc) / n if jobs == 1 else None, "speedup": 1.0 if jobs == 1 else speedup(walls),
            "vs_process": process / (wall / n)}


def _table(name: str, n: int, repeat: int, inproc: float, per: list[float], walls: dict, kept: tuple,
           cold: list[float]) -> Table:
    one = statistics.median(p + r for p, r in walls[1])
    two = statistics.median(p + r for p, r in walls[2])
    process = statistics.median(cold)
    overhead = (one - inproc) / n
    rows = [
        {"way": "in-process execute()", "jobs": 1, "wall": common.ok([inproc]), "per_input": inproc / n},
        *(_pool_row(jobs, walls, n, inproc, process) for jobs in (1, 2)),
        {"way": "compile-batch, every result kept", "jobs": 1, "wall": common.ok([kept[0] + kept[1]]),
         "plan": common.ok([kept[0]]), "per_input": (kept[0] + kept[1]) / n},
        {"way": f"tokfst promote process per input ({len(cold)} inputs)", "jobs": 1, "wall": common.ok(cold),
         "per_input": process, "overhead": process - inproc / n},
    ]
    for r in rows:
        r["tokenizer"] = name
    columns = [("tokenizer", "tokenizer", "text"), ("way", "way", "text"), ("jobs", "jobs", "int"),
               ("wall", "wall", "time"), ("plan", "of which plan", "time"), ("per_input", "per input (s)", "float"),
               ("overhead", "overhead per input (s)", "float"), ("speedup", "speed-up vs 1 worker", "ratio"),
               ("vs_process", "vs a process per input", "ratio")]
    table = Table("batch", f"compile-batch: {n} small regexes, local executor vs in-process and a process per input",
                  repeat, columns, rows, inputs={"inputs": n, "targets": TARGETS, "sample": SAMPLE,
                                                 "cpus": common.cpu_count()})
    table.notes += [
        f"Overhead per input: (the jobs-1 wall - the in-process total) / {n} = {overhead * 1000:.1f} ms (target <= "
        f"{TARGETS['overhead_s'] * 1000:.0f} ms); speed-up from one worker to two: {speedup(walls):.2f}x (target >= "
        f"{TARGETS['speedup']}x on 2 cores); a promote process per input: {process * 1000:.0f} ms each, "
        f"{process / (two / n):.0f}x the batch's per-input wall with two workers.",
        "wall: plan (reading and hashing the inputs, loading the tokenizer) + run (the pool's start and warm-up, "
        "the compiles, the artifacts and results.jsonl written); in-process: task.execute() of every input in one "
        f"warm process (median per input {statistics.median(per) * 1000:.1f} ms). Medians of {repeat} run(s), the "
        "runs with one worker and with two alternated, the speed-up the median of their pairs' ratios; the "
        f"process per input: the median of {len(cold)} processes.",
    ]
    return table
