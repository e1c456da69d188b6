"""The oracle for stage C: texts of token sequences and Hugging Face's own tokenization of them.

Hugging Face's BPE model is the oracle for "canonical"; canonical-check reports its output
for the text of a non-canonical sequence.
"""

from __future__ import annotations

from tokenizers import Tokenizer

from tokfst_cli.tokenizer.model import SPACE_MARK, TokenizerModel, bytes_to_unicode, model_text


class HfReference:
    """``level``: "pipeline" (``encode`` of the whole tokenizer) or "model" (BPE model alone)."""

    def __init__(self, model: TokenizerModel, level: str = "model"):
        self.model = model
        self.level = level
        self._hf: Tokenizer | None = None

    @property
    def hf(self) -> Tokenizer:
        """HF's tokenizer, parsed on first use (canonical lines never need it)."""
        if self._hf is None:
            self._hf = Tokenizer.from_file(self.model.source)
            self._hf.no_padding()
            self._hf.no_truncation()
        return self._hf

    def text_of(self, ids: list[int]) -> str | None:
        """The model-level text a sequence spells, or None if it is not valid UTF-8.

        WordPiece: the words separated by spaces (None if a word is [UNK] or special)."""
        m = self.model
        if m.family == "wordpiece":
            if any(m.surfaces[i] is None for i in ids):
                return None
            return "".join((" " if k and not m.word_internal[i] else "") + m.surfaces[i].decode("utf-8")
                           for k, i in enumerate(ids))
        if m.style == "byte-level":
            return "".join(m.tokens[i] for i in ids)
        parts = []
        for i in ids:
            s = m.surfaces[i]
            if s is not None and len(s) == 1 and m.tokens[i].startswith("<0x"):
                parts.append(s)
            else:
                parts.append(model_text(m, i)[0].encode("utf-8"))
        try:
            return b"".join(parts).decode("utf-8")
        except UnicodeDecodeError:
            return None

    def model_string(self, text: str) -> str:
        """Raw text as the model sees it (byte-level map, or spaces as ▁), without pre-tokenization."""
        if self.model.style == "byte-level":
            b2u = bytes_to_unicode()
            return "".join(b2u[b] for b in text.encode("utf-8"))
        if self.model.style == "sentencepiece":
            return text.replace(" ", SPACE_MARK)
        return text

    def tokenize_text(self, text: str) -> list[int]:
        if self.model.family == "wordpiece":
            return self.hf.encode(text, add_special_tokens=False).ids
        return [t.id for t in self.hf.model.tokenize(self.model_string(text))] if text else []

    def canonical(self, ids: list[int]) -> list[int] | None:
        """HF's tokenization of the sequence's text (pipeline level: ``encode(decode(ids))``)."""
        if self.level == "pipeline" and self.model.family == "bpe":
            return self.hf.encode(self.hf.decode(ids, skip_special_tokens=False), add_special_tokens=False).ids
        text = self.text_of(ids)
        if text is None or self.model.family == "wordpiece":
            return None if text is None else self.tokenize_text(text)
        return [t.id for t in self.hf.model.tokenize(text)] if text else []
