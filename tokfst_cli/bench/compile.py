"""``tokfst bench compile``: ``tokfst compile-bpe`` at scale, per --tokenizer.

Per BPE tokenizer, --repeat runs of each:
    process   a whole ``tokfst compile-bpe TOKENIZER OUT.bpe`` process with an empty private
              cache (so it compiles): the median wall time and the largest peak RSS (ru_maxrss,
              seen by a small launcher process), and the artifact's bytes, against the
              targets: <= 10 s, <= 1 GB, <= 8 MB
    stages    an in-process compile by stage (``compile_implicit(stages=...)``): reading the
              tokenizer.json, HF's merge table, the traces of every token, the spine orders and
              rectangles, the pairs of tokens whose traces pop out of rank order, the rows and
              classes (a reader's first use; not part of compile-bpe), the compressed artifact
The rows also give the vocabulary, the merges and the number of tokens whose trace HF pops out
of (rank, position) order.
"""

from __future__ import annotations

import os
import tempfile
import time

from tokfst_cli.bench import common
from tokfst_cli.bench.check import run_child
from tokfst_cli.bench.common import Results, Table
from tokfst_cli.bpe import implicit
from tokfst_cli.tokenizer import model as tokmod

TARGETS = {"time": 10.0, "rss": 1 << 30, "bytes": 8 << 20}
STAGES = ("load", "merges", "traces", "rectangles", "out_of_order", "rows", "artifact")


def tokenizer_row(name: str, path: str, runs: int, d: str) -> tuple[dict, dict]:

    out = os.path.join(d, "out.bpe")
    walls, rss = [], 0
    for i in range(runs):
        with common.private_cache(os.path.join(d, f"cache-{i}")):
            wall, _, peak = run_child(common.tokfst_command() + ["compile-bpe", os.path.abspath(path), out], d)
        walls.append(wall)
        rss = max(rss, peak)
    size = os.path.getsize(out)
    by_stage: dict[str, list[float]] = {k: [] for k in STAGES}
    for _ in range(runs):
        stages: dict[str, float] = {}
        t = time.perf_counter()
        model = tokmod.load(path)
        stages["load"] = time.perf_counter() - t
        imp = implicit.compile_implicit(model, stages=stages)
        t = time.perf_counter()
        imp.classes()
        stages["rows"] = time.perf_counter() - t
        t = time.perf_counter()
        implicit.to_bytes(imp)
        stages["artifact"] = time.perf_counter() - t
        for k in STAGES:
            by_stage[k].append(stages.get(k, 0.0))
    info = imp.info()
    cell = common.ok(walls)
    row = {"tokenizer": name, "vocab": model.vocab_size, "merges": len(model.merges),
           "out_of_order": info["non_monotone_tokens"], "time": cell, "rss": rss, "bytes": size,
           "targets": "met" if (common.median_of(cell) <= TARGETS["time"] and rss <= TARGETS["rss"]
                                and size <= TARGETS["bytes"]) else "missed",
           "states": info["states"], "rectangles": info["rectangles"]}
    totals = [sum(v[i] for v in by_stage.values()) for i in range(runs)]
    stage_row = {"tokenizer": name, **{k: common.ok(v) for k, v in by_stage.items()}, "total": common.ok(totals)}
    return row, stage_row


def compile_table(tokenizers: list[tuple[str, str, bool]], runs: int, progress) -> Results:
    res = Results()
    main = Table(
        "compile", "compile-bpe at scale: a whole process per tokenizer, empty cache", runs,
        [("tokenizer", "tokenizer", "text"), ("vocab", "vocab", "int"), ("merges", "merges", "int"),
         ("out_of_order", "out-of-order traces", "int"), ("time", "compile-bpe", "time"),
         ("rss", "peak RSS", "bytes"), ("bytes", "artifact", "bytes"), ("targets", "targets", "text"),
         ("states", "A_BPE states", "int"), ("rectangles", "rectangles", "int")],
        inputs={"targets": {"time_s": TARGETS["time"], "rss_bytes": TARGETS["rss"],
                            "artifact_bytes": TARGETS["bytes"]}})
    stages = Table(
        "compile_stages", "compile-bpe by stage, in-process", runs,
        [("tokenizer", "tokenizer", "text")] + [(k, k.replace("_", "-"), "time") for k in STAGES]
        + [("total", "total", "time")])
    with tempfile.TemporaryDirectory(prefix="tokfst-bench-compile-") as d:
        for name, path, _ in tokenizers:
            progress(f"compile: {name}: {runs} compile-bpe processes, then {runs} in-process runs by stage")
            row, stage_row = tokenizer_row(name, path, runs, d)
            main.rows.append(row)
            stages.rows.append(stage_row)
    main.notes += [
        f"compile-bpe: the wall time of a whole `tokfst compile-bpe TOKENIZER OUT.bpe` process with an empty cache, "
        f"median of {runs} runs (--repeat); peak RSS: the largest ru_maxrss of those processes; artifact: the "
        "bytes written.",
        "targets: compile-bpe <= 10 s, peak RSS <= 1 GB, artifact <= 8 MB.",
        "out-of-order traces: tokens whose merge trace HF pops out of (rank, position) order; their pairs "
        "are decided by the general condition of tokfst_cli/bpe/exposure.py.",
    ]
    stages.notes += [
        "load: tokenizer.json read and checked (tokenizer.load); merges: HF's merge table; traces: every token's "
        "trace (trace.derive); rectangles: spine orders and merge rectangles; out-of-order: traces, rows, "
        "columns and pairs of the out-of-order tokens; rows: per-row banned intervals and classes (what a reader "
        "of the artifact builds; compile-bpe itself does not); artifact: the compressed bytes. The process adds "
        f"the interpreter start, imports and the write. Medians of {runs} runs.",
    ]
    res.tables += [main, stages]
    return res
