"""Stage C for BPE: the implicit canonical BPE automaton and its artifact (seed 000 Sec. 6.5).

State after a token u is its class: tokens with the same BANNED row share a class, which is
the state q_u of A_BPE. BANNED is stored as the merge rectangles of ``canonical`` (about one
per merge) plus exact pairs for the few tokens outside the rectangle argument; rows are
expanded at load time into sorted disjoint intervals of the left-spine order (CSR), so a pair
test is a binary search and a mask is a handful of slices.

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

import zlib
from dataclasses import dataclass, field

import numpy as np
import pynini

from .. import utf8
from ..artifacts import pack, unpack
from ..errors import InputError, LimitError
from ..regex import ranges_acceptor
from ..tokenizer import TokenizerModel
from .canonical import derive, model_text, rectangles
from .hf import HfBpe

FORMAT = "tokfst-implicit-bpe"
VERSION = 1
MAGIC = b"TOKFSTBPE\0"
ARRAYS = ("allowed", "alone", "fb_byte", "may_start", "may_end", "may_continue", "may_follow",
          "rpos", "lorder", "boxes", "extra", "fb_delta", "fb_final", "token_class")


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
    rpos: np.ndarray  # int32: right-spine position, -1 if outside the rectangles
    lorder: np.ndarray  # int32: left-spine position -> token
    boxes: np.ndarray  # int32 (k, 4): u_lo, u_hi, v_lo, v_hi
    extra: np.ndarray  # int32 (p, 2): banned pairs decided exactly
    fb_delta: np.ndarray  # int32 (s, 256): fallback-run DFA, -1 = no move
    fb_final: np.ndarray  # bool (s,)
    token_class: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int32))  # int32: class (state) per token
    derived: dict = field(default_factory=dict, repr=False)

    # ---- derived structure -------------------------------------------------------------
    def _rows(self):
        """CSR over right positions of merged banned intervals (left positions)."""
        if "rows" not in self.derived:
            b = self.boxes.astype(np.int64)
            nright = int(self.rpos.max()) + 1 if len(self.rpos) else 0
            lens = b[:, 1] - b[:, 0] + 1
            box = np.repeat(np.arange(len(b)), lens)
            upos = b[box, 0] + (np.arange(lens.sum()) - np.repeat(np.cumsum(lens) - lens, lens))
            lo, hi = b[box, 2], b[box, 3]
            order = np.lexsort((lo, upos))
            upos, lo, hi = upos[order], lo[order], hi[order]
            if len(upos):
                new_row = np.r_[True, upos[1:] != upos[:-1]]
                group = np.cumsum(new_row)
                span = int(hi.max()) + 2
                running = np.maximum.accumulate(hi + group * span) - group * span
                start = new_row.copy()
                start[1:] |= lo[1:] > running[:-1] + 1
                first = np.flatnonzero(start)
                lo, hi, upos = lo[first], np.maximum.reduceat(hi, first), upos[first]
            ptr = np.zeros(nright + 1, np.int64)
            np.add.at(ptr, upos + 1, 1)
            ptr = np.cumsum(ptr)
            width = len(self.lorder) + 1
            self.derived["rows"] = (ptr, lo, hi, upos * width + lo, width)
        return self.derived["rows"]

    def _extra_keys(self) -> np.ndarray:
        if "extra" not in self.derived:
            e = self.extra.astype(np.int64)
            self.derived["extra"] = np.sort(e[:, 0] * self.vocab_size + e[:, 1])
        return self.derived["extra"]

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
        ptr, lo, hi, keys, width = self._rows()
        ru, lv = self.rpos[u].astype(np.int64), self._lpos()[v]
        ok = (ru >= 0) & (lv >= 0)
        if ok.any() and len(keys):
            q = ru[ok] * width + lv[ok]
            order = np.argsort(q)  # sorted queries search the sorted keys far faster
            idx = np.empty(len(q), np.int64)
            idx[order] = np.searchsorted(keys, q[order], side="right") - 1
            inrow = (idx >= ptr[ru[ok]]) & (idx >= 0)
            hit = np.zeros(len(q), bool)
            hit[inrow] = hi[idx[inrow]] >= lv[ok][inrow]
            out[np.flatnonzero(ok)] |= hit
        if len(self.extra):
            ek = self._extra_keys()
            q = u * self.vocab_size + v
            i = np.clip(np.searchsorted(ek, q), 0, len(ek) - 1)
            out |= ek[i] == q
        return out

    def banned_row(self, u: int) -> np.ndarray:
        """BANNED(u) as a bool mask over token ids (cached per token)."""
        cache = self.derived.setdefault("row_cache", {})
        if u not in cache:
            mask = ~self.allowed | ~self.may_follow
            if not self.may_continue[u] or not self.allowed[u]:
                mask = np.ones(self.vocab_size, bool)
            else:
                mask = mask.copy()
                ru = int(self.rpos[u])
                if ru >= 0:
                    ptr, lo, hi, _, _ = self._rows()
                    for a, b in zip(lo[ptr[ru]:ptr[ru + 1]], hi[ptr[ru]:ptr[ru + 1]]):
                        mask[self.lorder[a:b + 1]] = True
                if len(self.extra):
                    mask[self.extra[self.extra[:, 0] == u, 1]] = True
            cache[u] = mask
        return cache[u]

    def attach(self, model: TokenizerModel) -> ImplicitBpe:
        """Bind the tokenizer's texts for the ignore_merges rule (a word that is a token is that token)."""
        if model.options.get("ignore_merges"):
            texts = [model_text(model, t)[0] for t in range(model.vocab_size)]
            self.derived["texts"] = texts
            self.derived["vocab"] = {t for t in model.tokens if t}
            # HF returns such a token for the word spelled exactly like it, markers or not
            self.derived["whole"] = np.array([bool(t) and t == x and i not in model.special_ids
                                              for i, (t, x) in enumerate(zip(model.tokens, texts))])
            hf = HfBpe(model)  # merge tokenizations that ignore_merges replaces by one token
            self.derived["replaced"] = {int(w): hf.merge_all(_symbols(hf, model, int(w)))
                                        for w in np.flatnonzero(self.alone)}
        return self

    def _whole_word_rule(self, seq: list[int]) -> tuple[int, str] | None:
        texts = self.derived.get("texts")
        if texts is None:
            if self.alone.any():
                raise ValueError("ignore_merges artifact used without attach(model)")
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
        if "classes" not in self.derived and len(self.token_class) == self.vocab_size:
            self.derived["classes"] = self.token_class.astype(np.int64)
        if "classes" not in self.derived:
            ptr, lo, hi, _, _ = self._rows()
            extra_rows: dict[int, bytes] = {}
            for u in np.unique(self.extra[:, 0]) if len(self.extra) else ():
                extra_rows[int(u)] = np.sort(self.extra[self.extra[:, 0] == u, 1]).tobytes()
            sig: dict[tuple, int] = {}
            cls = np.full(self.vocab_size, -1, np.int64)
            for t in np.flatnonzero(self.allowed):
                ru = int(self.rpos[t])
                key = (bool(self.may_continue[t]), int(self.fb_byte[t]) >= 0,
                       lo[ptr[ru]:ptr[ru + 1]].tobytes() if ru >= 0 else b"",
                       hi[ptr[ru]:ptr[ru + 1]].tobytes() if ru >= 0 else b"",
                       extra_rows.get(int(t), b""))
                cls[t] = sig.setdefault(key, len(sig))
            self.derived["classes"] = cls
        return self.derived["classes"]

    def info(self) -> dict:
        ptr, lo, _, _, _ = self._rows()
        cls = self.classes()
        return {
            "format": FORMAT, "version": VERSION, "fingerprint": self.fingerprint,
            "vocab_size": self.vocab_size,
            "allowed_tokens": int(self.allowed.sum()),
            "unreachable_tokens": int(self.vocab_size - self.allowed.sum()),
            "byte_fallback_tokens": int((self.fb_byte >= 0).sum()),
            "states": int(cls.max()) + 2 if (cls >= 0).any() else 1,  # classes + the start state
            "rectangles": len(self.boxes),
            "banned_intervals": len(lo),
            "exact_pairs": len(self.extra),
            "banned_pairs": self.count_banned(),
        }

    def count_banned(self) -> int:
        """|{(u, v) banned}| among allowed tokens, from the interval rows (no |V|^2 walk)."""
        ptr, lo, hi, _, _ = self._rows()
        allowed_follow = self.allowed & self.may_follow
        pref = np.r_[0, np.cumsum(allowed_follow[self.lorder])]
        per_row = np.zeros(len(ptr) - 1, np.int64)
        if len(lo):
            seg = pref[hi + 1] - pref[lo]
            per_row = np.add.reduceat(np.r_[seg, 0], ptr[:-1])[: len(ptr) - 1] * (np.diff(ptr) > 0)
        total = 0
        n_follow = int(allowed_follow.sum())
        for t in np.flatnonzero(self.allowed):
            if not self.may_continue[t]:
                total += n_follow
            elif self.rpos[t] >= 0:
                total += int(per_row[self.rpos[t]])
        return total + len(self.extra)


