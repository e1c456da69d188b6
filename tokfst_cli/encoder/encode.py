"""Text -> token ids, exactly as Hugging Face's ``encode(text, add_special_tokens=False).ids``
(Incremental BPE 2026 Sec. 2; Pitfalls 2025 Sec. 3.1 for the pipeline).

The pipeline, as HF runs it:

1. *Added tokens* are cut out of the raw text first, leftmost-longest over their contents (HF's
   added vocabulary, special and non-special alike); each is its own id, and each text segment
   between them goes through the rest alone.
2. *Normalizer and pre-tokenizer*: stage P's transducer (:mod:`tokfst_cli.pretok.build`), applied
   to the segment, gives the pre-tokens (the same automaton the canonical constructions use:
   one implementation of HF's components, refused by name where not modelled).
3. *Model*: each pre-token through HF's BPE (:class:`tokfst_cli.bpe.hf.HfBpe`: merges by rank
   and position, ``ignore_merges``, byte fallback, unknown tokens), memoized per pre-token.

``level="model"``: HF's model on the text as one pre-token (no added tokens, normalizer or
pre-tokenizer). Configurations not modelled are refused when the encoder is made
(:class:`~tokfst_cli.errors.InputError`; BPE dropout by the loader): WordPiece and Unigram models, added
tokens with ``lstrip``/``rstrip``/``single_word`` or ``normalized`` under a normalizer.

What it costs: stage P is one composition with the segment (C++, linear in its length); BPE per
distinct pre-token is HF's heap (O(n log n) in the pre-token's length), then a lookup.
"""

from __future__ import annotations

import codecs
import re
from collections.abc import Iterator

import numpy as np

from tokfst_cli.bpe.hf import HfBpe
from tokfst_cli.encoder.incremental import EagerTables, EagerWord, eager_ok
from tokfst_cli.errors import InputError, UsageError
from tokfst_cli.pretok import image, split
from tokfst_cli.pretok.added import splitting
from tokfst_cli.tokenizer.model import TokenizerModel, bytes_to_unicode
from tokfst_cli.tokenizer.model import load as load_tokenizer

LEVELS = ("pipeline", "model")
WORDS = 1 << 16  # pre-tokens memoized per encoder (the memo starts anew past it)
HINT = "encode-unsupported"


