"""``tokfst compile-bpe``: the canonical BPE automaton, implicit (default) or explicit."""

from __future__ import annotations

import sys
from enum import Enum
from pathlib import Path
from typing import Optional

import typer

from .. import tokenizer as tokmod
from ..artifacts import write_bytes, write_fst
from ..bpe import implicit
from ..bpe.explicit import explicit_automaton
from ..bpe.gadgets import canonical_automaton
from ..errors import InputError
from .common import print_counts, progress, refuse_binary_tty, say


class Form(str, Enum):
    implicit = "implicit"
    fst = "fst"
    gadgets = "gadgets"


def compile_bpe_cmd(
    tokenizer: Optional[str] = typer.Argument(None, metavar="TOKENIZER",
                                              help="tokenizer.json path, or a bundled name (gpt2)."),
    out: Optional[str] = typer.Argument(None, metavar="OUT", help="Output file; absent or '-' = stdout."),
    form: Form = typer.Option(Form.implicit, "--form",
                              help="implicit: the compressed artifact; fst: A_BPE as an OpenFst acceptor from the implicit "
                                   "form; gadgets: A_BPE by the merge-gadget cascade on Sigma* (Eq. 4; small vocabularies)."),
    info: Optional[str] = typer.Option(None, "--info", metavar="ARTIFACT",
                                       help="Print the counts of an implicit artifact instead of compiling."),
    json_out: bool = typer.Option(False, "--json", help="With --info: one JSON object."),
    max_arcs: int = typer.Option(5_000_000, "--max-arcs", min=1, metavar="N",
                                 help="--form fst: stop with an error instead of writing more arcs than this."),
) -> None:
    """Compile the canonical BPE automaton A_BPE (seed 000 Sec. 6.4-6.5).

    A_BPE accepts exactly the token sequences Hugging Face's BPE model produces for some
    text (one pre-token): merges by (rank, leftmost position), a repeated pair keeping its
    last rank, unreachable tokens never, byte-fallback runs only as the UTF-8 of characters
    absent from the vocabulary, continuing-subword prefixes and end-of-word suffixes in place.

    --form implicit (default) writes a versioned, zlib-compressed artifact: per merge one
    rectangle of banned pairs over the two spine orders, exact pairs for tokens outside that
    construction, and the side automata; it carries the tokenizer fingerprint, counts and a
    sha256 checksum (format in tokfst_cli/bpe/implicit.py). Llama-2: about 0.4 MB.

    --form fst writes A_BPE explicitly (one state per class of tokens with the same banned
    set, plus the start) for vocabularies where it fits under --max-arcs. --form gadgets
    builds the same automaton the slow, reference way: the cascade of merge gadgets (Eq. 4,
    made exact for merge lists out of rank order) applied to Sigma*.

    \\b
    Examples:
      tokfst compile-bpe llama2.json llama2.bpe
      tokfst compile-bpe --info llama2.bpe --json
      tokfst compile-bpe small.json small-abpe.fst --form fst
    """
    if info is not None:
        data = _read(info)
        imp = implicit.from_bytes(data, source=info)
        counts = imp.info()
        counts["bytes"] = len(data)
        print_counts(counts, json_out)
        return
    if tokenizer is None:
        raise InputError("missing TOKENIZER", "see 'tokfst compile-bpe --help'")
    refuse_binary_tty(out)
    with progress("compiling A_BPE"):
        model = tokmod.load(tokenizer)
        if form is Form.gadgets:
            write_fst(out, canonical_automaton(model))
            return
        imp = implicit.load_or_compile(model)
        if form is Form.implicit:
            write_bytes(out, implicit.to_bytes(imp))
        else:
            write_fst(out, explicit_automaton(imp, model, max_arcs=max_arcs))
    if out not in (None, "-"):
        say(f"tokfst: wrote {out}")


def _read(path: str) -> bytes:
    try:
        return sys.stdin.buffer.read() if path == "-" else Path(path).read_bytes()
    except OSError as e:
        raise InputError(f"cannot read {path}: {e.strerror or e}", "give an artifact written by tokfst compile-bpe")
