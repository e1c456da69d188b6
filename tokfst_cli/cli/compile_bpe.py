"""``tokfst compile-bpe``: parse, compile A_BPE (implicit or explicit), write (help: ``helptext.COMPILE_BPE``)."""

from __future__ import annotations

from enum import Enum
from typing import Optional

import typer

from tokfst_cli.bpe import implicit
from tokfst_cli.bpe.explicit import explicit_automaton
from tokfst_cli.bpe.gadgets import canonical_automaton
from tokfst_cli.cli.common import Out, read_binary
from tokfst_cli.cli.output import OUT
from tokfst_cli.errors import InputError
from tokfst_cli.tokenizer import model as tokmod


class Form(str, Enum):
    implicit = "implicit"
    fst = "fst"
    gadgets = "gadgets"


def compile_bpe_cmd(
    tokenizer: Optional[str] = typer.Argument(None, metavar="TOKENIZER",
                                              help="tokenizer.json path, or a bundled name (gpt2)."),
    out: Optional[str] = Out,
    form: Form = typer.Option(Form.implicit, "--form",
                              help="implicit: the compressed artifact; fst: A_BPE as an OpenFst acceptor from the "
                                   "implicit form; gadgets: A_BPE by the merge-gadget cascade on Sigma* "
                                   "(Eq. 4; small vocabularies)."),
    info: Optional[str] = typer.Option(None, "--info", metavar="ARTIFACT",
                                       help="Print the counts of an implicit artifact instead of compiling."),
    json_out: bool = typer.Option(False, "--json", help="With --info: one JSON object."),
    max_arcs: int = typer.Option(5_000_000, "--max-arcs", min=1, metavar="N",
                                 help="--form fst: stop with an error instead of writing more arcs than this."),
) -> None:
    """Compile the canonical BPE automaton A_BPE (Cognetta & Okazaki 2024 Sec. 6.4-6.5)."""
    if info is not None:
        data = read_binary(info, "give an artifact written by tokfst compile-bpe")
        imp = implicit.from_bytes(data, source=info)
        counts = imp.info()
        counts["bytes"] = len(data)
        OUT.counts(counts, json_out)
        return
    if tokenizer is None:
        raise InputError("missing TOKENIZER", "see 'tokfst compile-bpe --help'")
    OUT.refuse_binary_tty(out)
    with OUT.progress("compiling A_BPE"):
        model = tokmod.load(tokenizer)
        if form is Form.gadgets:
            OUT.fst(out, canonical_automaton(model))
            return
        imp = implicit.load_or_compile(model)
        if form is Form.implicit:
            OUT.data(out, implicit.to_bytes(imp))
        else:
            OUT.fst(out, explicit_automaton(imp, model, max_arcs=max_arcs))
    if out not in (None, "-"):
        OUT.say(f"tokfst: wrote {out}")

