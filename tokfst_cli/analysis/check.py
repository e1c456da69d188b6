"""canonical-check as a library: lines in, verdicts and report lines out, in chunks.

:func:`read_chunks` reads a file or stdin in blocks and yields its lines (split at '\\n', a
CRLF's '\\r' dropped, as reading the whole text would give them) in chunks of ``CHUNK_LINES`` lines, so memory
stays flat in the input size. :class:`Checker` turns one chunk into :class:`Verdict` objects:

parse   token ids or names: the caller's ``parse_line(line, n)`` (the command line's: it words
        the errors). Raw text: HF's batch encoder, one call per chunk: WordPiece
        ``encode(text, add_special_tokens=False).ids`` of the whole tokenizer; BPE the
        model-level ``model.tokenize`` of the model string (a bare ``Tokenizer`` around the same
        model, so no added-token splitting, no pre-tokenizer).
check   WordPiece: ``maxmatch.product.checker``'s ``step`` per token, memoized (bounded): a
        ``##`` piece per (state, token), any other token per (word start, token). BPE: every
        pair of the chunk in one ``ImplicitBpe.banned`` call and the per-token rules as array
        tests; a sequence that fails any of them goes through ``ImplicitBpe.check_batch`` for
        the exact first offence and its reason (the empty sequence is canonical, as
        ``first_violation`` says).
explain a non-canonical line gets HF's tokenization of its text (``reference.HfReference``).

A chunk is parsed completely before it is checked, so an input error in a chunk stops the run
before any of that chunk's lines is reported; lines of earlier chunks have been written.
"""

from __future__ import annotations

import codecs
import itertools
import json
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np

from tokfst_cli.automata.symbols import escape
from tokfst_cli.errors import InputError
from tokfst_cli.tokenizer.model import SPACE_MARK, TokenizerModel, bytes_to_unicode
from tokfst_cli.tokenizer.reference import HfReference

CHUNK_LINES = 4096
ADDED_INSIDE = "an added token inside a word: HF splits it out between complete text segments"
BLOCK_BYTES = 1 << 20
FIX = "give a readable UTF-8 file"


# ---- input ------------------------------------------------------------------------------------
def read_chunks(src: str | None, chunk_lines: int | None = None, block: int | None = None) -> Iterator[list[str]]:
    """The lines of a UTF-8 file, or of stdin for None or '-', in chunks of ``chunk_lines`` lines
    (default :data:`CHUNK_LINES`; the last chunk shorter), read ``block`` bytes (default
    :data:`BLOCK_BYTES`) at a time.

    Lines and errors are those of reading the whole text and splitting it with :func:`lines`:
    an unreadable file, or bytes that are not UTF-8 (the message gives the offset in the whole
    input; stdin is read as UTF-8 whatever the locale), is an InputError "cannot read SRC:
    ...", raised when reached.
    """
    chunk_lines, block = chunk_lines or CHUNK_LINES, block or BLOCK_BYTES
    if src in (None, "-"):
        src = "stdin"
        raw = getattr(sys.stdin, "buffer", None)
        if raw is None:  # a text stream without bytes below it
            blocks = _text_blocks(sys.stdin, block, src)
        else:
            blocks = _decoded_blocks(raw, "utf-8", "strict", block, src)
        yield from _chunks(blocks, chunk_lines)
        return
    try:
        f = open(src, "rb")
    except OSError as e:
        raise InputError(f"cannot read {src}: {e.strerror or e}", FIX) from None
    with f:
        yield from _chunks(_decoded_blocks(f, "utf-8", "strict", block, src), chunk_lines)


def _read(stream, block: int, src) -> bytes | str:
    try:
        return stream.read(block)
    except OSError as e:
        raise InputError(f"cannot read {src}: {e.strerror or e}", FIX) from None


def _decoded_blocks(raw, encoding: str, errors: str, block: int, src) -> Iterator[tuple[str, bool]]:
    """(text, last) per block read; a decoding error worded as for the whole input at once."""
    decoder = codecs.getincrementaldecoder(encoding)(errors)
    offset = 0  # bytes read so far
    while True:
        data = _read(raw, block, src)
        held = decoder.getstate()[0]  # bytes of an unfinished character, decoded with this block
        try:
            text = decoder.decode(data, final=not data)
        except UnicodeDecodeError as e:
            raise InputError(f"cannot read {src}: {_decode_error(e, offset - len(held))}", FIX) from None
        offset += len(data)
        yield text, not data
        if not data:
            return


def _decode_error(e: UnicodeDecodeError, base: int) -> str:
    """str(e) as if the whole input had been decoded at once (positions from its start)."""
    start, end = base + e.start, base + e.end
    if e.end == e.start + 1 and e.start < len(e.object):
        return f"'{e.encoding}' codec can't decode byte 0x{e.object[e.start]:02x} in position {start}: {e.reason}"
    return f"'{e.encoding}' codec can't decode bytes in position {start}-{end - 1}: {e.reason}"


