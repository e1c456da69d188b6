"""Stage C for BPE: HF's merge trace of every token's own text, all tokens at once (numpy).

``derive`` runs Hugging Face's ``Word::merge_all`` (re-stated in :mod:`.hf`) on every token's
initial symbols in lock-step rounds. HF's heap pops the valid entry of least (rank, position),
and the valid entries are exactly the current adjacent pairs that have a merge: an entry is
valid when the pair now at its position makes its token, which fixes the pair's span, and a
span once split one way is never split another way (symbols only grow). So one round merges,
in every unfinished word at once, its adjacent pair of least (rank, position); a word is done
when no adjacent pair has a merge. Words whose initial symbols are not one vocabulary token per
character (byte fallback, unknowns) are traced one by one with :class:`~.hf.HfBpe`.

``spines`` re-traces one token (a non-monotone one: few) and returns its *moments*: after t of
its m merges, the rightmost and leftmost symbols, the largest rank popped so far and the rank of
the next pop (:mod:`.exposure` turns them into the pairs a merge can cross).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tokfst_cli.bpe.hf import HfBpe
from tokfst_cli.tokenizer.model import TokenizerModel, model_text

INF = np.int64(1) << 62  # "no merge" / "never consumed"


@dataclass
class Derivations:
    """Per token id: reachable, monotone, creation rank rc, left and right operand (-1 = none)."""

    reachable: np.ndarray
    monotone: np.ndarray
    rc: np.ndarray
    left: np.ndarray
    right: np.ndarray
    fallback: np.ndarray  # byte-fallback tokens <0xNN>: outside merges, handled by the UTF-8 rule




class MergeTable:
    """HF's merges as sorted int64 pair keys a * V + b -> (rank, new token)."""

    def __init__(self, hf: HfBpe, vocab_size: int):
        self.v = max(vocab_size, 1)
        n = len(hf.new_ids)
        pairs = np.array(hf.model.merges, np.int64).reshape(n, 2)
        keys = pairs[:, 0] * self.v + pairs[:, 1]
        order = np.argsort(keys, kind="stable")
        last = np.ones(n, bool)  # a repeated pair keeps its last rank
        last[:-1] = keys[order][1:] != keys[order][:-1]
        order = order[last]
        self.keys, self.rank = keys[order], order.astype(np.int64)
        self.new = np.array(hf.new_ids, np.int64).reshape(n)[order]
        self.a, self.b = pairs[order, 0], pairs[order, 1]
        bkeys = self.b * self.v + self.a  # the same merges by right operand: by_b indexes the arrays above
        self.by_b = np.argsort(bkeys)
        self.keys_by_b = bkeys[self.by_b]

    def lookup(self, a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(rank, new) of the pairs (a[i], b[i]); rank INF and new -1 where there is no merge."""
        q = a * self.v + b
        if not len(self.keys):
            return np.full(len(q), INF), np.full(len(q), -1, np.int64)
        i = np.minimum(sorted_search(self.keys, q), len(self.keys) - 1)
        hit = self.keys[i] == q
        return np.where(hit, self.rank[i], INF), np.where(hit, self.new[i], -1)


def sorted_search(keys: np.ndarray, q: np.ndarray, side: str = "left") -> np.ndarray:
    """np.searchsorted, with the queries sorted first when there are many (far fewer cache misses)."""
    if len(q) < 50_000:
        return np.searchsorted(keys, q, side)
    order = np.argsort(q)
    out = np.empty(len(q), np.int64)
    out[order] = np.searchsorted(keys, q[order], side)
    return out


def _initial_symbols(model: TokenizerModel, hf: HfBpe, words: np.ndarray):
    """Flat initial symbols of the given tokens where every character is one vocabulary token.

    Returns (symbols, word index of each symbol, tokens traced this way, the others).
    """
    prefix, suffix = hf.prefix, hf.suffix
    texts, pres, sufs = [], [], []
    for t in words.tolist():
        if prefix or suffix:
            text, pre, suf = model_text(model, t)
        else:
            text, pre, suf = model.tokens[t], False, False
        texts.append(text)
        pres.append(pre)
        sufs.append(suf)
    lens = np.fromiter(map(len, texts), np.int64, len(texts))
    cps = np.frombuffer("".join(texts).encode("utf-32-le"), np.uint32).astype(np.int64)
    # one table: code point * 4 + variant (1: continuing-subword prefix, 2: end-of-word suffix) -> id
    table: dict[int, int] = {}
    longest = 1 + len(prefix) + len(suffix)
    for s, i in hf.ids.items():
        if len(s) > longest:
            continue
        for var in range(4) if (prefix or suffix) else (0,):
            core = s
            if var & 1:
                if not prefix or not core.startswith(prefix):
                    continue
                core = core[len(prefix):]
            if var & 2:
                if not suffix or not core.endswith(suffix):
                    continue
                core = core[: -len(suffix)]
            if len(core) == 1:
                table[ord(core) * 4 + var] = i
    tkeys = np.array(sorted(table), np.int64)
    tvals = np.array([table[k] for k in tkeys.tolist()], np.int64)
    wid = np.repeat(np.arange(len(texts)), lens)
    starts = np.cumsum(lens) - lens
    local = np.arange(len(cps)) - starts[wid]
    var = np.zeros(len(cps), np.int64)
    if prefix:
        var |= (local > 0) | np.asarray(pres, bool)[wid]
    if suffix:
        var |= 2 * ((local == lens[wid] - 1) & np.asarray(sufs, bool)[wid])
    q = cps * 4 + var
    j = np.minimum(sorted_search(tkeys, q), max(len(tkeys) - 1, 0))
    hit = tkeys[j] == q if len(tkeys) else np.zeros(len(q), bool)
    bad_word = np.zeros(len(texts), bool)
    bad_word[wid[~hit]] = True
    bad_word |= lens == 0
    keep = ~bad_word[wid]
    fast = ~bad_word
    remap = np.cumsum(fast) - 1
    return tvals[j[keep]], remap[wid[keep]], words[fast], words[bad_word]


def _rounds(table: MergeTable, sym: np.ndarray, wid: np.ndarray, nwords: int):
    """Lock-step merge_all of many words. Returns per word: symbols left, first symbol, monotone,
    and the last merge's rank, left and right operand (-1 if none)."""
    left_n = np.zeros(nwords, np.int64)
    first = np.full(nwords, -1, np.int64)
    mono = np.ones(nwords, bool)
    last_key = np.full(nwords, -1, np.int64)
    rc = np.full(nwords, -1, np.int64)
    lop = np.full(nwords, -1, np.int64)
    rop = np.full(nwords, -1, np.int64)
    if not len(sym):
        return left_n, first, mono, rc, lop, rop
    starts = np.flatnonzero(np.r_[True, wid[1:] != wid[:-1]])
    lp = np.arange(len(sym)) - np.repeat(starts, np.diff(np.r_[starts, len(sym)]))
    shift = int(lp.max()) + 1
    same = np.r_[wid[1:] == wid[:-1], False]
    rank, _ = table.lookup(sym, np.r_[sym[1:], 0])
    pk = np.where(same & (rank < INF), rank * shift + lp, INF)
    while len(sym):
        starts = np.flatnonzero(np.r_[True, wid[1:] != wid[:-1]])
        lens = np.diff(np.r_[starts, len(sym)])
        segmin = np.minimum.reduceat(pk, starts)
        words = wid[starts]
        done = segmin >= INF
        left_n[words[done]] = lens[done]
        first[words[done]] = sym[starts[done]]
        seg = np.repeat(np.arange(len(starts)), lens)
        j = np.flatnonzero((pk == segmin[seg]) & ~done[seg])
        w = wid[j]
        key = pk[j]
        mono[w] &= key > last_key[w]
        last_key[w] = key
        a, b = sym[j], sym[j + 1]
        r, new = table.lookup(a, b)
        rc[w], lop[w], rop[w] = r, a, b
        sym[j] = new
        keep = ~done[seg]
        keep[j + 1] = False
        pos = np.cumsum(keep) - 1
        jn = pos[j]
        sym, wid, lp = sym[keep], wid[keep], lp[keep]
        if not len(sym):
            break
        pk = pk[keep]
        n = len(sym)
        for k in (jn, jn - 1):  # the merged symbol's pairs with its right and left neighbours
            k = k[k >= 0]
            nxt = np.minimum(k + 1, n - 1)
            ok = (k + 1 < n) & (wid[nxt] == wid[k])
            rk, _ = table.lookup(sym[k], sym[nxt])
            pk[k] = np.where(ok & (rk < INF), rk * shift + lp[k], INF)
    return left_n, first, mono, rc, lop, rop


def trace_one(hf: HfBpe, symbols: list[int]) -> tuple[list[int], list]:
    """HF's result and merge trace of one word (reference path)."""
    trace: list = []
    return hf.merge_all(list(symbols), trace), trace


def derive(model: TokenizerModel, hf: HfBpe | None = None, table: MergeTable | None = None) -> Derivations:
    """HF's merge trace of every token's own text: reachable, monotone, last merge."""
    hf = hf or HfBpe(model)
    table = table or MergeTable(hf, model.vocab_size)
    n = model.vocab_size
    reachable = np.zeros(n, bool)
    monotone = np.zeros(n, bool)
    fallback = np.zeros(n, bool)
    rc = np.full(n, -1, np.int64)
    left = np.full(n, -1, np.int64)
    right = np.full(n, -1, np.int64)
    byte_fb = bool(model.options.get("byte_fallback"))
    cands = []
    for tid, tok in enumerate(model.tokens):
        if not tok or tid in model.not_in_model:
            continue
        if byte_fb and len(tok) == 6 and tok.startswith("<0x") and tok.endswith(">"):
            fallback[tid] = monotone[tid] = True  # a leaf: created by no merge (rc = -1)
            continue
        cands.append(tid)
    words = np.array(cands, np.int64)
    sym, wid, fast, slow = _initial_symbols(model, hf, words)
    left_n, first, mono, r, lo, ro = _rounds(table, sym, wid, len(fast))
    ok = (left_n == 1) & (first == fast)
    reachable[fast[ok]] = True
    monotone[fast] = mono
    rc[fast], left[fast], right[fast] = r, lo, ro
    for tid in slow.tolist():
        text, pre, suf = model_text(model, tid)
        try:
            out, trace = trace_one(hf, hf.initial_symbols(text, prefix_first=pre, suffix_last=suf))
        except Exception:  # noqa: BLE001 - a token HF cannot even start (no unk): unreachable
            continue
        reachable[tid] = out == [tid]
        keys = [(e.rank, e.pos) for e in trace]
        monotone[tid] = all(keys[i] < keys[i + 1] for i in range(len(keys) - 1))
        if trace:
            rc[tid], left[tid], right[tid] = trace[-1].rank, trace[-1].left, trace[-1].right
    if hf.unk_id is not None:
        reachable[hf.unk_id] = False
    unreached = ~reachable & ~fallback
    rc[unreached], left[unreached], right[unreached] = -1, -1, -1
    monotone &= reachable | fallback
    return Derivations(reachable, monotone, rc, left, right, fallback)


@dataclass
class Spines:
    """One token's trace seen from its ends. ``h[t]`` is the rank of the (t+1)-th pop (INF after
    the last), ``top[t]`` the largest rank popped in the first t pops (-1 for none). ``right``/
    ``left``: (symbol, first moment, end moment) of each rightmost/leftmost symbol in turn, from
    the initial character to the token; a symbol is at the end during moments [first, end)."""

    h: np.ndarray
    top: np.ndarray
    right: list[tuple[int, int, int]]
    left: list[tuple[int, int, int]]


def spines(hf: HfBpe, symbols: list[int]) -> Spines:
    """The moments of one word's trace (see :class:`Spines`)."""
    out, trace = trace_one(hf, symbols)
    n, m = len(symbols), len(trace)
    end = list(range(1, n + 1))  # end[p]: one past the last initial symbol covered by symbol p
    right = [[symbols[-1], 0, m + 1]]
    left = [[symbols[0], 0, m + 1]]
    for k, e in enumerate(trace, start=1):
        q = end[e.pos]
        if end[q] == n:
            right[-1][2] = k
            right.append([e.new, k, m + 1])
        if e.pos == 0:
            left[-1][2] = k
            left.append([e.new, k, m + 1])
        end[e.pos] = end[q]
    h = np.array([e.rank for e in trace] + [INF], np.int64)
    top = np.maximum.accumulate(np.r_[-1, h[:-1]])
    return Spines(h, top, [tuple(x) for x in right], [tuple(x) for x in left])
