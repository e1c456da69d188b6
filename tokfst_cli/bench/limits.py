"""``tokfst bench limits``: how long a refusal takes, and how much memory it costs on the way.

Patterns come from a Hypothesis strategy of nested bounded repetitions, alternations, classes
and words (derandomized: the same ``--patterns`` patterns every run), after a pinned set of known
hard cases (products of bounded repetitions around a separator, a long bounded repetition of
``.``, overlapping alternatives). Each runs as a whole ``tokfst promote TOKENIZER -e PATTERN OUT``
process at the default limits, agnostic and ``--canonical``, through a launcher that reads its
peak RSS and kills it at ``--timeout``:

* ``limits``: the per-mode summary: how many compiled, were refused as bad input (exit 2), hit a
  limit (exit 3) or ran out of time; median, p95 and worst time and peak RSS of the limit
  refusals; how many of them took over 2 s or 500 MB (the goal: none).
* ``limits_worst``: the slowest refusals and timeouts, with the stage their message names.
"""

from __future__ import annotations

import os
import statistics
import tempfile

from tokfst_cli.bench import common
from tokfst_cli.bench.common import Results, Table

PINNED = ["[a-z]{1,50}x[a-z]{1,50}", ".{0,200}x.{0,200}", "[a-z]{1,20}(?:[0-9]{1,20}[a-z]{1,20}){1,10}",
          "(?:a|ab){1,60}c", "[a-z0-9]{1,40}@[a-z0-9]{1,40}\\.[a-z]{2,10}", "(?:[a-z]{1,8} ){1,30}",
          "[0-9]{1,30}(?:,[0-9]{1,30}){0,30}", "(?:x|[a-z]{2,9}){1,40}y"]
GOAL_S, GOAL_BYTES = 2.0, 500_000_000
MODES = {"agnostic": [], "canonical": ["--canonical"]}


def strategy():
    """Nested bounded repetitions (up to {40,100}), alternations, concatenations of classes and words."""
    from hypothesis import strategies as st  # deferred: a bench-time dependency (tokfst[bench], the test extra)

    atom = st.sampled_from(["[a-z]", "[0-9]", "[a-z0-9]", ".", "[^,]", "x", "a", "(?:ab)", "(?:a|b)", " "])

    def repeated(inner):
        return st.tuples(inner, st.integers(0, 40), st.integers(0, 60)).map(
            lambda t: f"(?:{t[0]}){{{t[1]},{t[1] + t[2]}}}")

    def extend(inner):
        concat = st.lists(inner, min_size=1, max_size=4).map("".join)
        return st.one_of(concat, st.lists(concat, min_size=2, max_size=3).map(lambda xs: f"(?:{'|'.join(xs)})"),
                         repeated(concat))

    return st.recursive(st.one_of(atom, repeated(atom)), extend, max_leaves=8)


def generated(n: int) -> list[str]:
    """``n`` distinct patterns of :func:`strategy`, the same every run (Hypothesis derandomized)."""
    from hypothesis import HealthCheck, Phase, given, settings  # deferred: as in strategy()

    out: list[str] = []
    if n <= 0:
        return out

    @settings(max_examples=4 * n, database=None, derandomize=True, phases=[Phase.generate], deadline=None,
              suppress_health_check=list(HealthCheck))
    @given(strategy())
    def collect(pattern: str) -> None:
        if pattern not in out and len(out) < n:
            out.append(pattern)

    collect()
    return out


def _stage(err: str) -> str:
    line = err.strip().splitlines()[-1] if err.strip() else ""
    return line.removeprefix("tokfst: error: ").split(";")[0][:100]


def limits_tables(tokenizers: list[tuple[str, str, bool]], n: int, timeout: float, progress) -> Results:
    """``tokenizers``: (name, path, trained) of --tokenizer; ``n`` generated patterns after the pinned ones."""
    res = Results()
    patterns = PINNED + generated(n)
    summary = Table("limits", f"time and memory to a refusal, default limits ({len(patterns)} patterns)", 1,
                    [("tokenizer", "tokenizer", "text"), ("mode", "mode", "text"), ("runs", "runs", "int"),
                     ("compiled", "compiled", "int"), ("bad_input", "exit 2", "int"), ("limit", "exit 3", "int"),
                     ("timeout", "killed at the timeout", "int"), ("p50", "refusal p50", "time"),
                     ("p95", "refusal p95", "time"), ("worst", "refusal worst", "time"),
                     ("worst_rss", "refusal peak RSS (max)", "bytes"), ("over", "over 2 s or 500 MB", "int")],
                    inputs={"pinned": PINNED, "generated": n, "timeout_s": timeout})
    worst = Table("limits_worst", "the slowest refusals (exit 3) and timeouts", 1,
                  [("tokenizer", "tokenizer", "text"), ("mode", "mode", "text"), ("pattern", "pattern", "text"),
                   ("exit", "exit", "int"), ("seconds", "time", "time"), ("rss", "peak RSS", "bytes"),
                   ("stage", "message", "text")])
    slow: list[dict] = []
    with tempfile.TemporaryDirectory(prefix="tokfst-bench-limits-") as d:
        out = os.path.join(d, "out.fst")
        for name, path, _ in tokenizers:
            common.launch(common.tokfst_command() + ["promote", path, "-e", "ab", "--canonical", out], d)  # warm
            for mode, flags in MODES.items():
                rows = []
                for i, pattern in enumerate(patterns):
                    progress(f"limits {name} {mode} {i + 1}/{len(patterns)}: {pattern}")
                    cmd = common.tokfst_command() + ["promote", path, "-e", pattern, *flags, out]
                    wall, rc, rss, err = common.launch(cmd, d, timeout)
                    rows.append({"pattern": pattern, "exit": rc, "seconds": wall, "rss": rss, "stage": _stage(err)})
                refusals = [r for r in rows if r["exit"] in (3, -9)]
                times = sorted(r["seconds"] for r in refusals)
                summary.rows.append({
                    "tokenizer": name, "mode": mode, "runs": len(rows),
                    "compiled": sum(r["exit"] == 0 for r in rows), "bad_input": sum(r["exit"] == 2 for r in rows),
                    "limit": sum(r["exit"] == 3 for r in rows), "timeout": sum(r["exit"] == -9 for r in rows),
                    "p50": common.ok([statistics.median(times)]) if times else None,
                    "p95": common.ok([times[min(len(times) - 1, int(0.95 * len(times)))]]) if times else None,
                    "worst": common.ok([times[-1]]) if times else None,
                    "worst_rss": max((r["rss"] for r in refusals), default=None),
                    "over": sum(r["seconds"] > GOAL_S or r["rss"] > GOAL_BYTES for r in refusals)})
                slow += [{"tokenizer": name, "mode": mode, **r, "seconds": common.ok([r["seconds"]])}
                         for r in refusals]
                failed = [r for r in rows if r["exit"] not in (0, 2, 3, -9)]
                res.check(f"limits {name} {mode}: every process exits 0, 2 or 3 (or is killed at the timeout)",
                          not failed, "; ".join(f"{r['pattern']}: exit {r['exit']}" for r in failed[:3]))
    slow.sort(key=lambda r: -r["seconds"]["median_s"])
    worst.rows = slow[:15]
    summary.notes.append(f"Each pattern: `tokfst promote TOKENIZER -e PATTERN [--canonical] OUT` as a whole process "
                         f"(warm cache), default limits, killed after {timeout:g} s; a refusal is exit 3 or a kill. "
                         f"Goal: every refusal within {GOAL_S:g} s and {GOAL_BYTES // 1_000_000} MB.")
    return Results([summary, worst], res.checks)
