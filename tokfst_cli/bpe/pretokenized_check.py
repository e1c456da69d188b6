"""canonical-check at the pipeline level: is there a text whose ``encode`` is this sequence? (Pitfalls 2025 Sec. 3.3)

A subset simulation over R = PROJ_out(P), the pre-tokenized form of every text (a DFA over bytes
and ``symbols.MARKER``), reading each token's model text and trying a pre-token boundary between
every two tokens; the A_BPE side is the per-word rule of :mod:`.pretokenized` (a pair inside a
word not banned, a word starting and ending where it may, byte-fallback runs complete,
ignore_merges' whole words), an added token a text segment of its own (R restarts after it).

A member of a state is (R state, mode, fallback state, trie node) with mode START (a word not
begun), IN (inside a word) or WHOLE (after an ignore_merges whole-word token). The pair tests of
a chunk of sequences are one vectorized ``ImplicitBpe.banned`` call; what remains per token
depends on the state, the token and three flags, and is memoized (bounded), so a state does not
carry the last token's class and states repeat across lines.
"""

from __future__ import annotations

import itertools

import numpy as np

from tokfst_cli.bpe.implicit import ImplicitBpe
from tokfst_cli.bpe.word import Word
from tokfst_cli.errors import InputError

MODE_START, MODE_IN, MODE_WHOLE = 0, 1, 2
Member = tuple[int, int, int, int]


