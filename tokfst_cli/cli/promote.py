"""``tokfst promote``: regex -> token automaton (thin wrapper over ``promote``/``index``)."""

from __future__ import annotations

import json
import time
from enum import Enum
from typing import Optional

import pynini
import typer

from .. import lexicon
from .. import tokenizer as tokmod
from ..artifacts import write_bytes, write_fst
from ..index import build_index
from ..bpe import factorized, implicit
from ..bpe.explicit import explicit_automaton
from ..bpe.gadgets import promote_gadgets
from ..bpe.product import materialize
from ..errors import InputError, LimitError
from ..promote import count_arcs, promote
from ..regex import compile_regex
from .common import MaxStates, progress, say, read_pattern, refuse_binary_tty


class Method(str, Enum):
    implicit = "implicit"
    precomputed = "precomputed"
    gadgets = "gadgets"


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
    canonical: bool = typer.Option(False, "--canonical",
                                   help="BPE: only canonical token sequences (what HF's model produces for the text)."),
    method: Method = typer.Option(Method.implicit, "--method",
                                  help="--canonical: implicit (product with the implicit A_BPE), precomputed "
                                       "(Eq. 5: explicit A_BPE, small vocabularies), gadgets (Eq. 4: the merge "
                                       "gadget cascade, small vocabularies)."),
    artifact: Optional[str] = typer.Option(None, "--artifact", metavar="FILE",
                                           help="--canonical: an implicit A_BPE from compile-bpe (default: cached)."),
    max_arcs: int = typer.Option(2_000_000, "--max-arcs", min=1, metavar="N",
                                 help="--canonical: refuse a materialized automaton with more arcs "
                                      "(then use --format index)."),
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
        fst = result.fst
        if canonical:
            fst = _canonical(model, fst, fmt, method, artifact, max_arcs, pattern, out)
    elapsed = time.perf_counter() - start
    if fst is None:
        pass  # the factorized artifact is written
    elif fmt is Format.fst:
        write_fst(out, fst)
    else:
        index = build_index(fst, model, pattern)
        write_bytes(out, (json.dumps(index, ensure_ascii=False) + "\n").encode("utf-8"))
    if verbose and fst is not None:
        say(f"tokfst: {fst.num_states()} states, {count_arcs(fst)} arcs, promoted in {elapsed * 1000:.1f} ms")


def _canonical(model, agnostic, fmt, method, artifact, max_arcs, pattern, out):
    """Canonical promotion: materialized (.fst, or an index when it fits) or factorized."""
    if model.family != "bpe":
        raise InputError(f"{model.source} is a {model.family} tokenizer",
                         "canonical MaxMatch (WordPiece) promotion arrives with issue #4")
    if method is Method.gadgets:
        return promote_gadgets(compile_regex(pattern), model)
    imp = implicit.load_or_compile(model, artifact)
    if method is Method.precomputed:
        abpe = explicit_automaton(imp, model, max_arcs=max_arcs)
        return pynini.intersect(agnostic.copy().arcsort("olabel"), abpe.arcsort("ilabel")).connect().minimize()
    try:
        return materialize(agnostic, imp, max_arcs=max_arcs)
    except LimitError as e:
        if fmt is Format.fst:
            raise LimitError(f"{e}", "write the factorized form with --format index") from None
    say(f"tokfst: the canonical automaton exceeds --max-arcs {max_arcs}; writing the factorized form")
    refuse_binary_tty(out)
    write_bytes(out, factorized.to_bytes(agnostic, imp, pattern))
    return None
