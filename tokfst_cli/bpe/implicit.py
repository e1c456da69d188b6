"""Stage C for BPE: the implicit canonical BPE automaton and its artifact (Cognetta & Okazaki 2024 Sec. 6.5).

State after a token u is its class: tokens with the same BANNED row share a class, which is
the state q_u of A_BPE. BANNED is stored as rectangles of spine positions: the merge rectangles
of ``canonical`` (about one per merge) among monotone tokens, plus one-row and one-column
rectangles for the tokens whose traces pop out of order (``exposure``; they sit after the
monotone tokens in both spine orders). Rows are expanded at load time into sorted disjoint
intervals of the left-spine order (``rows``), so a pair test is a binary search and a mask is
a handful of slices.

Rules that are not pair properties are small automata next to the bigram part:
- byte fallback: a run of ``<0xNN>`` tokens must spell complete UTF-8 characters that are
  absent from the vocabulary (``fb_delta``: a DFA over bytes, state 0 = outside a character);
- continuing_subword_prefix / end_of_word_suffix: the first token carries no prefix, later
  ones do; only the last carries the suffix.

Artifact (``compile-bpe --form implicit``), all integers little-endian:
    magic     b"TOKFSTBPE\\0"  (10 bytes)
    u32       header length H
    H bytes   JSON header: format "tokfst-implicit-bpe", version, fingerprint, vocab_size,
              counts, sha256 (hex, of the compressed payload), arrays [{name, dtype, shape}]
    payload   zlib-compressed concatenation of the arrays' bytes, in header order
(``artifacts.pack``/``unpack`` frame it.)
"""

from __future__ import annotations

import contextlib
import io
import time
import zlib
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import pynini

from tokfst_cli.automata import utf8
from tokfst_cli.automata.arrays import unique
from tokfst_cli.automata.fsts import ranges_acceptor
from tokfst_cli.bpe import exposure
from tokfst_cli.bpe import rows as rowmod
from tokfst_cli.bpe.canonical import rectangles, spine_order
from tokfst_cli.bpe.hf import HfBpe
from tokfst_cli.bpe.trace import MergeTable, derive
from tokfst_cli.errors import InputError, UsageError
from tokfst_cli.support import cache
from tokfst_cli.support.files import pack, read_artifact, unpack
from tokfst_cli.tokenizer.model import TokenizerModel, model_text

FORMAT = "tokfst-implicit-bpe"
VERSION = 3  # 2: no exact-pair array; non-monotone tokens have spine positions and rectangles of their own;
#  3: non-special added tokens are ordinary tokens
MAGIC = b"TOKFSTBPE\0"
ARRAYS = ("allowed", "alone", "fb_byte", "may_start", "may_end", "may_continue", "may_follow",
          "monotone", "rpos", "lorder", "boxes", "fb_delta", "fb_final")


