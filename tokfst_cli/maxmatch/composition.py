"""Stages S+C for WordPiece by composition with T_Aho: MIN(PROJ(X o T_Aho)) (Cognetta & Okazaki 2024 Sec. 6.2, Fig. 4).

T_Aho here is :func:`.taho.text_transducer`: pre-tokenized text (words separated by MARKER,
UNKSYM for a word that is too long) -> HF's WordPiece tokens. X is the regex's text automaton
with the identity limited to words within max_input_chars_per_word (:mod:`.wordtext`), so the
length rule needs no counter inside T_Aho. The result equals the product construction of
:mod:`.product`; it is the paper's route, kept for `compile-maxmatch` artifacts and as an
independent check.
"""

from __future__ import annotations

import pynini

from tokfst_cli.automata.fst_io import cached_fst, read_fst
from tokfst_cli.automata.symbols import TEXT_TABLE, text_byte_table, token_table, token_table_name
from tokfst_cli.errors import EmptyLanguageError, InputError, LimitError
from tokfst_cli.maxmatch.taho import text_transducer
from tokfst_cli.maxmatch.wordtext import text_automaton
from tokfst_cli.tokenizer.model import TokenizerModel


def compiled(model: TokenizerModel) -> pynini.Fst:
    """T_Aho for the tokenizer with symbol tables, built once and cached by fingerprint."""
    def build() -> pynini.Fst:
        t = text_transducer(model)
        t.set_input_symbols(text_byte_table())
        t.set_output_symbols(token_table(model))
        return t.arcsort("ilabel")
    return cached_fst(f"taho-{model.fingerprint}", build)


def maxmatch_artifact(model: TokenizerModel, path: str | None) -> pynini.Fst:
    """T_Aho from ``path`` (checked against the tokenizer's fingerprint) or the cache."""
    if path is None:
        return compiled(model)
    fst = read_fst(path)
    table, inputs = fst.output_symbols(), fst.input_symbols()
    if table is None or table.name() != token_table_name(model) or inputs is None or inputs.name() != TEXT_TABLE:
        raise InputError(f"{path} is not a T_Aho for {model.source}",
                         "build it with tokfst compile-maxmatch for this tokenizer")
    return fst.arcsort("ilabel")


def maxmatch_promote(model: TokenizerModel, automaton: pynini.Fst, taho: pynini.Fst,
                     max_states: int) -> pynini.Fst:
    """MIN(PROJ(X o T_Aho)), determinized within ``max_states``."""
    x = text_automaton(model, automaton, max_states, bounded=True)
    c = pynini.compose(x.arcsort("olabel"), taho, connect=True)
    if c.num_states() > max_states:
        raise LimitError("X o T_Aho", "max_states", max_states, c.num_states(), remedy="product")
    c.project("output").rmepsilon()
    d = pynini.determinize(c, nstate=max_states + 1)
    if d.num_states() > max_states:
        raise LimitError("the canonical automaton", "max_states", max_states, remedy="product")
    d.minimize()
    if d.num_states() == 0 or d.start() == pynini.NO_STATE_ID:
        raise EmptyLanguageError("no canonical token sequence spells a string of the language",
                                 "check the regex against the tokenizer's vocabulary")
    return d.arcsort("ilabel")
