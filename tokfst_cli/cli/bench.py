"""``tokfst bench``: the paper's tables and peer comparisons (thin wrapper over ``tokfst_cli.bench``)."""

from __future__ import annotations

import math
import os
import time
from enum import Enum
from pathlib import Path
from typing import Optional

import typer

from ..errors import InputError, TokfstError


class Mode(str, Enum):
    table1 = "table1"
    table2 = "table2"
    paragraph = "paragraph"
    peers = "peers"
    masks = "masks"
    all = "all"


def _vocab_sizes(text: str) -> list[int]:
    try:
        sizes = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise InputError(f"--vocab-sizes {text!r} is not a list of integers", "e.g. --vocab-sizes 4000,8000") from None
    if not sizes or any(v <= 256 for v in sizes):
        raise InputError(f"--vocab-sizes {text!r}: sizes must be above 256 (the byte alphabet)", "e.g. --vocab-sizes 4000,8000")
    return sorted(set(sizes))


def _methods(text: str) -> tuple[str, ...]:
    from ..bench.promotion import METHODS

    got = tuple(m.strip() for m in text.split(",") if m.strip())
    bad = [m for m in got if m not in METHODS]
    if bad or not got:
        raise InputError(f"--methods {text!r}: unknown method {', '.join(bad) or '(none)'}",
                         f"choose from {','.join(METHODS)}")
    return tuple(m for m in METHODS if m in got)


def _tokenizers(specs: list[str], used: bool) -> list[tuple[str, str, bool]]:
    """(name, path, trained) per --tokenizer; when the mode uses them, each is read now (a malformed
    or non-BPE tokenizer.json is a usage error before anything is trained or measured)."""
    from .. import tokenizer as tokmod
    from ..bench.common import load_bpe

    out = []
    for spec in specs:
        path = tokmod.resolve_path(spec)
        name = spec if spec in tokmod.BUNDLED and not Path(spec).exists() else path.stem
        if used:
            load_bpe(str(path))
        out.append((name, str(path), False))
    return out


def _output(option: str, path: str | None) -> None:
    """Refuse an output target that could only fail after the whole run."""
    if path in (None, "-"):
        return
    p = Path(path)
    if p.is_dir():
        raise InputError(f"{option} {path} is a directory", "give a file name")
    parent = p.absolute().parent
    while not parent.exists():
        parent = parent.parent
    if not parent.is_dir() or not os.access(parent, os.W_OK | os.X_OK):
        raise InputError(f"{option} {path}: cannot write in {parent}", "check the directory and permissions")


def _regexes(regex: list[str], regex_file: Optional[str]) -> dict[str, str]:
    from ..bench.regexes import default_set, read_regex_file
    from ..regex import compile_regex

    pats = list(regex) + (read_regex_file(regex_file) if regex_file else [])
    if not pats:
        return default_set()
    out: dict[str, str] = {}
    for i, p in enumerate(pats, 1):
        compile_regex(p)  # a bad pattern is a usage error, before anything is measured
        name = p if len(p) <= 30 else p[:29] + "…"
        out[name if name not in out else f"{name} #{i}"] = p
    return out


