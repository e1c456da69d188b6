"""A grammar's text to its byte automaton: the reader by format, then :mod:`.regular` (Koo et al. 2024 Sec. 3).

``compile_grammar(text, format="gbnf")`` is the Python entry point (``tokfst.compile_grammar``);
``promote --grammar FILE`` takes the format from FILE's extension (``.gbnf``, ``.lark``). The
result is stage A's :class:`~tokfst_cli.text.regex.ByteAutomaton` (``pipeline.build(model, name,
automaton=...)`` promotes it, canonically too, and ``constraint.lazy(model, automaton=...)``
decodes it without promotion), or a :class:`~tokfst_cli.grammar.pushdown.Pushdown` where a rule
embeds itself (``promotion.stack.PushdownDecoder`` decodes it).
"""

from __future__ import annotations

from pathlib import Path

from tokfst_cli.errors import InputError
from tokfst_cli.grammar.gbnf import read_gbnf
from tokfst_cli.grammar.ir import Grammar
from tokfst_cli.grammar.lark_reader import read_lark
from tokfst_cli.grammar.pushdown import Pushdown
from tokfst_cli.grammar.regular import compile_grammar as compile_ir
from tokfst_cli.text.regex import ByteAutomaton

FORMATS = {".gbnf": "gbnf", ".lark": "lark"}


def read(text: str, format: str = "gbnf", source: str = "<grammar>", import_paths: list[str] = ()) -> Grammar:
    """The grammar IR of ``text`` in ``format`` (``"gbnf"`` or ``"lark"``)."""
    if format == "gbnf":
        return read_gbnf(text, source)
    if format == "lark":
        return read_lark(text, source, list(import_paths))
    raise InputError(f"unknown grammar format {format!r}", "give gbnf or lark")


def format_of(path: str) -> str:
    """The format named by a grammar file's extension."""
    fmt = FORMATS.get(Path(path).suffix.lower())
    if fmt is None:
        raise InputError(f"grammar file {path} is neither .gbnf nor .lark",
                         "name it FILE.gbnf (GBNF) or FILE.lark (Lark)")
    return fmt


def compile_grammar(text: str, format: str = "gbnf", *, source: str = "<grammar>", max_states: int = 1_000_000,
                    import_paths: list[str] = ()) -> ByteAutomaton | Pushdown:
    """The minimal byte DFA of a grammar whose recursion is left- or right-linear, else its byte PDT
    (:mod:`.pushdown`: self-embedding rules need a stack)."""
    try:
        return compile_ir(read(text, format, source, import_paths), max_states)
    except RecursionError:  # the readers and the compiler walk expressions recursively
        raise InputError(f"grammar {source} nests its groups too deeply to read",
                         "move deep groups into rules of their own") from None


def compile_file(path: str, text: str, max_states: int = 1_000_000) -> ByteAutomaton | Pushdown:
    """``compile_grammar`` of a file's text, the format by its extension, imports beside it (Lark)."""
    return compile_grammar(text, format_of(path), source=path, max_states=max_states,
                           import_paths=[str(Path(path).resolve().parent)] if path != "-" else [])
