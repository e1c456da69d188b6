"""``tokfst bench``: parse, then :mod:`tokfst_cli.bench.run` (help: ``helptext.BENCH``)."""

from __future__ import annotations

from enum import Enum
from pathlib import Path
from typing import Optional

import typer

from tokfst_cli.cli.output import OUT


class Mode(str, Enum):
    table1 = "table1"
    table2 = "table2"
    paragraph = "paragraph"
    peers = "peers"
    masks = "masks"
    promote = "promote"
    canonical = "canonical"
    maxmatch = "maxmatch"
    check = "check"
    compile = "compile"
    logits = "logits"
    ready = "ready"
    filters = "filters"
    inspect = "inspect"
    schemas = "schemas"
    terminals = "terminals"
    grammars = "grammars"
    encode = "encode"
    limits = "limits"
    batch = "batch"
    all = "all"
    report = "report"


MODE = typer.Argument(..., metavar="MODE",
                      help="table1, table2, paragraph, peers, masks, promote, canonical, maxmatch, check, compile, "
                           "logits, ready, filters, inspect, schemas, terminals, grammars, encode, limits, batch, or "
                           "all; "
                           "report renders results.")
CORPUS = typer.Option(None, "--corpus", metavar="PATH",
                      help="Training text: a file, or a directory of *.txt files "
                           "[default: /usr/share/doc/python3.11/html/_sources].")
VOCAB_SIZES = typer.Option("4000,8000,16000,32000", "--vocab-sizes", metavar="N,N,...",
                           help="Vocabulary sizes of the BPE tokenizers trained on the corpus.")
WORDS = typer.Option(100, "--words", min=1, metavar="N", help="table1: words of the edit-distance-one automaton.")
METHODS = typer.Option("eq4,eq5,implicit", "--methods", metavar="M,M,...",
                       help="table1: the methods (columns) to run: eq4, eq5, implicit.")
REPEAT = typer.Option(None, "--repeat", min=1, metavar="N",
                      help="Timed runs per figure (medians; at least 3, schemas: at least 1) [default: 3; schemas: 1].")
COLD_REPEAT = typer.Option(3, "--cold-repeat", min=0, metavar="N",
                           help="promote, maxmatch: runs of a whole tokfst process per figure (promote per regex, and "
                                "its cold-start breakdown; compile-maxmatch); 0 = none.")
TIMEOUT = typer.Option(None, "--timeout", min=0.001, metavar="SECONDS",
                       help="table1: limit per cell for its timed runs (and again for its precomputation); a cell over "
                            "it reports >T [default: 600]. schemas: limit per peer call [default: 20]. limits: a "
                            "promote process is killed after it [default: 60].")
TOKENIZER = typer.Option(None, "--tokenizer", metavar="TOKENIZER",
                         help="A tokenizer.json or bundled name, repeatable: the tokenizer of peers, masks, "
                              "promote, canonical, compile, logits, ready, filters, inspect and terminals "
                              "(maxmatch: a WordPiece one), and an "
                              "extra row in table2 and paragraph [default: gpt2].")
REGEX = typer.Option(None, "-e", "--regex", metavar="REGEX",
                     help="peers, masks, promote, canonical, maxmatch, logits, ready, filters, inspect: a regex, "
                          "repeatable (replaces the default set).")
REGEX_FILE = typer.Option(None, "-f", "--regex-file", metavar="FILE",
                          help="Regexes, one per line (replaces the default set).")
NAMED = typer.Option(None, "--named", metavar="NAME,...",
                     help="Regexes of the catalogue by name (decimal, json, date, email, cities, words100, pokedex, "
                          "words4, punct, accents), replacing the default set; with -e/-f, before them.")
TRIALS = typer.Option(100, "--trials", min=1, metavar="N", help="paragraph: tokenizations per timed run.")
PARAGRAPH_CHARS = typer.Option(1200, "--paragraph-chars", min=1, metavar="N",
                               help="paragraph: pick the corpus paragraph closest to this length.")
STEPS = typer.Option(None, "--steps", min=1, metavar="N",
                     help="masks: at most N tokens of each regex's walk [default: the whole sample].")