class Encoder:
    """HF's ``encode`` of one tokenizer (see the module docstring). ``tokenizer``: a
    :class:`TokenizerModel`, a tokenizer.json path or a bundled name."""

    def __init__(self, tokenizer: TokenizerModel | str, level: str = "pipeline"):
        if level not in LEVELS:
            raise InputError(f"level {level!r} is not known", f"give one of {', '.join(LEVELS)}", hint="level")
        model = load_tokenizer(tokenizer)
        if model.family != "bpe":
            raise InputError(f"{model.source} has a {model.family} model; the encoder implements BPE",
                             "give a BPE tokenizer.json", hint=HINT)
        self.model, self.level = model, level
        self.bpe = HfBpe(model)
        self._byte_level = model.style == "byte-level"
        self._map = bytes_to_unicode()
        self._words: dict[str, tuple[int, ...]] = {}
        self._table: tuple[np.ndarray, ...] | None = None  # the kernel's merge table, made on first use
        self.work = 0  # merge queue entries the kernel popped so far (each O(log n)): its work
        kept, unmodelled = splitting(model)
        if unmodelled and level == "pipeline":
            content = next(iter(unmodelled.values()))
            raise InputError(f"added token {content!r} strips spaces, matches single words or normalized text (or "
                             "overlaps a raw one, matched first), which "
                             "the encoder does not model", "give a tokenizer without such added tokens, or level model",
                             hint=HINT)
        self.added = {a["content"]: int(a["id"]) for a in model.added_tokens if a.get("id") in kept}
        contents = sorted(self.added, key=lambda c: (-len(c), c))  # at one start, the longest first
        self._added_re = re.compile("|".join(map(re.escape, contents))) if contents else None
        self.longest_added = max(map(len, contents), default=0)
        self._data = {"normalizer": model.normalizer, "pre_tokenizer": model.pre_tokenizer}
        self._p = image.for_model(model).arcsort("ilabel") if level == "pipeline" else None  # cached on disk
        self._variants: dict[str, object] = {}
        self.splits = model.pre_tokenizer is not None  # else a segment is one pre-token (see eager_word)
        self._eager: EagerTables | None = None  # made on the first eager word

    # ---- the pipeline ----------------------------------------------------------------------------
    def encode(self, text: str) -> list[int]:
        """HF's ``encode(text, add_special_tokens=False).ids``."""
        if not isinstance(text, str):
            raise UsageError(f"encode takes a str, not {type(text).__name__}")
        if self.level == "model":
            return list(self.word(text, whole=True))
        out: list[int] = []
        for start, end, added in self.spans(text):
            if added is not None:
                out.append(added)
            else:
                for piece in self.pre_tokens(text[start:end], self.p_for(start == 0, True)):
                    out += self.word(piece)
        return out

    def p_for(self, text_start: bool, segment_start: bool):
        """Stage P for text at the start of the text, of a later segment (after an added token:
        Metaspace's prepend_scheme first does not prepend there), or continuing a segment."""
        if text_start:
            return self._p
        return self._variant("segment" if segment_start else "continuation")

    def count(self, text: str) -> int:
        """The number of ids :meth:`encode` gives."""
        return len(self.encode(text))

    def spans(self, text: str) -> Iterator[tuple[int, int, int | None]]:
        """The text cut at added tokens, in order: (start, end, None) for a text segment,
        (start, end, id) for an added token."""
        start = 0
        if self._added_re is not None:
            for m in self._added_re.finditer(text):
                if m.start() > start:
                    yield start, m.start(), None
                yield m.start(), m.end(), self.added[m.group()]
                start = m.end()
        if start < len(text):
            yield start, len(text), None

    def added_matches(self, text: str, start: int = 0) -> Iterator[tuple[int, int, int]]:
        """The added tokens in ``text`` from ``start`` on, leftmost-longest: (start, end, id)."""
        if self._added_re is not None:
            for m in self._added_re.finditer(text, start):
                yield m.start(), m.end(), self.added[m.group()]

    def pre_tokens(self, segment: str, p=None) -> list[str]:
        """Stage P's pre-tokens of one segment (normalized text)."""
        try:
            return split.pieces(self._p if p is None else p, segment)
        except UsageError:
            raise InputError("the text is outside what the tokenizer's normalizer is modelled on (tokfst models "
                             "a Unicode normalizer on the texts it leaves unchanged)",
                             "normalize the text first, or give level model", hint=HINT) from None

    def word(self, piece: str, whole: bool = False) -> tuple[int, ...]:
        """HF's model on one pre-token (memoized)."""
        got = self._words.get(piece)
        if got is None:
            text = "".join(self._map[b] for b in piece.encode("utf-8")) if self._byte_level else piece
            got = self._tokenize(text)
            if not whole:
                if len(self._words) >= WORDS:
                    self._words.clear()
                self._words[piece] = got
        return got

    def _tokenize(self, text: str) -> tuple[int, ...]:
        """HF's ``BPE::tokenize`` (:meth:`HfBpe.tokenize`) with the merges in the compiled kernel."""
        if not text:
            return ()
        if self.bpe.ignore_merges and text in self.bpe.ids:
            return (self.bpe.ids[text],)
        symbols = self.bpe.initial_symbols(text)
        if len(symbols) < 2:
            return tuple(symbols)
        self._kernel_table()
        merged, work = self._kernels.merge_all(np.array(symbols, np.int64), *self._table, self.model.vocab_size)
        self.work += work
        return tuple(merged.tolist())

    def symbols(self, piece: str) -> list[int]:
        """HF's initial symbols of one pre-token (the model's alphabet: bytes mapped for byte-level)."""
        text = "".join(self._map[b] for b in piece.encode("utf-8")) if self._byte_level else piece
        return self.bpe.initial_symbols(text)

    def eager_word(self) -> EagerWord | None:
        """An :class:`EagerWord` for one segment encoded as a single pre-token (``level`` model, or
        a model without a pre-tokenizer whose normalizer acts character by character), or None
        where tokens inside a pre-token cannot be emitted early (the stream then holds it whole)."""
        if eager_ok(self.bpe) is not None or (self.level == "pipeline" and (
                self.splits or not _per_character(self.model.normalizer))):
            return None
        if self._eager is None:
            self._kernel_table()
            self._eager = EagerTables(self.bpe, self._kernels, self._table)
        return self._eager.word()

    def _kernel_table(self) -> None:
        if self._table is None:
            from tokfst_cli.encoder import kernels  # deferred: loads numba

            self._kernels, self._table = kernels, kernels.merge_table(self.bpe.merges, self.model.vocab_size)

    def stream(self) -> Stream:
        """A :class:`Stream` of this encoder: ``feed`` chunks, then ``finish``."""
        return Stream(self)

    def _variant(self, where: str):
        """Stage P of a later segment or of a continuation (``image.variant``), built once."""
        got = self._variants.get(where)
        if got is None:
            got = self._variants[where] = image.variant(self.model, where).arcsort("ilabel")
        return got


