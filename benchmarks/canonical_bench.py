#!/usr/bin/env python3
"""Benchmark canonical BPE (issue #3; not a test): compile-bpe, canonical promotion, masks, canonical-check.

Measures, per tokenizer (default: Llama-2 and GPT-2), medians of --repeat runs:
* compile-bpe --form implicit: compile time in-process (tokenizer loaded), artifact bytes;
* canonical promotion of the six regexes with the artifact loaded: agnostic promotion time,
  materialized canonical time (or "factorized" when over --max-arcs), factorized time;
* a factorized mask lookup (``Factorized.mask``) for a state reached by a random walk;
* canonical-check per pair vs HF's ``model.tokenize`` on the same 100k pairs (ratio).
Prints Markdown; ``--json FILE`` writes every figure.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tokfst_cli import lexicon, tokenizer  # noqa: E402
from tokfst_cli.bpe import implicit  # noqa: E402
from tokfst_cli.bpe.product import factorize, materialize  # noqa: E402
from tokfst_cli.errors import LimitError  # noqa: E402
from tokfst_cli.promote import promote  # noqa: E402
from tokfst_cli.regex import compile_regex  # noqa: E402

WORDS = (ROOT / "tokfst_cli" / "data" / "words100.txt").read_text().split()
REGEXES = {
    "decimal": r"([0-9]+)?\.[0-9]+",
    "json": r'\{"name":("John"|"Paul"),"age":(20|30)\}',
    "date": r"[0-9]{4}-[0-9]{2}-[0-9]{2}",
    "email": r"[a-z0-9._%+-]+@[a-z0-9.-]+\.[a-z]{2,6}",
    "cities": r"(Cologne|Berlin|Bonn|Munich)",
    "words100": "(" + "|".join(WORDS) + ")",
}


def timed(fn, repeat: int):
    times, out = [], None
    for _ in range(repeat):
        t = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times), out


def bench(path: str, repeat: int, max_arcs: int) -> dict:
    from tokenizers import Tokenizer

    model = tokenizer.load(path)
    lex = lexicon.build(model)
    t_compile, imp = timed(lambda: implicit.compile_implicit(model), max(1, repeat // 2))
    data = implicit.to_bytes(imp)
    t_load, imp = timed(lambda: implicit.from_bytes(data, model.fingerprint), repeat)
    imp._rows(), imp.classes(), imp._lpos()
    res = {"tokenizer": Path(path).name, "vocab": model.vocab_size, "compile_s": t_compile,
           "artifact_bytes": len(data), "load_s": t_load, "states": imp.info()["states"], "regexes": {}}
    for name, pattern in REGEXES.items():
        automaton = compile_regex(pattern)
        t_agn, agn = timed(lambda: promote(model, automaton, lex).fst, repeat)
        row = {"agnostic_s": t_agn}
        try:
            t_mat, mat = timed(lambda: materialize(agn, imp, max_arcs=max_arcs), max(1, repeat // 2))
            row.update(materialized_s=t_mat, states=mat.num_states(), arcs=sum(mat.num_arcs(s) for s in mat.states()))
        except LimitError:
            row.update(materialized_s=None)
        t_fz, fz = timed(lambda: factorize(agn, imp), repeat)
        row["factorized_s"] = t_fz
        rng = np.random.default_rng(0)
        state = fz.initial()
        for _ in range(3):
            allowed = np.flatnonzero(fz.mask(state))
            if not len(allowed):
                break
            state = fz.advance(state, int(rng.choice(allowed)))
        fz.mask(state)  # warm the class mask
        t_mask, _ = timed(lambda: fz.mask(state), 200)
        row["mask_ms"] = t_mask * 1000
        res["regexes"][name] = row
    hf = Tokenizer.from_file(path)
    rng = np.random.default_rng(1)
    toks = np.flatnonzero(imp.allowed & (imp.fb_byte < 0))
    u, v = rng.choice(toks, 100_000), rng.choice(toks, 100_000)
    t_ours, _ = timed(lambda: imp.banned(u, v), repeat)
    texts = [model.tokens[a] + model.tokens[b] for a, b in zip(u.tolist(), v.tolist())]
    t_hf, _ = timed(lambda: [hf.model.tokenize(t) for t in texts], 1)
    res.update(check_pair_us=t_ours / len(u) * 1e6, hf_pair_us=t_hf / len(u) * 1e6, check_speedup=t_hf / t_ours)
    return res


def markdown(results: list[dict], repeat: int) -> str:
    lines = [f"Machine: {os.cpu_count()} CPUs, {platform.platform()}; Python {platform.python_version()}; "
             f"medians of {repeat} runs (compile: {max(1, repeat // 2)}).", "",
             "| tokenizer | vocab | compile-bpe s | artifact MB | load s | A_BPE states | check µs/pair | HF µs/pair | speedup |",
             "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for r in results:
        lines.append(f"| {r['tokenizer']} | {r['vocab']} | {r['compile_s']:.2f} | {r['artifact_bytes'] / 1e6:.2f} | "
                     f"{r['load_s']:.3f} | {r['states']} | {r['check_pair_us']:.3f} | {r['hf_pair_us']:.2f} | "
                     f"{r['check_speedup']:.0f}x |")
    lines += ["", "| tokenizer | regex | agnostic ms | materialized ms (states/arcs) | factorized ms | mask ms |",
              "| --- | --- | ---: | ---: | ---: | ---: |"]
    for r in results:
        for name, x in r["regexes"].items():
            mat = (f"{x['materialized_s'] * 1000:.1f} ({x['states']}/{x['arcs']})" if x["materialized_s"] is not None
                   else "over --max-arcs")
            lines.append(f"| {r['tokenizer']} | {name} | {x['agnostic_s'] * 1000:.1f} | {mat} | "
                         f"{x['factorized_s'] * 1000:.1f} | {x['mask_ms']:.3f} |")
    return "\n".join(lines)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tokenizers", default=f"{ROOT}/tests/data/llama2.json,{ROOT}/tokfst_cli/data/gpt2.json")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--max-arcs", type=int, default=2_000_000)
    ap.add_argument("--json", dest="json_out")
    args = ap.parse_args(argv)
    results = [bench(p, args.repeat, args.max_arcs) for p in args.tokenizers.split(",")]
    print(markdown(results, args.repeat))
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
