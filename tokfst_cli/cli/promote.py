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
    regex: Optional[str] = typer.Option(None, "-e", "--regex", metavar="REGEX", help="The regex (Python re syntax, fullmatch)."),
    regex_file: Optional[str] = typer.Option(None, "-f", "--regex-file", metavar="FILE",
                                             help="Read the regex from a file ('-' = stdin)."),
    fmt: Format = typer.Option(Format.fst, "--format", help="fst: an OpenFst vector acceptor; index: a JSON state -> allowed-tokens index."),
    max_states: int = MaxStates,
    no_cache: bool = typer.Option(False, "--no-cache", help="Build the lexicon transducer afresh; do not cache."),
    verbose: bool = typer.Option(False, "-v", "--verbose", help="Print sizes and timings on stderr."),
) -> None:
    """Promote a regex to the automaton of all token sequences that spell it (seed 000 Eq. 3).

    The result accepts exactly the sequences of TOKENIZER's tokens whose concatenated surface
    bytes are a UTF-8 string matching REGEX in full: MIN(PROJ(A o T)) for the regex's byte
    automaton A and the tokenizer's lexicon transducer T. It is tokenization-agnostic:
    non-canonical segmentations are accepted too. Added and special tokens never appear.
    Surfaces: byte-level BPE tokens spell their bytes (Ġ is a space), SentencePiece-style
    tokens read ▁ as a space and <0xNN> as byte NN, WordPiece ## pieces are glued to the
    piece before them (word boundaries come with canonical MaxMatch).

    \b
    --format fst    an OpenFst vector acceptor; labels are token id + 1 (0 = epsilon), with
                    embedded symbol tables named tokfst-tokens-<fingerprint>, readable by
                    fstinfo, fstprint and fstdraw. Binary: not written to a terminal.
    --format index  JSON: initial, finals, masks (sorted allowed token ids, shared by all
                    states with the same set: coalescence), per state its mask and next
                    states, and stats (masks, states in shared masks, single-token states).

    Regexes: Python re syntax, matched in full, over all of Unicode (negated classes and .
    included; . excludes newline unless (?s)); \\d, \\w and \\s are ASCII classes as in
    interegular; \\uXXXX, \\UXXXXXXXX and \\N{NAME} escapes work; (?i) folds case per
    character with str.lower/str.upper. Anchors, backreferences and lookaround are refused.
    A regex file holds one pattern; one trailing newline is dropped.

    The lexicon transducer is built once per tokenizer and cached under
    $XDG_CACHE_HOME/tokfst (or $TOKFST_CACHE), keyed by the tokenizer's fingerprint.

    \b
    Examples:
      tokfst promote gpt2 -e '[0-9]{4}-[0-9]{2}-[0-9]{2}' date.fst
      tokfst promote llama2.json -f email.re --format index > email.json
      tokfst promote gpt2 -e '(Cologne|Berlin)' | fstprint | head
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
