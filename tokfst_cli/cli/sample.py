"""``tokfst sample``: load an artifact, draw with :mod:`tokfst_cli.analysis.sample`, write
(help: ``helptext.SAMPLE``)."""

from __future__ import annotations

import json
from enum import Enum
from typing import Optional

import typer

from tokfst_cli import constraint
from tokfst_cli.analysis import sample
from tokfst_cli.cli.canonical_check import InputKind as OutputKind  # ids, tokens, text: a token sequence's three forms
from tokfst_cli.cli.common import Out, Tokenizer
from tokfst_cli.cli.count import MaxArcs
from tokfst_cli.cli.output import OUT
from tokfst_cli.tokenizer import model as tokmod


class Law(str, Enum):
    paths = "paths"
    strings = "strings"


def sample_cmd(
    tokenizer: str = Tokenizer,
    artifact: str = typer.Argument(..., metavar="ARTIFACT",
                                   help="An artifact of tokfst promote: .fst, index JSON, or factorized form."),
    out: Optional[str] = Out,
    count: int = typer.Option(10, "-n", "--count", min=0, metavar="N", help="How many sequences to draw."),
    seed: Optional[int] = typer.Option(None, "--seed", min=0, metavar="N",
                                       help="Seed of the random draws (the same seed, the same samples)."),
    max_tokens: int = typer.Option(sample.MAX_TOKENS, "--max-tokens", min=0, metavar="N",
                                   help="Draw among the sequences of at most N tokens."),
    output: OutputKind = typer.Option(OutputKind.ids, "--output",
                                      help="ids: token ids; tokens: token names as fstprint shows them; "
                                           "text: Hugging Face's decode of the ids."),
    json_out: bool = typer.Option(False, "--json", help="One JSON object per sequence: ids, tokens and text."),
    uniform: Optional[Law] = typer.Option(None, "--uniform",
                                          help="paths: uniform among the token sequences; strings: uniform among "
                                               "the strings they spell [default: paths, or random walks for "
                                               "factorized artifacts]."),
    max_len: Optional[int] = typer.Option(None, "--max-len", min=0, metavar="N",
                                          help="--uniform strings: strings of at most N bytes [default: all of a "
                                               "finite language, else 64]."),
    max_arcs: int = MaxArcs,
) -> None:
    """Draw random token sequences of an artifact: uniform paths or strings, or random walks for factorized ones."""
    with OUT.progress("loading"):
        model = tokmod.load(tokenizer)
        decoder = constraint.load(artifact, model)
    with OUT.progress("sampling"):
        drawn = sample.sample(decoder, count, max_tokens, seed, uniform.value if uniform else None, model,
                              max_len, max_arcs)
    decode = sample.hf_decoder(model) if json_out or output is OutputKind.text else None
    lines = []
    for ids in drawn:
        if json_out:
            lines.append(json.dumps(sample.record(model, ids, decode), ensure_ascii=False))
        elif output is OutputKind.ids:
            lines.append(" ".join(map(str, ids)))
        elif output is OutputKind.tokens:
            lines.append(" ".join(sample.names(model, ids)))
        else:
            lines.append(decode(ids))
    OUT.data(out, "".join(line + "\n" for line in lines).encode("utf-8"))
