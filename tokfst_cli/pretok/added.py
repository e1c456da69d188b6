"""Added tokens around stage P (seed 001 Sec. 3.1): HF splits them out of the raw text first.

``encode`` finds every added token's content in the raw text (``normalized: true`` ones in the
normalized text) before the normalizer and pre-tokenizer run, and emits its id; each text
segment between them goes through P alone. A regex whose language can contain such a content
is refused (:class:`AddedTokenInLanguage`), so P alone is exact on the rest.
"""

from __future__ import annotations

import pynini

from ..errors import InputError
from ..fsts import linear
from ..tokenizer import TokenizerModel


class AddedTokenInLanguage(InputError):
    """The regex's language contains the text of an added token, which HF would split out."""

    def __init__(self, content: str):
        super().__init__(f"the regex can match text containing the added token {content!r}, which the tokenizer "
                         "splits out before preprocessing",
                         "exclude that text from the regex, or use the model level", hint="added-token",
                         content=content)


def contents(model: TokenizerModel, normalized: bool) -> list[str]:
    return [a["content"] for a in model.added_tokens
            if isinstance(a.get("content"), str) and a["content"] and bool(a.get("normalized")) == normalized]


def _containing(texts: list[str]) -> pynini.Fst:
    sigma = pynini.union(*(linear([b]) for b in range(1, 257))).closure()
    words = pynini.union(*(linear([b + 1 for b in t.encode("utf-8")]) for t in texts))
    return pynini.concat(pynini.concat(sigma, words), sigma.copy())


def check(model: TokenizerModel, a: pynini.Fst, normalizer: pynini.Fst | None = None) -> None:
    """AddedTokenInLanguage when some string of L(a) (raw, or normalized by ``normalizer`` for
    ``normalized: true`` tokens) contains an added token's content."""
    for normalized in (False, True):
        texts = contents(model, normalized)
        if not texts:
            continue
        lang = a
        if normalized and normalizer is not None:
            lang = pynini.compose(a, normalizer).project("output").rmepsilon()
        hits = pynini.intersect(lang.copy().arcsort("olabel"), _containing(texts).arcsort("ilabel"))
        if hits.connect().num_states():
            found = pynini.shortestpath(hits).rmepsilon().topsort()
            raw = bytes(arc.ilabel - 1 for s in found.states() for arc in found.arcs(s) if 0 < arc.ilabel <= 256)
            text = raw.decode("utf-8", "replace")
            raise AddedTokenInLanguage(next((t for t in texts if t in text), texts[0]))