def _text_blocks(stream, block: int, src) -> Iterator[tuple[str, bool]]:
    while True:
        text = _read(stream, block, src)
        yield text, not text
        if not text:
            return


def lines(text: str) -> list[str]:
    """The lines of ``text`` as a text file has them: split at '\\n' only, a CRLF's '\\r' dropped,
    no empty last line after a final '\\n'. The other separators of ``str.splitlines`` (\\v, \\f,
    \\x1c-\\x1e, U+0085, U+2028, U+2029, a lone '\\r') are text a line may hold."""
    *ended, rest = text.split("\n")  # rest: after the last '\n', not a line ending in one
    return [p[:-1] if p.endswith("\r") else p for p in ended] + ([rest] if rest else [])


def _chunks(blocks: Iterator[tuple[str, bool]], chunk_lines: int) -> Iterator[list[str]]:
    """Chunks of exactly ``chunk_lines`` complete lines (the last one shorter). What follows a
    block's last '\\n' waits for the next block: the line is unfinished."""
    pending, got = "", []
    for text, last in blocks:
        text = pending + text
        cut = len(text) if last else text.rfind("\n") + 1
        pending = text[cut:]
        got += lines(text[:cut])
        while len(got) >= chunk_lines or (last and got):
            yield got[:chunk_lines]
            got = got[chunk_lines:]


# ---- --input text ---------------------------------------------------------------------------
def _batch(tok, texts: list[str]) -> list[list[int]]:
    encode = getattr(tok, "encode_batch_fast", tok.encode_batch)  # no offsets: the same ids, faster
    return [e.ids for e in encode(texts, add_special_tokens=False)]


class TextEncoder:
    """--input text: the ids ``HfReference.tokenize_text`` gives each line, one batch call per chunk
    (pipeline level: ``encode(line, add_special_tokens=False)`` of the whole tokenizer)."""

    def __init__(self, ref: HfReference, level: str = "pipeline") -> None:
        from tokenizers import Tokenizer  # deferred: HF's tokenizers only where the oracle is asked (start-up)

        self.ref = ref
        model = ref.model
        if model.family == "wordpiece" or level == "pipeline":
            self.tok, self.map = ref.hf, None
        else:  # model.tokenize of the whole model string: the bare model, nothing around it
            self.tok = Tokenizer(ref.hf.model)
            if model.style == "byte-level":
                table = str.maketrans({chr(b): c for b, c in bytes_to_unicode().items()})
                self.map = lambda s: s.encode("utf-8").decode("latin-1").translate(table)
            elif model.style == "sentencepiece":
                self.map = lambda s: s.replace(" ", SPACE_MARK)
            else:
                self.map = None

    def encode(self, lines: list[str]) -> list[list[int]]:
        texts = lines if self.map is None else [self.map(s) for s in lines]
        return _batch(self.tok, texts)