def bench_cmd(
    mode: Mode = typer.Argument(..., metavar="MODE", help="table1, table2, paragraph, peers, masks, or all."),
    corpus: Optional[str] = typer.Option(None, "--corpus", metavar="PATH",
                                         help="Training text: a file, or a directory of *.txt files "
                                              "[default: /usr/share/doc/python3.11/html/_sources]."),
    vocab_sizes: str = typer.Option("4000,8000,16000,32000", "--vocab-sizes", metavar="N,N,...",
                                    help="Vocabulary sizes of the BPE tokenizers trained on the corpus."),
    words: int = typer.Option(100, "--words", min=1, metavar="N", help="table1: words of the edit-distance-one automaton."),
    methods: str = typer.Option("eq4,eq5,implicit", "--methods", metavar="M,M,...",
                                help="table1: the methods (columns) to run: eq4, eq5, implicit."),
    repeat: int = typer.Option(3, "--repeat", min=3, metavar="N", help="Timed runs per figure (medians)."),
    timeout: float = typer.Option(600.0, "--timeout", min=0.001, metavar="SECONDS",
                                  help="table1: limit per cell for its timed runs (and again for its "
                                       "precomputation); a cell over it reports >T."),
    tokenizer: Optional[list[str]] = typer.Option(None, "--tokenizer", metavar="TOKENIZER",
                                                  help="A tokenizer.json or bundled name, repeatable: the peers "
                                                       "tokenizer, and an extra row in table2, paragraph and masks "
                                                       "[default: gpt2]."),
    regex: Optional[list[str]] = typer.Option(None, "-e", "--regex", metavar="REGEX",
                                              help="peers/masks: a regex, repeatable (replaces the default set)."),
    regex_file: Optional[str] = typer.Option(None, "-f", "--regex-file", metavar="FILE",
                                             help="peers/masks: regexes, one per line (replaces the default set)."),
    trials: int = typer.Option(100, "--trials", min=1, metavar="N", help="paragraph: tokenizations per timed run."),
    paragraph_chars: int = typer.Option(1200, "--paragraph-chars", min=1, metavar="N",
                                        help="paragraph: pick the corpus paragraph closest to this length."),
    steps: int = typer.Option(8, "--steps", min=1, metavar="N", help="masks: tokens per walk."),
    max_arcs: int = typer.Option(50_000_000, "--max-arcs", min=1, metavar="N",
                                 help="Build the explicit A_BPE (Eq. 5, table2's .fst, paragraph) only up to this "
                                      "many arcs."),
    json_out: Optional[str] = typer.Option(None, "--json", metavar="FILE", help="Write all results as JSON ('-' = stdout)."),
    csv_out: Optional[str] = typer.Option(None, "--csv", metavar="FILE", help="Write all table rows as one CSV."),
    plot: Optional[str] = typer.Option(None, "--plot", metavar="FILE",
                                       help="Plot the scaling tables (time or size vs vocabulary) to FILE.svg or FILE.png."),
    verbose: bool = typer.Option(False, "-v", "--verbose", help="Progress lines on stderr."),
) -> None:
    """Reproduce the paper's tables and time tokfst against its peers (seed 000 Sec. 6.4-6.5, seed 003).

    \b
    table1     Table 1: canonical promotion time of the automaton of all strings within edit
               distance one of --words corpus words, per trained vocabulary: Eq. 4 (merge
               gadgets, timed whole), Eq. 5 (precomputed explicit A_BPE) and the implicit
               form; each cell in its own process, a cell over --timeout shows >T; the
               three results are checked to be equivalent.
    table2     Table 2: A_BPE size (states, stored arcs, bytes) as an explicit .fst, in the
               seed's implicit encoding and as tokfst's artifact, per trained vocabulary and
               --tokenizer.
    paragraph  Sec. 6.4.1: a corpus paragraph (~--paragraph-chars) tokenized via the automaton
               vs HF's encode: time per trial, and equality of the token ids.
    peers      per regex: tokfst's agnostic and canonical promotion vs outlines-core's Index
               (optional: pip install 'tokfst[bench]'), ratios, start masks, non-canonical first
               tokens; default regexes: the six of the foundation issue and seed 001's Pokedex.
    masks      per-step mask lookup: tokfst's index vs the naive per-token partial match.
    all        everything above, one report.

    BPE tokenizers (byte-level, GPT-2-like) are trained on the corpus with HF's BpeTrainer and
    cached under $XDG_CACHE_HOME/tokfst/bench (or $TOKFST_CACHE/bench). Output: tables on
    stdout (rich on a terminal, Markdown otherwise), each with machine, versions, repetition
    count and the command; --json (schema in tokfst_cli/bench/common.py), --csv, --plot.
    Exit 1 if an internal equivalence check fails.

    \b
    Examples:
      tokfst bench table1 --vocab-sizes 4000,8000 --timeout 300 --json t1.json
      tokfst bench table2 --tokenizer llama2.json --tokenizer gpt2 --plot t2.svg
      tokfst bench peers --tokenizer gpt2 -e '[0-9]{4}-[0-9]{2}-[0-9]{2}'
      tokfst bench all --corpus notes.txt --vocab-sizes 300,400 --words 5 --trials 3
    """
    from ..bench import common, report
    from ..bench.corpus import load_corpus

    if plot is not None:
        if mode is Mode.peers:
            raise InputError("peers has no scaling table to plot", "drop --plot, or use table1, table2, paragraph, masks or all")
        report.check_plot_target(plot)
    for option, target in (("--json", json_out), ("--csv", csv_out), ("--plot", plot)):
        _output(option, target)
    if not math.isfinite(timeout):
        raise InputError(f"--timeout {timeout}: give a finite number of seconds", "e.g. --timeout 600")
    want = {m.value for m in Mode if m is not Mode.all} if mode is Mode.all else {mode.value}
    sizes = _vocab_sizes(vocab_sizes)
    chosen = _methods(methods)
    extra = _tokenizers(tokenizer or ["gpt2"], used=bool(want - {"table1"}))
    patterns = _regexes(regex or [], regex_file) if want & {"peers", "masks"} else {}
    progress = common.Progress(verbose)
    started, machine = time.time(), common.machine_facts()
    settings = {"repeat": repeat, "timeout_s": timeout, "vocab_sizes": sizes, "words": words, "methods": list(chosen),
                "tokenizers": [p for _, p, _ in extra], "trials": trials, "paragraph_chars": paragraph_chars,
                "steps": steps, "max_arcs": max_arcs}
    results = common.Results()

    trained: list[tuple[str, str, bool]] = []
    corp = text = None
    if want - {"peers"}:
        corp = load_corpus(corpus)
        settings["corpus"] = corp.describe()
        from ..bench.corpus import paragraph, train

        if "paragraph" in want:  # a corpus without a prose paragraph fails now, not after the other tables
            text = paragraph(corp, paragraph_chars)

        for v in sizes:
            path, fresh = train(corp, v)
            progress(f"tokenizer {v}: {'trained' if fresh else 'cached'} ({path})")
            trained.append((f"corpus-{v}", str(path), True))
    if "table1" in want:
        from ..bench.promotion import table1

        results.extend(table1(corp, sizes, words, repeat, timeout, max_arcs, progress, chosen))
    if "table2" in want:
        from ..bench.size import table2

        results.extend(table2(trained + extra, max_arcs, repeat, progress))
    if "paragraph" in want:
        from ..bench.tokenization import paragraph_table

        results.extend(paragraph_table(text, trained + extra, repeat, trials, max_arcs, progress))
    if "peers" in want:
        from ..bench.peers import peers_table

        results.extend(peers_table(extra, patterns, repeat, progress))
    if "masks" in want:
        from ..bench.masks import masks_table

        results.extend(masks_table(trained + extra, patterns, repeat, steps, progress))

    doc = common.document(mode.value, settings, results, started, machine)
    report.print_tables(doc, to_stderr=json_out == "-")
    if json_out is not None:
        report.write_json(json_out, doc)
    if csv_out is not None:
        report.write_csv(csv_out, doc)
    if plot is not None and not report.write_plot(plot, doc):
        raise TokfstError(f"nothing to plot into {plot}", "the scaling tables have no finished figures")
    failed = [c for c in doc["checks"] if c["passed"] is False]
    if failed:
        raise TokfstError(f"{len(failed)} equivalence check(s) failed, first: {failed[0]['name']}",
                          "see the report; this is a bug in tokfst")
