"""``tokfst draw``: parse, build or read the automaton, render with ``tokfst_cli.analysis.draw``, write
(help: ``helptext.DRAW``)."""

from __future__ import annotations

from enum import Enum
from pathlib import Path
from typing import Optional

import typer

from tokfst_cli.analysis import draw
from tokfst_cli.automata.fst_io import read_fst
from tokfst_cli.cli.common import out_not_an_automaton
from tokfst_cli.cli.output import OUT
from tokfst_cli.errors import InputError
from tokfst_cli.text.regex import compile_regex

DRAW_FIX = ("draw reads OpenFst files (.fst): of a promoted constraint, draw the .fst of the same promotion "
            "(tokfst promote ... --format fst, the default); count, inspect and sample read the others")


class Format(str, Enum):
    dot = "dot"
    svg = "svg"
    pdf = "pdf"
    png = "png"


def _split_paths(paths: list[str], built: bool) -> tuple[str | None, str | None]:
    """(IN, OUT) from the positionals; with -e/--vocab there is no IN."""
    if built:
        if len(paths) > 1:
            raise InputError(f"with -e or --vocab, give at most OUT, not {len(paths)} paths",
                             "drop IN, or drop -e/--vocab to draw IN")
        out_not_an_automaton(paths[0] if paths else None)
        return None, paths[0] if paths else None
    if not paths:
        raise InputError("nothing to draw", "give IN (an .fst file, '-' = stdin), -e REGEX or --vocab PIECES")
    if len(paths) > 2:
        raise InputError(f"too many paths ({len(paths)})", "give IN and at most OUT")
    return paths[0], paths[1] if len(paths) == 2 else None


def _format(fmt: Format | None, out: str | None) -> str:
    """--format, else OUT's suffix when it names a format, else dot."""
    if fmt is not None:
        return fmt.value
    if out not in (None, "-"):
        suffix = Path(out).suffix.lower().lstrip(".")
        if suffix in draw.FORMATS:
            return suffix
    return "dot"


def _stage_path(out: str, key: str, fmt: str) -> str:
    """fig3.svg -> fig3-a.svg; fig3 -> fig3-a.<fmt>."""
    p = Path(out)
    suffix = p.suffix or f".{fmt}"
    return str(p.with_name(f"{p.stem if p.suffix else p.name}-{key}{suffix}"))


def _check_options(regex: str | None, vocab: str | None, maxmatch: bool, stages: bool, out: str | None,
                   pretokenizer: str | None) -> None:
    if pretokenizer is not None and (vocab is not None or stages):
        raise InputError("--pretokenizer draws P (with -e, A o P) and takes no --vocab or --stages",
                         "drop --vocab/--stages")
    if maxmatch and vocab is None:
        raise InputError("--maxmatch needs --vocab PIECES", "e.g. tokfst draw --vocab a,b,aa,ab --maxmatch")
    if stages:
        if regex is None or vocab is None:
            raise InputError("--stages needs both -e REGEX and --vocab PIECES",
                             "e.g. tokfst draw -e abaabcc --vocab a,b,c,ab,abc,bc --stages fig3.svg")
        if out in (None, "-"):
            raise InputError("--stages writes five files and needs OUT", "give OUT such as fig3.svg")


def _automaton(src: str | None, regex: str | None, vocab: str | None, maxmatch: bool, pretokenizer: str | None):
    """What to draw: P or A o P, the promoted automaton (-e and --vocab), A (-e), T or T_Aho (--vocab), or IN."""
    if pretokenizer is not None:
        from tokfst_cli.pretok.build import for_tokenizer  # deferred: start-up: only this path needs it

        return for_tokenizer(pretokenizer, regex)
    if regex is not None and vocab is not None:
        return (draw.maxmatch_stages if maxmatch else draw.stages)(regex, draw.parse_vocab(vocab))[
            "d" if maxmatch else "e"]
    elif regex is not None:
        return compile_regex(regex).fst
    elif vocab is not None and maxmatch:
        return draw.aho_phi_form(draw.parse_vocab(vocab))
    elif vocab is not None:
        return draw.vocab_lexicon(draw.parse_vocab(vocab))
    else:
        return read_fst(src, DRAW_FIX)


def draw_cmd(
    first: Optional[str] = typer.Argument(
        None, metavar="IN", help="An OpenFst file ('-' = stdin); absent with -e/--vocab, where the only path is OUT."),
    second: Optional[str] = typer.Argument(None, metavar="OUT", help="Output file; absent or '-' = stdout."),
    regex: Optional[str] = typer.Option(None, "-e", "--regex",
                                        help="Draw the byte automaton A of this regex (Python re syntax, fullmatch)."),
    vocab: Optional[str] = typer.Option(
        None, "--vocab", metavar="PIECES",
        help="A tiny comma-separated vocabulary, e.g. a,b,ab: draw its lexicon transducer T; "
             "with -e, draw the promoted automaton MIN(PROJ(A o T))."),
    maxmatch: bool = typer.Option(
        False, "--maxmatch",
        help="With --vocab: MaxMatch (greedy longest match, every piece at every position) instead of all "
             "tokenizations: draw T_Aho with its failure (phi) arcs; with -e, MIN(PROJ(A o T_Aho)); "
             "with --stages, the panels of Cognetta & Okazaki 2024 Fig. 4."),
    stages: bool = typer.Option(False, "--stages",
                                help="With -e and --vocab: write the five panels of Cognetta & Okazaki 2024 Fig. 3 "
                                     "(Fig. 4 with --maxmatch), OUT fig3.svg giving fig3-a.svg ... "
                                     "fig3-e.svg (OUT required)."),
    fmt: Optional[Format] = typer.Option(None, "--format",
                                         help="dot, svg, pdf or png [default: from OUT's suffix, else dot]."),
    max_arcs: int = typer.Option(12, "--max-arcs", min=1, metavar="N",
                                 help="Draw at most N arcs per state; fold the rest into one '+K more' edge."),
    title: Optional[str] = typer.Option(None, "--title", metavar="TEXT", help="A caption above the drawing."),
    pretokenizer: Optional[str] = typer.Option(
        None, "--pretokenizer", metavar="TOKENIZER",
        help="Draw the preprocessing transducer P of a BPE tokenizer (its normalizer and pre-tokenizer, "
             "Pitfalls 2025 Fig. 2(b)); with -e, A o P for that regex."),
) -> None:
    """Draw an automaton as dot, svg, pdf or png (Cognetta & Okazaki 2024 Figs. 3 and 4, Secs. 5 and 6.2)."""
    built = regex is not None or vocab is not None or pretokenizer is not None
    src, out = _split_paths([p for p in (first, second) if p is not None], built)
    _check_options(regex, vocab, maxmatch, stages, out, pretokenizer)
    kind = _format(fmt, out)
    if kind in draw.BINARY_FORMATS:
        OUT.refuse_binary_tty(out, kind)

    if stages:
        with OUT.progress(f"drawing Fig. {4 if maxmatch else 3} panels"):
            dots = draw.stage_dots(regex, draw.parse_vocab(vocab), maxmatch=maxmatch, title=title,
                                   max_arcs=max_arcs)
            rendered = {key: draw.render(dot, kind) for key, dot in dots.items()}
        for key, data in rendered.items():
            OUT.data(_stage_path(out, key, kind), data)
        return

    fst = _automaton(src, regex, vocab, maxmatch, pretokenizer)
    with OUT.progress("drawing"):
        data = draw.render(draw.to_dot(fst, title=title, max_arcs=max_arcs), kind)
    OUT.data(out, data)
