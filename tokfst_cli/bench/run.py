"""One ``tokfst bench`` run: validate the request, train, run the modes, emit the outputs.

:func:`plan` checks a :class:`Request` (plain option values) before anything is measured: a
bad value, an unwritable output, a tokenizer of the wrong family or a bad regex is an
:class:`InputError` carrying a ``hint`` key (the command line adds its flags). :func:`run`
trains the corpus tokenizers a mode needs and runs the modes, reporting progress through
``say``; :func:`emit` prints the tables on a rich Console and hands the JSON and CSV bytes to
``write(target, data)``; it raises when an internal check failed.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from tokfst_cli.bench import common, report
from tokfst_cli.bench.batch import batch_table
from tokfst_cli.bench.canonical import canonical_table
from tokfst_cli.bench.check import REGEXES, check_table
from tokfst_cli.bench.compile import compile_table
from tokfst_cli.bench.corpus import load_corpus, paragraph, train
from tokfst_cli.bench.encode import encode_tables
from tokfst_cli.bench.filters import filters_table
from tokfst_cli.bench.grammars import grammars_table
from tokfst_cli.bench.inspect import inspect_table
from tokfst_cli.bench.limits import limits_tables
from tokfst_cli.bench.logits import logits_table
from tokfst_cli.bench.masks import default_regexes, masks_table
from tokfst_cli.bench.maxmatch import maxmatch_table
from tokfst_cli.bench.peers import peers_table
from tokfst_cli.bench.promote import promote_table
from tokfst_cli.bench.promotion import METHODS, table1
from tokfst_cli.bench.ready import ready_table
from tokfst_cli.bench.report import check_plot_target
from tokfst_cli.bench.size import table2
from tokfst_cli.bench.terminals import PATTERNS, terminals_table
from tokfst_cli.bench.tokenization import paragraph_table
from tokfst_cli.errors import InputError, TokfstError
from tokfst_cli.text.catalogue import catalogue, read_regex_file
from tokfst_cli.text.regex import compile_regex
from tokfst_cli.tokenizer import model as tokmod

PAPER = ("table1", "table2", "paragraph", "peers", "masks")  # what "all" runs: the paper's tables and the peers
MODES = PAPER + ("promote", "canonical", "maxmatch", "check", "compile", "logits", "ready", "filters", "inspect",
                 "terminals", "grammars", "encode", "limits", "batch")
CORPUS_MODES = {"table1", "table2", "paragraph"}  # train BPE tokenizers on the corpus
PLOTTED = {"table1", "table2", "paragraph"}  # modes with a scaling table
FAMILY = {"table2": "bpe", "paragraph": "bpe", "peers": "bpe", "masks": "bpe", "canonical": "bpe",
          "maxmatch": "wordpiece", "promote": None, "check": None, "compile": "bpe", "logits": None,
          "ready": None, "filters": None, "inspect": "bpe",
          "terminals": None, "grammars": None, "encode": "bpe",
          "limits": None, "batch": None}  # of the --tokenizer tokenizers; table1 uses none


@dataclass
class Request:
    """The options of one run, as given (see ``tokfst bench --help``)."""

    mode: str
    corpus: str | None = None
    vocab_sizes: str = "4000,8000,16000,32000"
    words: int = 100
    methods: str = "eq4,eq5,implicit"
    repeat: int = 3
    cold_repeat: int = 3
    timeout: float = 600.0
    tokenizer: list[str] = field(default_factory=list)
    regex: list[str] = field(default_factory=list)
    regex_file: str | None = None
    named: str | None = None
    trials: int = 100
    paragraph_chars: int = 1200
    steps: int | None = None  # masks: at most this many tokens of each walk (None: all)
    evict_each_step: bool = False  # masks: cold caches before every step, not only before each walk
    encode_mb: float = 1.0  # encode: megabytes per corpus
    max_log: int = 20  # encode: the longest pathological run is 2^max_log characters
    patterns: int = 40  # limits: generated patterns after the pinned ones
    batch_inputs: int = 1000  # batch: small regexes compiled by compile-batch
    max_arcs: int = 50_000_000
    lines: int = 20_000
    rss_mb: str = "10,100"
    json_out: str | None = None
    csv_out: str | None = None
    plot: str | None = None


@dataclass
class Plan:
    request: Request
    modes: list[str]
    sizes: list[int]
    methods: tuple[str, ...]
    tokenizers: list[tuple[str, str, bool]]  # (name, path, trained) of --tokenizer
    regexes: dict[str, str] | None  # None: each mode's default set


# ---- validation ---------------------------------------------------------------------------------
def vocab_sizes(text: str) -> list[int]:
    try:
        sizes = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise InputError(f"vocabulary sizes {text!r}: not a list of integers", "e.g. 4000,8000",
                         hint="bench-vocab-sizes") from None
    if not sizes or any(v <= 256 for v in sizes):
        raise InputError(f"vocabulary sizes {text!r}: sizes must be above 256 (the byte alphabet)", "e.g. 4000,8000",
                         hint="bench-vocab-sizes")
    return sorted(set(sizes))


def rss_sizes(text: str) -> list[int]:
    try:
        sizes = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        sizes = []
    if not sizes or any(v < 1 for v in sizes):
        raise InputError(f"input sizes {text!r}: not a list of positive integers (MB)", "e.g. 10,100")
    return sizes


def methods(text: str) -> tuple[str, ...]:
    got = tuple(m.strip() for m in text.split(",") if m.strip())
    bad = [m for m in got if m not in METHODS]
    if bad or not got:
        raise InputError(f"table1 methods {text!r}: unknown method {', '.join(bad) or '(none)'}",
                         f"choose from {','.join(METHODS)}", hint="bench-methods", allowed=",".join(METHODS))
    return tuple(m for m in METHODS if m in got)


def tokenizers(specs: list[str], family: str | None, used: bool) -> list[tuple[str, str, bool]]:
    """(name, path, trained) per spec; when a mode uses them, each is read now (a malformed one,
    or one of the wrong family, is a usage error before anything is trained or measured)."""
    out = []
    for spec in specs:
        path = tokmod.resolve_path(spec)
        name = spec if spec in tokmod.BUNDLED and not Path(spec).exists() else path.stem
        if used:
            common.load_model(str(path), family)
        out.append((name, str(path), False))
    return out


def output_target(what: str, path: str | None) -> None:
    """Refuse an output target that could only fail after the whole run."""
    if path in (None, "-"):
        return
    p = Path(path)
    if p.is_dir():
        raise InputError(f"the {what} output {path} is a directory", "give a file name", hint="bench-output",
                         output=what)
    parent = p.absolute().parent
    while not parent.exists():
        parent = parent.parent
    if not parent.is_dir() or not os.access(parent, os.W_OK | os.X_OK):
        raise InputError(f"the {what} output {path}: cannot write in {parent}", "check the directory and permissions")


def regexes(patterns: list[str], regex_file: str | None, named: str | None) -> dict[str, str] | None:
    """name -> pattern of the chosen regexes (catalogue names first), None for the defaults."""

    known = catalogue()
    out: dict[str, str] = {}
    for n in (x.strip() for x in (named or "").split(",")):
        if n and n not in known:
            raise InputError(f"no regex named {n!r} in the catalogue", f"choose from {','.join(known)}",
                             hint="bench-named", allowed=",".join(known))
        if n:
            out[n] = known[n]
    pats = list(patterns) + (read_regex_file(regex_file) if regex_file else [])
    if not out and not pats:
        return None
    for i, p in enumerate(pats, 1):
        compile_regex(p)  # a bad pattern is a usage error, before anything is measured
        name = p if len(p) <= 30 else p[:29] + "…"
        out[name if name not in out else f"{name} #{i}"] = p
    return out


def plan(req: Request) -> Plan:
    """The checked request (InputError for anything that would only fail later)."""
    modes = list(PAPER) if req.mode == "all" else [req.mode]
    if req.plot is not None:
        if not PLOTTED & set(modes):
            raise InputError(f"{req.mode} has no scaling table to plot",
                             "plot table1, table2, paragraph or all", hint="bench-plot")

        check_plot_target(req.plot)
    for what, target in (("json", req.json_out), ("csv", req.csv_out), ("plot", req.plot)):
        output_target(what, target)
    if not math.isfinite(req.timeout):
        raise InputError(f"a timeout of {req.timeout} s: give a finite number of seconds", "e.g. 600",
                         hint="bench-timeout")
    sizes, chosen = vocab_sizes(req.vocab_sizes), methods(req.methods)
    families = {FAMILY[m] for m in modes if m in FAMILY}
    extra = tokenizers(req.tokenizer or ["gpt2"], next(iter(families)) if len(families) == 1 else "bpe",
                       used=bool(families))
    wants_regexes = {"peers", "masks", "promote", "canonical", "maxmatch", "check", "logits", "ready", "filters",
                     "terminals", "inspect"} & set(modes)
    if "check" in modes:
        rss_sizes(req.rss_mb)
    patterns = regexes(req.regex, req.regex_file, req.named) if wants_regexes else None
    return Plan(req, modes, sizes, chosen, extra, patterns)


# ---- the run ------------------------------------------------------------------------------------
def regex_set(mode: str, chosen: dict[str, str] | None) -> dict[str, str]:
    from tokfst_cli.text import catalogue  # deferred: start-up: only this path needs it

    if chosen is not None:
        return chosen
    if mode == "check":
        return dict(REGEXES)
    if mode == "masks":
        return default_regexes()
    if mode == "inspect":
        return {"pokedex": catalogue.POKEDEX}
    return {"promote": catalogue.six, "canonical": catalogue.six, "logits": catalogue.six, "ready": catalogue.six,
            "maxmatch": catalogue.maxmatch_set}.get(mode, catalogue.default_set)()


def settings(p: Plan) -> dict:
    r = p.request
    out = {"repeat": r.repeat, "timeout_s": r.timeout, "vocab_sizes": p.sizes, "words": r.words,
           "methods": list(p.methods), "tokenizers": [path for _, path, _ in p.tokenizers], "trials": r.trials,
           "paragraph_chars": r.paragraph_chars, "steps": r.steps, "evict_each_step": r.evict_each_step,
           "max_arcs": r.max_arcs}
    if {"promote", "maxmatch"} & set(p.modes):
        out["cold_repeat"] = r.cold_repeat
    if "check" in p.modes:
        out.update(lines=r.lines, rss_mb=rss_sizes(r.rss_mb))
    if p.regexes is not None:
        out["regexes"] = p.regexes
    return out


def run(p: Plan, say: Callable[[str], None], verbose: bool) -> dict:
    """Train what the modes need, run them, and return the result document."""
    r, want = p.request, set(p.modes)
    progress = common.Progress(verbose, say)
    started, machine = time.time(), common.machine_facts()
    conf = settings(p)
    results = common.Results()
    trained: list[tuple[str, str, bool]] = []
    corp = text = None
    if want & CORPUS_MODES:
        corp = load_corpus(r.corpus)
        conf["corpus"] = corp.describe()
        if "paragraph" in want:  # a corpus without a prose paragraph fails now, not after the other tables
            text = paragraph(corp, r.paragraph_chars)
        for v in p.sizes:
            path, fresh = train(corp, v)
            progress(f"tokenizer {v}: {'trained' if fresh else 'cached'} ({path})")
            trained.append((f"corpus-{v}", str(path), True))
    for mode in p.modes:
        results.extend(run_mode(mode, p, corp, text, trained, progress))
    return common.document(r.mode, conf, results, started, machine)


def run_mode(mode: str, p: Plan, corp, text: str | None, trained: list, progress) -> common.Results:
    r, extra = p.request, p.tokenizers
    if mode == "table1":
        return table1(corp, p.sizes, r.words, r.repeat, r.timeout, r.max_arcs, progress, p.methods)
    if mode == "table2":
        return table2(trained + extra, r.max_arcs, r.repeat, progress)
    if mode == "paragraph":
        return paragraph_table(text, trained + extra, r.repeat, r.trials, r.max_arcs, progress)
    if mode == "peers":
        return peers_table(extra, regex_set(mode, p.regexes), r.repeat, progress)
    if mode == "masks":
        return masks_table(extra, regex_set(mode, p.regexes), r.repeat, r.steps, progress, r.evict_each_step)
    if mode == "promote":
        return promote_table(extra, regex_set(mode, p.regexes), r.repeat, r.cold_repeat, progress)
    if mode == "canonical":
        return canonical_table(extra, regex_set(mode, p.regexes), r.repeat, progress)
    if mode == "maxmatch":
        return maxmatch_table(extra, regex_set(mode, p.regexes), r.repeat, r.cold_repeat, progress)
    if mode == "check":
        return check_table(extra, regex_set(mode, p.regexes), r.lines, rss_sizes(r.rss_mb), r.repeat, progress)
    if mode == "compile":
        return compile_table(extra, r.repeat, progress)
    if mode == "logits":
        return logits_table(extra, regex_set(mode, p.regexes), r.repeat, progress)
    if mode == "ready":
        return ready_table(extra, regex_set(mode, p.regexes), r.repeat, progress)
    if mode == "inspect":
        return inspect_table(extra, regex_set(mode, p.regexes), r.repeat, progress)
    if mode == "filters":
        return filters_table(extra, regex_set(mode, p.regexes), r.repeat, progress)
    if mode == "terminals":
        return terminals_table(extra, p.regexes or PATTERNS, r.repeat, progress)
    if mode == "grammars":
        return grammars_table(extra, r.repeat, r.steps, progress)
    if mode == "encode":
        return encode_tables(extra, r.repeat, r.corpus, r.encode_mb, r.max_log, progress)
    if mode == "limits":
        return limits_tables(extra, r.patterns, r.timeout, progress)
    if mode == "batch":
        return batch_table(extra, r.batch_inputs, r.repeat, progress)
    raise ValueError(f"unknown bench mode {mode}")


# ---- outputs ------------------------------------------------------------------------------------
def emit(doc: dict, p: Plan, console, write: Callable[[str, bytes], None]) -> None:
    """Tables on ``console``, the JSON and CSV through ``write``, the plot; raise if a check failed."""
    r = p.request
    report.print_tables(doc, console)
    if r.json_out is not None:
        write(r.json_out, report.json_bytes(doc))
    if r.csv_out is not None:
        write(r.csv_out, report.csv_bytes(doc))
    if r.plot is not None and not report.write_plot(r.plot, doc):
        raise TokfstError(f"nothing to plot into {r.plot}", "the scaling tables have no finished figures")
    failed = [c for c in doc["checks"] if c["passed"] is False]
    if failed:
        raise TokfstError(f"{len(failed)} equivalence check(s) failed, first: {failed[0]['name']}",
                          "see the report; this is a bug in tokfst")
