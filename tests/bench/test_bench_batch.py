"""``tokfst bench batch`` on a few inputs: the rows, the checks, and the speed-up as the median of
the ratios of alternated pairs of runs (one worker, two, one, two, ...)."""

from __future__ import annotations

import json
import statistics

from ..runner import run


def test_bench_batch_rows_checks_and_paired_speedup(tmp_path):
    out = tmp_path / "batch.json"
    r = run("bench", "batch", "--tokenizer", "gpt2", "--batch-inputs", "4", "--repeat", "3", "--json", out)
    assert r.rc == 0, r.stderr
    doc = json.loads(out.read_text())
    (table,) = doc["tables"]
    rows = {(row["way"], row["jobs"]): row for row in table["rows"]}
    one, two = rows[("compile-batch (local)", 1)], rows[("compile-batch (local)", 2)]
    pairs = [a / b for a, b in zip(one["wall"]["runs_s"], two["wall"]["runs_s"])]
    assert len(pairs) == 3 and two["speedup"] == statistics.median(pairs) and one["speedup"] == 1.0
    assert one["overhead"] is not None and rows[("in-process execute()", 1)]["per_input"] > 0
    assert doc["checks"] and all(c["passed"] for c in doc["checks"]), doc["checks"]
