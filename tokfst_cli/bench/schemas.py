"""``tokfst bench schemas DIR``: real-world JSON Schemas, tokfst vs outlines-core, llguidance and xgrammar.

Per ``*.json`` file of DIR (sorted; ``limit``: the first N) and tokenizer, ``repeat`` timed runs each:

    tokfst         ``schema.compile_schema`` (schema -> byte DFA), then agnostic promotion
                   (``pipeline.build(model, name, automaton=..., terminals=...)``, default limits,
                   the lexicon T loaded once): time, states, arcs, the most arcs of one state;
                   then the walk: HF's tokenization of the longest of ten random texts of the
                   byte DFA (``pynini.randgen``, seeds 0-9; none within 4096 bytes: a walk
                   steered to a final state after 2048 bytes), followed by a fresh
                   ``Result.decoder()`` per timed walk: the packed mask at each state reached for
                   the first time, median; and the lazy decoder of the byte DFA
                   (``lazy.LazyDecoder``: no promotion): ready (decoder + first mask), the
                   median mask at the same walk's fresh states, a new decoder per walk, and
                   its artifact (``promote --format lazy``): size, and ``constraint.load`` of
                   the file + the first mask
    outlines-core  ``build_regex_from_schema(text, whitespace_pattern="")`` + ``Index(regex, Vocabulary)``
    llguidance     ``LLMatcher.grammar_from_json_schema`` (no flexible whitespace) + ``LLMatcher``
                   (an error state is an error; masks are computed lazily, later)
    xgrammar       ``GrammarCompiler.compile_json_schema`` (compact separators, no free whitespace,
                   not strict: the schema's own additionalProperties), the compiler's cache disabled

Every engine runs in worker processes (:mod:`.schema_workers`, on ``compile-batch``'s local
pool, one worker at a time): a time limit per stage of each file (``tokfst_timeout`` for
tokfst, ``timeout`` for the peers) and a memory cap. Status
per file and engine: compiled, refused (tokfst's InputError while compiling the schema: a
keyword, a remote ``$ref``, a pattern), limit (LimitError), memory (the worker died at its
cap), error (anything else, e.g. a peer refusing the schema) or timeout. The summary counts
them per engine, with the median and p95 time over the files the engine compiled, and the
peer/tokfst ratios over the files both compiled.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from tokfst_cli.bench import common, run
from tokfst_cli.bench.common import Results, Table
from tokfst_cli.bench.engines import LLGUIDANCE, MISSING, OUTLINES, PEERS, XGRAMMAR
from tokfst_cli.bench.run import output_target, tokenizers
from tokfst_cli.bench.schema_workers import MAX_MEMORY, TOKFST, run_engine
from tokfst_cli.errors import InputError

STATUSES = ("compiled", "refused", "limit", "memory", "error", "timeout")
TIMEOUT, TOKFST_TIMEOUT = 20.0, 120.0  # seconds per stage of one file: peers, tokfst


@dataclass
class Request:
    """The options of one ``tokfst bench schemas`` run (see ``tokfst bench --help``)."""

    directory: str
    tokenizer: list[str] = field(default_factory=list)
    peers: bool | tuple[str, ...] = True  # True: every peer of ``engines.PEERS``; or those named
    repeat: int = 1
    timeout: float = TIMEOUT
    tokfst_timeout: float = TOKFST_TIMEOUT
    limit: int | None = None
    terminals: bool = True  # tokfst's promotion with terminal labels, as ``tokfst promote --schema``
    json_out: str | None = None
    csv_out: str | None = None


def schema_files(directory: str, limit: int | None = None) -> list[Path]:
    """The ``*.json`` files of ``directory``, sorted, the first ``limit``; InputError if none."""
    d = Path(directory)
    if not d.is_dir():
        raise InputError(f"{directory} is not a directory", "give a directory of JSON Schema files (*.json)",
                         hint="bench-schemas-dir")
    files = sorted(p for p in d.glob("*.json") if p.is_file())
    if not files:
        raise InputError(f"{directory} has no *.json file", "give a directory of JSON Schema files (*.json)",
                         hint="bench-schemas-dir")
    return files[:limit] if limit else files


CELLS = {"compile": "compile", "lazy": "lazy", "promotion": "promote", "walk": "mask"}  # a stage -> its timing cell


def cell_of(got: dict, key: str, limit: float) -> dict | None:
    """The timing cell ``key`` of an engine's report; where its stage failed, a timeout or error
    cell (a refusal or a limit: none, the status says it)."""
    if key in got:
        return got[key]
    if CELLS.get(got.get("stage")) != key or got["status"] in ("refused", "limit"):
        return None
    return common.timeout(limit) if got["status"] == "timeout" else common.error(got.get("detail") or "")


def merge(name: str, path: Path, tok: dict, peers: dict[str, dict | None], limits: dict[str, float]) -> dict:
    """One table row: tokfst's report, then each peer's cell and status."""
    row = {"tokenizer": name, "schema": path.stem, "bytes": path.stat().st_size,
           **{k: tok.get(k) for k in ("status", "stage", "reason", "detail", "refusal", "byte_states", "states",
                                      "arcs", "max_out", "walk_bytes", "steps", "fresh", "load", "walk_accepted",
                                      "lazy_accepted", "lazy_bytes", "lazy_load_same")}}
    for key in ("compile", "lazy", "promote", "mask"):
        row[key] = cell_of(tok, key, limits[TOKFST])
    row["lazy_mask"], row["lazy_load"] = tok.get("lazy_mask"), tok.get("lazy_load")
    others = []
    for peer, got in peers.items():
        if got is None:
            row[peer], row[f"{peer}_status"] = common.skipped(f"{peer} {MISSING}"), "skipped"
            continue
        row[peer] = cell_of(got, "compile", limits[peer])
        row[f"{peer}_status"], row[f"{peer}_detail"] = got["status"], got.get("detail")
        if got["status"] != "compiled":
            why = f" ({got['reason'][:50]})" if got["status"] != "timeout" else ""
            others.append(f"{peer}: {got['status']}{why}")
    row["peers"] = "; ".join(others)
    return row


def p95(xs: list[float]) -> float:
    return float(np.percentile(xs, 95))


def coverage(rows: list[dict], engine: str, status: Callable[[dict], str],
             seconds: Callable[[dict], float | None]) -> dict:
    """One summary row: counts per status, median and p95 of ``seconds`` over the compiled files."""
    got = [status(r) for r in rows]
    times = [seconds(r) for r, s in zip(rows, got) if s == "compiled"]
    times = [t for t in times if t is not None]
    out = {"tokenizer": rows[0]["tokenizer"], "engine": engine, "schemas": len(rows),
           **{s: got.count(s) for s in STATUSES}}
    if times:
        out.update(median=common.ok([statistics.median(times)]), p95=common.ok([p95(times)]))
    return out


def tokfst_bytes(r: dict) -> str:
    return "compiled" if common.median_of(r.get("compile")) is not None else r["status"]


def tokfst_total(r: dict) -> float | None:
    a, b = common.median_of(r.get("compile")), common.median_of(r.get("promote"))
    return a + b if a is not None and b is not None else None


def lazy_status(r: dict) -> str:
    if tokfst_bytes(r) != "compiled":
        return tokfst_bytes(r)
    return "compiled" if common.median_of(r.get("lazy")) is not None else "error"


def lazy_total(r: dict) -> float | None:
    a, b = common.median_of(r.get("compile")), common.median_of(r.get("lazy"))
    return a + b if a is not None and b is not None else None


def lazy_file_status(r: dict) -> str:
    if lazy_status(r) != "compiled":
        return lazy_status(r)
    return "compiled" if common.median_of(r.get("lazy_load")) is not None else "error"


LEVELS = {"schema -> bytes": (tokfst_bytes, lambda r: common.median_of(r.get("compile"))),
          "schema -> tokens": (lambda r: r["status"], tokfst_total),
          "schema -> lazy": (lazy_status, lazy_total),
          "lazy artifact -> ready": (lazy_file_status, lambda r: common.median_of(r.get("lazy_load")))}


def summaries(rows: list[dict], peers: list[str]) -> tuple[list[dict], list[dict]]:
    """Coverage rows (tokfst at both levels, each peer) and the peer/tokfst ratio rows."""
    cover = [coverage(rows, f"tokfst {lvl}", *fns) for lvl, fns in LEVELS.items()]
    ratios = []
    for peer in peers:
        cover.append(coverage(rows, peer, lambda r: r[f"{peer}_status"], lambda r: common.median_of(r.get(peer))))
        for lvl, (status, seconds) in LEVELS.items():
            both = [(common.median_of(r.get(peer)), seconds(r)) for r in rows
                    if r[f"{peer}_status"] == "compiled" and status(r) == "compiled"]
            both = [(p, t) for p, t in both if p is not None and t]
            row = {"tokenizer": rows[0]["tokenizer"], "peer": peer, "tokfst": f"tokfst {lvl}", "both": len(both)}
            if both:
                ps, ts = zip(*both)
                row.update(peer_median=common.ok([statistics.median(ps)]),
                           tokfst_median=common.ok([statistics.median(ts)]),
                           ratio=statistics.median(ps) / statistics.median(ts),
                           ratio_median=statistics.median(p / t for p, t in both))
            ratios.append(row)
    return cover, ratios


# ---- the run --------------------------------------------------------------------------------------------
ROW_COLUMNS = [("tokenizer", "tokenizer", "text"), ("schema", "schema", "text"), ("bytes", "size", "bytes"),
               ("status", "tokfst", "text"), ("reason", "why", "text"), ("compile", "schema -> bytes", "time"),
               ("byte_states", "byte states", "int"), ("lazy", "lazy ready", "time"),
               ("lazy_mask", "lazy mask median", "time"), ("lazy_bytes", "lazy artifact", "bytes"),
               ("lazy_load", "lazy load", "time"), ("promote", "promotion", "time"), ("states", "states", "int"),
               ("arcs", "arcs", "int"), ("max_out", "max arcs/state", "int"), ("steps", "walk tokens", "int"),
               ("fresh", "fresh states", "int"), ("mask", "mask median", "time"), (OUTLINES, "outlines-core", "time"),
               (LLGUIDANCE, "llguidance", "time"), (XGRAMMAR, "xgrammar", "time"),
               ("peers", "peers not compiled", "text")]
SUMMARY_COLUMNS = [("tokenizer", "tokenizer", "text"), ("engine", "engine", "text"), ("schemas", "schemas", "int"),
                   *((s, s, "int") for s in STATUSES), ("median", "median (compiled)", "time"),
                   ("p95", "p95 (compiled)", "time")]
RATIO_COLUMNS = [("tokenizer", "tokenizer", "text"), ("peer", "peer", "text"), ("tokfst", "vs", "text"),
                 ("both", "both compiled", "int"), ("peer_median", "peer median", "time"),
                 ("tokfst_median", "tokfst median", "time"), ("ratio", "peer/tokfst (medians)", "ratio"),
                 ("ratio_median", "median of peer/tokfst", "ratio")]


def plan(req: Request) -> tuple[list[Path], list[tuple[str, str, bool]]]:
    """The files and tokenizers of a request, checked before anything runs (InputError)."""
    for what, target in (("json", req.json_out), ("csv", req.csv_out)):
        output_target(what, target)
    return schema_files(req.directory, req.limit), tokenizers(req.tokenizer or ["gpt2"], None, used=True)


def schemas_table(req: Request, progress) -> Results:
    files, toks = plan(req)
    peers = list(PEERS) if req.peers is True else [p for p in PEERS if p in (req.peers or ())]
    limits = {TOKFST: req.tokfst_timeout, **{p: req.timeout for p in PEERS}}
    res = Results()
    rows, cover, ratios, setup = [], [], [], {}
    for name, path, _ in toks:
        got, setup[name] = {}, {}
        for engine in [TOKFST, *peers]:
            if engine != TOKFST and common.version_of(engine) == "not installed":
                got[engine] = None
                continue
            progress(f"schemas: {name}: {engine} on {len(files)} files ...")
            got[engine], setup[name][engine] = run_engine(engine, path, files, req.repeat, limits[engine], progress,
                                                          req.terminals)
        mine = [merge(name, p, got[TOKFST].get(p.name, {}), {e: (got[e] or {}).get(p.name, {}) if got[e] is not None
                                                             else None for e in peers}, limits) for p in files]
        for r in mine:
            if r["status"] == "compiled" and r.get("walk_accepted") is not None:
                res.check(f"schemas {name} {r['schema']}: a fresh decoder accepts a walk of its own automaton",
                          r["walk_accepted"], f"{r['steps']} tokens of a {r['walk_bytes']}-byte text")
            if r.get("lazy_accepted") is not None:
                res.check(f"schemas {name} {r['schema']}: a fresh lazy decoder accepts the walk", r["lazy_accepted"])
            if r.get("lazy_load_same") is not None:
                res.check(f"schemas {name} {r['schema']}: the loaded lazy artifact's first mask is the decoder's",
                          r["lazy_load_same"])
        rows += mine
        c, q = summaries(mine, peers)
        cover += c
        ratios += q
    inputs = {"directory": str(Path(req.directory)), "files": [p.name for p in files], "setup_s": setup,
              "timeouts_s": limits, "max_memory_bytes": MAX_MEMORY}
    columns = [c for c in ROW_COLUMNS if c[0] not in PEERS or c[0] in peers]
    table = Table("schemas", "JSON Schemas: compile time and coverage, tokfst vs peers", req.repeat, columns, rows,
                  inputs=inputs)
    table.notes += notes(req, peers)
    summary = Table("schemas-summary", "JSON Schemas: coverage and compile time per engine", req.repeat,
                    SUMMARY_COLUMNS, cover)
    summary.notes.append("tokfst schema -> bytes: compile_schema alone (its statuses; the rest of the chain left "
                         "out); schema -> tokens: compile_schema + agnostic promotion (compiled = both done); "
                         "schema -> lazy: "
                         "compile_schema + the lazy decoder and its first mask (no promotion); lazy artifact -> ready: "
                         "constraint.load of the schema's lazy artifact (promote --format lazy, compiled ahead) + the "
                         "first mask. median, p95: over the schemas that engine compiled "
                         "(each a median of the repeats).")
    res.tables += [table, summary]
    if peers:
        res.tables.append(Table("schemas-ratios", "JSON Schemas: peer / tokfst compile time on the schemas both "
                                "compiled", req.repeat, RATIO_COLUMNS, ratios,
                                notes=["Above 1: tokfst is faster. peer/tokfst (medians): the peer's median over "
                                       "tokfst's median on the same schemas; median of peer/tokfst: per schema."]))
    return res


def notes(req: Request, peers: list[str]) -> list[str]:
    labels = "with terminal labels (each one arc)" if req.terminals else "without terminal labels"
    out = [
        "tokfst: schema -> bytes is compile_schema (compact whitespace, stable key order, max_depth 3); promotion is "
        f"pipeline.build's agnostic promotion of that automaton, {labels}, default limits; states, arcs, max "
        "arcs/state: the token automaton. walk: HF's tokenization of the longest of ten random texts of the byte "
        "DFA (pynini.randgen, seeds 0-9; when none is within 4096 bytes, a walk of the DFA steered to a final "
        "state after 2048 bytes); mask median: the packed mask at each state the walk reaches for the "
        "first time (fresh states), a fresh Result.decoder() per walk. why: tokfst's refusal (keyword, remote "
        "$ref, pattern), or the stage and the limit it met. lazy ready: lazy.LazyDecoder of the byte DFA + its "
        "first mask (no promotion); lazy mask median: the same walk's fresh states, a new lazy decoder per walk, "
        "each mask a walk of the token trie; lazy artifact: the size of the byte DFA's lazy artifact (promote "
        "--format lazy); lazy load: constraint.load of that file + the first mask.",
        "Peers, compile only: outlines-core build_regex_from_schema (whitespace_pattern='') + Index; llguidance "
        "grammar_from_json_schema (whitespace_flexible false) + LLMatcher (lazy: masks are computed later, at "
        "decoding); xgrammar compile_json_schema (any_whitespace false, separators ',' ':', strict_mode false), "
        "cache disabled. A peer's error is any exception or error state (often an unsupported keyword).",
        f"Every engine runs in worker processes, one file after another, each with its address space capped at "
        f"{MAX_MEMORY >> 30} GiB more than after its set-up (tokfst's: the tokenizer, T's layout and the compiled "
        f"kernels, a lazy decoder's first mask; memory: the worker died there); every stage of every "
        f"file has {req.tokfst_timeout:g} s (tokfst) or {req.timeout:g} s (peers). Figures: medians of {req.repeat} "
        "run(s).",
    ]
    return out if peers else out[::2]


def document(req: Request, say: Callable[[str], None], verbose: bool) -> dict:
    """Run the bench (see the module docstring) and return the result document."""
    started, machine = time.time(), common.machine_facts()
    results = schemas_table(req, common.Progress(verbose, say))
    settings = {"directory": req.directory, "tokenizers": req.tokenizer or ["gpt2"], "peers": req.peers,
                "repeat": req.repeat, "timeout_s": req.timeout, "tokfst_timeout_s": req.tokfst_timeout,
                "limit": req.limit, "terminals": req.terminals}
    return common.document("schemas", settings, results, started, machine)


def emit(doc: dict, req: Request, console, write: Callable[[str, bytes], None]) -> None:
    """As ``run.emit``: the tables, the JSON and CSV, and an error if a check failed."""
    plan_ = run.Plan(run.Request("schemas", json_out=req.json_out, csv_out=req.csv_out), ["schemas"], [], (), [],
                     None)
    run.emit(doc, plan_, console, write)
