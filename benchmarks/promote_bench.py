#!/usr/bin/env python3
"""Benchmark ``tokfst promote`` on six regexes against real tokenizers (not a test).

Requirement measured: promote each regex against llama2.json and gpt2.json; report wall time
per regex warm (tokenizer and lexicon loaded once, in-process) and cold (a whole
``tokfst promote`` subprocess), and the size of each result. Targets on the 2-core reference
machine: <= 0.1 s per regex warm; a cold ``tokfst promote`` run <= 2 s. The lexicon
transducer T is built once per tokenizer and cached on disk by fingerprint; coalescence
(states sharing a mask) is counted in the index report.

Per tokenizer and regex it measures

* warm: ``compile_regex`` + ``promote`` (median and min of --repeat runs after one untimed
  warm-up), and the index export ``build_index`` as a separate column;
* peer: a plain pynini ``compose + project + rmepsilon + minimize`` of the same byte
  automaton against the same lexicon, in the same process, and the ratio of tokfst's
  ``promote()`` to it (ratios travel between noisy machines better than absolute times);
* cold: the wall time of ``tokfst promote TOKENIZER -e REGEX OUT.fst`` as a subprocess with
  the lexicon cache warm (median of --cold-repeat runs), plus one run with an empty cache
  (TOKFST_CACHE = a fresh directory) to show the first-build cost;
* sizes: states and arcs of the result; masks, states_in_shared_masks and
  single_token_states from ``build_index``;
* where the time goes: the steps of ``promote()`` timed one by one (copy+arcsort, compose,
  project, rmepsilon, the all-bytes check, minimize, symbol tables, arc count), and a
  cold-start breakdown per tokenizer: the real CLI in a fresh interpreter with timers around
  its calls (imports, argument parsing, tokenizer load, lexicon read, compile, promote, write,
  interpreter start and exit).

Everything runs against a private cache directory; the user's tokfst cache is not touched.
Output: Markdown tables on stdout (ready to paste into a README); ``--json FILE`` writes all
figures. Run from anywhere with the project's virtualenv active::

    python benchmarks/promote_bench.py --json artifacts/promote_bench.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import pynini

from tokfst_cli import lexicon as lexmod
from tokfst_cli.bench.common import repeat, summary, timed  # noqa: F401 - shared timing helpers
from tokfst_cli.bench.common import version_of as _version
from tokfst_cli import tokenizer as tokmod
from tokfst_cli.index import build_index
from tokfst_cli.promote import count_arcs, covers_all_bytes, promote
from tokfst_cli.regex import compile_regex, parse

ROOT = Path(__file__).resolve().parent.parent
WORDS_FILE = ROOT / "tokfst_cli" / "data" / "words100.txt"
DEFAULT_TOKENIZERS = ("tests/data/llama2.json", "gpt2")
WARM_TARGET_S = 0.1
COLD_TARGET_S = 2.0


# --------------------------------------------------------------------------- inputs

def read_words() -> list[str]:
    words = [w.strip() for w in WORDS_FILE.read_text(encoding="ascii").splitlines() if w.strip()]
    if len(words) != 100 or len(set(words)) != 100:
        sys.exit(f"{WORDS_FILE}: expected 100 distinct words, found {len(words)} ({len(set(words))} distinct)")
    return words


def regexes() -> list[tuple[str, str]]:
    """(pattern, short label for tables) of the six benchmark regexes, in order."""
    words = read_words()
    return [
        (r"([0-9]+)?\.[0-9]+", r"([0-9]+)?\.[0-9]+"),
        (r'\{"name":("John"|"Paul"),"age":(20|30)\}', r'\{"name":("John"|"Paul"),"age":(20|30)\}'),
        (r"[0-9]{4}-[0-9]{2}-[0-9]{2}", r"[0-9]{4}-[0-9]{2}-[0-9]{2}"),
        (r"[a-z0-9._%+-]+@[a-z0-9.-]+\.[a-z]{2,6}", r"[a-z0-9._%+-]+@[a-z0-9.-]+\.[a-z]{2,6}"),
        (r"(Cologne|Berlin|Bonn|Munich)", r"(Cologne|Berlin|Bonn|Munich)"),
        ("(" + "|".join(words) + ")", f"({words[0]}|{words[1]}|…|{words[-1]}) 100 words"),
    ]


def resolve_tokenizer(spec: str) -> tuple[str, str]:
    """(argument for tokfst, short name): bundled names stay names, paths become absolute."""
    if spec in tokmod.BUNDLED and not Path(spec).exists():
        return spec, spec
    for cand in (Path(spec), ROOT / spec):
        if cand.exists():
            return str(cand.resolve()), cand.stem
    sys.exit(f"tokenizer not found: {spec}")


def tokfst_command() -> list[str]:
    exe = Path(sys.executable).with_name("tokfst")
    if exe.exists():
        return [str(exe)]
    found = shutil.which("tokfst")
    return [found] if found else [sys.executable, "-m", "tokfst_cli"]


# --------------------------------------------------------------------------- machine facts

def machine_facts() -> dict[str, Any]:
    cpu = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.lower().startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    try:
        nproc = subprocess.run(["nproc"], capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        nproc = str(len(os.sched_getaffinity(0)))
    return {
        "nproc": nproc,
        "cpu_model": cpu,
        "os": f"{platform.system()} {platform.release()} {platform.machine()}",
        "python": platform.python_version(),
        "pynini": _version("pynini"),
        "pynini_module_version": getattr(pynini, "__version__", "?"),
        "tokenizers": _version("tokenizers"),
        "interegular": _version("interegular"),
        "tokfst": _version("tokfst"),
        "loadavg_start": list(os.getloadavg()),
    }


# --------------------------------------------------------------------------- timing helpers

def peer(automaton_fst: pynini.Fst, lex: pynini.Fst) -> pynini.Fst:
    """The textbook pipeline: compose, project on the output side, remove epsilons, minimize."""
    c = pynini.compose(automaton_fst, lex)
    c.project("output")
    c.rmepsilon()
    c.minimize()
    return c


def promote_stages(model, automaton, lex) -> tuple[dict[str, float], tuple[int, int]]:
    """The steps of ``promote.promote`` timed one by one (same calls, same order)."""
    st: dict[str, float] = {}
    t = time.perf_counter

    t0 = t(); a = automaton.fst.copy().arcsort("olabel"); st["copy_arcsort"] = t() - t0
    t0 = t(); c = pynini.compose(a, lex, connect=True); st["compose"] = t() - t0
    st["compose_states"] = c.num_states()
    t0 = t(); c.project("output"); st["project"] = t() - t0
    t0 = t(); c.rmepsilon(); st["rmepsilon"] = t() - t0
    t0 = t(); minimize = not covers_all_bytes(model); st["covers_all_bytes"] = t() - t0
    t0 = t()
    if minimize:
        c.minimize()
    st["minimize"] = t() - t0
    t0 = t()
    c.set_input_symbols(lex.output_symbols())
    c.set_output_symbols(lex.output_symbols())
    st["symbol_tables"] = t() - t0
    t0 = t(); arcs = count_arcs(c); st["count_arcs"] = t() - t0
    return st, (c.num_states(), arcs)


def median_dicts(dicts: list[dict[str, float]]) -> dict[str, float]:
    return {k: statistics.median(d[k] for d in dicts) for k in dicts[0]}


# --------------------------------------------------------------------------- cold runs

BREAKDOWN = r"""
# The real ``tokfst promote`` (tokfst_cli.cli.main), run in a fresh interpreter with timers
# wrapped around the calls cli/promote.py makes; nothing in the package is changed.
import json, sys, time
t_start = time.perf_counter()
import tokfst_cli.cli as cli  # what the console script imports: typer, rich, pynini, ...
from tokfst_cli.cli import promote as cmd
t_imported = time.perf_counter()
marks = {}