# ---- compilation ----------------------------------------------------------------------------
def _fallback_dfa(model: TokenizerModel) -> tuple[np.ndarray, np.ndarray]:
    """DFA over bytes of (UTF-8 of characters absent from the vocabulary)*; state 0 = start."""
    if not model.options.get("byte_fallback"):
        return np.full((1, 256), -1, np.int32), np.ones(1, bool)
    present = {ord(t) for t in model.tokens if len(t) == 1}
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


def compile_implicit(model: TokenizerModel, max_exact: int = 2_000_000) -> ImplicitBpe:
    """Derive traces, rectangles, exact pairs and the side automata for a BPE tokenizer."""
    hf = HfBpe(model)
    der = derive(model, hf)
    rect = rectangles(model, der, hf)
    n = model.vocab_size
    prefix = model.options.get("continuing_subword_prefix") or ""
    suffix = model.options.get("end_of_word_suffix") or ""
    flags = [model_text(model, t)[1:] for t in range(n)]
    has_prefix = np.array([p for p, _ in flags], bool)
    has_suffix = np.array([s for _, s in flags], bool)
    allowed = der.reachable | der.fallback
    alone = np.zeros(n, bool)
    if model.options.get("ignore_merges"):  # merges never make these, but a word spelled as one is one
        alone = ~allowed & np.array([bool(t) and i not in model.special_ids and not der.fallback[i]
                                     and model_text(model, i)[0] == t for i, t in enumerate(model.tokens)])
    fb_byte = np.full(n, -1, np.int16)
    for t in np.flatnonzero(der.fallback):
        fb_byte[t] = int(model.tokens[t][3:5], 16)
    rpos = np.full(n, -1, np.int32)
    rpos[rect.right.order] = np.arange(len(rect.right.order))
    # tokens outside the rectangle argument: decide their pairs exactly
    outside = np.flatnonzero(allowed & (rect.left.pos < 0))
    extra: list[tuple[int, int]] = []
    if len(outside):
        cands = np.flatnonzero(allowed)
        if 2 * len(outside) * len(cands) > max_exact:
            raise LimitError(f"checking {len(outside)} tokens outside the rectangles against {len(cands)} tokens",
                             "max_exact", max_exact, 2 * len(outside) * len(cands), remedy="rectangles",
                             unit="pair checks")
        symbols = {int(t): _symbols(hf, model, int(t)) for t in cands}
        for e in outside:
            for t in cands:
                for u, v in ((int(e), int(t)), (int(t), int(e))):
                    if hf.merge_all(symbols[u] + symbols[v]) != [u, v]:
                        extra.append((u, v))
        lorder = np.r_[rect.left.order, outside].astype(np.int32)
    else:
        lorder = rect.left.order.astype(np.int32)
    fb_delta, fb_final = _fallback_dfa(model)
    return ImplicitBpe(
        fingerprint=model.fingerprint, vocab_size=n, allowed=allowed, alone=alone, fb_byte=fb_byte,
        may_start=~has_prefix if prefix else np.ones(n, bool),
        may_end=has_suffix if suffix else np.ones(n, bool),
        may_continue=~has_suffix if suffix else np.ones(n, bool),
        may_follow=has_prefix if prefix else np.ones(n, bool),
        rpos=rpos, lorder=lorder, boxes=rect.boxes.astype(np.int32),
        extra=np.array(sorted(set(extra)), np.int32).reshape(-1, 2), fb_delta=fb_delta, fb_final=fb_final,
    )


