"""``tokfst canonical-check``: are token sequences what HF's BPE model would produce? (grep's exit codes)"""

from __future__ import annotations

import json
import sys
from enum import Enum
from pathlib import Path
from typing import Optional

import typer

from .. import tokenizer as tokmod
from .. import wordpiece
from ..bpe import implicit
from ..bpe.reference import HfReference
from ..errors import InputError
from ..symbols import escape, unescape
from .common import progress


class InputKind(str, Enum):
    ids = "ids"
    tokens = "tokens"
    text = "text"


def canonical_check_cmd(
    tokenizer: str = typer.Argument(..., metavar="TOKENIZER", help="tokenizer.json path, or a bundled name (gpt2)."),
    src: Optional[str] = typer.Argument(None, metavar="IN", help="Input lines; absent or '-' = stdin."),
    kind: InputKind = typer.Option(InputKind.ids, "--input",
                                   help="ids: token ids; tokens: token names as fstprint shows them; text: raw text."),
    artifact: Optional[str] = typer.Option(None, "--artifact", metavar="FILE",
                                           help="An implicit A_BPE from 'tokfst compile-bpe' (default: cached)."),
    json_out: bool = typer.Option(False, "--json", help="One JSON object per input line."),
    quiet: bool = typer.Option(False, "-q", "--quiet", help="No output; the exit status says it all."),
) -> None:
    """Check token sequences for canonicity (BPE: seed 000 Sec. 6.5; WordPiece: Sec. 6.2).

    BPE: a sequence is canonical when Hugging Face's BPE model produces exactly it for its own
    text (one pre-token, no normalizer): every token reachable, no banned adjacent pair, byte-
    fallback runs spelling whole characters absent from the vocabulary.

    WordPiece: canonical when HF's tokenizer (normalizer, pre-tokenizer, WordPiece, without
    special tokens) produces it for some text: every piece the longest match of its kind,
    no ## piece at a word start, words that the normalizer and pre-tokenizer can produce
    (e.g. no upper case for an uncased model, no punctuation inside a word), at most
    max_input_chars_per_word characters per word, [UNK] alone as a word.

    Each input line is one
    sequence: space-separated token ids (--input ids), token names with the escapes of
    fstprint/symbol files (--input tokens), or raw text (--input text: reports its canonical
    tokenization). All pairs of all lines are tested in one vectorized pass.

    Output, one line per input line: "canonical" and the tokens, or "non-canonical", the
    index of the first offending token, the reason, the offending pair, and the canonical
    tokenization of the same text (tab-separated; --json gives objects with the same fields).

    Exit status as grep: 0 every line canonical, 1 some line not, 2 error (bad input, an
    unsupported tokenizer, an artifact for another tokenizer).

    \\b
    Examples:
      echo '464 3290' | tokfst canonical-check gpt2
      tokfst canonical-check llama2.json seqs.txt --json --artifact llama2.bpe
      tokfst canonical-check bert.json --input tokens <<< 'un ##af ##fa ##ble'
    """
    model = tokmod.load(tokenizer)
    if model.family == "wordpiece" and artifact is not None:
        raise InputError("--artifact is for BPE tokenizers", "drop --artifact for a WordPiece tokenizer")
    lines = _read_lines(src)
    with progress("checking"):
        ref = HfReference(model)
        seqs = [_parse(model, kind, ref, line, n) for n, line in enumerate(lines, 1)]
        if model.family == "wordpiece":
            checker = wordpiece.checker(model)
            verdicts = [checker.first_violation(seq) for seq in seqs]
        else:
            verdicts = implicit.load_or_compile(model, artifact).check_batch(seqs)
    bad = 0
    out = sys.stdout
    for n, (seq, v) in enumerate(zip(seqs, verdicts), 1):
        bad += v is not None
        if quiet:
            continue
        canon = ref.canonical(seq) if v is not None else seq
        rec = {"line": n, "canonical": v is None, "tokens": seq}
        if v is not None:
            i, reason = v
            rec.update(index=i, reason=reason, pair=seq[max(i - 1, 0):i + 1], canonical_tokens=canon)
        if json_out:
            out.write(json.dumps(rec) + "\n")
        elif v is None:
            out.write("canonical\t" + _names(model, seq) + "\n")
        else:
            out.write("\t".join(["non-canonical", str(rec["index"]), rec["reason"], _names(model, rec["pair"]),
                                 _names(model, canon) if canon is not None else "-"]) + "\n")
    out.flush()
    raise typer.Exit(1 if bad else 0)


def _names(model: tokmod.TokenizerModel, ids: list[int]) -> str:
    return " ".join(escape(model.tokens[i]) for i in ids)


def _read_lines(src: str | None) -> list[str]:
    try:
        text = sys.stdin.read() if src in (None, "-") else Path(src).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise InputError(f"cannot read {src}: {getattr(e, 'strerror', None) or e}", "give a readable UTF-8 file") from None
    return text.splitlines()


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
