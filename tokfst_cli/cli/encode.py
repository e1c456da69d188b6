"""``tokfst encode``: read the text, run :class:`tokfst_cli.encoder.encode.Encoder`, write the ids."""

from __future__ import annotations

import sys
from typing import Optional

import typer

from tokfst_cli.automata.symbols import escape
from tokfst_cli.cli.common import Level, Out, Tokenizer, read_binary
from tokfst_cli.cli.output import OUT
from tokfst_cli.errors import InputError, UsageError
from tokfst_cli.tokenizer import model as tokmod

CHUNK = 1 << 16  # bytes read at a time by --stream (a read returns what the pipe holds)


def encode_cmd(
    tokenizer: str = Tokenizer,
    src: Optional[str] = typer.Argument(None, metavar="IN", help="The text (UTF-8, one text); absent or '-' = stdin."),
    out: Optional[str] = Out,
    json_out: bool = typer.Option(False, "--json", help="One JSON object: ids, count (and tokens with --tokens)."),
    tokens: bool = typer.Option(False, "--tokens", help="Token strings (escaped as fstprint shows them), not ids."),
    count: bool = typer.Option(False, "--count", help="Only the number of tokens."),
    stream: bool = typer.Option(False, "--stream", help="Read stdin as it comes and print each token as soon as no "
                                                        "later text can change it (one line per read; stdout only)."),
    level: Level = typer.Option(Level.pipeline, "--level", help="pipeline: encode(text, add_special_tokens=False) "
                                                                 "(added tokens, normalizer, pre-tokenizer, model); "
                                                                 "model: the BPE model on the text as one pre-token."),
) -> None:
    """Encode text to token ids as Hugging Face's encode does (Incremental BPE 2026)."""
    from tokfst_cli.encoder.encode import Encoder  # deferred: start-up: only this command needs it

    with OUT.progress("loading tokenizer"):
        encoder = Encoder(tokmod.load(tokenizer), level.value)
    if stream:
        if out not in (None, "-") or src not in (None, "-") or json_out or count:
            raise UsageError("--stream reads stdin and writes stdout, without --json or --count",
                             "drop IN, OUT, --json and --count, or drop --stream")
        return _stream(encoder, tokens)
    data = read_binary(src or "-", "give a readable UTF-8 file")
    with OUT.progress("encoding"):
        ids = encoder.encode(_decode(data))
    names = [escape(encoder.model.tokens[i]) for i in ids] if tokens else None
    if json_out:
        OUT.document(out, {"count": len(ids), "ids": ids, **({"tokens": names} if tokens else {})})
    elif count:
        OUT.data(out, f"{len(ids)}\n".encode())
    else:
        OUT.data(out, (" ".join(names if tokens else map(str, ids)) + "\n").encode("utf-8"))


def _decode(data: bytes) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise InputError(f"the input is not UTF-8 ({e.reason} at byte {e.start})", "give UTF-8 text",
                         hint="utf8") from None


def _stream(encoder, tokens: bool) -> None:
    """--stream: each read of stdin (what the pipe holds, up to CHUNK) fed to the stream, the final
    ids printed and flushed."""
    s, stdin = encoder.stream(), sys.stdin.buffer
    while True:
        chunk = stdin.read1(CHUNK)
        ids = s.feed(chunk) if chunk else s.finish()
        if ids:
            OUT.text(" ".join(escape(encoder.model.tokens[i]) for i in ids) if tokens else " ".join(map(str, ids)))
            OUT.flush()
        if not chunk:
            return
