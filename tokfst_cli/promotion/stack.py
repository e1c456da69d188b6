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
* The walk is compiled (``stack_kernels.walk``): the sets met are numbered, their steps kept in
  a table by (set, byte) filled on demand from Python where the kernel finds none. A mask is
  made on the state's stacks cut to their top ``CUT`` frames, so states with the same stack
  top share it however deep their stacks are; under the trie nodes where a token would pop
  below the cut, the walk goes on from the whole stacks.

What it costs: a mask kept (``MASKS`` per decoder) is a lookup; a new one, one pass of the
kernel over the live part of T plus the steps not met before. Agnostic only.
"""

from __future__ import annotations

import functools
from collections import OrderedDict
from typing import Any

import numpy as np
import pynini

from tokfst_cli.automata.bitsets import WORD, words_for
from tokfst_cli.decoding.matcher import Steps, check_state, int_state, token_id, unpack
from tokfst_cli.errors import DisallowedTokenError, ForeignStateError, InternalError
from tokfst_cli.grammar.pushdown import Pushdown
from tokfst_cli.promotion.lazy import layout, spelling_trie
from tokfst_cli.tokenizer.model import TokenizerModel

MASKS = 4096  # masks kept per decoder (the oldest made again on use)
CUT = 8  # masks are kept per state with each stack cut to its top CUT frames (bitmask)
STEPS = 1 << 20  # memoized byte steps (and closures) per decoder before the memo starts anew
SETS = 1 << 16  # numbered configuration sets (rows of the walk's table) before the table starts anew


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


def _kernels():
    from tokfst_cli.promotion import stack_kernels  # deferred: loads numba

    return stack_kernels


def _derived(model: TokenizerModel, lay, k) -> tuple[list[int], np.ndarray]:
    """Per prefix node of the trie layout: its byte label (a list, read per node from Python) and
    its parent; made once per layout and kept on the model, as ``lazy.layout`` keeps the layout."""
    got = model.__dict__.get("_stack_derived")
    if got is None or got[0] is not lay:
        labels = lay.trie.labels[lay.col].astype(np.int64).tolist()
        got = model.__dict__["_stack_derived"] = (lay, labels, k.parents(lay.depth))
    return got[1], got[2]


class PushdownDecoder(Steps):
    """The agnostic decoder of a :class:`~tokfst_cli.grammar.pushdown.Pushdown` (module docstring).
    States are frozensets of (PDT state, :class:`Frame`). Its memos and the walk's table are its
    own and unlocked: one decoder per thread (states may be shared, they are immutable)."""

    def __init__(self, model: TokenizerModel, pdt: Pushdown, cache: bool = True):
        self.model, self.pdt, self.vocab_size = model, pdt, model.vocab_size
        self.trie = spelling_trie(model, cache)
        self._k = _kernels()
        lay = self._layout = layout(model, self.trie)
        self._labels, self._parent = _derived(model, lay, self._k)
        self._column_labels = self.trie.labels.astype(np.int64).tolist()
        self._size = lay.size
        n = len(lay.col)
        self._buffers = tuple(np.empty(max(n, 1), np.int64) for _ in range(4))
        self._at = np.empty(int(lay.depth.max(initial=0)) + 2, np.int64)
        self._nwords = words_for(self.vocab_size)
        self._frame_costs: dict[Frame, int] = {}
        self._reset_sets()
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
        if len(self._closures) >= STEPS:  # memory stays bounded on long, deep walks
            self._closures.clear()
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

    def is_state(self, state: Any) -> bool:
        """A nonempty set of configurations (PDT state, :class:`Frame`)."""
        return type(state) is frozenset and bool(state) and all(
            type(c) is tuple and len(c) == 2 and int_state(c[0], len(self._final)) and type(c[1]) is Frame
            for c in state)

    def is_final(self, state: frozenset) -> bool:
        try:
            return any(fr is self.root and self._final[q] for q, fr in state)
        except Exception:
            check_state(self, state)
            raise

    def advance(self, state: frozenset, token: int) -> frozenset:
        """The state after ``token``'s bytes (its labels from the trie layout, as ``LazyDecoder.advance``)."""
        if type(token) is not int or not 0 <= token < self.vocab_size:
            token = token_id(token, self.vocab_size)
        if type(state) is not frozenset or not state:
            raise ForeignStateError(state, type(self).__name__)
        lay = self._layout
        if not lay.ptr[token] < lay.ptr[token + 1]:  # no surface: a special token
            raise DisallowedTokenError(token, "a pushdown state")
        start = state
        try:
            for col in lay.cols[lay.ptr[token]:lay.ptr[token + 1]].tolist():
                state = self.step(state, self._column_labels[col])
                if not state:
                    raise DisallowedTokenError(token, "a pushdown state")
        except Exception:
            check_state(self, start)
            raise
        return state

    def bitmask(self, state: frozenset) -> np.ndarray:
        """The packed mask at ``state``: the walk of T on its stacks cut to the top CUT frames,
        kept per cut state (the part of T that a stack's top decides); the subtrees where a token
        would pop below the cut walked again from the whole stacks of the byte before."""
        if type(state) is not frozenset or not state:
            raise ForeignStateError(state, type(self).__name__)
        try:
            return self._bitmask(state)
        except Exception:
            check_state(self, state)
            raise

    def _bitmask(self, state: frozenset) -> np.ndarray:
        got = self._masks.get(state)
        if got is None:
            if len(self._sets) >= SETS:
                self._reset_sets()
            cut = frozenset((q, self._cut(fr)) for q, fr in state)
            part = self._parts.get(cut)
            if part is None:
                words = np.zeros(self._nwords, WORD)
                part = self._parts[cut] = (words, self._fill(self._id(cut), 0, len(self._labels), words))
            words = part[0]
            if part[1]:  # only where the cut stacks ran out: never if none was cut
                words = words.copy()
                for v in part[1]:
                    s = state
                    for lab in self._path(v):
                        s = self.step(s, lab)
                    if self._fill(self._id(s), v, v + int(self._size[v]), words):
                        raise InternalError("a walk on whole stacks met a cut")
            got = words.view("<i4")
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

    # ---- the walk's table (stack_kernels) ----------------------------------------------------------
    def _reset_sets(self) -> None:
        self._ids: dict[frozenset, int] = {}
        self._sets: list[frozenset] = []
        self._delta = np.full((256, max(len(self.trie.labels), 1)), -2, np.int32)
        self._marked = np.zeros(256, np.bool_)
        self._parts: dict[frozenset, tuple[np.ndarray, list[int]]] = {}

    def _id(self, s: frozenset) -> int:
        """The row of a configuration set in the walk's table (a new row: nothing computed)."""
        got = self._ids.get(s)
        if got is None:
            got = self._ids[s] = len(self._sets)
            self._sets.append(s)
            if got == len(self._marked):
                self._delta = np.vstack([self._delta, np.full_like(self._delta, -2)])
                self._marked = np.concatenate([self._marked, np.zeros_like(self._marked)])
            self._marked[got] = self._mark in s
        return got

    def _fill(self, q: int, lo: int, hi: int, words: np.ndarray) -> list[int]:
        """Sets in ``words`` the tokens under the prefix nodes lo..hi read from set ``q``: the
        kernel's walk, the steps it lacks computed here, until none is lacking; returns the nodes
        under which a token would pop below a cut stack (not walked)."""
        lay, k = self._layout, self._k
        todo_node, todo_set, cut_node, cut_set = self._buffers
        work, cuts = [(q, lo, hi)], []
        while work:
            p, a, b = work.pop()
            ntodo, ncut = k.walk(p, a, b, lay.col, lay.depth, lay.size, lay.tptr, lay.toks, self._delta,
                                 self._marked, words, self._at, todo_node, todo_set, cut_node, cut_set)
            cuts += cut_node[:ncut].tolist()
            for v, parent in zip(todo_node[:ntodo].tolist(), todo_set[:ntodo].tolist()):
                t = self.step(self._sets[parent], self._labels[v])
                self._delta[parent, lay.col[v]] = self._id(t) if t else -1
                work.append((parent, v, v + int(self._size[v])))
        return cuts

    def _path(self, v: int) -> list[int]:
        """The byte labels from T's root to prefix node ``v``'s parent."""
        out = []
        v = int(self._parent[v])
        while v >= 0:
            out.append(self._labels[v])
            v = int(self._parent[v])
        return out[::-1]

    def depth(self, state: frozenset) -> int:
        """The deepest stack among the state's configurations."""
        return max((fr.depth for _, fr in state), default=0)

    # ---- distance to acceptance (steering a walk to its end) ---------------------------------------
    def distance(self, state: frozenset) -> int:
        """The fewest bytes after which ``state`` can accept: per configuration, the bytes to leave
        its rule (``exits``) plus, per frame of its stack, the bytes to leave the rule it returns
        to; the minimum over the configurations."""
        exits, returns = self._exits
        best = None
        for q, fr in state:
            cost = exits[q] + self._frame_cost(fr, exits, returns)
            best = cost if best is None else min(best, cost)
        return best if best is not None else 1 << 62

    def _frame_cost(self, fr: Frame, exits: list[int], returns: dict[int, int]) -> int:
        """The bytes to leave every frame of the stack ``fr`` (kept per frame: stacks share frames)."""
        costs = self._frame_costs
        chain = []
        while fr is not self.root and fr is not self.cut and fr not in costs:
            chain.append(fr)
            fr = fr.below
        total = costs.get(fr, 0)
        for f in reversed(chain):
            total += exits[returns[f.paren]] if f.paren in returns else 0
            costs[f] = total
        return total

    @functools.cached_property
    def _exits(self) -> tuple[list[int], dict[int, int]]:
        """Per PDT state, the fewest bytes to a state that may leave its rule (a close parenthesis,
        or the PDT's final state); a call on the way costs its callee's shortest text
        (Bellman-Ford over the states: every cost is positive). And each open parenthesis's
        return state."""
        n, inf = len(self._final), 1 << 40
        returns: dict[int, int] = {}
        for q in range(n):
            for paren, to in self._pop[q]:
                returns[paren] = to
        exits = [0 if (self._pop[q] or self._final[q]) else inf for q in range(n)]
        changed = True
        while changed:
            changed = False
            for q in range(n):
                best = exits[q]
                for targets in self._bytes[q].values():
                    for to in targets:
                        best = min(best, 1 + exits[to])
                for paren, to in self._push[q]:
                    if paren in returns:
                        best = min(best, exits[to] + exits[returns[paren]])
                for to in self._eps[q]:
                    best = min(best, exits[to])
                if best < exits[q]:
                    exits[q], changed = best, True
        return exits, returns