def _symbols(hf: HfBpe, model: TokenizerModel, t: int) -> list[int]:
    """The initial symbols of a token inside a word (its own prefix/suffix status)."""
    tok = model.tokens[t]
    if model.options.get("byte_fallback") and len(tok) == 6 and tok.startswith("<0x"):
        return [t]
    text, pre, suf = model_text(model, t)
    return hf.initial_symbols(text, prefix_first=pre, suffix_last=suf)


def load_or_compile(model: TokenizerModel, artifact: str | None = None) -> ImplicitBpe:
    """An artifact given by path, else the cached one for this fingerprint, else compile and cache.

    A cache entry is sealed (:mod:`tokfst_cli.cache`) and verified on read; a damaged,
    truncated or foreign one is rebuilt.
    """
    from .. import cache
    from ..artifacts import read_artifact

    if artifact is not None:
        return from_bytes(read_artifact(artifact, hint="rebuild-implicit"), model.fingerprint, artifact).attach(model)
    path = cache.cache_dir() / f"v{VERSION}-bpe-{model.fingerprint}.tokfst"
    data = cache.load(path)
    if data is not None:
        try:
            return from_bytes(data, model.fingerprint, str(path)).attach(model)
        except InputError:
            pass  # sealed but not this format (another tokfst): rebuild
    imp = compile_implicit(model).attach(model)
    cache.store(path, to_bytes(imp))
    return imp


