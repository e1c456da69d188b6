"""Labels and named OpenFst symbol tables: bytes, text markers, and tokens named for their tokenizer.

Label 0 is epsilon; byte b is label b+1; token id t is label t+1. Pre-tokenized text (the
output of the preprocessing stage P, Pitfalls 2025 Sec. 3.1) adds two labels after the bytes:
:data:`MARKER` between words and :data:`UNKSYM` for a whole word that the tokenizer turns
into [UNK]. OpenFst's text formats split
names on blanks, so names escape backslash, whitespace and control characters as ``\\\\``,
``\\xNN`` and ``\\uNNNN``; ``unescape`` inverts ``escape`` exactly. An unused id in the
vocabulary is named ``\\gapN``, which ``escape`` never produces.
"""

from __future__ import annotations

import functools
import re

import numpy as np
import pynini

from tokfst_cli.automata.arrays import fst_arrays, unique
from tokfst_cli.errors import InputError
from tokfst_cli.tokenizer.model import TokenizerModel

EPS = "<eps>"
MARKER = 257  # word (pre-token) boundary label in a pre-tokenized text
UNKSYM = 258  # "this whole word is [UNK]" (e.g. longer than max_input_chars_per_word)
MARKER_NAME, UNKSYM_NAME = "<w>", "<unk-word>"
TEXT_TABLE = "tokfst-text-bytes"
_UNESCAPE = re.compile(r"\\(\\|x[0-9a-f]{2}|u[0-9a-f]{4})")


_PLAIN = re.compile(r"[^\\\x00-\x20\x7f\s]*")  # a name escape() leaves as it is (most tokens)


def escape(name: str) -> str:
    """A whitespace-free, reversible name for ``fstprint`` and text symbol files."""
    if name == EPS:
        return "\\x3ceps>"
    if _PLAIN.fullmatch(name):
        return name
    out = []
    for c in name:
        o = ord(c)
        if c == "\\":
            out.append("\\\\")
        elif o <= 0x20 or o == 0x7F or c.isspace():
            out.append(f"\\x{o:02x}" if o < 0x100 else f"\\u{o:04x}")
        else:
            out.append(c)
    return "".join(out)


def unescape(name: str) -> str:
    """Inverse of ``escape`` (one left-to-right pass)."""
    return _UNESCAPE.sub(lambda m: "\\" if m.group(1) == "\\" else chr(int(m.group(1)[1:], 16)), name)


def byte_name(b: int) -> str:
    return escape(chr(b)) if 0x21 <= b <= 0x7E else f"\\x{b:02x}"


@functools.lru_cache(maxsize=1)
def _byte_table() -> pynini.SymbolTable:
    table = pynini.SymbolTable("tokfst-bytes")
    table.add_symbol(EPS, 0)
    for b in range(256):
        table.add_symbol(byte_name(b), b + 1)
    return table


def byte_table() -> pynini.SymbolTable:
    """The byte symbol table (label b + 1 = byte b): a fresh copy of one made once (257 names
    cost ~0.3 ms to add from Python; a copy, under 1 µs)."""
    return _byte_table().copy()


def text_byte_table() -> pynini.SymbolTable:
    """Bytes plus the word boundary and the [UNK]-word symbol (pre-tokenized text)."""
    table = byte_table()
    table.set_name(TEXT_TABLE)
    table.add_symbol(MARKER_NAME, MARKER)
    table.add_symbol(UNKSYM_NAME, UNKSYM)
    return table


TOKEN_TABLE_PREFIX = "tokfst-tokens-"


def token_table_name(model: TokenizerModel) -> str:
    """The token symbol table's name: it carries the tokenizer's fingerprint (16 hex digits)."""
    return f"{TOKEN_TABLE_PREFIX}{model.fingerprint[:16]}"


def token_table(model: TokenizerModel) -> pynini.SymbolTable:
    """The model's token symbol table (built once per model; a copy for each caller)."""
    table = model.__dict__.get("_token_table")
    if table is None:
        table = model.__dict__["_token_table"] = _token_table(model)
    return table.copy()


def _token_table(model: TokenizerModel) -> pynini.SymbolTable:
    table = pynini.SymbolTable(token_table_name(model))
    table.add_symbol(EPS, 0)
    for i, tok in enumerate(model.tokens):
        table.add_symbol(escape(tok) if tok else f"\\gap{i}", i + 1)  # escape() never makes "\\g"
    return table


SYMBOLS = ("full", "compact", "none")  # how a token automaton's .fst names its labels (with_tables)


def with_tables(fst: pynini.Fst, mode: str, vocab_size: int) -> pynini.Fst:
    """``fst`` (a token acceptor, labels id + 1) with the symbol tables of ``mode``: "full" as it is
    (input and output tables of the whole vocabulary: GPT-2's 50,257 names take ~0.98 MB each);
    "compact" both tables holding only the labels on its arcs, the terminal names and the
    vocabulary's last token (so the table's last key still gives the vocabulary's size), under
    the same name (the tokenizer's fingerprint); "none" no tables (labels as numbers: nothing
    tells the tokenizer, and terminal labels, named only there, are refused)."""
    if mode not in SYMBOLS:
        raise InputError(f"symbol tables {mode!r} are not known", f"give one of: {', '.join(SYMBOLS)}")
    table = fst.input_symbols()
    if mode == "full" or table is None:
        return fst
    if mode == "none":
        if table.member(vocab_size + 1):
            raise InputError("the automaton has terminal labels, which only its symbol table names",
                             "keep a symbol table (compact)", hint="symbols-terminals")
        return fst.copy().set_input_symbols(None).set_output_symbols(None)
    labels = unique(np.concatenate([fst_arrays(fst).ilabel, [vocab_size]]))
    keys = [k for k, _ in table] if table.available_key() > vocab_size + 1 else []
    small = pynini.SymbolTable(table.name())
    small.add_symbol(EPS, 0)
    for label in sorted({*labels[labels > 0].tolist(), *(k for k in keys if k > vocab_size)}):
        small.add_symbol(table.find(label), label)
    return fst.copy().set_input_symbols(small).set_output_symbols(small)


def full_tables(fst: pynini.Fst, model: TokenizerModel) -> pynini.Fst:
    """A token acceptor read with compact tables (:func:`with_tables`) given the whole vocabulary's
    tables again (terminal names kept), in place, so that it composes with the tokenizer's
    lexicon as a full one does; any other ``fst`` as it is."""
    table = fst.input_symbols()
    if table is None or table.num_symbols() >= table.available_key():  # none, or dense: full
        return fst
    full = token_table(model)
    for key, name in table:
        if key > model.vocab_size:
            full.add_symbol(name, key)
    return fst.set_input_symbols(full).set_output_symbols(full)


def marked_pieces(labels: list[int]) -> list[str]:
    """The text pieces of a pre-tokenized label sequence (bytes as label b + 1, :data:`MARKER`
    between pieces), decoded as UTF-8; no labels, no pieces."""
    pieces, cur = [], bytearray()
    for lab in labels:
        if lab == MARKER:
            pieces.append(cur.decode("utf-8"))
            cur = bytearray()
        else:
            cur.append(lab - 1)
    if labels:
        pieces.append(cur.decode("utf-8"))
    return pieces
