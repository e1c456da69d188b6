"""``tokfst count``: exact counts of an artifact's sequences and strings (help: ``helptext.COUNT``)."""

from __future__ import annotations

import json
from typing import Optional

import typer

from tokfst_cli import constraint
from tokfst_cli.analysis import counting
from tokfst_cli.cli.common import MaxStates, Out, Tokenizer
from tokfst_cli.cli.output import OUT
from tokfst_cli.promotion.lexicon import lexicon
from tokfst_cli.tokenizer import model as tokmod

MaxLen = typer.Option(None, "--max-len", min=0, metavar="N",
                      help="Count lengths 0..N (tokens for sequences, bytes for strings); needed for an infinite "
                           "language [default: the longest].")
MaxArcs = typer.Option(counting.MAX_ARCS, "--max-arcs", min=1, metavar="N",
                       help="Factorized artifacts: expand at most N arcs through the decoder.")
Artifact = typer.Argument(..., metavar="ARTIFACT",
                          help="An artifact of tokfst promote: .fst, index JSON, or factorized.")

def table(tally: counting.Tally) -> str:
    """Columns length, sequences, strings; rows with a count, then total and longest."""
    seqs, strs = tally.sequences, tally.strings
    rows = [("length", "sequences", "strings")]
    for k in range(max(len(seqs), len(strs))):
        a, b = (seqs[k] if k < len(seqs) else 0), (strs[k] if k < len(strs) else 0)
        if a or b:
            rows.append((str(k), str(a), str(b)))
    rows.append(("total", str(sum(seqs)), str(sum(strs))))
    unknown = f"> {tally.max_len}?" if tally.unknown else "infinite"  # a pushdown language cut at --max-len
    tops = (tally.longest_sequence, tally.longest_string)
    rows.append(("longest", *(unknown if x is None else str(x) for x in tops)))
    widths = [max(len(r[i]) for r in rows) for i in range(3)]
    return "".join(f"{r[0]:<{widths[0]}}  {r[1]:>{widths[1]}}  {r[2]:>{widths[2]}}\n" for r in rows)


def count_cmd(
    tokenizer: str = Tokenizer,
    artifact: str = Artifact,
    out: Optional[str] = Out,
    max_len: Optional[int] = MaxLen,
    json_out: bool = typer.Option(False, "--json", help="One JSON object; counts as integers written in full."),
    max_arcs: int = MaxArcs,
    max_states: int = MaxStates,
) -> None:
    """Count an artifact's token sequences and the strings they spell, exactly, by length."""
    with OUT.progress("loading"):
        model = tokmod.load(tokenizer)
        decoder = constraint.load(artifact, model)
    with OUT.progress("counting"):
        got = counting.tally_decoder(decoder, lexicon(model), max_len, max_arcs, max_states)
    text = json.dumps(got.to_json()) + "\n" if json_out else table(got)
    OUT.data(out, text.encode("utf-8"))