def _per_character(spec) -> bool:
    """Whether a normalizer maps each character on its own (none, Prepend, a one-character
    Replace, or a Sequence of those): then the normalized text of a prefix never changes as
    text is appended, and a segment can be normalized piece by piece."""
    if spec is None:
        return True
    kind = spec.get("type") if isinstance(spec, dict) else None
    if kind == "Sequence":
        return all(_per_character(x) for x in spec.get("normalizers") or [])
    if kind == "Replace":
        pattern = spec.get("pattern") or {}
        return isinstance(pattern.get("String"), str) and len(pattern["String"]) == 1
    return kind == "Prepend"


HOLD = 2  # pre-tokens held back at the end of the text seen: more text may still change them
BATCH = 256  # characters the open segment grows by between two tries to cut it (amortizes stage P's runs)


class Stream:
    """Streaming encode with eager output (Incremental BPE 2026 Sec. 4): ``feed(chunk)`` returns
    the ids no later text can change, ``finish()`` the rest; their concatenation is
    ``encode`` of the whole text. ``chunk``: str, or UTF-8 bytes (a character may be cut
    between chunks; invalid UTF-8 is an InputError).

    Final are: every added token and text segment before an added token whose match no later
    text can extend (the buffer reaches the longest added token's length past its start); in
    the open segment, the pre-tokens before the last :data:`HOLD`, when the text splits there
    consistently (the rest, run through stage P on its own as a continuation, gives the same
    pre-tokens). The open segment is
    tried once it has grown by :data:`BATCH` characters since the last cut, or doubled since a
    try that found none, so stage P runs on each character a bounded number of times (a
    segment that never splits, as with a model without a pre-tokenizer, costs O(n) in all).
    ``held`` is the largest number of characters held back so far."""

    def __init__(self, encoder: Encoder):
        self.enc, self.buf, self.at_start, self.held, self.offset = encoder, "", True, 0, 0
        self._try_at = BATCH  # the open segment's length at which to try to cut it next
        self._scanned = 0  # no added token starts before this position of the buffer (decided)
        self._utf8 = codecs.getincrementaldecoder("utf-8")()
        self._eager = encoder.eager_word() is not None  # tokens inside the open segment as they settle
        self._word: EagerWord | None = None  # the open segment's, once text of it was fed

    def feed(self, chunk: str | bytes) -> list[int]:
        self.buf += self._text(chunk, False)
        out = self._emit(False)
        pending = self._word.n - self._word.done if self._word is not None else 0
        self.held = max(self.held, len(self.buf) + pending)
        return out

    def finish(self) -> list[int]:
        self.buf += self._text(b"", True)
        return self._emit(True)

    def _text(self, chunk: str | bytes, final: bool) -> str:
        if isinstance(chunk, str):
            return chunk
        try:
            return self._utf8.decode(chunk, final)
        except UnicodeDecodeError as e:
            raise InputError(f"the input is not UTF-8 ({e.reason} at byte {e.start} of a chunk)",
                             "give UTF-8 text", hint="utf8") from None

    def _emit(self, final: bool) -> list[int]:
        enc, out = self.enc, []
        if enc.level == "model":
            if self._eager:
                out, self.buf = self._push(self.buf), ""
                return out + self._close() if final else out
            if final:
                out, self.buf = list(enc.word(self.buf, whole=True)), ""
            return out
        undecided = len(self.buf) if final else len(self.buf) - max(enc.longest_added - 1, 0)
        pos = 0
        for start, end, added in enc.added_matches(self.buf, self._scanned):
            if start >= undecided:
                break
            out += self._segment(self.buf[pos:start])
            out.append(added)
            self.offset += end - pos
            pos, self.at_start, self._try_at = end, True, BATCH
        self.buf, self._scanned = self.buf[pos:], max(undecided - pos, 0)  # no added token starts before
        if final:
            out += self._segment(self.buf)
            self.buf = ""
            return out
        if self._eager and undecided > pos:
            n = undecided - pos
            out += self._push(self.buf[:n])
            self.buf, self.at_start, self.offset = self.buf[n:], False, self.offset + n
            self._scanned = max(self._scanned - n, 0)
            return out
        if self._eager:
            return out
        if len(self.buf) < self._try_at or not enc.splits:
            return out
        cut, ids = self._cut(undecided - pos)
        if cut:
            out += ids
            self.buf, self.at_start, self.offset = self.buf[cut:], False, self.offset + cut
            self._scanned = max(self._scanned - cut, 0)
        self._try_at = len(self.buf) + BATCH if cut else 2 * len(self.buf)  # doubling: linear in all
        return out

    def _segment(self, text: str) -> list[int]:
        """The ids of ``text``, the rest of the open segment (from its start or a boundary)."""
        if self._eager:
            return self._push(text) + self._close()
        if not text:
            return []
        p = self.enc.p_for(self.offset == 0, self.at_start)
        return [t for piece in self.enc.pre_tokens(text, p) for t in self.enc.word(piece)]

    def _push(self, text: str) -> list[int]:
        """Eager (:class:`EagerWord`): more text of the open segment normalized (a continuation
        unless at the segment's start) and pushed symbol by symbol; the ids that settled."""
        enc = self.enc
        if not text:
            return []
        if enc.level == "model":
            symbols = enc.symbols(text)
        else:
            p = enc.p_for(self.offset == 0, self.at_start)
            symbols = [x for piece in enc.pre_tokens(text, p) for x in enc.symbols(piece)]
        if self._word is None:
            self._word = enc.eager_word()
        self._word.push(symbols)
        return self._word.settled()

    def _close(self) -> list[int]:
        """Eager: the open segment ends (an added token, or the text): its remaining ids."""
        word, self._word = self._word, None
        return word.rest() if word is not None else []

    def _cut(self, limit: int) -> tuple[int, list[int]]:
        """Where the open segment splits for good before ``limit`` (0: nowhere yet), and the ids of
        the text before it: its pre-tokens but the last :data:`HOLD`, when the held-back text run
        through stage P as a continuation gives the same last pre-tokens."""
        enc = self.enc
        text = self.buf[:limit]
        pieces = enc.pre_tokens(text, enc.p_for(self.offset == 0, self.at_start)) if text else []
        if len(pieces) <= HOLD:
            return 0, []
        tail = pieces[-HOLD:]
        cut = len(text) - sum(map(len, tail))  # the tail's text, aligned from the end
        if cut <= 0 or enc.pre_tokens(text[cut:], enc.p_for(False, False)) != tail:
            return 0, []
        return cut, [t for piece in pieces[:-HOLD] for t in enc.word(piece)]
