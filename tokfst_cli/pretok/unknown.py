"""Stage P's output against the BPE model's alphabet: characters the model cannot spell
(Pitfalls 2025 Sec. 3.1; HF ``tokenizers`` models/bpe ``merge_word``).

HF's BPE starts a word from one symbol per character (per byte for byte-level tokenizers). A
character missing from the vocabulary becomes its ``<0xNN>`` byte tokens when ``byte_fallback``
holds and all of them exist; else the ``unk_token`` (one per character, or one per run with
``fuse_unk``); with no ``unk_token`` it is dropped, and the symbols on both sides may merge. The
canonical constructions spell every token by its text, so they cannot hold a token that stands
for a character it does not spell: a canonical language whose model text can contain such a
character is refused by name (:class:`UnknownCharacter`), after P and before promotion.

A character counts as spellable when each form it can take in a word is a token (the bare
character, and with the ``continuing_subword_prefix`` / ``end_of_word_suffix`` the tokenizer
uses), or its bytes all have fallback tokens. Texts the pre-tokenizer removes (a ``Whitespace``
split's blanks) never reach the model and are not checked.
"""

from __future__ import annotations

import pynini

from tokfst_cli.automata.fsts import linear, ranges_acceptor
from tokfst_cli.automata.symbols import MARKER
from tokfst_cli.automata.utf8 import ranges_of
from tokfst_cli.errors import InputError
from tokfst_cli.tokenizer.model import TokenizerModel, bytes_to_unicode, strip_markers


class UnknownCharacter(InputError):
    """Some text of the language reaches the BPE model with a character it has no token for."""

    def __init__(self, char: str, source: str, unk: str | None, fused: bool, example: str):
        what = (f"HF encodes it as the unknown token {unk!r}" + (" (one per run)" if fused else "")
                if unk else "HF drops it (the tokenizer has no unk_token)")
        super().__init__(f"{source}: the character {char!r} (U+{ord(char):04X}) can reach the BPE model, which has "
                         f"no token for it: {what}, which canonical languages do not model (e.g. in {example!r})",
                         "leave the character out of the pattern, or use a tokenizer with byte_fallback",
                         char=char, unk=unk, example=example)


def _forms(model: TokenizerModel, c: str) -> list[str]:
    prefix = model.options.get("continuing_subword_prefix") or ""
    suffix = model.options.get("end_of_word_suffix") or ""
    forms = [c]
    if prefix:
        forms.append(prefix + c)
    if suffix:
        forms += [c + suffix] + ([prefix + c + suffix] if prefix else [])
    return forms


def _has(model: TokenizerModel, c: str) -> bool:
    return all(f in model.model_vocab() for f in _forms(model, c))


def _fallback_bytes(model: TokenizerModel) -> set[int]:
    if not model.options.get("byte_fallback"):
        return set()
    return {b for b in range(256) if f"<0x{b:02X}>" in model.model_vocab()}


def _byte_ok(model: TokenizerModel, b: int, fb: set[int]) -> bool:
    """Byte-level: byte ``b``'s character (GPT-2's map) is a token in every form, or b falls back."""
    return b in fb or _has(model, bytes_to_unicode()[b])


def _char_ok(model: TokenizerModel, c: str, fb: set[int]) -> bool:
    """Can the model spell character ``c`` (as HF's ``merge_word`` starts a word from it)?"""
    if model.style == "byte-level":
        return all(_byte_ok(model, b, fb) for b in c.encode("utf-8"))
    return _has(model, c) or all(b in fb for b in c.encode("utf-8"))


def spellable(model: TokenizerModel) -> pynini.Fst | None:
    """The minimal DFA of the model texts (with pre-token boundaries) whose every character has a
    token or byte-fallback tokens; None when that is every text (cached on the model)."""
    if "_spellable" not in model.__dict__:
        model.__dict__["_spellable"] = _spellable(model)
    return model.__dict__["_spellable"]


def _spellable(model: TokenizerModel) -> pynini.Fst | None:
    fb = _fallback_bytes(model)
    if len(fb) == 256:
        return None
    units: list[pynini.Fst] = [linear([MARKER])]
    if model.style == "byte-level":
        ok = [b for b in range(256) if _byte_ok(model, b, fb)]
        if len(ok) == 256:
            return None
        units += [linear([b + 1]) for b in ok]
    else:
        prefix = model.options.get("continuing_subword_prefix") or ""
        suffix = model.options.get("end_of_word_suffix") or ""
        chars = {t for t in (strip_markers(tok, prefix, suffix)[0] for tok in model.model_vocab()) if len(t) == 1}
        ok = [ord(c) for c in chars if _has(model, c) and not 0xD800 <= ord(c) <= 0xDFFF]
        if ok:
            units.append(ranges_acceptor(ranges_of(ok)))
        units += [linear([b + 1]) for b in sorted(fb)]
    return pynini.determinize(pynini.union(*units).closure().rmepsilon()).minimize()


def check(model: TokenizerModel, text: pynini.Fst) -> None:
    """UnknownCharacter when L(text) (stage P's output, or a pre-token at the model level) holds a
    character the BPE model cannot spell; the first such character of a shortest witness is named."""
    if model.family != "bpe":
        return
    d = spellable(model)
    if d is None:
        return
    outside = pynini.difference(text.copy().arcsort("olabel"), d).connect()
    if outside.num_states() == 0:
        return
    path = pynini.shortestpath(outside).rmepsilon().topsort()
    labels = [arc.ilabel for s in path.states() for arc in path.arcs(s)]
    raw = bytes(lab - 1 for lab in labels if 0 < lab <= 256)
    witness = raw.decode("utf-8", "replace")
    bad = _first_unspellable(model, witness)
    raise UnknownCharacter(bad, model.source, model.options.get("unk_token"), bool(model.options.get("fuse_unk")),
                           witness)


def _first_unspellable(model: TokenizerModel, text: str) -> str:
    fb = _fallback_bytes(model)
    return next((c for c in text if not _char_ok(model, c, fb)), text[:1] or "?")
