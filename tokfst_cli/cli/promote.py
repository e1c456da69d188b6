"""``tokfst promote``: parse, run :func:`tokfst_cli.pipeline.build`, write (help: ``helptext.PROMOTE``)."""

from __future__ import annotations

from enum import Enum
from typing import Optional

import typer

from .. import pipeline
from .. import tokenizer as tokmod
from ..promote import count_arcs
from .common import Level, LevelOpt, MaxStates, Out, Tokenizer, read_pattern
from .errors import flag
from .output import OUT


class Method(str, Enum):
    implicit = "implicit"
    precomputed = "precomputed"
    gadgets = "gadgets"
    product = "product"
    aho = "aho"


class Format(str, Enum):
    fst = "fst"
    index = "index"


def promote_cmd(
    tokenizer: str = Tokenizer,
    out: Optional[str] = Out,
    regex: Optional[str] = typer.Option(None, "-e", "--regex", metavar="REGEX", help="The regex (Python re syntax, fullmatch)."),
    regex_file: Optional[str] = typer.Option(None, "-f", "--regex-file", metavar="FILE",
                                             help="Read the regex from a file ('-' = stdin)."),
    fmt: Format = typer.Option(Format.fst, "--format", help="fst: an OpenFst vector acceptor; index: a JSON state -> allowed-tokens index."),
    max_states: int = MaxStates,
    no_cache: bool = typer.Option(False, "--no-cache", help="Build the lexicon transducer afresh; do not cache."),
    verbose: bool = typer.Option(False, "-v", "--verbose", help="Print sizes and timings on stderr."),
    canonical: bool = typer.Option(False, "--canonical",
                                   help="Only canonical token sequences: what HF's tokenizer produces for the text "
                                        "(BPE, or WordPiece with its normalizer and pre-tokenizer)."),
    method: Optional[Method] = typer.Option(None, "--method",
                                            help="--canonical, BPE: implicit (default; product with the implicit "
                                                 "A_BPE), precomputed (Eq. 5: explicit A_BPE, small vocabularies), "
                                                 "gadgets (Eq. 4: the merge gadget cascade, small vocabularies). "
                                                 "WordPiece: product (default; greedy checks on the fly), aho "
                                                 "(MIN(PROJ(X o T_Aho)) with T_Aho from compile-maxmatch)."),
    artifact: Optional[str] = typer.Option(None, "--artifact", metavar="FILE",
                                           help="--canonical: an implicit A_BPE from compile-bpe, or (--method aho) "
                                                "a T_Aho .fst from compile-maxmatch (default: cached)."),
    max_arcs: int = typer.Option(2_000_000, "--max-arcs", min=1, metavar="N",
                                 help="--canonical: refuse a materialized automaton with more arcs "
                                      "(then use --format index)."),
    level: Level = LevelOpt,
) -> None:
    """Promote a regex to the automaton of all token sequences that spell it (seed 000 Eq. 3)."""
    pattern = read_pattern(regex, regex_file)
    if fmt is Format.fst:
        OUT.refuse_binary_tty(out)
    with OUT.progress("loading tokenizer"):
        model = tokmod.load(tokenizer)
        pipeline.check_method(model, canonical, method.value if method else None, level.value)
    with OUT.progress("promoting"):
        result = pipeline.build(model, pattern, canonical=canonical, method=method.value if method else None,
                                limits=pipeline.Limits(max_states, max_arcs), artifact=artifact,
                                factorized_ok=fmt is Format.index, cache=not no_cache, level=level.value)
    if not result.materialized:
        OUT.say(f"tokfst: the canonical automaton exceeds {flag('max_arcs')} {max_arcs}; writing the factorized form")
        OUT.refuse_binary_tty(out)
        OUT.data(out, result.to_bytes())
        return
    if fmt is Format.fst:
        OUT.fst(out, result.fst)
    else:
        OUT.document(out, result.index())
    if verbose:
        fst = result.fst
        OUT.say(f"tokfst: {fst.num_states()} states, {count_arcs(fst)} arcs, promoted in {result.seconds * 1000:.1f} ms")