EVICT_EACH_STEP = typer.Option(False, "--evict-each-step",
                               help="masks: read 64 MB before every step, not only before each walk (a model's "
                                    "forward pass comes before every token).")
MAX_ARCS = typer.Option(50_000_000, "--max-arcs", min=1, metavar="N",
                        help="Build the explicit A_BPE (Eq. 5, table2's .fst, paragraph) only up to this many arcs.")
LINES = typer.Option(20_000, "--lines", min=1, metavar="N", help="check: lines of generated text to check.")
RSS_MB = typer.Option("10,100", "--rss-mb", metavar="MB,MB,...", help="check: input sizes for the peak RSS runs.")
JSON_OUT = typer.Option(None, "--json", metavar="FILE", help="Write all results as JSON ('-' = stdout).")
CSV_OUT = typer.Option(None, "--csv", metavar="FILE", help="Write all table rows as one CSV.")
PLOT = typer.Option(None, "--plot", metavar="FILE",
                    help="Plot the scaling tables (time or size vs vocabulary) to FILE.svg or FILE.png.")
VERBOSE = typer.Option(False, "-v", "--verbose", help="Progress lines on stderr.")
ENCODE_MB = typer.Option(1.0, "--encode-mb", min=0.001, metavar="MB", help="encode: megabytes of each corpus.")
MAX_LOG = typer.Option(20, "--max-log", min=12, max=24, metavar="K",
                       help="encode: the longest pathological run is 2^K characters.")
PATTERNS = typer.Option(40, "--patterns", min=0, metavar="N",
                        help="limits: generated patterns (Hypothesis, derandomized) after the pinned hard cases.")
BATCH_INPUTS = typer.Option(1000, "--batch-inputs", min=1, metavar="N",
                            help="batch: small regexes compiled by compile-batch.")
# ---- bench schemas ----
DIRECTORY = typer.Argument(None, metavar="DIR",
                           help="schemas: a directory of JSON Schema files (*.json). report: a --json results file, "
                                "or a directory of them (one page).")
MARKDOWN = typer.Option(None, "--markdown", metavar="FILE",
                        help="report: write the Markdown page to FILE ('-' = stdout) [default: stdout].")
TITLE = typer.Option(None, "--title", metavar="TEXT", help="report: the page title [default: the DIR's name].")
PEERS = typer.Option(True, "--peers/--no-peers", help="schemas: compile with outlines-core, llguidance, xgrammar too.")
LIMIT = typer.Option(None, "--limit", min=1, metavar="N", help="schemas: the first N files of DIR (sorted) only.")
TOKFST_TIMEOUT = typer.Option(120.0, "--tokfst-timeout", min=0.001, metavar="SECONDS",
                              help="schemas: limit per tokfst stage (compile, promotion, walk) of one file.")
TERMINALS = typer.Option(True, "--terminals/--no-terminals",
                         help="schemas: tokfst promotes with terminal labels (as promote --schema does).")


