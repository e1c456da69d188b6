"""``tokfst canonical-check``: read in chunks, check against the canonical automaton, report (grep's exit codes).

The work is :mod:`tokfst_cli.analysis.check`'s; lines are reported chunk by chunk as they are checked, so
memory stays flat in the input size. A bad line stops the run (exit 2) before any line of its
chunk (``check.CHUNK_LINES`` lines) is written; lines of earlier chunks have been written.
"""

from __future__ import annotations

import re
from enum import Enum
from typing import Optional

import typer

from tokfst_cli.analysis import check
from tokfst_cli.automata.symbols import unescape
from tokfst_cli.cli.common import Level, LevelOpt, Tokenizer
from tokfst_cli.cli.output import OUT
from tokfst_cli.errors import InputError
from tokfst_cli.tokenizer import model as tokmod

_INT = re.compile(r"-?[0-9]+")  # str.isdigit() also accepts "²", which int() refuses


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
    level: Level = LevelOpt,
) -> None:
    """Check token sequences for canonicity (BPE: Cognetta & Okazaki 2024 Sec. 6.5; WordPiece: Sec. 6.2)."""
    model = tokmod.load(tokenizer)
    if model.family == "wordpiece" and artifact is not None:
        raise InputError("--artifact is for BPE tokenizers", "drop --artifact for a WordPiece tokenizer")
    parse = None if kind is InputKind.text else lambda line, n: _parse(model, kind, line, n)
    checker = check.Checker(model, parse, artifact, level.value)
    found, first = False, 1
    for lines in check.read_chunks(src):
        with OUT.progress("checking"):
            verdicts = checker.check(lines, first)
        first += len(lines)
        found = found or any(v.offence is not None for v in verdicts)
        if not quiet and verdicts:
            line = checker.json_line if json_out else checker.text_line
            OUT.text("\n".join(map(line, verdicts)))
    with OUT.progress("checking"):
        checker.verdicts()  # an unsupported tokenizer or a bad artifact is an error even without input
    OUT.flush()
    raise typer.Exit(1 if found else 0)


_IDS = re.compile(r"[0-9 ]*")  # a line of ASCII digits and spaces: every field is a valid integer


def _parse(model: tokmod.TokenizerModel, kind: InputKind, line: str, n: int) -> list[int]:
    if kind is InputKind.ids and _IDS.fullmatch(line):
        ids = list(map(int, line.split()))
        if not ids or max(ids) < model.vocab_size:
            return ids
    out = []
    for field in line.split():
        if kind is InputKind.ids:
            if not _INT.fullmatch(field) or not 0 <= int(field) < model.vocab_size:
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