# ---- checking ---------------------------------------------------------------------------------
class MaxMatchVerdicts:
    """``Canonical.first_violation`` for many sequences, with ``step`` memoized (bounded).

    States are interned to ints. A ``##`` piece's step is cached per (state, token); any other
    token's per (X state where its word starts, token), all that it depends on
    (``Canonical.word_start``), so a word's first token hits the cache whatever word came before.

    Added tokens (``pretok.added.splitting``): HF splits them out of the raw text first, so one
    that it splits as it is stands between complete text segments, each checked from the start;
    a sequence holding one whose splitting is not modelled is refused (InputError).
    """

    CAP = 1 << 18  # cached transitions before the cache starts afresh (memory stays bounded)

    def __init__(self, machine, splits: set[int] = frozenset(), unmodelled: dict[int, str] | None = None) -> None:
        self.machine = machine
        self.vocab = machine.pieces.vocab
        self.inner = machine.pieces.inner
        self.split = np.zeros(self.vocab, bool)
        self.split[list(splits)] = True
        self.unmodelled = unmodelled or {}
        self._reset()

    def _reset(self) -> None:
        self.ids: dict = {}
        self.states: list = []
        self.final: list[bool] = []
        self.start: list[int] = []  # per state: its word-start X state + 1 (0: none)
        self.next: dict[int, int] = {}
        self._intern(self.machine.initial())

    def _intern(self, state) -> int:
        j = self.ids.get(state)
        if j is None:
            j = self.ids[state] = len(self.states)
            self.states.append(state)
            self.final.append(self.machine.is_final(state))
            w = self.machine.word_start(state)
            self.start.append(0 if w is None else w + 1)
        return j

    def _step(self, s: int, t: int, key: int) -> int:
        """The interned next state of state s after token t, -1 if t is not allowed (cached at key)."""
        nxt = self.machine.step(self.states[s], t)[0]
        j = self.next[key] = -1 if nxt is None else self._intern(nxt)
        return j

    def __call__(self, seqs: list[list[int]]) -> list[tuple[int, str] | None]:
        flat = np.fromiter(itertools.chain.from_iterable(seqs), np.int64)
        if len(flat) and (flat.min() < 0 or flat.max() >= self.vocab):  # keys would collide
            return [self._uncached(seq) for seq in seqs]
        for t in set(self.unmodelled).intersection(flat.tolist()) if self.unmodelled else ():
            raise self._refusal(t)
        out: list[tuple[int, str] | None] = []
        vocab, inner, split = self.vocab, self.inner, self.split
        for seq in seqs:
            if len(self.next) > self.CAP:
                self._reset()
            table, start, final = self.next, self.start, self.final
            s = 0
            for i, t in enumerate(seq):
                if split[t]:  # an added token: a segment of its own, after a complete one
                    if not final[s]:
                        out.append((i, ADDED_INSIDE))
                        break
                    s = 0
                    continue
                key = (s if inner[t] else -1 - start[s]) * vocab + t  # ## piece: state; else word start
                j = table.get(key)
                if j is None:
                    j = self._step(s, t, key)
                if j < 0:
                    out.append((i, self.machine.step(self.states[s], t)[1]))
                    break
                s = j
            else:
                out.append(None if final[s] else (len(seq), "the sequence cannot end here"))
        return out

    def _uncached(self, seq: list[int]) -> tuple[int, str] | None:
        """The first offence of ``seq`` (ids may be out of range), segment by segment."""
        base = 0
        for i, t in enumerate([*seq, None]):
            if t is not None and t in self.unmodelled:
                raise self._refusal(t)
            if t is None or (0 <= t < self.vocab and self.split[t]):
                got = self.machine.first_violation(seq[base:i])
                if got is not None and (t is None or got[0] < i - base):
                    return got[0] + base, got[1]
                if got is not None:
                    return i, ADDED_INSIDE
                base = i + 1
        return None

    def _refusal(self, t: int) -> InputError:
        return InputError(f"the added token {self.unmodelled[t]!r} strips spaces, matches single words or matches "
                          "normalized text, which canonical-check does not model for WordPiece",
                          "check sequences without it", content=self.unmodelled[t])


class BpeVerdicts:
    """``ImplicitBpe.check_batch`` for many sequences: the clean ones decided by array tests."""

    def __init__(self, imp) -> None:
        self.imp = imp
        texts = imp.derived.get("texts")
        self.whole_rule = texts is not None  # ignore_merges: a sequence of 2+ tokens may spell a token
        self.slow_all = texts is None and bool(imp.alone.any())  # check_batch refuses: let it say so
        self.ok = imp.allowed & ~imp.alone & (imp.fb_byte < 0)

    def clean(self, seqs: list[list[int]]) -> np.ndarray:
        """Per sequence: non-empty and passing every rule (so check_batch would say None)."""
        imp = self.imp
        lens = np.fromiter(map(len, seqs), np.int64, len(seqs))
        flat = np.fromiter(itertools.chain.from_iterable(seqs), np.int64, int(lens.sum()))
        if self.slow_all or not len(flat) or ((flat < 0) | (flat >= imp.vocab_size)).any():
            return np.zeros(len(seqs), bool)
        ends = np.cumsum(lens)
        nonempty = lens > 0
        inner = np.ones(len(flat), bool)
        inner[ends[nonempty] - 1] = False  # position i < its sequence's last: the pair (i, i + 1)
        idx = np.flatnonzero(inner)
        bad = ~self.ok[flat]
        if len(idx):
            bad[idx] |= imp.banned(flat[idx], flat[idx + 1])
        starts = (ends - lens)[nonempty]
        good = np.add.reduceat(bad.astype(np.int64), starts) == 0
        good &= imp.may_start[flat[starts]] & imp.may_end[flat[ends[nonempty] - 1]] & bool(imp.fb_final[0])
        if self.whole_rule:
            good &= lens[nonempty] == 1
        out = np.zeros(len(seqs), bool)
        out[nonempty] = good
        return out

    def __call__(self, seqs: list[list[int]]) -> list[tuple[int, str] | None]:
        out: list[tuple[int, str] | None] = [None] * len(seqs)
        slow = [i for i in np.flatnonzero(~self.clean(seqs)).tolist() if seqs[i]]
        for i, v in zip(slow, self.imp.check_batch([seqs[i] for i in slow]) if slow else []):
            out[i] = v
        return out