def bench_cmd(
    mode: Mode = MODE, directory: Optional[str] = DIRECTORY, corpus: Optional[str] = CORPUS,
    vocab_sizes: str = VOCAB_SIZES, words: int = WORDS, methods: str = METHODS, repeat: Optional[int] = REPEAT,
    cold_repeat: int = COLD_REPEAT, timeout: Optional[float] = TIMEOUT,
    tokenizer: Optional[list[str]] = TOKENIZER, regex: Optional[list[str]] = REGEX,
    regex_file: Optional[str] = REGEX_FILE, named: Optional[str] = NAMED, trials: int = TRIALS,
    paragraph_chars: int = PARAGRAPH_CHARS, steps: Optional[int] = STEPS, evict_each_step: bool = EVICT_EACH_STEP,
    max_arcs: int = MAX_ARCS, lines: int = LINES,
    rss_mb: str = RSS_MB, json_out: Optional[str] = JSON_OUT, csv_out: Optional[str] = CSV_OUT,
    plot: Optional[str] = PLOT, verbose: bool = VERBOSE, peers: bool = PEERS, limit: Optional[int] = LIMIT,
    tokfst_timeout: float = TOKFST_TIMEOUT, terminals: bool = TERMINALS,
    markdown: Optional[str] = MARKDOWN, title: Optional[str] = TITLE, encode_mb: float = ENCODE_MB,
    max_log: int = MAX_LOG, patterns: int = PATTERNS, batch_inputs: int = BATCH_INPUTS,
) -> None:
    """Reproduce the paper's tables and time tokfst against its peers."""
    from rich.console import Console  # deferred: rich only where something is shown

    from tokfst_cli.bench import run  # deferred: start-up: only this path needs it

    if mode is Mode.report:
        return _report(directory, markdown, title)
    if (mode is Mode.schemas) != (directory is not None):
        raise typer.BadParameter("bench schemas takes a DIR of JSON Schemas, bench report a results file or DIR; "
                                 "the other modes none", param_hint="'DIR'")
    if mode is Mode.schemas:
        return _schemas(schemas_request(directory, tokenizer, peers, repeat, timeout, tokfst_timeout, limit,
                                        terminals, json_out, csv_out), plot, verbose)
    if repeat is not None and repeat < 3:
        raise typer.BadParameter(f"{repeat} is less than 3 (medians of at least 3 runs)", param_hint="'--repeat'")
    repeat, timeout = repeat or 3, (60.0 if mode is Mode.limits else 600.0) if timeout is None else timeout
    plan = run.plan(run.Request(
        mode=mode.value, corpus=corpus, vocab_sizes=vocab_sizes, words=words, methods=methods, repeat=repeat,
        cold_repeat=cold_repeat, timeout=timeout, tokenizer=tokenizer or [], regex=regex or [],
        regex_file=regex_file, named=named, trials=trials, paragraph_chars=paragraph_chars, steps=steps,
        evict_each_step=evict_each_step, encode_mb=encode_mb, max_log=max_log, patterns=patterns,
        batch_inputs=batch_inputs,
        max_arcs=max_arcs, lines=lines, rss_mb=rss_mb, json_out=json_out, csv_out=csv_out, plot=plot))
    doc = run.run(plan, OUT.say, verbose or OUT.err.is_terminal)
    run.emit(doc, plan, OUT.err if json_out == "-" else Console(highlight=False), OUT.data)


def _report(directory: Optional[str], markdown: Optional[str], title: Optional[str]) -> None:
    """``tokfst bench report DIR``: a results page rendered from ``--json`` files (``report.page``)."""
    from tokfst_cli.bench import report  # deferred: start-up: only this path needs it

    if directory is None:
        raise typer.BadParameter("bench report takes a results file or a directory of them", param_hint="'DIR'")
    docs = report.read_documents([directory])
    page = report.page(docs, title or Path(directory).stem)
    OUT.data(markdown or "-", page.encode("utf-8"))


def schemas_request(directory: str, tokenizer: Optional[list[str]], peers: bool, repeat: Optional[int],
                    timeout: Optional[float], tokfst_timeout: float, limit: Optional[int], terminals: bool,
                    json_out: Optional[str], csv_out: Optional[str]):
    """The options of ``tokfst bench schemas DIR`` as a ``bench.schemas.Request``."""
    from tokfst_cli.bench import schemas  # deferred: start-up: only this path needs it

    return schemas.Request(directory, tokenizer or [], peers, repeat or 1,
                           schemas.TIMEOUT if timeout is None else timeout, tokfst_timeout, limit, terminals,
                           json_out, csv_out)


def _schemas(req, plot: Optional[str], verbose: bool) -> None:
    """``tokfst bench schemas DIR``: :mod:`tokfst_cli.bench.schemas`."""
    from rich.console import Console  # deferred: rich only where something is shown

    from tokfst_cli.bench import schemas  # deferred: start-up: only this path needs it

    if plot is not None:
        raise typer.BadParameter("bench schemas has no scaling table to plot", param_hint="'--plot'")
    doc = schemas.document(req, OUT.say, verbose or OUT.err.is_terminal)
    schemas.emit(doc, req, OUT.err if req.json_out == "-" else Console(highlight=False), OUT.data)