def wrap(owner, name, phase):
    fn = getattr(owner, name, None)
    if fn is None:
        return
    def timed(*a, **k):
        t = time.perf_counter()
        try:
            return fn(*a, **k)
        finally:
            marks.setdefault("first", t)
            marks[phase] = marks.get(phase, 0.0) + time.perf_counter() - t
            marks["last"] = time.perf_counter()
    setattr(owner, name, timed)

wrap(getattr(cmd, "tokmod", None), "load", "tokenizer_load")
wrap(getattr(cmd, "lexicon", None), "lexicon", "lexicon_read")
wrap(cmd, "compile_regex", "compile_regex")
wrap(cmd, "promote", "promote")
wrap(cmd, "write_fst", "write_fst")
sys.argv = ["tokfst", "promote"] + sys.argv[1:]
t_main = time.perf_counter()
try:
    cli.main()
    rc = 0
except SystemExit as e:
    rc = e.code
t_end = time.perf_counter()
if rc not in (0, None):
    sys.exit(f"tokfst promote exited {rc}")
row = {"imports": t_imported - t_start, "cli_dispatch": marks.get("first", t_end) - t_main}
for k in ("tokenizer_load", "lexicon_read", "compile_regex", "promote", "write_fst"):
    row[k] = marks.get(k, 0.0)
