"""Stage S: tokenization-agnostic promotion MIN(PROJ(A o T)) (seed 000 Sec. 5, Eq. 3, Lemma 1).

A is the minimal deterministic byte acceptor of the regex, T the lexicon transducer. By
Lemma 1, epsilon-removal of PROJ(A o T) is already deterministic, so no determinization is
run. When every single byte is a token (byte-level BPE, byte fallback), the result is also
already minimal: distinct states of the minimal A have distinct byte languages, and spelling
any distinguishing string byte by byte tells their token languages apart. Minimization is
then skipped; otherwise OpenFst minimizes.
"""

from __future__ import annotations

from dataclasses import dataclass

import pynini

from .errors import EmptyLanguageError, LimitError
from .regex import ByteAutomaton
from .tokenizer import TokenizerModel


@dataclass
class Promoted:
    fst: pynini.Fst
    states: int
    arcs: int
    minimized: bool


def covers_all_bytes(model: TokenizerModel) -> bool:
    """Is every byte 0-255 the surface of some single token? (computed once per model)"""
    cached = model.__dict__.get("_covers_all_bytes")
    if cached is None:
        singles = {s[0] for s in model.surfaces if s is not None and len(s) == 1}
        cached = model.__dict__["_covers_all_bytes"] = len(singles) == 256
    return cached


def count_arcs(fst: pynini.Fst) -> int:
    return sum(fst.num_arcs(s) for s in fst.states())


def promote(
    model: TokenizerModel,
    automaton: ByteAutomaton,
    lexicon: pynini.Fst,
    max_states: int = 1_000_000,
    force_minimize: bool = False,
) -> Promoted:
    """The minimal acceptor of token sequences whose concatenated surfaces are in L(A)."""
    a = automaton.fst.copy().arcsort("olabel")
    c = pynini.compose(a, lexicon, connect=True)
    if c.num_states() > max_states:
        raise LimitError("A o T", "max_states", max_states, c.num_states(), remedy="simplify")
    c.project("output").rmepsilon()
    minimize = force_minimize or not covers_all_bytes(model)
    if minimize:
        c.minimize()
    if c.start() == pynini.NO_STATE_ID or c.num_states() == 0:
        raise EmptyLanguageError(
            f"no sequence of {model.source} tokens spells a string matching {automaton.pattern!r}",
            "the vocabulary cannot write this language (e.g. upper case for an uncased model)")
    if c.num_states() > max_states:
        raise LimitError("the promoted automaton", "max_states", max_states, c.num_states())
    c.set_input_symbols(lexicon.output_symbols())
    c.set_output_symbols(lexicon.output_symbols())
    return Promoted(fst=c, states=c.num_states(), arcs=count_arcs(c), minimized=minimize)
