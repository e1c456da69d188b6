"""Modular filters composed into the pipeline (Pitfalls 2025 Sec. 4): which ones a constraint asks for.

Text-level filters restrict the regex's language before stage P (stage A's output):
``scripts`` / ``ascii`` (Sec. 4.2, mono- vs multi-linguality; App. A.4), ``nfc`` (Sec. 4.1,
canonical Unicode): MIN(A ∩ F) with F a tokenizer-independent byte DFA (:mod:`.text`).
Token-level filters restrict stage S's token automaton before stage C: ``literal_ascii`` /
``no_byte_tokens`` (Sec. 4.3, characters vs bytes; :mod:`.bytes`), ``fuse_spaces`` (Sec. 4.5,
isolated spaces; :mod:`.tokens`), ``max_tokens`` (sequences of at most N tokens, Pitfalls 2025 App. B's
Gamma^k; :mod:`.length`): S ∩ F with F a DFA over token labels. Canonical filtering commutes with
both: C(S ∩ F) = C(S) ∩ F. A filter that leaves nothing raises ``EmptyLanguageError``
(hint ``filters-empty``); an unknown script ``InputError`` (hint ``scripts``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import pynini

from tokfst_cli.errors import InputError
from tokfst_cli.tokenizer.model import TokenizerModel

if TYPE_CHECKING:
    from tokfst_cli.automata.arrays import FstArrays  # deferred: start-up: only this path needs it


@dataclass(frozen=True)
class Filters:
    """The filters of one constraint (all off by default)."""

    scripts: tuple[str, ...] = ()  # Unicode Script property values (Common and Inherited always allowed)
    ascii: bool = False
    nfc: bool = False
    no_byte_tokens: bool = False
    literal_ascii: bool = False
    fuse_spaces: bool = False
    max_tokens: int | None = None

    def __post_init__(self) -> None:
        """Refuse an unknown script or a negative count now (InputError), before anything is built."""
        if isinstance(self.scripts, str):  # one name, not its letters
            object.__setattr__(self, "scripts", (self.scripts,))
        object.__setattr__(self, "scripts", tuple(self.scripts))
        if self.scripts:
            from tokfst_cli.filters.text import check_script  # deferred: start-up: only this path needs it

            for name in self.scripts:
                check_script(name)
        if self.max_tokens is not None and self.max_tokens < 0:
            raise InputError(f"max_tokens must be at least 0, not {self.max_tokens}", "give a count of tokens >= 0",
                             hint="max-tokens", max_tokens=self.max_tokens)

    def text_level(self) -> bool:
        return bool(self.scripts) or self.ascii or self.nfc

    def token_level(self) -> bool:
        return self.no_byte_tokens or self.literal_ascii or self.fuse_spaces or self.max_tokens is not None

    def names(self) -> list[str]:
        """The filters asked for, by their library names."""
        return [name for name, on in (("scripts", bool(self.scripts)), ("ascii", self.ascii), ("nfc", self.nfc),
                                      ("no_byte_tokens", self.no_byte_tokens), ("literal_ascii", self.literal_ascii),
                                      ("fuse_spaces", self.fuse_spaces),
                                      ("max_tokens", self.max_tokens is not None)) if on]


NONE = Filters()
TEXT = ("scripts", "ascii", "nfc")


def apply_text(model: TokenizerModel, fst: pynini.Fst, filters: Filters) -> pynini.Fst:
    """A ∩ F_text: the regex's byte DFA restricted by the text-level filters (minimal DFA)."""
    from tokfst_cli.filters import text  # deferred: start-up: only this path needs it

    if not filters.text_level():
        return fst
    return text.restrict(fst, text.filters_for(filters.scripts, filters.ascii, filters.nfc),
                         [n for n in filters.names() if n in TEXT])


def apply_tokens(model: TokenizerModel, fst: pynini.Fst, filters: Filters, marker: int | None = None,
                 max_states: int = 1_000_000, arrays: FstArrays | None = None, agnostic: bool = False) -> pynini.Fst:
    """S ∩ F_tokens: a token acceptor restricted by the token-level filters; ``marker`` is the
    pre-token boundary label of S_M (pipeline level), which every filter passes through.
    ``max_states`` bounds the product with ``max_tokens``'s counter (LimitError); ``arrays``:
    S's arcs in bulk, if read already (``promote.Promoted.arrays``); ``agnostic``: ``fst`` is
    stage S's agnostic automaton as promoted (the shortcuts of ``tokens`` that need no OpenFst)."""
    return apply_tokens_arrays(model, fst, filters, marker, max_states, arrays, agnostic)[0]


def apply_tokens_arrays(model: TokenizerModel, fst: pynini.Fst, filters: Filters, marker: int | None = None,
                        max_states: int = 1_000_000, arrays: FstArrays | None = None,
                        agnostic: bool = False) -> tuple[pynini.Fst, FstArrays | None]:
    """:func:`apply_tokens` and the result's arcs where they are known without reading them
    (S's own, or made over S's; None else), for the decoder."""
    from tokfst_cli.filters import bytes as byte_filters  # deferred: start-up: only this path needs it
    from tokfst_cli.filters import length, tokens  # deferred: start-up: only this path needs it

    if not filters.token_level():
        return fst, arrays
    names = [n for n in filters.names() if n not in TEXT]
    steps = [(name, build) for name, build, on in (
        ("literal_ascii", byte_filters.literal_ascii, filters.literal_ascii),
        ("no_byte_tokens", byte_filters.no_byte_tokens, filters.no_byte_tokens),
        ("fuse_spaces", tokens.fuse_spaces, filters.fuse_spaces)) if on]
    out, dirty, arrays = tokens.restrict(model, fst, steps, marker, names, arrays, agnostic)
    if filters.max_tokens is not None:
        counted = length.restrict(out, filters.max_tokens, marker, max_states)
        if counted is not None:
            out, dirty = counted, True
            if tokens.empty(out):
                raise tokens.no_sequence(names)
    if dirty:
        out.minimize()
    if out is not fst:
        out.set_input_symbols(fst.input_symbols()).set_output_symbols(fst.output_symbols())
    return out, None if dirty else arrays
