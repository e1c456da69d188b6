"""``tokfst bench inspect``: Pitfalls 2025 Table 2's skip rate without a model, and its cost.

Per tokenizer and regex (default: the Pokedex object of Pitfalls 2025 App. C), medians of --repeat
runs in one process: the two automata of ``inspection.automata`` (canonical, and agnostic with
the tokenizer's preprocessing), then ``inspection.survey`` over ``SAMPLES`` uniform strings
(draws, HF ``encode_batch``, walks through both automata): the issue's bound is on this step
(<= 2 s for 1,000 samples of the Pokedex automaton). The cold column times one whole
``tokfst inspect TOKENIZER -e REGEX --samples 1000 --json`` process (the cache warm: T, P and
the implicit A_BPE built once before), which builds both automata too.
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile

from tokfst_cli.analysis import inspection
from tokfst_cli.bench import common
from tokfst_cli.bench.common import Results, Table
from tokfst_cli.errors import TokfstError

SAMPLES = 1000
GOAL_S = 2.0  # the goal: inspect over 1,000 samples of the Pokedex automaton


def inspect_row(name: str, path: str, rname: str, pattern: str, repeat: int, env: dict, res: Results) -> dict:
    model = common.load_model(path, "bpe")
    row = {"tokenizer": name, "regex": rname}
    row["build"], (a, built) = common.measure(repeat, lambda: inspection.automata(model, pattern), warmup=True)
    row["survey"], got = common.measure(repeat, lambda: inspection.survey(model, a, built, SAMPLES, 0))
    report = got.to_json()
    row.update(samples=SAMPLES, steps=report["steps"],
               skip_agnostic=report["automata"]["agnostic"]["skip_rate"],
               skip_canonical=report["automata"]["canonical"]["skip_rate"],
               canonical_arcs=report["automata"]["canonical"].get("arcs"),
               first_noncanonical=report["first_tokens"]["share"])
    row["met"] = common.median_of(row["survey"]) <= GOAL_S
    cmd = common.tokfst_command() + ["inspect", path, "-e", pattern, "--samples", str(SAMPLES), "--seed", "0",
                                     "--json"]
    runs = []
    for _ in range(repeat):
        runs.append(common.run_cold(cmd, env, os.getcwd()))
    row["cold"] = common.ok(runs)
    cli = json.loads(subprocess.run(cmd, env=env, capture_output=True, text=True, check=True).stdout)
    res.check(f"inspect {name} {rname}: the CLI reports the in-process skip rates",
              cli["automata"]["canonical"]["skip_rate"] == row["skip_canonical"]
              and cli["automata"]["agnostic"]["skip_rate"] == row["skip_agnostic"])
    return row


def inspect_table(tokenizers: list[tuple[str, str, bool]], regexes: dict[str, str], repeat: int,
                  progress) -> Results:
    res = Results()
    table = Table(
        "inspect", f"inspect: skip rates on {SAMPLES} uniform samples (Pitfalls 2025 Table 2, no model)", repeat,
        [("tokenizer", "tokenizer", "text"), ("regex", "regex", "text"), ("steps", "steps", "int"),
         ("skip_agnostic", "skip agnostic", "percent"), ("skip_canonical", "skip canonical", "percent"),
         ("first_noncanonical", "non-canon. 1st", "percent"), ("canonical_arcs", "canonical arcs", "int"),
         ("build", "both automata", "time"), ("survey", f"{SAMPLES} samples", "time"), ("met", "<= 2 s", "bool"),
         ("cold", "cold CLI", "time")],
        inputs={"samples": SAMPLES, "regexes": regexes})
    table.notes.append(
        f"both automata: inspection.automata (canonical pipeline-level, agnostic with the tokenizer's "
        f"preprocessing). {SAMPLES} samples: inspection.survey (uniform draws, HF encode_batch, walks), the "
        f"issue's bound (<= {GOAL_S:g} s). cold CLI: a whole `tokfst inspect TOKENIZER -e REGEX --samples "
        f"{SAMPLES} --json` process (cache warm), both automata built. Skip rate: steps with one option "
        f"(a token or ending) over all steps; Pitfalls 2025 Table 2: Llama-2-7B 24.5% agnostic, 77.9% canonical.")
    work = tempfile.mkdtemp(prefix="tokfst-bench-")
    with common.private_cache(os.path.join(work, "cache")):
        env = dict(os.environ)
        for name, path, _ in tokenizers:
            for rname, pattern in regexes.items():
                progress(f"inspect: {name}: {rname}")
                try:
                    table.rows.append(inspect_row(name, path, rname, pattern, repeat, env, res))
                except TokfstError as e:
                    table.rows.append({"tokenizer": name, "regex": rname, "build": common.error(e.one_line())})
    res.tables.append(table)
    return res
