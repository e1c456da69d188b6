"""Stage S for pushdown grammars: the token masks of a PDT over bytes, computed on demand
(Koo et al. 2024 Sec. 3.2: the PDT composed with the detokenizing T, here walked over T's trie
instead of built; Allauzen & Riley 2012 for the PDT's semantics).

A configuration is (PDT state, stack). Stacks are interned :class:`Frame` chains (one object per
distinct stack, shared by every configuration and decoder state on it), so a configuration
hashes in O(1) whatever its depth, and a decoder state, the frozenset of configurations the
bytes so far can reach (closed over parenthesis arcs), is immutable: rollback keeps old states.

* ``closure``: from a configuration, every one reachable through open parentheses (push),
  close parentheses matching the top (pop) and epsilons. It ends because the grammar's
  left-corner graph is acyclic (:mod:`tokfst_cli.grammar.pushdown` refuses the rest).
* ``mask(state)``: a depth-first walk of T's trie; a byte moves the configuration set
  (``step``, memoized per (set, byte)); an empty set prunes the subtree; a token whose last
  byte leaves a non-empty set is allowed. Every rule of the PDT is trim and productive, so the
  set is non-empty exactly when the bytes extend a prefix of some sentence: no dead ends, and
  the mask is the agnostic one.

What it costs: the walk visits the live part of T from the state (Python, with the step memo
shared by the decoder's masks); a mask is kept per state (``MASKS`` of them). Agnostic only.
"""

from __future__ import annotations

from collections import OrderedDict

import numpy as np
import pynini

from tokfst_cli.decoding.matcher import Steps, pack, unpack
from tokfst_cli.errors import DisallowedTokenError
from tokfst_cli.grammar.pushdown import Pushdown
from tokfst_cli.promotion.lazy import spelling_trie
from tokfst_cli.promotion.trie import TokenTrie
from tokfst_cli.tokenizer.model import TokenizerModel

MASKS = 4096  # masks kept per decoder (the oldest made again on use)
CUT = 8  # masks are kept per state with each stack cut to its top CUT frames (bitmask)
STEPS = 1 << 20  # memoized byte steps per decoder before the memo starts anew


class Frame:
    """One stack: the open parenthesis on top and the stack below (None: the empty stack)."""

    __slots__ = ("paren", "below", "depth", "_up")

    def __init__(self, paren: int, below: Frame | None):
        self.paren, self.below = paren, below
        self.depth = 0 if below is None else below.depth + 1
        self._up: dict[int, Frame] = {}

    def push(self, paren: int) -> Frame:
        """The interned stack with ``paren`` on top of this one."""
        got = self._up.get(paren)
        if got is None:
            got = self._up[paren] = Frame(paren, self)
        return got


State = frozenset  # of (PDT state, Frame)


def _children(trie: TokenTrie) -> list[list[tuple[int, tuple[int, ...], int]]]:
    """Per node of T: (byte label, tokens ending with it, the inner node it leads to or -1)."""
    out: list[list[tuple[int, tuple[int, ...], int]]] = []
    labels, column, token, nxt = (a.tolist() for a in (trie.labels, trie.column, trie.token, trie.next))
    for u in range(trie.states):
        by: dict[int, list] = {}
        for i in range(int(trie.lo[u]), int(trie.hi[u])):
            entry = by.setdefault(labels[column[i]], [[], -1])
            if token[i] >= 0:
                entry[0].append(token[i])
            else:
                entry[1] = nxt[i]
        out.append([(lab, tuple(toks), inner) for lab, (toks, inner) in by.items()])
    return out


_TRIES: dict[int, tuple[TokenTrie, list]] = {}


def children_of(trie: TokenTrie) -> list:
    got = _TRIES.get(id(trie))
    if got is None or got[0] is not trie:
        got = _TRIES[id(trie)] = (trie, _children(trie))
    return got[1]


