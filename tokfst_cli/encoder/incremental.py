"""Eager BPE inside one pre-token: the last token of every prefix (Incremental BPE 2026 Sec. 4-6).

A pre-token's symbols (HF's initial symbols, :meth:`HfBpe.initial_symbols`) arrive one at a
time. For every prefix ``s[:i]`` the class keeps ``theta(i)``, the last token of its encoding:
by prefix consistency (Berglund & van der Merwe 2023; Incremental BPE 2026 Sec. 3) the encoding
of ``s[:i]`` is the encoding of ``s[:i - |theta(i)|]`` followed by ``theta(i)``, so the theta
chain from ``i`` back to 0 spells the whole encoding. ``theta(i)`` is the one token ``t`` ending
at ``i`` whose pair with ``theta(i - |t|)`` is canonical, i.e. encodes to itself (the BANNED
pairs of Cognetta & Okazaki 2024 Sec. 6.5); the candidates are tried longest first and each pair
is checked by HF's merges on its symbols (the compiled kernel), so a check is exact by
construction. This is the paper's characterization with a plain scan of the suffix tokens (at
most the longest token's length per symbol) instead of its centroid search.

Eager output (Incremental BPE 2026 Sec. 6): any encoding of a longer text has a boundary in
the window ``[i - L + 1, i]`` (``L``: the longest token, in symbols) and from there follows
that position's theta chain, so where the chains of every window position meet, all that lies
before is final whatever comes next.
"""

from __future__ import annotations

import numpy as np

from tokfst_cli.bpe.hf import HfBpe


class EagerWord:
    """One growing pre-token: ``push(symbols)``, then ``settled()`` for the ids that no later
    symbol can change (each returned once), ``rest()`` for the others at the end. ``tables``:
    :class:`EagerTables` of the model (the reversed-token trie and HF's merge table)."""

    def __init__(self, tables: EagerTables):
        self.t = tables
        self.sym = np.zeros(64, np.int64)
        self.theta = np.full(65, -1, np.int64)  # theta[i]: the last token of the prefix of i symbols
        self.size = np.zeros(65, np.int64)  # its length in symbols
        self.n = 0  # symbols pushed
        self.done = 0  # symbols whose tokens were returned by settled()
        self.checks = 0  # pair checks run (each one run of HF's merges on at most two tokens' symbols)

    def push(self, symbols: list[int]) -> None:
        unk = self.t.fuse_unk
        new = [s for k, s in enumerate(symbols) if not (  # HF fuses a run of unknowns into one
            s == unk and (symbols[k - 1] == unk if k else self.n and self.sym[self.n - 1] == unk))]
        if self.n + len(new) > len(self.sym):
            cap = 2 * (self.n + len(new))
            self.sym = np.concatenate([self.sym, np.zeros(cap - len(self.sym), np.int64)])
            self.theta = np.concatenate([self.theta, np.full(cap + 1 - len(self.theta), -1, np.int64)])
            self.size = np.concatenate([self.size, np.zeros(cap + 1 - len(self.size), np.int64)])
        self.sym[self.n:self.n + len(new)] = new
        t = self.t
        got = t.kernels.extend(self.sym, self.n, self.n + len(new), self.theta, self.size, self.done, t.longest,
                               *t.trie, t.atom, *t.merges, t.v)
        if got < 0:
            raise AssertionError(f"no last token for the prefix of {-1 - got} symbols")  # a token always ends there
        self.checks += got
        self.n += len(new)

    def _chain(self, i: int) -> list[int]:
        out = []
        while i > self.done:
            out.append(int(self.theta[i]))
            i -= int(self.size[i])
        return out[::-1]

    def settled(self) -> list[int]:
        """The ids before the point where the theta chains of the window's positions meet."""
        i, size = self.n, self.size
        ps = set(range(max(self.done, i - self.t.longest + 1), i + 1))
        while len(ps) > 1:
            top = max(ps)
            ps.remove(top)
            ps.add(top - int(size[top]))
        meet = ps.pop()
        out = self._chain(meet)
        self.done = meet
        return out

    def rest(self) -> list[int]:
        """The ids of what :meth:`settled` has not returned (the pre-token is complete)."""
        out = self._chain(self.n)
        self.done = self.n
        return out


class EagerTables:
    """What every :class:`EagerWord` of a model shares: the longest token in symbols, the
    reversed-token trie (``kernels.suffix_trie``), the byte-fallback and unknown symbols (never
    part of a longer token), HF's merge table, the unknown token when HF fuses runs of it."""

    def __init__(self, bpe: HfBpe, kernels, merges: tuple[np.ndarray, ...]):
        tokens, v = bpe.model.tokens, bpe.model.vocab_size
        fallback = [f"<0x{b:02X}>" for b in range(256)] if bpe.byte_fallback else []
        atoms = {bpe.ids[x] for x in fallback if x in bpe.ids}
        atoms |= {bpe.unk_id} if bpe.unk_id is not None else set()  # the unknown token stands alone too
        self.kernels, self.merges, self.v = kernels, merges, v
        self.longest = max((len(t) for t in tokens if t), default=1)
        self.trie = kernels.suffix_trie(tokens, bpe.ids, atoms, v)
        self.atom = np.zeros(v, np.bool_)
        self.atom[list(atoms)] = True
        self.fuse_unk = bpe.unk_id if bpe.fuse_unk and bpe.unk_id is not None else -1

    def word(self) -> EagerWord:
        return EagerWord(self)


def eager_ok(bpe: HfBpe) -> str | None:
    """Why a model's BPE cannot be run eagerly within a pre-token (None: it can). The theta
    characterization assumes HF's plain merges: no ``ignore_merges`` (a whole word looked up
    first), no subword prefix or word suffix (a symbol's form depends on where the word ends)."""
    if bpe.ignore_merges:
        return "ignore_merges"
    if bpe.prefix or bpe.suffix:
        return "a continuing_subword_prefix or end_of_word_suffix"
    if bpe.byte_fallback and bpe.unk_id is not None and any(f"<0x{b:02X}>" not in bpe.ids for b in range(256)):
        return "byte fallback with missing byte tokens beside an unk_token"  # HF orders those symbols oddly
    return None

