"""``tokfst promote``: regex -> token automaton (thin wrapper over ``promote``/``index``)."""

from __future__ import annotations

import json
import time
from enum import Enum
from typing import Optional

import typer

from .. import lexicon
from .. import tokenizer as tokmod
from ..artifacts import write_bytes, write_fst
from ..index import build_index
from ..promote import promote
from ..regex import compile_regex
from .common import MaxStates, progress, say, read_pattern, refuse_binary_tty


class Format(str, Enum):
    fst = "fst"
    index = "index"


def promote_cmd(
    tokenizer: str = typer.Argument(..., metavar="TOKENIZER", help="tokenizer.json path, or a bundled name (gpt2)."),
    out: Optional[str] = typer.Argument(None, metavar="OUT", help="Output file; absent or '-' = stdout."),
    regex: Optional[str] = typer.Option(None, "-e", "--regex", help="The regex (Python re syntax, fullmatch)."),
    regex_file: Optional[str] = typer.Option(None, "-f", "--regex-file",
                                             help="Read the regex from a file ('-' = stdin)."),
    fmt: Format = typer.Option(Format.fst, "--format", help="fst: OpenFst vector acceptor; index: JSON index."),
    max_states: int = MaxStates,
    no_cache: bool = typer.Option(False, "--no-cache", help="Build the lexicon transducer afresh; do not cache."),
    verbose: bool = typer.Option(False, "-v", "--verbose", help="Print sizes and timings on stderr."),
) -> None:
    """Promote a regex to the automaton of all token sequences that spell it (seed 000 Eq. 3).

    The result accepts exactly the sequences of TOKENIZER's tokens whose concatenated surface
    bytes are a UTF-8 string matching REGEX in full. Labels are token id + 1 (0 = epsilon)
    with embedded symbol tables; added/special tokens never appear. Tokenization-agnostic:
    non-canonical segmentations are accepted too.
    """
    pattern = read_pattern(regex, regex_file)
    if fmt is Format.fst:
        refuse_binary_tty(out)
    with progress("loading tokenizer"):
        model = tokmod.load(tokenizer)
        lex = lexicon.lexicon(model, cache=not no_cache)
    start = time.perf_counter()
    with progress("promoting"):
        automaton = compile_regex(pattern, max_states=max_states)
        result = promote(model, automaton, lex, max_states=max_states)
    elapsed = time.perf_counter() - start
    if fmt is Format.fst:
        write_fst(out, result.fst)
    else:
        index = build_index(result.fst, model, pattern)
        write_bytes(out, (json.dumps(index, ensure_ascii=False) + "\n").encode("utf-8"))
    if verbose:
        say(f"tokfst: {result.states} states, {result.arcs} arcs, promoted in {elapsed * 1000:.1f} ms"
            f"{' (minimized)' if result.minimized else ' (minimal by construction)'}")
