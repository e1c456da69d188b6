"""Added tokens around stage P (Pitfalls 2025 Sec. 3.1): HF splits them out of the raw text first.

``encode`` finds every added token's content in the raw text (``normalized: true`` ones in the
normalized text) before the normalizer and pre-tokenizer run, and emits its id; each text
segment between them goes through P alone. Special ones' texts are left out of the language
(:func:`without_specials`); non-special ones matched on the raw text are cut as HF does
(``pretok.cut``); a language that can contain any other added token's content is refused
(:class:`AddedTokenInLanguage`), so P is exact on the rest.
"""

from __future__ import annotations

import pynini

from tokfst_cli.automata.fsts import linear
from tokfst_cli.errors import InputError
from tokfst_cli.tokenizer.model import TokenizerModel


class AddedTokenInLanguage(InputError):
    """The regex's language contains the text of an added token, which HF would split out
    (``model_level``: the fix may name the model level, which BPE has and WordPiece has not)."""

    def __init__(self, content: str, model_level: bool = True):
        super().__init__(f"the regex can match text containing the added token {content!r}, which the tokenizer "
                         "splits out before preprocessing",
                         "exclude that text from the regex" + (", or use the model level" if model_level else ""),
                         hint="added-token" if model_level else None, content=content)


def splitting(model: TokenizerModel) -> tuple[set[int], dict[int, str]]:
    """(the added tokens HF splits out of the raw text as they are, the others: id -> content).
    A split token is a segment of its own between complete text segments; the others strip
    spaces around them, match single words only, or match normalized text, which a checker of
    token sequences does not model (it refuses a sequence that holds one, by name).

    HF matches ``normalized: false`` contents on the raw text first and ``normalized: true`` ones
    on each piece after it; without a normalizer that is one leftmost-longest pass over both
    unless a content of one kind can overlap one of the other in a text (a substring, or a
    suffix that is a prefix): then the ``normalized: true`` ones are not modelled."""
    splits: dict[int, tuple[str, bool]] = {}
    unmodelled: dict[int, str] = {}
    for a in model.added_tokens:
        aid = a.get("id")
        if isinstance(aid, int) and 0 <= aid < model.vocab_size:
            if any(a.get(k) for k in ("lstrip", "rstrip", "single_word")) or (a.get("normalized") and model.normalizer):
                unmodelled[aid] = str(a.get("content"))
            else:
                splits[aid] = (str(a.get("content")), bool(a.get("normalized")))
    raw = [c for c, n in splits.values() if not n]
    late = {i: c for i, (c, n) in splits.items() if n}
    if raw and late and any(_overlap(x, y) for x in raw for y in late.values()):
        unmodelled.update(late)
        return {i for i in splits if i not in late}, unmodelled
    return set(splits), unmodelled


def _overlap(x: str, y: str) -> bool:
    """Can matches of ``x`` and ``y`` overlap in some text (one inside the other, or a suffix of
    one the other's prefix)?"""
    return x in y or y in x or any(x.endswith(y[:k]) or y.endswith(x[:k]) for k in range(1, min(len(x), len(y))))


def contents(model: TokenizerModel, normalized: bool) -> list[str]:
    return [a["content"] for a in model.added_tokens
            if isinstance(a.get("content"), str) and a["content"] and bool(a.get("normalized")) == normalized]


def _containing(texts: list[str]) -> pynini.Fst:
    sigma = pynini.union(*(linear([b]) for b in range(1, 257))).closure()
    words = pynini.union(*(linear([b + 1 for b in t.encode("utf-8")]) for t in texts))
    return pynini.concat(pynini.concat(sigma, words), sigma.copy())


def specials(model: TokenizerModel) -> list[str]:
    """The contents of the special added tokens HF cuts out of the raw text as they are (``special``,
    not ``normalized``): control tokens (``<|endoftext|>``, ``<s>``, ``[CLS]``) a decoder must
    not spell as text."""
    return [a["content"] for a in model.added_tokens if a.get("special") and not a.get("normalized")
            and isinstance(a.get("content"), str) and a["content"]]


def without_specials(model: TokenizerModel, a: pynini.Fst) -> tuple[pynini.Fst, list[str]]:
    """L(a) without the texts that contain a special token's content, and the contents whose texts
    were there (left out: HF's encode would cut them out as control tokens)."""
    texts = specials(model)
    if not texts:
        return a, []
    found = [t for t in texts if _contains(a, [t])]
    if not found:
        return a, []
    banned = pynini.determinize(_containing(found).rmepsilon()).minimize()
    out = pynini.difference(a.copy().arcsort("olabel"), banned.arcsort("ilabel")).connect()
    return out.rmepsilon(), found


def _contains(a: pynini.Fst, texts: list[str]) -> bool:
    hits = pynini.intersect(a.copy().arcsort("olabel"), _containing(texts).arcsort("ilabel"))
    return hits.connect().num_states() > 0


def check(model: TokenizerModel, a: pynini.Fst, normalizer: pynini.Fst | None = None, model_level: bool = True,
          modelled: set[bytes] = frozenset()) -> None:
    """AddedTokenInLanguage when some string of L(a) (raw, or normalized by ``normalizer`` for
    ``normalized: true`` tokens) contains an added token's content, other than the ``modelled``
    ones (UTF-8; the cuts ``pretok.cut`` models)."""
    for normalized in (False, True):
        texts = [t for t in contents(model, normalized) if t.encode("utf-8") not in modelled]
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
            raise AddedTokenInLanguage(next((t for t in texts if t in text), texts[0]), model_level)


def check_wordpiece(model: TokenizerModel, a: pynini.Fst) -> None:
    """:func:`check` for canonical WordPiece, whose P has no normalizer of its own to compose
    with: added tokens matched on normalized text are refused by name, not checked on raw text."""
    normalized = contents(model, True)
    if normalized and model.normalizer:
        raise InputError(f"{model.source}: the added token {normalized[0]!r} is matched on normalized text, which "
                         "canonical WordPiece does not model",
                         "mark it \"normalized\": false in the tokenizer.json, or promote without the canonical filter",
                         hint="added-token-normalized", content=normalized[0])
    check(model, a, model_level=False)