def text_checker(model: TokenizerModel, imp):
    """The pipeline-level checker: R = P's image as a table, tokens' model texts, added tokens."""
    from tokfst_cli.automata.symbols import MARKER  # deferred: start-up: only this path needs it
    from tokfst_cli.bpe.pretokenized_check import TextChecker  # deferred: start-up: only this path needs it
    from tokfst_cli.pretok import added, image  # deferred: start-up: only this path needs it

    delta, final = image.table(image.language(None, image.for_model(model)))
    texts: list[bytes | None] = [None] * model.vocab_size
    for i, s in model.model_items():
        texts[i] = s
    splits, unmodelled = added.splitting(model)
    for aid in (*splits, *unmodelled):
        texts[aid] = None
    return TextChecker(imp, delta, final, texts, splits, MARKER, unmodelled)


# ---- the whole check --------------------------------------------------------------------------
@dataclass
class Verdict:
    line: int  # 1-based line number
    tokens: list[int]
    offence: tuple[int, str] | None  # (index, reason) of the first offence; None = canonical
    canonical_tokens: list[int] | None = None  # HF's tokenization of the text (non-canonical lines)


class Checker:
    """canonical-check for one tokenizer: a chunk of input lines -> one Verdict per line.

    ``parse_line(line, n)`` reads a line of token ids or names (InputError naming line n);
    None means raw text (HF's tokenization of each line is checked)."""

    def __init__(self, model: TokenizerModel, parse_line: Callable[[str, int], list[int]] | None = None,
                 artifact: str | None = None, level: str = "pipeline") -> None:
        self.model, self.parse_line, self.artifact = model, parse_line, artifact
        self.level = "model" if model.family == "wordpiece" else level
        self.ref = HfReference(model, self.level)
        self._text: TextEncoder | None = None
        self._verdicts = None
        self.names = _Names(model.tokens)

    def verdicts(self):
        """The sequence checker, built on first use (after the first chunk is parsed)."""
        if self._verdicts is None:
            if self.model.family == "wordpiece":
                from tokfst_cli.maxmatch import product  # deferred: start-up: only this path needs it
                from tokfst_cli.pretok import added  # deferred: start-up: only this path needs it

                self._verdicts = MaxMatchVerdicts(product.checker(self.model), *added.splitting(self.model))
            else:
                from tokfst_cli.bpe import implicit  # deferred: start-up: only this path needs it

                imp = implicit.load_or_compile(self.model, self.artifact)
                self._verdicts = BpeVerdicts(imp) if self.level == "model" else text_checker(self.model, imp)
        return self._verdicts

    def parse(self, lines: list[str], first: int) -> list[list[int]]:
        if self.parse_line is None:
            if self._text is None:
                self._text = TextEncoder(self.ref, self.level)
            return self._text.encode(lines)
        return [self.parse_line(line, n) for n, line in enumerate(lines, first)]

    def check(self, lines: list[str], first: int = 1) -> list[Verdict]:
        """Verdicts for ``lines`` (line numbers from ``first``); InputError for a bad line."""
        seqs = self.parse(lines, first)
        offences = self.verdicts()(seqs)
        return [Verdict(n, seq, v, None if v is None else self.ref.canonical(seq))
                for n, (seq, v) in enumerate(zip(seqs, offences), first)]

    # ---- report lines
    def text_line(self, v: Verdict) -> str:
        """canonical TAB tokens, or non-canonical TAB index TAB reason TAB pair TAB HF's tokens."""
        if v.offence is None:
            return "canonical\t" + self.names.join(v.tokens)
        i, reason = v.offence
        canon = v.canonical_tokens
        return "\t".join(["non-canonical", str(i), reason, self.names.join(v.tokens[max(i - 1, 0):i + 1]),
                          self.names.join(canon) if canon is not None else "-"])

    @staticmethod
    def json_line(v: Verdict) -> str:
        if v.offence is None:  # json.dumps of {"line", "canonical", "tokens"}, written out
            return f'{{"line": {v.line}, "canonical": true, "tokens": [{", ".join(map(str, v.tokens))}]}}'
        i, reason = v.offence
        return json.dumps({"line": v.line, "canonical": False, "tokens": v.tokens, "index": i, "reason": reason,
                           "pair": v.tokens[max(i - 1, 0):i + 1], "canonical_tokens": v.canonical_tokens})


class _Names(dict):
    """Token id -> its escaped name (``symbols.escape``), computed on first use."""

    def __init__(self, tokens: list[str]) -> None:
        super().__init__()
        self.tokens = tokens

    def __missing__(self, tid: int) -> str:
        name = self[tid] = escape(self.tokens[tid])
        return name

    def join(self, ids: list[int]) -> str:
        return " ".join(map(self.__getitem__, ids))
