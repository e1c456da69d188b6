"""A batch of matchers (xgrammar's ``BatchGrammarMatcher``, vLLM's and SGLang's batched masks): one
call fills every row of one caller's int32 bitmask (numpy or torch) and one more accepts a token,
a text or a draft per row, validates drafts (speculative decoding, Koo et al. 2024 Sec. 5.3) or
rolls them back."""

from __future__ import annotations

import numpy as np

from tokfst_cli.decoding.matcher import Matcher, fill_rows
from tokfst_cli.errors import UsageError
from tokfst_cli.tokenizer.model import TokenizerModel


def fill_next_token_bitmasks(matchers: list[Matcher], bitmask, indices: list[int] | None = None) -> None:
    """Row ``indices[i]`` (default ``i``) of ``bitmask`` set to matcher i's :meth:`Matcher.bitmask`,
    every row in one copy (xgrammar's ``batch_fill_next_token_bitmask``)."""
    rows = list(range(len(matchers))) if indices is None else [int(i) for i in indices]
    if len(rows) != len(matchers):
        raise UsageError(f"{len(matchers)} matchers but {len(rows)} row indices")
    fill_rows(bitmask, rows, [m.bitmask() for m in matchers])


class BatchMatcher:
    """The matchers of a batch of sequences (row i: ``matchers[i]``), each call over every row:
    fill one bitmask buffer, accept one token (or a text, or a draft) per row, validate drafts,
    roll back, reset. ``BatchMatcher.of(decoder, n, eos, tokenizer)``: n fresh matchers."""

    def __init__(self, matchers: list[Matcher]):
        self.matchers = list(matchers)

    @classmethod
    def of(cls, decoder, n: int, eos: int | list[int] | None = None,
           tokenizer: TokenizerModel | None = None) -> BatchMatcher:
        return cls([Matcher(decoder, eos, tokenizer) for _ in range(n)])

    def __len__(self) -> int:
        return len(self.matchers)

    def __getitem__(self, i: int) -> Matcher:
        return self.matchers[i]

    def _rows(self, values: list, what: str) -> list:
        if len(values) != len(self.matchers):
            raise UsageError(f"{len(values)} {what} for {len(self.matchers)} matchers")
        return list(values)

    def fill_next_token_bitmask(self, bitmask, indices: list[int] | None = None) -> None:
        """:func:`fill_next_token_bitmasks` of the batch."""
        fill_next_token_bitmasks(self.matchers, bitmask, indices)

    def accept_token(self, tokens: list[int]) -> list[bool]:
        """Row i takes ``tokens[i]`` (:meth:`Matcher.accept_token`); whether each was allowed."""
        return [m.accept_token(t) for m, t in zip(self.matchers, self._rows(tokens, "tokens"))]

    def accept_tokens(self, drafts: list[list[int]]) -> list[bool]:
        return [m.accept_tokens(d) for m, d in zip(self.matchers, self._rows(drafts, "drafts"))]

    def accept_string(self, texts: list[str | bytes]) -> list[bool]:
        return [m.accept_string(s) for m, s in zip(self.matchers, self._rows(texts, "texts"))]

    def validate_tokens(self, drafts: list[list[int]]) -> list[int]:
        """Per row, how many leading tokens of its draft would be accepted (no state changes)."""
        return [m.validate_tokens(d) for m, d in zip(self.matchers, self._rows(drafts, "drafts"))]

    def rollback(self, counts: list[int] | int) -> None:
        """Undo ``counts[i]`` tokens of row i (one count: the same for every row)."""
        ks = [counts] * len(self.matchers) if isinstance(counts, (int, np.integer)) else self._rows(counts, "counts")
        for m, k in zip(self.matchers, ks):
            m.rollback(int(k))

    def reset(self) -> None:
        for m in self.matchers:
            m.reset()

    def is_terminated(self) -> list[bool]:
        return [m.is_terminated() for m in self.matchers]
