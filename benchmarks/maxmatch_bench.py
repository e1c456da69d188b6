"""Canonical MaxMatch benchmark (issue #4): compile-maxmatch for BERT, canonical promotion per regex.

    python benchmarks/maxmatch_bench.py [--repeat 3] [--json FILE]

1. ``tokfst compile-maxmatch BERT OUT`` in a fresh process with an empty cache (T_Aho built
   from scratch), median of --repeat runs; states, arcs and bytes of the .fst.
2. Per regex (the six of the foundation issue, the 100-word alternation, and the three of
   issue #4), in one process with the per-tokenizer tables warm: the canonical promotion
   (text automaton X + the product machine), the initial mask, and the materialized minimal
   automaton when it fits under 2 M arcs (else the factorized form is what `promote` writes);
   for the materializable ones also the paper's route MIN(PROJ(X o T_Aho)), as a peer in the
   same run. Medians of --repeat runs.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.helpers import SIX_REGEXES, add_words_regex  # noqa: E402
from tokfst_cli import tokenizer, wordpiece  # noqa: E402
from tokfst_cli.aho import compiled, maxmatch_promote  # noqa: E402
from tokfst_cli.bench.common import repeat  # noqa: E402
from tokfst_cli.errors import LimitError  # noqa: E402
from tokfst_cli.promote import count_arcs  # noqa: E402
from tokfst_cli.regex import compile_regex  # noqa: E402

BERT = ROOT / "tests" / "data" / "bert-base-uncased.json"
EXTRA = {"words4": r"[a-z]+( [a-z]+){0,3}", "punct": r"[a-z]+[.,!?]",
         "accents": r"[àáâäèéêëìíîïòóôöùúûüçñ]+( [A-Za-zÉÈÖ]+)?"}


def median_time(fn, n: int):
    """(median wall time of n calls, the last call's result)."""
    result = []
    runs = repeat(n, lambda: result.append(fn()))
    return statistics.median(runs), result[-1]


def compile_cold(repeat: int) -> dict:
    tokfst = Path(sys.executable).with_name("tokfst")
    times = []
    for _ in range(repeat):
        with tempfile.TemporaryDirectory() as d:
            env = {**os.environ, "TOKFST_CACHE": d}
            t = time.perf_counter()
            subprocess.run([str(tokfst), "compile-maxmatch", str(BERT), f"{d}/taho.fst"], env=env, check=True,
                           capture_output=True)
            times.append(time.perf_counter() - t)
            size = os.path.getsize(f"{d}/taho.fst")
    model = tokenizer.load(str(BERT))
    fst = compiled(model)
    return {"seconds_median": statistics.median(times), "runs": times, "states": fst.num_states(),
            "arcs": count_arcs(fst), "bytes": size}


def promotions(repeat: int) -> list[dict]:
    model = tokenizer.load(str(BERT))
    words = (ROOT / "tokfst_cli" / "data" / "words100.txt").read_text().split()
    regexes = {**add_words_regex(SIX_REGEXES, words), **EXTRA}
    taho = compiled(model)
    wordpiece.canonical_machine(model, compile_regex("a").fst, 10)  # warm the per-tokenizer tables
    rows = []
    for name, pattern in regexes.items():
        a = compile_regex(pattern).fst
        t_prom, machine = median_time(lambda: wordpiece.canonical_machine(model, a, 1_000_000), repeat)
        t_mask, mask = median_time(lambda: machine.mask(machine.initial), repeat)
        row = {"regex": name, "pattern": pattern, "promote_s": t_prom, "text_states": machine.text.num_states(),
               "initial_mask_s": t_mask, "initial_mask_tokens": int(mask.sum())}
        try:
            t_mat, fst = median_time(lambda: wordpiece.materialize(machine, 1_000_000, 2_000_000), repeat)
            row.update(materialized_s=t_prom + t_mat, states=fst.num_states(), arcs=count_arcs(fst))
            t_aho, _ = median_time(lambda: maxmatch_promote(model, a, taho, 1_000_000), repeat)
            row.update(aho_s=t_aho)
        except LimitError:
            row.update(materialized_s=None, states=None, arcs="> 2,000,000")
        rows.append(row)
        print(json.dumps(row), file=sys.stderr)
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--json", metavar="FILE")
    args = ap.parse_args()
    result = {"machine": {"platform": platform.platform(), "cpus": os.cpu_count(), "python": platform.python_version()},
              "repeat": args.repeat, "compile_maxmatch": compile_cold(args.repeat), "promote": promotions(args.repeat)}
    c = result["compile_maxmatch"]
    print(f"compile-maxmatch BERT: {c['seconds_median']:.2f} s (median of {args.repeat}, cold process, empty cache); "
          f"{c['states']:,} states, {c['arcs']:,} arcs, {c['bytes'] / 1e6:.1f} MB")
    print("| regex | promote (X + machine) | X states | initial mask | mask tokens | materialized | states | arcs "
          "| MIN(PROJ(X o T_Aho)) |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for r in result["promote"]:
        mat = f"{r['materialized_s'] * 1000:.0f} ms" if r["materialized_s"] is not None else "factorized"
        aho = f"{r['aho_s'] * 1000:.0f} ms" if "aho_s" in r else "-"
        states = f"{r['states']:,}" if r["states"] is not None else "-"
        arcs = f"{r['arcs']:,}" if isinstance(r["arcs"], int) else r["arcs"]
        print(f"| {r['regex']} | {r['promote_s'] * 1000:.0f} ms | {r['text_states']} | "
              f"{r['initial_mask_s'] * 1e6:.0f} µs | {r['initial_mask_tokens']:,} | {mat} | {states} | {arcs} | {aho} |")
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