class PushdownDecoder(Steps):
    """The agnostic decoder of a :class:`~tokfst_cli.grammar.pushdown.Pushdown` (module docstring).
    States are frozensets of (PDT state, :class:`Frame`)."""

    def __init__(self, model: TokenizerModel, pdt: Pushdown, cache: bool = True):
        self.model, self.pdt, self.vocab_size = model, pdt, model.vocab_size
        self.trie = spelling_trie(model, cache)
        self._kids = children_of(self.trie)
        self._surface = dict(model.lexicon_items())
        f = pdt.fst
        zero = pynini.Weight.zero(f.weight_type())
        close_of = {c: o for o, c in pdt.parens.items()}
        n = f.num_states()
        self._bytes: list[dict[int, list[int]]] = [{} for _ in range(n)]
        self._push: list[list[tuple[int, int]]] = [[] for _ in range(n)]
        self._pop: list[list[tuple[int, int]]] = [[] for _ in range(n)]
        self._eps: list[list[int]] = [[] for _ in range(n)]
        for q in f.states():
            for arc in f.arcs(q):
                lab, to = arc.ilabel, arc.nextstate
                if lab == 0:
                    self._eps[q].append(to)
                elif lab in pdt.parens:
                    self._push[q].append((lab, to))
                elif lab in close_of:
                    self._pop[q].append((close_of[lab], to))
                else:
                    self._bytes[q].setdefault(lab, []).append(to)
        self._final = [f.final(q) != zero for q in range(n)]
        self.root = Frame(0, None)
        self.cut = Frame(-1, None)  # the bottom of a stack cut to its top CUT frames (below it: unknown)
        for table in (self._push, self._pop, self._eps):
            table.append([])
        self._bytes.append({})
        self._final.append(False)
        self._mark = (n, self.cut)  # in a step's result: some configuration would pop below the cut
        self._closures: dict[tuple[int, Frame], frozenset] = {}
        self._steps: dict[tuple[frozenset, int], frozenset] = {}
        self._masks: OrderedDict[frozenset, np.ndarray] = OrderedDict()
        self._parts: dict[frozenset, tuple[np.ndarray, list]] = {}
        self.start = self._closure(f.start(), self.root)
        if not self.start:
            raise DisallowedTokenError(-1, "the start")

    # ---- configurations ---------------------------------------------------------------------
    def _closure(self, q: int, frame: Frame) -> frozenset:
        """The configurations reachable from (q, frame) through parentheses and epsilons."""
        key = (q, frame)
        got = self._closures.get(key)
        if got is not None:
            return got
        seen = {key}
        todo = [key]
        while todo:
            s, fr = todo.pop()
            nxt = [(to, fr) for to in self._eps[s]]
            nxt += [(to, fr.push(p)) for p, to in self._push[s]]
            if fr is self.cut:
                nxt += [self._mark] if self._pop[s] else []
            elif fr is not self.root:
                nxt += [(to, fr.below) for p, to in self._pop[s] if p == fr.paren]
            for c in nxt:
                if c not in seen:
                    seen.add(c)
                    todo.append(c)
        got = self._closures[key] = frozenset(c for c in seen if self._bytes[c[0]] or self._final[c[0]]
                                              or c == self._mark)
        return got

    def step(self, state: frozenset, label: int) -> frozenset:
        """The configurations after one byte (label = byte + 1), closed; empty if none reads it."""
        key = (state, label)
        got = self._steps.get(key)
        if got is None:
            out: set = set()
            for q, fr in state:
                for to in self._bytes[q].get(label, ()):
                    out |= self._closure(to, fr)
            if len(self._steps) >= STEPS:
                self._steps.clear()
            got = self._steps[key] = frozenset(out)
        return got

    # ---- the decoding protocol -----------------------------------------------------------------
    def initial(self) -> frozenset:
        return self.start

    def is_final(self, state: frozenset) -> bool:
        return any(fr is self.root and self._final[q] for q, fr in state)

    def advance(self, state: frozenset, token: int) -> frozenset:
        surface = self._surface.get(token) if isinstance(state, frozenset) and state else None
        if surface is None:
            raise DisallowedTokenError(token, "a pushdown state")
        for b in surface:
            state = self.step(state, b + 1)
            if not state:
                raise DisallowedTokenError(token, "a pushdown state")
        return state

    def bitmask(self, state: frozenset) -> np.ndarray:
        """The packed mask at ``state``: the walk of T on its stacks cut to the top CUT frames,
        kept per cut state (the part of T that a stack's top decides); the subtrees where a token
        would pop below the cut walked again on the whole stacks, from the byte before."""
        got = self._masks.get(state)
        if got is None:
            cut = frozenset((q, self._cut(fr)) for q, fr in state)
            part = self._parts.get(cut)
            if part is None:
                allowed, rest = self._walk(cut, self.trie.root)
                base = np.zeros(self.vocab_size, bool)
                base[allowed] = True
                part = self._parts[cut] = (base, rest)
                if len(self._parts) >= MASKS:
                    del self._parts[next(iter(self._parts))]
            mask = part[0].copy() if part[1] else part[0]
            for path, toks, inner in part[1]:  # only where the cut stacks ran out: never if none was cut
                s = state
                for lab in path:
                    s = self.step(s, lab)
                if s:
                    mask[list(toks)] = True
                    if inner >= 0:
                        mask[self._walk(s, inner)[0]] = True
            got = pack(mask)
            got.flags.writeable = False
            if len(self._masks) >= MASKS:
                self._masks.popitem(last=False)
            self._masks[state] = got
        return got

    def mask(self, state: frozenset) -> np.ndarray:
        return unpack(self.bitmask(state), self.vocab_size)

    def _cut(self, frame: Frame) -> Frame:
        """The stack's top CUT frames on ``self.cut`` (the stack itself if it is no deeper)."""
        if frame.depth <= CUT:
            return frame
        top = []
        while len(top) < CUT:
            top.append(frame.paren)
            frame = frame.below
        out = self.cut
        for p in reversed(top):
            out = out.push(p)
        return out

    def _walk(self, state: frozenset, node: int) -> tuple[list[int], list[tuple[tuple[int, ...], tuple, int]]]:
        """The tokens under T's ``node`` whose bytes some configuration of ``state`` reads (depth
        first), and where a configuration would pop below a cut stack: (the bytes from ``node``,
        the tokens ending there, the node below), not walked."""
        allowed: list[int] = []
        rest: list = []
        kids, step, mark = self._kids, self.step, self._mark
        todo = [(node, state, ())]
        while todo:
            u, s, path = todo.pop()
            for lab, toks, inner in kids[u]:
                t = step(s, lab)
                if not t:
                    continue
                if mark in t:
                    rest.append(((*path, lab), toks, inner))
                    continue
                allowed.extend(toks)
                if inner >= 0:
                    todo.append((inner, t, (*path, lab)))
        return allowed, rest

    def depth(self, state: frozenset) -> int:
        """The deepest stack among the state's configurations."""
        return max((fr.depth for _, fr in state), default=0)
