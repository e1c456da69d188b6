"""``tokfst canonical-check``: parse, check against the canonical automaton, report (grep's exit codes)."""

from __future__ import annotations

from enum import Enum
from typing import Optional

import typer

from .. import tokenizer as tokmod
from ..bpe import implicit
from ..errors import InputError
from ..maxmatch import product as maxmatch
from ..reference import HfReference
from ..symbols import escape, unescape
from .common import Tokenizer, read_text
from .output import OUT


class InputKind(str, Enum):
    ids = "ids"
    tokens = "tokens"
    text = "text"


def canonical_check_cmd(
    tokenizer: str = Tokenizer,
    src: Optional[str] = typer.Argument(None, metavar="IN", help="Input lines; absent or '-' = stdin."),
    kind: InputKind = typer.Option(InputKind.ids, "--input",
                                   help="ids: token ids; tokens: token names as fstprint shows them; text: raw text."),
    artifact: Optional[str] = typer.Option(None, "--artifact", metavar="FILE",
                                           help="An implicit A_BPE from 'tokfst compile-bpe' (default: cached)."),
    json_out: bool = typer.Option(False, "--json", help="One JSON object per input line."),
    quiet: bool = typer.Option(False, "-q", "--quiet", help="No output; the exit status says it all."),
) -> None:
    """Check token sequences for canonicity (BPE: seed 000 Sec. 6.5; WordPiece: Sec. 6.2)."""
    model = tokmod.load(tokenizer)
    if model.family == "wordpiece" and artifact is not None:
        raise InputError("--artifact is for BPE tokenizers", "drop --artifact for a WordPiece tokenizer")
    lines = read_text(src).splitlines()
    with OUT.progress("checking"):
        ref = HfReference(model)
        seqs = [_parse(model, kind, ref, line, n) for n, line in enumerate(lines, 1)]
        if model.family == "wordpiece":
            checker = maxmatch.checker(model)
            verdicts = [checker.first_violation(seq) for seq in seqs]
        else:
            verdicts = implicit.load_or_compile(model, artifact).check_batch(seqs)
    if not quiet:
        for n, (seq, v) in enumerate(zip(seqs, verdicts), 1):
            _report(model, ref, n, seq, v, json_out)
        OUT.flush()
    raise typer.Exit(1 if any(v is not None for v in verdicts) else 0)


def _report(model: tokmod.TokenizerModel, ref: HfReference, n: int, seq: list[int], v: tuple[int, str] | None,
            json_out: bool) -> None:
    """One output line: canonical + tokens, or the first offence and HF's tokenization of the text."""
    canon = ref.canonical(seq) if v is not None else seq
    rec = {"line": n, "canonical": v is None, "tokens": seq}
    if v is not None:
        i, reason = v
        rec.update(index=i, reason=reason, pair=seq[max(i - 1, 0):i + 1], canonical_tokens=canon)
    if json_out:
        OUT.record(rec)
    elif v is None:
        OUT.text("canonical\t" + _names(model, seq))
    else:
        OUT.text("\t".join(["non-canonical", str(rec["index"]), rec["reason"], _names(model, rec["pair"]),
                            _names(model, canon) if canon is not None else "-"]))


def _names(model: tokmod.TokenizerModel, ids: list[int]) -> str:
    return " ".join(escape(model.tokens[i]) for i in ids)


def _parse(model: tokmod.TokenizerModel, kind: InputKind, ref: HfReference, line: str, n: int) -> list[int]:
    if kind is InputKind.text:
        return ref.tokenize_text(line)
    out = []
    for field in line.split():
        if kind is InputKind.ids:
            if not field.lstrip("-").isdigit() or not 0 <= int(field) < model.vocab_size:
                raise InputError(f"line {n}: {field!r} is not a token id of this tokenizer (0..{model.vocab_size - 1})",
                                 "give space-separated token ids, or use --input tokens/text")
            out.append(int(field))
        else:
            tid = model.token_id(unescape(field))
            if tid is None:
                raise InputError(f"line {n}: {field!r} is not a token of this tokenizer",
                                 "give token names as fstprint shows them, or use --input ids/text")
            out.append(tid)
    return out
