"""Helpers of the schema tests: compile to a byte automaton, test texts against it."""

from __future__ import annotations

import pynini

from tokfst_cli.automata.fsts import text_acceptor
from tokfst_cli.errors import EmptyLanguageError
from tokfst_cli.schema.compile import compile_schema


def compiled(schema, **options) -> pynini.Fst:
    """The schema's byte automaton, arc-sorted for :func:`accepts` (no state when no text is valid)."""
    try:
        return compile_schema(schema, **options).automaton.fst.arcsort("ilabel")
    except EmptyLanguageError:
        return pynini.Fst()


def accepts(fst: pynini.Fst, text: str) -> bool:
    """Does the (arc-sorted) byte automaton accept the UTF-8 bytes of ``text``?"""
    return pynini.intersect(text_acceptor(text), fst).num_states() > 0