row["cli_other"] = (t_end - t_main) - sum(v for k, v in row.items() if k != "imports")
row["in_process"] = t_end - t_start
print(json.dumps(row))
"""


def run_cold(cmd: list[str], env: dict[str, str], cwd: str) -> float:
    t = time.perf_counter()
    p = subprocess.run(cmd, env=env, cwd=cwd, capture_output=True, text=True)
    wall = time.perf_counter() - t
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} exited {p.returncode}: {p.stderr.strip()}")
    return wall


def cold_breakdown(tok_arg: str, pattern: str, env: dict[str, str], work: str, n: int) -> dict[str, float]:
    """The phases of one real ``tokfst promote`` run in a fresh interpreter (median of n)."""
    rows = []
    for i in range(n):
        out = os.path.join(work, f"breakdown-{i}.fst")
        t = time.perf_counter()
        p = subprocess.run([sys.executable, "-c", BREAKDOWN, tok_arg, "-e", pattern, out],
                           env=env, cwd=work, capture_output=True, text=True)
        wall = time.perf_counter() - t
        if p.returncode != 0:
            raise RuntimeError(f"breakdown subprocess failed: {p.stderr.strip()}")
        row = json.loads(p.stdout)
        row["wall"] = wall
        row["startup_and_exit"] = wall - row["in_process"]
        rows.append(row)
    return median_dicts(rows)


# --------------------------------------------------------------------------- formatting

def cell(text: str) -> str:
    return text.replace("|", "\\|")


def ms(s: float) -> str:
    """Milliseconds: two decimals below 1 ms, one below 10 s."""
    return f"{s * 1000:.2f}" if s < 0.001 else f"{s * 1000:.1f}" if s < 10 else f"{s * 1000:.0f}"


def markdown(report: dict[str, Any]) -> str:
    m, rep = report["machine"], report["repetitions"]
    lines = [
        "## tokfst promote benchmark",
        "",
        f"Machine: {m['nproc']} CPUs ({m['cpu_model']}), {m['os']}; Python {m['python']}, "
        f"pynini {m['pynini']}, tokenizers {m['tokenizers']}, interegular {m['interegular']}; "
        f"load average {m['loadavg_start'][0]:.2f} at start, {m['loadavg_end'][0]:.2f} at end.",
        f"Repetitions: warm/index/peer {rep['warm']} timed runs after 1 warm-up (median, min); "
        f"cold {rep['cold']} runs with a warm lexicon cache (median) + 1 run with an empty cache"
        + (f"; cold breakdown {rep['breakdown']} run(s) per tokenizer." if rep["breakdown"] else "."),
        f"Command: `{report['command']}`",
        "",
    ]
    if report["tokenizers"]:
        lines += [
            "| tokenizer | vocab | T states | T arcs | load s | T build s | T build+store s | T cache read s |",
            "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
        ]
        for name, t in report["tokenizers"].items():
            lines.append(f"| {name} | {t['vocab_size']} | {t['lexicon_states']} | {t['lexicon_arcs']} | "
                         f"{t['load_s']:.3f} | {t['lexicon_build_s']:.3f} | {t['lexicon_first_store_s']:.3f} | "
                         f"{t['lexicon_read_s']:.3f} |")
        lines.append("")

    cold = rep["cold"] > 0
    head = ["tokenizer", "#", "regex", "states", "arcs", "masks", "shared", "1-tok",
            "warm ms med (min)", "index ms", "peer ms", "tokfst/peer"]
    align = ["---", "---:", "---", "---:", "---:", "---:", "---:", "---:", "---:", "---:", "---:", "---:"]
    if cold:
        head += ["cold s (cached T)", "cold s (empty cache)"]
        align += ["---:", "---:"]
    lines += ["| " + " | ".join(head) + " |", "| " + " | ".join(align) + " |"]
    for r in report["results"]:
        w, ix = r["warm"], r["index"]
        row = [r["tokenizer"], str(r["no"]), f"`{cell(r['label'])}`", str(r["states"]), str(r["arcs"]),
               str(ix["masks"]), str(ix["states_in_shared_masks"]), str(ix["single_token_states"]),
               f"{ms(w['median'])} ({ms(w['min'])})" + ("" if r["warm_ok"] else " ✗"),
               ms(r["index_time"]["median"]), ms(r["peer"]["median"]), f"{r['ratio_promote_vs_peer']:.2f}"]
        if cold:
            c = r["cold"]
            row += [f"{c['median']:.2f}" + ("" if r["cold_ok"] else " ✗"), f"{c['empty_cache_s']:.2f}"]
        lines.append("| " + " | ".join(row) + " |")
    lines += [
        "",
        "states/arcs: the promoted token acceptor; masks: distinct allowed-token sets in the index; "
        "shared: states whose mask is shared with another state (coalescence); 1-tok: states with "
        "exactly one allowed token. warm: `compile_regex` + `promote` in-process, tokenizer and T "
        "loaded once. index: `build_index` of the result. peer: pynini compose + project + rmepsilon "
        "+ minimize of the same byte automaton against the same T; tokfst/peer = median `promote()` "
        "time (without `compile_regex`) / median peer time. cold: wall time of the whole "
        "`tokfst promote TOKENIZER -e REGEX OUT.fst` process. ✗ = target missed "
        f"(warm <= {WARM_TARGET_S * 1000:.0f} ms, cold <= {COLD_TARGET_S:.0f} s).",
        "",
    ]
    t = report["targets"]
    lines.append(f"Targets: warm <= {WARM_TARGET_S * 1000:.0f} ms met by {t['warm_met']}/{t['n']} "
                 f"(worst {ms(t['warm_worst'])} ms)"
                 + (f"; cold <= {COLD_TARGET_S:.0f} s met by {t['cold_met']}/{t['n']} "
                    f"(worst {t['cold_worst']:.2f} s)." if cold else "; cold not measured."))
    lines.append("")

    # where the time goes, warm
    keys = ["compile", "copy_arcsort", "compose", "project", "rmepsilon", "covers_all_bytes",
            "minimize", "symbol_tables", "count_arcs"]
    lines += [
        "### Warm time by step (median ms)",
        "",
        "The steps of `promote()` replayed one by one with the same calls; `promote()` is the median of "
        "the real function; compile_regex is separate (its interegular parse in parentheses).",
        "",
        "| tokenizer | # | compile_regex (parse) | copy+arcsort | compose (A∘T states) | project | rmepsilon "
        "| all-bytes check | minimize | symbol tables | count_arcs | promote() |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in report["results"]:
        s = r["stages"]
        vals = [f"{ms(s['compile'])} ({ms(s['parse'])})", ms(s["copy_arcsort"]),
                f"{ms(s['compose'])} ({int(s['compose_states'])})"]
        vals += [ms(s[k]) for k in keys[3:]] + [ms(r["promote_time"]["median"])]
        lines.append(f"| {r['tokenizer']} | {r['no']} | " + " | ".join(vals) + " |")
    lines.append("")

    if report.get("cold_breakdown"):
        lines += [
            "### Cold start by phase (median s)",
            "",
            "The real `tokfst promote TOKENIZER -e REGEX OUT.fst` in a fresh interpreter with timers around "
            "the calls it makes. imports: `import tokfst_cli.cli`; CLI dispatch: from `main()` to the "
            "tokenizer load (typer/click parsing, incl. typer's parameter coercion); CLI other: the rest of "
            "`main()` (progress, output handling); startup+exit: the "
            "process wall time not inside `main()` or the imports (interpreter start, teardown). "
            "For scale: `python -c pass` and `tokfst --version`.",
            "",
            "| tokenizer | regex # | `python -c pass` | `tokfst --version` | imports | CLI dispatch | tokenizer load "
            "| T cache read | compile_regex | promote | write | CLI other | startup+exit | total |",
            "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
        ]
        for name, b in report["cold_breakdown"].items():
            lines.append(
                f"| {name} | {b['regex_no']} | {b['python_startup']:.3f} | {b['tokfst_version']:.3f} | "
                f"{b['imports']:.3f} | {b['cli_dispatch']:.3f} | {b['tokenizer_load']:.3f} | {b['lexicon_read']:.3f} | "
                f"{b['compile_regex']:.3f} | {b['promote']:.3f} | {b['write_fst']:.3f} | {b['cli_other']:.3f} | "
                f"{b['startup_and_exit']:.3f} | {b['wall']:.3f} |")
        lines.append("")
    return "\n".join(lines)


# --------------------------------------------------------------------------- main

def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tokenizers", default=",".join(DEFAULT_TOKENIZERS),
                    help="comma-separated tokenizer.json paths or bundled names (default: %(default)s)")
    ap.add_argument("--repeat", type=int, default=None, metavar="N",
                    help="timed warm/index/peer runs per regex (default 7; 3 with --quick)")
    ap.add_argument("--cold-repeat", type=int, default=None, metavar="N",
                    help="cold subprocess runs with a warm cache per regex (default 3; 1 with --quick; 0 = no cold runs)")
    ap.add_argument("--quick", action="store_true", help="fewer repetitions (a smoke run, not for quoting)")
    ap.add_argument("--regexes", default="1,2,3,4,5,6", help="which of the six regexes, e.g. 1,4 (default: all)")
    ap.add_argument("--json", metavar="FILE", help="write all figures to FILE")
    args = ap.parse_args(argv)

    warm_n = args.repeat if args.repeat is not None else (3 if args.quick else 7)
    cold_n = args.cold_repeat if args.cold_repeat is not None else (1 if args.quick else 3)
    if warm_n < 1 or cold_n < 0:
        ap.error("--repeat must be >= 1 and --cold-repeat >= 0")
    breakdown_n = 0 if cold_n == 0 else (1 if args.quick else 3)
    all_regexes = regexes()
    try:
        chosen = [int(x) for x in args.regexes.split(",") if x.strip()]
        assert chosen and all(1 <= i <= len(all_regexes) for i in chosen)
    except (ValueError, AssertionError):
        ap.error(f"--regexes takes numbers 1..{len(all_regexes)}")
    toks = [resolve_tokenizer(s.strip()) for s in args.tokenizers.split(",") if s.strip()]

    started = time.perf_counter()
    report: dict[str, Any] = {
        "machine": machine_facts(),
        "repetitions": {"warm": warm_n, "warmup": 1, "cold": cold_n, "cold_empty_cache": 1 if cold_n else 0,
                        "breakdown": breakdown_n},
        "command": " ".join(["python", "benchmarks/promote_bench.py"] + (argv if argv is not None else sys.argv[1:])),
        "tokfst_command": tokfst_command(),
        "targets_s": {"warm": WARM_TARGET_S, "cold": COLD_TARGET_S},
        "tokenizers": {},
        "results": [],
        "cold_breakdown": {},
    }
    work = tempfile.mkdtemp(prefix="tokfst-bench-")
    cache = os.path.join(work, "cache")
    os.environ["TOKFST_CACHE"] = cache  # in-process lexicon() and warm-cache subprocesses share this
    env = dict(os.environ)
    try:
        for tok_arg, name in toks:
            say(f"[{name}] loading tokenizer and lexicon")
            load_s, model = timed(lambda: tokmod.load(tok_arg))
            build_s, lex_fresh = timed(lambda: lexmod.build(model))
            store_s, _ = timed(lambda: lexmod.lexicon(model))  # empty private cache: build + store
            read_s, lex = timed(lambda: lexmod.lexicon(model))  # from the cache, as the CLI does
            report["tokenizers"][name] = {
                "argument": tok_arg, "fingerprint": model.fingerprint, "vocab_size": model.vocab_size,
                "family": model.family, "style": model.style, "covers_all_bytes": covers_all_bytes(model),
                "load_s": load_s, "lexicon_build_s": build_s, "lexicon_first_store_s": store_s,
                "lexicon_read_s": read_s, "lexicon_states": lex.num_states(), "lexicon_arcs": count_arcs(lex),
            }
            del lex_fresh

            for no in chosen:
                pattern, label = all_regexes[no - 1]
                say(f"[{name}] regex {no}: warm")
                automaton = compile_regex(pattern)  # warm-up
                result = promote(model, automaton, lex)

                def warm_once() -> None:
                    promote(model, compile_regex(pattern), lex)

                warm_runs = repeat(warm_n, warm_once)
                compile_runs = repeat(warm_n, lambda: compile_regex(pattern))
                parse_runs = repeat(warm_n, lambda: parse(pattern))
                promote_runs = repeat(warm_n, lambda: promote(model, automaton, lex))
                index = build_index(result.fst, model, pattern)
                index_runs = repeat(warm_n, lambda: build_index(result.fst, model, pattern))
                peer_fst = peer(automaton.fst, lex)
                peer_runs = repeat(warm_n, lambda: peer(automaton.fst, lex))
                stage_rows = []
                for _ in range(warm_n):
                    st, size = promote_stages(model, automaton, lex)
                    stage_rows.append(st)
                stages = median_dicts(stage_rows)
                stages["compile"] = statistics.median(compile_runs)
                stages["parse"] = statistics.median(parse_runs)
                peer_arcs = count_arcs(peer_fst)
                try:
                    equivalent = bool(pynini.equivalent(result.fst, peer_fst))
                except Exception as e:  # noqa: BLE001 - a benchmark reports, never stops
                    equivalent = f"n/a ({type(e).__name__})"
                entry: dict[str, Any] = {
                    "tokenizer": name, "no": no, "regex": pattern, "label": label,
                    "byte_states": automaton.fst.num_states(),
                    "states": result.states, "arcs": result.arcs, "minimized": result.minimized,
                    "index": index["stats"],
                    "warm": summary(warm_runs),
                    "compile_time": summary(compile_runs),
                    "promote_time": summary(promote_runs),
                    "index_time": summary(index_runs),
                    "peer": summary(peer_runs),
                    "peer_states": peer_fst.num_states(), "peer_arcs": peer_arcs,
                    "peer_equivalent": equivalent,
                    "ratio_promote_vs_peer": statistics.median(promote_runs) / statistics.median(peer_runs),
                    "ratio_warm_vs_peer": statistics.median(warm_runs) / statistics.median(peer_runs),
                    "stages": stages,
                    "stages_match_promote": list(size) == [result.states, result.arcs],
                }
                entry["warm_ok"] = entry["warm"]["median"] <= WARM_TARGET_S
                if (peer_fst.num_states(), peer_arcs) != (result.states, result.arcs) or equivalent is False:
                    say(f"  note: peer gives {peer_fst.num_states()} states/{peer_arcs} arcs, "
                        f"tokfst {result.states}/{result.arcs}, equivalent={equivalent}")

                if cold_n:
                    say(f"[{name}] regex {no}: cold")
                    out = os.path.join(work, f"out-{name}-{no}.fst")
                    cmd = tokfst_command() + ["promote", tok_arg, "-e", pattern, out]
                    cold_runs = [run_cold(cmd, env, work) for _ in range(cold_n)]
                    written = pynini.Fst.read(out)
                    if written.num_states() != result.states:
                        say(f"  note: the CLI wrote {written.num_states()} states, in-process {result.states}")
                    fresh = tempfile.mkdtemp(prefix="empty-cache-", dir=work)
                    empty_s = run_cold(cmd, {**env, "TOKFST_CACHE": fresh}, work)
                    entry["cold"] = {**summary(cold_runs), "empty_cache_s": empty_s, "command": cmd}
                    entry["cold_ok"] = entry["cold"]["median"] <= COLD_TARGET_S
                report["results"].append(entry)

            if breakdown_n:
                worst = max((r for r in report["results"] if r["tokenizer"] == name),
                            key=lambda r: r["cold"]["median"])
                say(f"[{name}] cold-start breakdown (regex {worst['no']})")
                b = cold_breakdown(tok_arg, worst["regex"], env, work, breakdown_n)
                b["regex_no"] = worst["no"]
                b["python_startup"] = statistics.median(
                    run_cold([sys.executable, "-c", "pass"], env, work) for _ in range(breakdown_n))
                b["tokfst_version"] = statistics.median(
                    run_cold(tokfst_command() + ["--version"], env, work) for _ in range(breakdown_n))
                report["cold_breakdown"][name] = b
    finally:
        shutil.rmtree(work, ignore_errors=True)

    res = report["results"]
    report["machine"]["loadavg_end"] = list(os.getloadavg())
    report["targets"] = {
        "n": len(res),
        "warm_met": sum(r["warm_ok"] for r in res),
        "warm_worst": max(r["warm"]["median"] for r in res),
        "cold_met": sum(r.get("cold_ok", False) for r in res),
        "cold_worst": max((r["cold"]["median"] for r in res if "cold" in r), default=0.0),
    }
    report["elapsed_s"] = time.perf_counter() - started
    print(markdown(report))
    say(f"benchmark finished in {report['elapsed_s']:.0f} s")
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
        say(f"wrote {args.json}")
    return 0


def say(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


if __name__ == "__main__":
    sys.exit(main())