# ---- artifact ---------------------------------------------------------------------------
FIX = "rebuild the implicit A_BPE artifact"


def to_bytes(imp: ImplicitBpe) -> bytes:
    imp.token_class = imp.classes().astype(np.int32)
    arrays = [np.ascontiguousarray(getattr(imp, name)) for name in ARRAYS]
    payload = zlib.compress(b"".join(a.tobytes() for a in arrays), 9)
    info = imp.info()
    header = {
        "format": FORMAT, "version": VERSION, "fingerprint": imp.fingerprint, "vocab_size": imp.vocab_size,
        "counts": {k: v for k, v in info.items() if k not in ("format", "version", "fingerprint")},
        "arrays": [{"name": n, "dtype": a.dtype.str, "shape": list(a.shape)} for n, a in zip(ARRAYS, arrays)],
    }
    return pack(MAGIC, header, payload)


DTYPES = {"allowed": "|b1", "alone": "|b1", "fb_byte": "<i2", "may_start": "|b1", "may_end": "|b1",
          "may_continue": "|b1", "may_follow": "|b1", "rpos": "<i4", "lorder": "<i4", "boxes": "<i4",
          "extra": "<i4", "fb_delta": "<i4", "fb_final": "|b1", "token_class": "<i4"}


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
                len(shape) != (2 if name in ("boxes", "extra", "fb_delta") else 1):
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
    return ImplicitBpe(fingerprint=fp, vocab_size=n, **{x: fields[x] for x in ARRAYS})


def _check_arrays(a: dict, n: int, damaged) -> None:
    """Shapes and index ranges, so that a damaged artifact is refused instead of misread."""
    def within(x: np.ndarray, lo: int, hi: int) -> bool:
        return x.size == 0 or (int(x.min()) >= lo and int(x.max()) < hi)

    per_token = ("allowed", "alone", "fb_byte", "may_start", "may_end", "may_continue", "may_follow", "rpos")
    bad = [x for x in per_token if a[x].shape != (n,)]
    bad += [x for x, v in a.items() if v.dtype == bool and v.size and int(v.view(np.uint8).max()) > 1]
    nright = int(a["rpos"].max()) + 1 if n else 0
    k, states = len(a["lorder"]), len(a["fb_final"])
    boxes, extra, delta = a["boxes"], a["extra"], a["fb_delta"]
    checks = {
        "lorder": a["lorder"].ndim == 1 and within(a["lorder"], 0, n),
        "rpos": within(a["rpos"], -1, n),
        "fb_byte": within(a["fb_byte"], -1, 256),
        "boxes": boxes.ndim == 2 and boxes.shape[1:] == (4,) and within(boxes[:, :2], 0, nright)
        and within(boxes[:, 2:], 0, k) and bool((boxes[:, 0] <= boxes[:, 1]).all() and (boxes[:, 2] <= boxes[:, 3]).all()),
        "extra": extra.ndim == 2 and extra.shape[1:] == (2,) and within(extra, 0, n),
        "fb_delta": delta.shape == (states, 256) and states > 0 and within(delta, -1, states),
        "token_class": a["token_class"].shape in ((n,), (0,)) and within(a["token_class"], -1, n + 1),
    }
    bad += [x for x, ok in checks.items() if not ok]
    if bad:
        raise damaged(f"array {bad[0]}")
