"""``tokfst compile-maxmatch``: the MaxMatch transducer T_Aho of a WordPiece tokenizer as an .fst."""

from __future__ import annotations

import time
from typing import Optional

import typer

from .. import tokenizer as tokmod
from ..aho import compiled
from ..artifacts import fst_bytes, write_bytes
from ..errors import InputError
from ..promote import count_arcs
from .common import print_counts, progress, refuse_binary_tty, say


def compile_maxmatch_cmd(
    tokenizer: str = typer.Argument(..., metavar="TOKENIZER", help="A WordPiece tokenizer.json path."),
    out: Optional[str] = typer.Argument(None, metavar="OUT", help="Output file; absent or '-' = stdout."),
    info: bool = typer.Option(False, "--info", help="Print states, arcs, bytes and build time instead of the .fst."),
    json_out: bool = typer.Option(False, "--json", help="With --info: one JSON object."),
) -> None:
    """Compile the MaxMatch transducer T_Aho (seed 000 Sec. 6.2, App. C Alg. 7-8).

    T_Aho maps a pre-tokenized text to exactly the token ids Hugging Face's WordPiece model
    produces: per word, greedy longest match from the left (word-initial pieces first, "##"
    pieces after), [UNK] for a word with an unmatched position. It is the Aho-Corasick-style
    failure trie of LinMaxMatch (Song et al. 2021) with the failure arcs expanded over the
    byte labels (pynini has no phi matcher).

    \b
    Labels, as in promote: input byte b is label b+1, with two more input symbols:
      <w>         (label 257) the boundary between two words; maps to nothing
      <unk-word>  (label 258) a word longer than max_input_chars_per_word; maps to [UNK]
    output token id t is label t+1 (0 = epsilon); symbol tables are embedded (the token table
    is named tokfst-tokens-<fingerprint>, which promote --artifact checks).

    The length rule and the normalizer/pre-tokenizer are not inside T_Aho: `promote
    --canonical --method aho --artifact FILE` applies them to the regex first (X) and
    computes MIN(PROJ(X o T_Aho)). The transducer is cached by tokenizer fingerprint.

    \b
    Examples:
      tokfst compile-maxmatch bert.json bert-taho.fst
      tokfst compile-maxmatch bert.json --info --json
      tokfst promote bert.json -e '[0-9]{4}' --canonical --method aho --artifact bert-taho.fst
    """
    model = tokmod.load(tokenizer)
    if model.family != "wordpiece":
        raise InputError(f"{model.source} is a {model.family} tokenizer",
                         "compile-maxmatch needs a WordPiece tokenizer (for BPE use compile-bpe)")
    if not info:
        refuse_binary_tty(out)
    start = time.perf_counter()
    with progress("compiling T_Aho"):
        fst = compiled(model)
        data = fst_bytes(fst)
    elapsed = time.perf_counter() - start
    if info:
        counts = {"tokenizer": model.source, "fingerprint": model.fingerprint, "states": fst.num_states(),
                  "arcs": count_arcs(fst), "bytes": len(data), "seconds": round(elapsed, 3)}
        print_counts(counts, json_out)
        return
    write_bytes(out, data)
    if out not in (None, "-"):
        say(f"tokfst: wrote {out} ({fst.num_states()} states, {len(data)} bytes, {elapsed:.1f} s)")