@dataclass
class ImplicitBpe:
    """A_BPE in implicit form. Token ids index every per-token array."""

    fingerprint: str
    vocab_size: int
    allowed: np.ndarray  # bool: may appear at all (reachable, or a byte-fallback token)
    alone: np.ndarray  # bool: ignore_merges only: a token merges never make, canonical as a whole word
    fb_byte: np.ndarray  # int16: byte of a fallback token, else -1
    may_start: np.ndarray  # bool: may begin a word (no continuing-subword prefix)
    may_end: np.ndarray  # bool: may end a word (end-of-word suffix when the model has one)
    may_continue: np.ndarray  # bool: may be followed inside a word (no end-of-word suffix)
    may_follow: np.ndarray  # bool: may follow inside a word (prefixed when the model has a prefix)
    monotone: np.ndarray  # bool: allowed, and HF pops its merge trace in (rank, position) order
    rpos: np.ndarray  # int32: right-spine position, -1 if not allowed
    lorder: np.ndarray  # int32: left-spine position -> token
    boxes: np.ndarray  # int32 (k, 4): u_lo, u_hi, v_lo, v_hi
    fb_delta: np.ndarray  # int32 (s, 256): fallback-run DFA, -1 = no move
    fb_final: np.ndarray  # bool (s,)
    derived: dict = field(default_factory=dict, repr=False)

    # ---- derived structure -------------------------------------------------------------
    def _rows(self) -> rowmod.Rows:
        """CSR over right positions of merged banned intervals (left positions)."""
        if "rows" not in self.derived:
            nright = int(self.rpos.max()) + 1 if len(self.rpos) else 0
            self.derived["rows"] = rowmod.build(self.boxes, nright, len(self.lorder))
        return self.derived["rows"]

    def banned_positions(self, ru: int) -> np.ndarray:
        """The left positions of right position ``ru``'s BANNED row: read off the rectangles for the
        first ``ROW_QUERIES`` rows asked (a small constraint never builds the rows), then the rows."""
        asked = self.derived["asked"] = self.derived.get("asked", 0) + 1
        if "rows" in self.derived or asked > ROW_QUERIES:
            return rowmod.row_positions(self._rows(), ru)
        b = self.boxes.reshape(-1, 4)
        sel = b[(b[:, 0] <= ru) & (ru <= b[:, 1])].astype(np.int64)
        return unique(rowmod.expand(sel[:, 2], sel[:, 3]))

    def _lpos(self) -> np.ndarray:
        if "lpos" not in self.derived:
            lpos = np.full(self.vocab_size, -1, np.int64)
            lpos[self.lorder] = np.arange(len(self.lorder))
            self.derived["lpos"] = lpos
        return self.derived["lpos"]

    # ---- queries -----------------------------------------------------------------------
    def banned(self, u: np.ndarray, v: np.ndarray) -> np.ndarray:
        """Vectorized: is the adjacent pair (u[i], v[i]) impossible in canonical output?"""
        u = np.asarray(u, np.int64)
        v = np.asarray(v, np.int64)
        out = ~self.allowed[u] | ~self.allowed[v] | ~self.may_continue[u] | ~self.may_follow[v]
        ru, lv = self.rpos[u].astype(np.int64), self._lpos()[v]
        ok = np.flatnonzero((ru >= 0) & (lv >= 0))
        if len(ok):
            out[ok] |= rowmod.lookup(self._rows(), ru[ok], lv[ok])
        return out

    def banned_pair(self, u: int, v: int) -> bool:
        """``banned`` for one pair, without arrays (a binary search in u's row)."""
        if not (self.allowed[u] and self.allowed[v] and self.may_continue[u] and self.may_follow[v]):
            return True
        ru, lv = int(self.rpos[u]), int(self._lpos()[v])
        if ru < 0 or lv < 0:
            return False
        rows = self._rows()
        a, b = int(rows.ptr[ru]), int(rows.ptr[ru + 1])
        j = a + int(np.searchsorted(rows.hi[a:b], lv))
        return j < b and int(rows.lo[j]) <= lv

    def banned_row(self, u: int) -> np.ndarray:
        """BANNED(u) as a bool mask over token ids (cached per token)."""
        cache = self.derived.setdefault("row_cache", {})
        if u not in cache:
            if not self.may_continue[u] or not self.allowed[u]:
                mask = np.ones(self.vocab_size, bool)
            else:
                mask = ~self.allowed | ~self.may_follow
                ru = int(self.rpos[u])
                if ru >= 0:
                    mask[self.lorder[rowmod.row_positions(self._rows(), ru)]] = True
            cache[u] = mask
        return cache[u]

    def attach(self, model: TokenizerModel) -> ImplicitBpe:
        """Bind the tokenizer's texts for the ignore_merges rule (a word that is a token is that token)."""
        if model.options.get("ignore_merges"):
            texts = [model_text(model, t)[0] for t in range(model.vocab_size)]
            self.derived["texts"] = texts
            self.derived["vocab"] = set(model.model_vocab())
            # HF returns such a token for the word spelled exactly like it, markers or not
            self.derived["whole"] = np.array([bool(t) and t == x and i not in model.not_in_model
                                              for i, (t, x) in enumerate(zip(model.tokens, texts))])
            hf = HfBpe(model)  # merge tokenizations that ignore_merges replaces by one token
            self.derived["replaced"] = {int(w): hf.merge_all(_symbols(hf, model, int(w)))
                                        for w in np.flatnonzero(self.alone)}
        return self

    def _whole_word_rule(self, seq: list[int]) -> tuple[int, str] | None:
        texts = self.derived.get("texts")
        if texts is None:
            if self.alone.any():
                raise UsageError("ignore_merges artifact used without attach(model)")
            return None
        if len(seq) == 1:
            return None
        if any(self.alone[t] for t in seq):
            return int(next(i for i, t in enumerate(seq) if self.alone[t])), "token only canonical as a whole word"
        if "".join(texts[t] for t in seq) in self.derived["vocab"]:
            return len(seq) - 1, "the text is itself a token (ignore_merges)"
        return None

    def first_violation(self, seq: list[int]) -> tuple[int, str] | None:
        """(index, reason) of the first problem in a token sequence, or None if canonical."""
        if not seq:
            return None
        arr = np.asarray(seq, np.int64)
        if (arr < 0).any() or (arr >= self.vocab_size).any():
            bad = int(np.flatnonzero((arr < 0) | (arr >= self.vocab_size))[0])
            return bad, "unknown token id"
        return self._violation_from(seq, self.banned(arr[:-1], arr[1:]) if len(arr) > 1 else np.zeros(0, bool))

    def _violation_from(self, seq: list[int], pair_bad: np.ndarray) -> tuple[int, str] | None:
        whole = self.derived.get("whole")
        if len(seq) == 1 and whole is not None and whole[seq[0]]:
            return None
        fb_state = 0
        for i, t in enumerate(seq):
            if not self.allowed[t] and not self.alone[t]:
                return i, "unreachable token (BPE never produces it)"
            if i == 0 and not self.may_start[t]:
                return i, "a word cannot start with a continuing-subword token"
            b = int(self.fb_byte[t])
            if b >= 0:
                fb_state = int(self.fb_delta[fb_state, b])
                if fb_state < 0:
                    return i, "byte-fallback run is not the UTF-8 of a character absent from the vocabulary"
            elif fb_state != 0:
                return i, "byte-fallback run ends inside a character"
            if i > 0 and pair_bad[i - 1]:
                return i, "banned pair"
        if fb_state != 0 or not self.fb_final[fb_state]:
            return len(seq) - 1, "byte-fallback run ends inside a character"
        if not self.may_end[seq[-1]]:
            return len(seq) - 1, "a word must end with an end-of-word token"
        return self._whole_word_rule(seq)

    def check_batch(self, seqs: list[list[int]]) -> list[tuple[int, str] | None]:
        """first_violation for many sequences, with all pairs tested in one vectorized call."""
        lens = np.array([len(s) for s in seqs], np.int64)
        flat = np.fromiter((t for s in seqs for t in s), np.int64, int(lens.sum()))
        if len(flat) and ((flat < 0) | (flat >= self.vocab_size)).any():
            return [self.first_violation(s) for s in seqs]
        ends = np.cumsum(lens)
        pair_ok = np.ones(len(flat), bool)
        if len(flat) > 1:
            pair_ok[:-1] = False  # pairs inside one sequence: all but each sequence's last token
            pair_ok[ends[lens > 0] - 1] = True
        idx = np.flatnonzero(~pair_ok)
        bad = np.zeros(len(flat), bool)
        if len(idx):
            bad[idx] = self.banned(flat[idx], flat[idx + 1])
        starts = ends - lens
        return [self._violation_from(s, bad[st:st + len(s) - 1]) for s, st in zip(seqs, starts)]

    # ---- classes (states of A_BPE) -------------------------------------------------------
    def classes(self) -> np.ndarray:
        """Class (state) id per token: tokens with identical BANNED rows share one; -1 if never allowed."""
        if "classes" not in self.derived:
            def make() -> np.ndarray:
                flags = self.may_continue.astype(np.int64) + 2 * (self.fb_byte >= 0)
                return rowmod.classes(self._rows(), self.rpos.astype(np.int64), self.allowed, flags)
            self.derived["classes"] = self._kept_arrays("classes", lambda: {"classes": make()})["classes"]
        return self.derived["classes"]

    def _kept_arrays(self, name: str, make: Callable[[], dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
        """Derived arrays, kept in the cache beside the artifact (by format version and fingerprint):
        a 200k vocabulary's rows and classes cost about a second each per process otherwise."""
        if not self.fingerprint:
            return make()
        path = cache.cache_dir() / f"v{VERSION}-bpe-{name}-{self.fingerprint}.tokfst"
        data = cache.load(path)
        if data is not None:
            with contextlib.suppress(Exception):  # not an .npz of this layout: made again
                with np.load(io.BytesIO(data), allow_pickle=False) as z:
                    return {k: z[k] for k in z.files}
        out = make()
        buf = io.BytesIO()
        np.savez(buf, **out)
        cache.store(path, buf.getvalue())
        return out

    def counts(self) -> dict:
        """The counts read off the arrays (the artifact header's)."""
        return {
            "vocab_size": self.vocab_size,
            "allowed_tokens": int(self.allowed.sum()),
            "unreachable_tokens": int(self.vocab_size - self.allowed.sum()),
            "byte_fallback_tokens": int((self.fb_byte >= 0).sum()),
            "rectangles": len(self.boxes),
            "non_monotone_tokens": int((self.allowed & ~self.monotone).sum()),
        }

    def info(self) -> dict:
        """The counts, and those that need the rows: states, banned intervals and pairs."""
        rows = self._rows()
        cls = self.classes()
        return {"format": FORMAT, "version": VERSION, "fingerprint": self.fingerprint, **self.counts(),
                "states": int(cls.max()) + 2 if (cls >= 0).any() else 1,  # classes + the start state
                "banned_intervals": len(rows.lo), "banned_pairs": self.count_banned()}

    def count_banned(self) -> int:
        """|{(u, v) banned}| among allowed tokens, from the interval rows (no |V|^2 walk)."""
        allowed_follow = self.allowed & self.may_follow
        per_row = rowmod.count(self._rows(), allowed_follow[self.lorder])
        toks = np.flatnonzero(self.allowed)
        cont = self.may_continue[toks]
        r = self.rpos[toks]
        total = int((~cont).sum()) * int(allowed_follow.sum())
        sel = cont & (r >= 0)
        return total + int(per_row[r[sel]].sum())


# ---- compilation ----------------------------------------------------------------------------
def _fallback_dfa(model: TokenizerModel) -> tuple[np.ndarray, np.ndarray]:
    """DFA over bytes of (UTF-8 of characters absent from the vocabulary)*; state 0 = start."""
    if not model.options.get("byte_fallback"):
        return np.full((1, 256), -1, np.int32), np.ones(1, bool)
    present = {ord(t) for t in model.model_vocab() if len(t) == 1}
    absent = utf8.complement(utf8.ranges_of(present))
    f = ranges_acceptor(absent).closure()
    f = pynini.determinize(f.rmepsilon()).minimize()
    zero = pynini.Weight.zero(f.weight_type())
    order = [f.start()] + [s for s in f.states() if s != f.start()]
    index = {s: i for i, s in enumerate(order)}
    delta = np.full((len(order), 256), -1, np.int32)
    final = np.zeros(len(order), bool)
    for s in order:
        final[index[s]] = f.final(s) != zero
        for arc in f.arcs(s):
            delta[index[s], arc.ilabel - 1] = index[arc.nextstate]
    return delta, final


def compile_implicit(model: TokenizerModel, stages: dict | None = None) -> ImplicitBpe:
    """Derive traces, rectangles and the side automata for a BPE tokenizer (exact for every merge order).

    ``stages``, if given, receives the seconds spent in each stage (merges, traces, rectangles,
    out_of_order)."""
    clock = _Clock(stages)
    hf = HfBpe(model)
    table = MergeTable(hf, model.vocab_size)
    clock("merges")
    der = derive(model, hf, table)
    clock("traces")
    rect = rectangles(der, table)
    n = model.vocab_size
    prefix = model.options.get("continuing_subword_prefix") or ""
    suffix = model.options.get("end_of_word_suffix") or ""
    has_prefix = np.zeros(n, bool)
    has_suffix = np.zeros(n, bool)
    if prefix or suffix:
        flags = [model_text(model, t)[1:] for t in range(n)]
        has_prefix[:] = [p for p, _ in flags]
        has_suffix[:] = [s for _, s in flags]
    allowed = der.reachable | der.fallback
    alone = np.zeros(n, bool)
    if model.options.get("ignore_merges"):  # merges never make these, but a word spelled as one is one
        alone = ~allowed & np.array([bool(t) and i not in model.not_in_model and not der.fallback[i]
                                     and model_text(model, i)[0] == t for i, t in enumerate(model.tokens)])
    fb_byte = np.full(n, -1, np.int16)
    for t in np.flatnonzero(der.fallback):
        fb_byte[t] = int(model.tokens[t][3:5], 16)
    mono = allowed & der.monotone
    clock("rectangles")
    boxes = rect.boxes
    rpos = rect.right.pos.copy()
    lorder = rect.left.order
    odd = np.flatnonzero(allowed & ~mono)  # traces out of (rank, position) order: after the monotone ones,
    if len(odd):  # in the post-order of the whole forests, so that their own rows and columns stay few intervals
        full_r = spine_order(der.right, der.rc, allowed).pos[odd]
        full_l = spine_order(der.left, der.rc, allowed).pos[odd]
        rpos[odd[np.argsort(full_r)]] = len(rect.right.order) + np.arange(len(odd))
        lpos = rect.left.pos.copy()
        by_left = odd[np.argsort(full_l)]
        lpos[by_left] = len(lorder) + np.arange(len(odd))
        lorder = np.r_[lorder, by_left]
        rx, lx = exposure.moments(model, hf, odd)
        row = exposure.rows(rx, table, der, rect.left, mono)
        col = exposure.columns(lx, table, der, rect.right, mono)
        both = exposure.pairs(rx, lx, table)
        parts = [boxes]
        for key, lo, hi, is_row in ((rpos[row[:, 0]], row[:, 1], row[:, 2], True),
                                    (lpos[col[:, 0]], col[:, 1], col[:, 2], False),
                                    (rpos[both[:, 0]], lpos[both[:, 1]], lpos[both[:, 1]], True)):
            key, lo, hi = _merge_intervals(key, lo, hi)
            parts.append(np.stack([key, key, lo, hi] if is_row else [lo, hi, key, key], axis=1).reshape(-1, 4))
        boxes = np.concatenate(parts)
    clock("out_of_order")
    fb_delta, fb_final = _fallback_dfa(model)
    return ImplicitBpe(
        fingerprint=model.fingerprint, vocab_size=n, allowed=allowed, alone=alone, fb_byte=fb_byte,
        may_start=~has_prefix if prefix else np.ones(n, bool),
        may_end=has_suffix if suffix else np.ones(n, bool),
        may_continue=~has_suffix if suffix else np.ones(n, bool),
        may_follow=has_prefix if prefix else np.ones(n, bool),
        monotone=mono, rpos=rpos.astype(np.int32), lorder=lorder.astype(np.int32), boxes=boxes.astype(np.int32),
        fb_delta=fb_delta, fb_final=fb_final,
    )


class _Clock:
    """Adds the time since the previous call to ``stages[name]``."""

    def __init__(self, stages: dict | None):
        self.stages, self.t = stages, time.perf_counter()

    def __call__(self, name: str) -> None:
        now = time.perf_counter()
        if self.stages is not None:
            self.stages[name] = self.stages.get(name, 0.0) + now - self.t
        self.t = now


def _merge_intervals(key: np.ndarray, lo: np.ndarray, hi: np.ndarray):
    """Per key, the union of the intervals [lo, hi] as disjoint, non-adjacent intervals."""
    if not len(key):
        return key, lo, hi
    order = np.lexsort((lo, key))
    key, lo, hi = key[order], lo[order], hi[order]
    new = np.r_[True, key[1:] != key[:-1]]
    group = np.cumsum(new)
    span = int(hi.max()) + 2
    running = np.maximum.accumulate(hi + group * span) - group * span
    start = new.copy()
    start[1:] |= lo[1:] > running[:-1] + 1
    first = np.flatnonzero(start)
    return key[first], lo[first], np.maximum.reduceat(hi, first)


def _symbols(hf: HfBpe, model: TokenizerModel, t: int) -> list[int]:
    """The initial symbols of a token inside a word (its own prefix/suffix status)."""
    tok = model.tokens[t]
    if model.options.get("byte_fallback") and len(tok) == 6 and tok.startswith("<0x"):
        return [t]
    text, pre, suf = model_text(model, t)
    return hf.initial_symbols(text, prefix_first=pre, suffix_last=suf)


ROW_QUERIES = 64  # BANNED rows read off the rectangles before the rows are built (about 1 ms each on 200k tokens)
LOADED = 2  # implicit A_BPEs kept per process, by cache entry (their rows and classes are made once)
_LOADED: OrderedDict[tuple, ImplicitBpe] = OrderedDict()


def load_or_compile(model: TokenizerModel, artifact: str | None = None) -> ImplicitBpe:
    """An artifact given by path, else the cached one for this fingerprint, else compile and cache.

    A cache entry is sealed (:mod:`tokfst_cli.support.cache`) and verified on read; a damaged,
    truncated or foreign one is rebuilt. The one read from the cache is kept for this process
    (with what it derives on use: rows, classes) while its entry is unchanged on disk
    (``cache.identity``), so the canonical builds of one process share it.
    """

    if artifact is not None:
        return from_bytes(read_artifact(artifact, hint="rebuild-implicit"), model.fingerprint, artifact).attach(model)
    path = cache.cache_dir() / f"v{VERSION}-bpe-{model.fingerprint}.tokfst"
    ident = cache.identity(path)
    if ident is not None and ident in _LOADED:
        _LOADED.move_to_end(ident)
        return _LOADED[ident]
    data = cache.load(path)
    if data is not None:
        try:
            return _kept(ident, from_bytes(data, model.fingerprint, str(path)).attach(model))
        except InputError:
            pass  # sealed but not this format (another tokfst): rebuild
    imp = compile_implicit(model).attach(model)
    if cache.store(path, to_bytes(imp)):
        _kept(cache.identity(path), imp)
    return imp


def _kept(ident: tuple | None, imp: ImplicitBpe) -> ImplicitBpe:
    if ident is not None:
        _LOADED[ident] = imp
        while len(_LOADED) > LOADED:
            _LOADED.popitem(last=False)
    return imp


# ---- artifact ---------------------------------------------------------------------------
FIX = "rebuild the implicit A_BPE artifact"


def to_bytes(imp: ImplicitBpe) -> bytes:
    """The artifact (kept with the automaton: writing it again costs nothing)."""
    if "bytes" in imp.derived:
        return imp.derived["bytes"]
    # neither rows nor classes are stored: a reader builds the rows for its first pair test anyway,
    # and the classes from them in a fraction of that time
    arrays = [np.ascontiguousarray(getattr(imp, name)) for name in ARRAYS]
    payload = zlib.compress(b"".join(a.tobytes() for a in arrays), 3)
    header = {
        "format": FORMAT, "version": VERSION, "fingerprint": imp.fingerprint, "vocab_size": imp.vocab_size,
        "counts": imp.counts(),
        "arrays": [{"name": n, "dtype": a.dtype.str, "shape": list(a.shape)} for n, a in zip(ARRAYS, arrays)],
    }
    imp.derived["bytes"] = data = pack(MAGIC, header, payload)
    return data


DTYPES = {"allowed": "|b1", "alone": "|b1", "fb_byte": "<i2", "may_start": "|b1", "may_end": "|b1",
          "may_continue": "|b1", "may_follow": "|b1", "monotone": "|b1", "rpos": "<i4", "lorder": "<i4",
          "boxes": "<i4", "fb_delta": "<i4", "fb_final": "|b1"}


def from_bytes(data: bytes, fingerprint: str | None = None, source: str = "artifact") -> ImplicitBpe:
    """Load an artifact; refuse a truncated or damaged one, or one built for another tokenizer."""
    header, payload = unpack(data, MAGIC, FORMAT, VERSION, source, FIX, hint="rebuild-implicit")

    def damaged(why: str) -> InputError:
        return InputError(f"{source} is damaged ({why})", FIX, hint="rebuild-implicit")

    n, fp, specs = header.get("vocab_size"), header.get("fingerprint"), header.get("arrays")
    if not isinstance(fp, str) or type(n) is not int or n < 0 or not isinstance(specs, list):
        raise damaged("header fields")
    if fingerprint is not None and fp != fingerprint:
        raise InputError(f"{source} was built for tokenizer {fp[:16]}, "
                         f"not {fingerprint[:16]}", "rebuild it for this tokenizer", hint="rebuild-implicit")
    try:
        raw = zlib.decompress(payload)
    except zlib.error:
        raise InputError(f"{source} is damaged (payload does not decompress)", FIX, hint="rebuild-implicit") from None
    fields, pos = {}, 0
    for spec in specs:
        try:
            name, dtype, shape = spec["name"], spec["dtype"], [int(x) for x in spec["shape"]]
        except (TypeError, KeyError, ValueError):
            raise damaged("array table") from None
        if DTYPES.get(name) != dtype or name in fields or any(x < 0 for x in shape) or \
                len(shape) != (2 if name in ("boxes", "fb_delta") else 1):
            raise damaged(f"array {str(name)[:20]}")
        dt = np.dtype(dtype)
        count = int(np.prod(shape)) if shape else 1
        if pos + count * dt.itemsize > len(raw):
            raise damaged("arrays larger than the payload")
        fields[name] = np.frombuffer(raw, dt, count, pos).reshape(shape)
        pos += count * dt.itemsize
    missing = [x for x in ARRAYS if x not in fields]
    if missing or pos != len(raw):
        raise InputError(f"{source} does not hold the arrays of {FORMAT} v{VERSION} ({', '.join(missing) or 'size'})",
                         "rebuild it with this tokfst")
    _check_arrays(fields, n, damaged)
    imp = ImplicitBpe(fingerprint=fp, vocab_size=n, **{x: fields[x] for x in ARRAYS})
    imp.derived["bytes"] = bytes(data)
    return imp


def _check_arrays(a: dict, n: int, damaged) -> None:
    """Shapes and index ranges, so that a damaged artifact is refused instead of misread."""
    def within(x: np.ndarray, lo: int, hi: int) -> bool:
        return x.size == 0 or (int(x.min()) >= lo and int(x.max()) < hi)

    per_token = ("allowed", "alone", "fb_byte", "may_start", "may_end", "may_continue", "may_follow", "monotone",
                 "rpos")
    bad = [x for x in per_token if a[x].shape != (n,)]
    bad += [x for x, v in a.items() if v.dtype == bool and v.size and int(v.view(np.uint8).max()) > 1]
    nright = int(a["rpos"].max()) + 1 if n else 0
    k, states = len(a["lorder"]), len(a["fb_final"])
    boxes, delta = a["boxes"], a["fb_delta"]
    checks = {
        "lorder": a["lorder"].ndim == 1 and within(a["lorder"], 0, n),
        "rpos": within(a["rpos"], -1, n),
        "fb_byte": within(a["fb_byte"], -1, 256),
        "boxes": boxes.ndim == 2 and boxes.shape[1:] == (4,) and within(boxes[:, :2], 0, nright)
        and within(boxes[:, 2:], 0, k)
        and bool((boxes[:, 0] <= boxes[:, 1]).all() and (boxes[:, 2] <= boxes[:, 3]).all()),
        "fb_delta": delta.shape == (states, 256) and states > 0 and within(delta, -1, states),
    }
    bad += [x for x, ok in checks.items() if not ok]
    if bad:
        raise damaged(f"array {bad[0]}")
