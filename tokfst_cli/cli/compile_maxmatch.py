"""``tokfst compile-maxmatch``: parse, build T_Aho (``maxmatch.composition``), write
(help: ``helptext.COMPILE_MAXMATCH``)."""

from __future__ import annotations

import time
from typing import Optional

import typer

from tokfst_cli.automata.fst_io import fst_bytes
from tokfst_cli.cli.common import Out
from tokfst_cli.cli.output import OUT
from tokfst_cli.errors import InputError
from tokfst_cli.maxmatch.composition import compiled
from tokfst_cli.promotion.promote import count_arcs
from tokfst_cli.tokenizer import model as tokmod


def compile_maxmatch_cmd(
    tokenizer: str = typer.Argument(..., metavar="TOKENIZER", help="A WordPiece tokenizer.json path."),
    out: Optional[str] = Out,
    info: bool = typer.Option(False, "--info", help="Print states, arcs, bytes and build time instead of the .fst."),
    json_out: bool = typer.Option(False, "--json", help="With --info: one JSON object."),
) -> None:
    """Compile the MaxMatch transducer T_Aho (Cognetta & Okazaki 2024 Sec. 6.2, App. C Alg. 7-8)."""
    model = tokmod.load(tokenizer)
    if model.family != "wordpiece":
        raise InputError(f"{model.source} is a {model.family} tokenizer",
                         "compile-maxmatch needs a WordPiece tokenizer (for BPE use compile-bpe)")
    if not info:
        OUT.refuse_binary_tty(out)
    start = time.perf_counter()
    with OUT.progress("compiling T_Aho"):
        fst = compiled(model)
        data = fst_bytes(fst)
    elapsed = time.perf_counter() - start
    if info:
        counts = {"tokenizer": model.source, "fingerprint": model.fingerprint, "states": fst.num_states(),
                  "arcs": count_arcs(fst), "bytes": len(data), "seconds": round(elapsed, 3)}
        OUT.counts(counts, json_out)
        return
    OUT.data(out, data)
    if out not in (None, "-"):
        OUT.say(f"tokfst: wrote {out} ({fst.num_states()} states, {len(data)} bytes, {elapsed:.1f} s)")
