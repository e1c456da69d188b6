"""A_BPE on one word, as a deterministic automaton over token ids (Cognetta & Okazaki 2024 Sec. 6.5;
Pitfalls 2025 Sec. 3.3).

:class:`Stepper`: the implicit A_BPE's state (class of the last token, byte-fallback DFA state)
with cached per-state masks. :class:`Word`: the same on one pre-token, with the word-start
state ``START``, ``WHOLE`` after a token that ignore_merges allows only as the whole word, and
the node in the trie of the merge tokenizations ignore_merges replaces (``DEAD``: none).
Shared by the factorized products (``product``, ``pretokenized``), their co-reachability
(``liveness``) and canonical-check (``pretokenized_check``).
"""

from __future__ import annotations

import numpy as np

from tokfst_cli.bpe.explicit import START, fallback_ok, successors
from tokfst_cli.bpe.implicit import ImplicitBpe
from tokfst_cli.errors import InputError

WHOLE = -2  # after a token ignore_merges allows only as the whole word
DEAD = -1  # trie node: this word is no replaced sequence


class Stepper:
    """The implicit A_BPE as a deterministic automaton over token ids, with cached masks."""

    def __init__(self, imp: ImplicitBpe):
        self.imp = imp
        self.classes = imp.classes()
        ids, first = np.unique(self.classes, return_index=True)
        self.reps = dict(zip(ids.tolist(), first.tolist()))
        self.rep_ids = first[ids >= 0].astype(np.int64)  # classes are 0..n-1: the representative of each
        self._masks: dict[tuple[int, int], np.ndarray] = {}
        self._next_fb: dict[int, np.ndarray] = {}

    def next_fb(self, fb: int) -> np.ndarray:
        """Fallback-DFA state after each token, from state fb (0 for ordinary tokens)."""
        arr = self._next_fb.get(fb)
        if arr is None:
            b = self.imp.fb_byte
            arr = self._next_fb[fb] = np.where(b >= 0, self.imp.fb_delta[fb, np.clip(b, 0, 255)], 0)
        return arr

    def mask(self, cls: int, fb: int) -> np.ndarray:
        """``explicit.successors`` of (cls, fb), cached: the class-free part once per fb, then the
        class's BANNED row cleared from it (a handful of intervals of the left spine)."""
        key = (cls, fb)
        m = self._masks.get(key)
        if m is None:
            imp = self.imp
            rep = self.reps.get(cls, -1)
            if cls == START or rep < 0:
                m = successors(imp, cls, rep, fb)
            elif not imp.may_continue[rep]:
                m = np.zeros(imp.vocab_size, bool)
            else:
                m = self.follow(fb).copy()
                m[self.banned_ids(cls)] = False
            self._masks[key] = m
        return m

    def banned_ids(self, cls: int) -> np.ndarray:
        """The token ids of class cls's BANNED row (its left-spine intervals), cached: what a
        continuing class removes from ``follow``."""
        key = ("banned", cls)
        got = self._masks.get(key)
        if got is None:
            imp = self.imp
            ru = int(imp.rpos[self.reps[cls]])
            got = imp.lorder[imp.banned_positions(ru)] if ru >= 0 else np.zeros(0, np.int64)
            self._masks[key] = got
        return got

    def continues(self, cls: int) -> bool:
        """May a token follow one of class cls inside a word (no end-of-word suffix)?"""
        return bool(self.imp.may_continue[self.reps[cls]])

    def follow(self, fb: int) -> np.ndarray:
        """Tokens that may follow some token inside a word from fallback state fb (no BANNED row)."""
        key = ("follow", fb)
        m = self._masks.get(key)
        if m is None:
            imp = self.imp
            m = self._masks[key] = imp.allowed & imp.may_follow & fallback_ok(imp, fb)
        return m

    def final(self, cls: int, fb: int) -> bool:
        return fb == 0 and bool(self.imp.fb_final[0]) and (cls == START or bool(self.imp.may_end[self.reps[cls]]))