class TextChecker:
    """``delta``: R's transition table (states x labels, -1 = none; byte b is label b + 1, and
    ``marker``), ``final`` its final states, ``texts`` each token's model text (None: none, e.g.
    an added token), ``splits`` the added tokens HF splits out of the raw text, ``unmodelled``
    the added tokens (id -> content) whose splitting is not modelled: a sequence holding one is
    refused (InputError), never judged."""

    CAP = 1 << 18  # memoized steps before the memo starts afresh (memory stays bounded)

    def __init__(self, imp: ImplicitBpe, delta: np.ndarray, final: np.ndarray, texts: list[bytes | None],
                 splits: set[int], marker: int, unmodelled: dict[int, str] | None = None):
        self.imp, self.word = imp, Word(imp)
        self.delta, self.final, self.texts, self.marker = delta, final, texts, marker
        self.vocab = imp.vocab_size
        self.split = np.zeros(self.vocab, bool)
        self.split[list(splits)] = True
        self.start_ok = imp.allowed & imp.may_start | imp.alone  # a word may begin with it
        self.unmodelled = unmodelled or {}  # added tokens whose splitting is not modelled: refused
        self._walk: dict[tuple[int, int], int] = {}
        self._reset()

    def _reset(self) -> None:
        self._walk.clear()
        self.ids: dict[frozenset, int] = {}
        self.sets: list[frozenset] = []
        self.next: dict[int, int] = {}
        self.reasons: list[str] = []
        self._intern(frozenset({(0, MODE_START, 0, 0)}))

    def _intern(self, s: frozenset) -> int:
        j = self.ids.get(s)
        if j is None:
            j = self.ids[s] = len(self.sets)
            self.sets.append(s)
        return j

    def walk(self, q: int, t: int) -> int:
        """R's state after token t's model text from q (-1: R cannot read it)."""
        r = self._walk.get((q, t))
        if r is None:
            r = q
            for b in self.texts[t]:
                r = int(self.delta[r, b + 1])
                if r < 0:
                    break
            self._walk[(q, t)] = r
        return r

    def _ends(self, mode: int, fb: int, node: int, end_ok: bool) -> bool:
        """May the word end here (``end_ok``: the last token may end a word)?"""
        if mode == MODE_WHOLE:
            return True
        if mode == MODE_START:
            return False
        return end_ok and fb == 0 and bool(self.imp.fb_final[0]) and node not in self.word.complete

    def _enter(self, q: int, mode: int, fb: int, node: int, t: int, ok: bool) -> Member | None:
        """The member after token t read from (q, mode, fb, node); ``ok``: the pair or start rule."""
        imp = self.imp
        if not ok:
            return None
        b = int(imp.fb_byte[t])
        if (fb != 0 and b < 0) or (b >= 0 and imp.fb_delta[fb, b] < 0):
            return None
        r = self.walk(q, t)
        if r < 0:
            return None
        if mode == MODE_START and imp.alone[t]:
            return (r, MODE_WHOLE, 0, -1)
        f, n = self.word.after1(fb, node, t)
        return (r, MODE_IN, f, n)

    def _step(self, s: frozenset, t: int, inword: bool, start: bool, end_ok: bool) -> tuple[frozenset, str]:
        if self.split[t]:  # an added token: a segment of its own, after a complete one
            ok = any(self.final[q] and (m == MODE_START or self._ends(m, f, n, end_ok)) for q, m, f, n in s)
            return (frozenset({(0, MODE_START, 0, 0)}) if ok else frozenset()), "added token inside a pre-token"
        if t in self.unmodelled:
            raise InputError(f"the added token {self.unmodelled[t]!r} strips spaces or matches single words or "
                             "normalized text, which the pipeline-level check does not model",
                             "check sequences without it, or use the model level", hint="unmodelled-added-token",
                             content=self.unmodelled[t])
        if self.texts[t] is None:
            return frozenset(), "token without text (special)"
        out, readable = set(), False
        for q, m, f, n in s:
            options = [(q, m, f, n, inword if m == MODE_IN else start if m == MODE_START else False)]
            b = int(self.delta[q, self.marker]) if m != MODE_START else -1
            if b >= 0 and self._ends(m, f, n, end_ok):
                options.append((b, MODE_START, 0, 0, start))
            for q0, m0, f0, n0, ok in options:
                readable = readable or self.walk(q0, t) >= 0
                got = self._enter(q0, m0, f0, n0, t, ok)
                if got is not None:
                    out.add(got)
        why = "BPE does not produce this token here in any pre-token" if readable else \
            "no pre-tokenization of any text puts this token here"
        return frozenset(out), why

    def _final(self, s: frozenset, end_ok: bool) -> bool:
        return any(self.final[q] and (m == MODE_START or self._ends(m, f, n, end_ok)) for q, m, f, n in s)

    def __call__(self, seqs: list[list[int]]) -> list[tuple[int, str] | None]:
        """(index, reason) of each sequence's first offence, or None if canonical."""
        imp, vocab = self.imp, self.vocab
        lens = np.fromiter(map(len, seqs), np.int64, len(seqs))
        flat = np.fromiter(itertools.chain.from_iterable(seqs), np.int64, int(lens.sum()))
        if ((flat < 0) | (flat >= vocab)).any():
            return [self._one(seq) for seq in seqs]
        first = np.zeros(len(flat), bool)
        first[(np.cumsum(lens) - lens)[lens > 0]] = True
        inword = np.zeros(len(flat), bool)  # pair (i-1, i) allowed inside a word
        if len(flat) > 1:
            prev, cur = flat[:-1], flat[1:]
            inword[1:] = imp.allowed[cur] & ~imp.banned(prev, cur)
        end = imp.may_end[flat]
        end_prev = np.zeros(len(flat), bool)
        end_prev[1:] = end[:-1]
        flags = (inword & ~first) * 4 + self.start_ok[flat] * 2 + (end_prev & ~first)
        codes = (flat * 8 + flags).tolist()  # a step's memo key is state * 8 * vocab + code
        ends = end.tolist()
        out, pos = [], 0
        for n in lens.tolist():
            out.append(self._run(codes, ends, pos, n))
            pos += n
        return out

    def _one(self, seq: list[int]) -> tuple[int, str] | None:
        for i, t in enumerate(seq):
            if not 0 <= t < self.vocab:
                return i, "unknown token id"
        return self([seq])[0]

    def _run(self, codes: list[int], ends: list[bool], pos: int, n: int) -> tuple[int, str] | None:
        if len(self.next) > self.CAP:
            self._reset()
        s, memo, width = 0, self.next, 8 * self.vocab
        for i in range(pos, pos + n):
            got = memo.get(s * width + codes[i])
            if got is None:
                got = self._miss(s, codes[i])
            if got < 0:
                return i - pos, self.reasons[-1 - got]
            s = got
        last_end = ends[pos + n - 1] if n else False
        return None if self._final(self.sets[s], last_end) else (max(n - 1, 0), "the text cannot end here")

    def _miss(self, s: int, code: int) -> int:
        """Compute and memoize a step: the next state's id, or -1 - the index of the reason."""
        t, flags = divmod(code, 8)
        nxt, why = self._step(self.sets[s], t, bool(flags & 4), bool(flags & 2), bool(flags & 1))
        if nxt:
            got = self._intern(nxt)
        else:
            if why not in self.reasons:
                self.reasons.append(why)
            got = -1 - self.reasons.index(why)
        self.next[s * 8 * self.vocab + code] = got
        return got