def stepper(imp: ImplicitBpe) -> Stepper:
    """One Stepper per loaded artifact (its class masks are shared by every promotion)."""
    if "stepper" not in imp.derived:
        imp.derived["stepper"] = Stepper(imp)
    return imp.derived["stepper"]


class Word:
    """A_BPE on one pre-token: allowed tokens, next state and word end for (class, fb, node)."""

    def __init__(self, imp: ImplicitBpe):
        self.imp, self.step = imp, stepper(imp)
        self.classes = self.step.classes
        self.vocab_size = imp.vocab_size
        kids: dict[int, dict[int, int]] = {}
        self.complete: set[int] = set()
        last = [-1]  # per node: the token that leads to it (-1 at the root)
        for seq in imp.derived.get("replaced", {}).values():
            node = 0
            for t in seq:
                nxt = kids.setdefault(node, {}).get(t)
                if nxt is None:
                    nxt = kids[node][t] = len(last)
                    last.append(t)
                node = nxt
            if len(seq) > 1:
                self.complete.add(node)
        self.kids = {n: (np.array(sorted(d), np.int64), np.array([d[t] for t in sorted(d)], np.int64))
                     for n, d in kids.items()}
        self._kid_maps = kids
        self.last = np.array(last, np.int64)
        self.nodes = len(last)
        self.has_alone = bool(imp.alone.any())
        if self.has_alone and "replaced" not in imp.derived:
            raise InputError("this artifact's tokenizer uses ignore_merges", "load it with the tokenizer (model=...)")

    def allowed(self, cls: int, fb: int) -> np.ndarray:
        """Bool mask over token ids: the tokens that may come next in the word."""
        if cls == WHOLE:
            return np.zeros(self.vocab_size, bool)
        m = self.step.mask(cls, fb)
        if cls == START and self.has_alone:
            m = m | self.imp.alone
        return m

    def allows(self, cls: int, fb: int, t: int) -> bool:
        """``allowed(cls, fb)[t]`` without building the mask (``explicit.successors`` per token)."""
        imp = self.imp
        if cls == WHOLE:
            return False
        if cls == START and imp.alone[t]:
            return True
        if not imp.allowed[t]:
            return False
        if cls == START:
            ok = bool(imp.may_start[t])
        else:
            ok = not imp.banned_pair(self.step.reps[cls], t)
        b = int(imp.fb_byte[t])
        if fb != 0 and b < 0:
            return False
        return ok and (b < 0 or imp.fb_delta[fb, b] >= 0)

    def after(self, cls: int, fb: int, node: int, labels: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(class, fb, node) after each of ``labels`` (all allowed)."""
        c = self.classes[labels]
        f = self.step.next_fb(fb)[labels]
        if cls == START and self.has_alone:
            alone = self.imp.alone[labels]
            c = np.where(alone, WHOLE, c)
            f = np.where(alone, 0, f)
        n = np.full(len(labels), DEAD, np.int64)
        if node != DEAD and node in self.kids:
            toks, nodes = self.kids[node]
            pos = np.clip(np.searchsorted(toks, labels), 0, len(toks) - 1)
            hit = toks[pos] == labels
            n[hit] = nodes[pos[hit]]
        if cls == START and self.has_alone:
            n = np.where(self.imp.alone[labels], DEAD, n)
        return c, f, n

    def after_one(self, cls: int, fb: int, node: int, t: int) -> tuple[int, int, int]:
        """``after`` for one token t (allowed): (class, fb, node), without arrays."""
        if cls == START and self.has_alone and self.imp.alone[t]:
            return WHOLE, 0, DEAD
        return (int(self.classes[t]), *self.after1(fb, node, t))

    def after1(self, fb: int, node: int, t: int) -> tuple[int, int]:
        """(fb, node) after one token t inside a word (not a whole-word token): ``after`` for one."""
        f = int(self.step.next_fb(fb)[t])
        if node == DEAD or node not in self._kid_maps:
            return f, DEAD
        return f, self._kid_maps[node].get(t, DEAD)

    def ends(self, cls: int, fb: int, node: int) -> bool:
        """May the word end here?"""
        if cls == WHOLE:
            return True
        return self.step.final(cls, fb) and node not in self.complete
