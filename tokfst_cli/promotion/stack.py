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
  a table by (set, byte), a set's whole row filled at once from Python where the kernel finds
  none (one step per class of bytes its configurations read alike).
* Masks are made of parts (the context-independent tokens of xgrammar, per parser state): the
  part of a PDT state q is the walk of T from (q, an unknown frame): the tokens allowed without
  popping that frame, as packed words, and the nodes where a pop of it waits (``marks``),
  grouped by the states that wait, each with the states a frame opened by paren p returns to.
  A pop is recorded only where it may matter: the set does not live on, or a byte under the
  node is one that a state reached by pops may read. A tail part is the same walk under such
  nodes from the states a pop returned to, again on an unknown frame. The mask of a state is
  the OR of its PDT states' parts (kept per set of them) and of the tail parts its stacks
  resolve, frame by frame from the top (``_resolved``, kept per (part, frame): frames are
  shared, so a state resolves its new frames only). Exact: the same set of tokens as the walk
  on whole stacks (``whole_bitmask``, the tests' reference).

What it costs: a mask kept (``MASKS`` per decoder) is a lookup; a new one, the OR of a few
parts plus the resolution of its new frames; a part met for the first time, one pass of the
kernel over the live part of T (``prepare``, at the decoder's making with ``EAGER``, makes
every PDT state's part up front: the first mask pays, no later one does). Agnostic only.
"""

from __future__ import annotations

import functools
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tokfst_cli.automata.bitsets import WORD, words_for
from tokfst_cli.decoding.matcher import Steps, check_state, int_state, token_id, unpack
from tokfst_cli.errors import DisallowedTokenError, ForeignStateError, InternalError
from tokfst_cli.grammar.pushdown import Pushdown
from tokfst_cli.promotion.lazy import layout, spelling_trie
from tokfst_cli.promotion.pdt_tables import byte_classes, exits, pop_columns, tables
from tokfst_cli.tokenizer.model import TokenizerModel

MASKS = 4096  # masks kept per decoder (the oldest made again on use)
EAGER = True  # make every PDT state's context-independent part when a decoder is made (``prepare``)
PARTS = 1 << 16  # parts kept per decoder before they are made anew
CLASSES = 1 << 9  # above the classes of bytes a PDT state can have (one per byte, at most 256)
KEYED = 7  # configurations whose classes pack into one int64 key (9 bits each)
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


@dataclass(frozen=True, eq=False)
class Part:
    """What a walk on an unknown frame decides: the tokens allowed without popping it (``words``,
    packed, kept for the context-independent parts only; ``index``/``bits``: its nonzero words),
    and the prefix nodes where a pop of it waits, in groups, each with the states it returns to per
    paren of the frame (``marks``)."""

    words: np.ndarray | None
    index: np.ndarray
    bits: np.ndarray
    marks: list[tuple[tuple[int, ...], dict[int, frozenset]]]
    tails: dict[int, list[Part]] = field(default_factory=dict)  # per paren, the tail parts (``_tails``)


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
        t = tables(pdt)
        self._bytes, self._push, self._pop, self._eps, self._final = t.bytes, t.push, t.pop, t.eps, t.final
        self._tables = t
        self._classes = byte_classes(t, self._column_labels)
        self._after_pops = pop_columns(t, self._column_labels, lay.below.shape[1])
        self.root = Frame(0, None)
        self.cut = Frame(-1, None)  # the unknown frame of a part: its pops wait (``Part.marks``)
        self._closures: dict[tuple[int, Frame], frozenset] = {}
        self._steps: dict[tuple[frozenset, int], frozenset] = {}
        self._masks: OrderedDict[frozenset, np.ndarray] = OrderedDict()
        self._parts: dict[tuple, Part] = {}
        self._bases: dict[frozenset, np.ndarray] = {}
        self._reach: dict[tuple[Part, Frame], frozenset] = {}
        self._unions: dict[frozenset, tuple[np.ndarray, np.ndarray]] = {}
        self.start = self._closure(t.start, self.root)
        if not self.start:
            raise DisallowedTokenError(-1, "the start")
        if EAGER:
            self.prepare()

    def prepare(self) -> None:
        """Makes now the context-independent part of every PDT state that reads a byte (masks
        otherwise make each on first use)."""
        for q in range(len(self._bytes)):
            if self._bytes[q]:
                self._part((q, self.cut))

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
            if fr is not self.root and fr is not self.cut:
                nxt += [(to, fr.below) for p, to in self._pop[s] if p == fr.paren]
            for c in nxt:
                if c not in seen:
                    seen.add(c)
                    todo.append(c)
        if len(self._closures) >= STEPS:  # memory stays bounded on long, deep walks
            self._closures.clear()
        got = self._closures[key] = frozenset(c for c in seen if self._bytes[c[0]] or self._final[c[0]]
                                              or (c[1] is self.cut and self._pop[c[0]]))
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
        """The packed mask at ``state``: the OR of its configurations' parts (module docstring)."""
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
            if len(self._parts) >= PARTS or len(self._reach) >= STEPS or len(self._unions) >= PARTS:
                self._parts.clear()
                self._bases.clear()
                self._reach.clear()
                self._unions.clear()
            words = self._base(state).copy()
            self._popping(state, words)
            got = words.view("<i4")
            got.flags.writeable = False
            if len(self._masks) >= MASKS:
                self._masks.popitem(last=False)
            self._masks[state] = got
        return got

    def mask(self, state: frozenset) -> np.ndarray:
        return unpack(self.bitmask(state), self.vocab_size)

    def whole_bitmask(self, state: frozenset) -> np.ndarray:
        """The packed mask at ``state`` walked on its whole stacks from T's root, no part used (the
        reference the parts are checked against: equal by construction)."""
        words = np.zeros(self._nwords, WORD)
        if self._fill([(self._id(state), 0, len(self._labels))], words):
            raise InternalError("a walk on whole stacks met an unknown frame")
        return words.view("<i4")

    # ---- parts: what a configuration decides without the stack below its frame ---------------------
    def _base(self, state: frozenset) -> np.ndarray:
        """The OR of the context-independent parts of the state's PDT states (kept per set of them)."""
        keys = frozenset((q, fr if fr is self.root else self.cut) for q, fr in state)
        got = self._bases.get(keys)
        if got is None:
            got = np.zeros(self._nwords, WORD)
            for key in keys:
                got |= self._part(key).words
            self._bases[keys] = got
        return got

    def _popping(self, state: frozenset, words: np.ndarray) -> None:
        """Sets in ``words`` the tokens that pop below their configuration's frame: the tail parts
        that the waiting pops of its context-independent part lead to on its stack (``_resolved``)."""
        found = [self._resolved(self._parts[(q, self.cut)], fr) for q, fr in state if fr is not self.root]
        tails = found[0] if len(found) == 1 else frozenset().union(*found)
        got = self._unions.get(tails)
        if got is None:  # the OR of the tail parts, kept per set of them
            acc = np.zeros(self._nwords, WORD)
            for part in tails:
                acc[part.index] |= part.bits
            index = np.flatnonzero(acc)
            got = self._unions[tails] = (index, acc[index])
        if len(got[0]):
            words[got[0]] |= got[1]

    def _resolved(self, part: Part, frame: Frame) -> frozenset:
        """The tail parts (``_tail``) that the waiting pops of ``part`` lead to when its unknown
        frame is ``frame``: each resolved with the frame's paren (``_tails``), the tail's own
        waiting pops one frame lower, to the stack's bottom. Kept per (part, frame) (frames are
        shared, so a new state resolves only its new frames); iterative, as stacks may be deep."""
        memo, root = self._reach, self.root
        todo = [(part, frame)]
        while todo:
            key = todo[-1]
            if key in memo:
                todo.pop()
                continue
            p, fr = key
            subs = self._tails(p, fr.paren)
            deeper = fr.below is not root
            missing = [(sub, fr.below) for sub in subs if deeper and sub.marks and (sub, fr.below) not in memo]
            if missing:
                todo += missing
                continue
            out = set(subs)
            if deeper:
                for sub in subs:
                    if sub.marks:
                        out |= memo[(sub, fr.below)]
            memo[key] = frozenset(out)
            todo.pop()
        return memo[(part, frame)]

    def _tails(self, part: Part, paren: int) -> list[Part]:
        """The tail parts of ``part``'s waiting pops when the frame was opened by ``paren`` (kept
        on the part)."""
        got = part.tails.get(paren)
        if got is None:
            got = part.tails[paren] = [self._tail(returns[paren], nodes) for nodes, returns in part.marks
                                       if paren in returns]
        return got

    def _part(self, key: tuple[int, Frame]) -> Part:
        """The part of configuration ``key``, (q, the unknown frame) (or (q, the empty stack):
        exact): a walk of the whole trie."""
        got = self._parts.get(key)
        if got is None:
            words = np.zeros(self._nwords, WORD)
            marks = self._fill([(self._id(frozenset([key])), 0, len(self._labels))], words)
            got = self._parts[key] = self._made(words, marks, dense=True)
        return got

    def _tail(self, back: frozenset, nodes: tuple[int, ...]) -> Part:
        """The part of the tokens under ``nodes`` after a pop at each returned to the states
        ``back`` on an unknown frame: the token at a node if some configuration lives, and the
        walk of its subtree."""
        key = (back, nodes)
        got = self._parts.get(key)
        if got is None:
            here: set = set()
            for to in back:
                here |= self._closure(to, self.cut)
            here, words, lay = frozenset(here), np.zeros(self._nwords, WORD), self._layout
            marks, starts, lives = [], [], self._lives(here)
            for v in nodes:
                if self._waits_here(here, v):
                    marks.append((v, here))
                if lives:
                    for t in lay.toks[lay.tptr[v]:lay.tptr[v + 1]].tolist():
                        words[t >> 5] |= WORD(1) << WORD(t & 31)
                if self._size[v] > 1:
                    starts.append((self._id(here), v + 1, v + int(self._size[v])))
            marks += self._fill(starts, words)
            got = self._parts[key] = self._made(words, marks, dense=False)
        return got

    def _made(self, words: np.ndarray, marks: list[tuple[int, frozenset]], dense: bool) -> Part:
        """A :class:`Part` of a walk's words and waiting pops, the pops grouped by the states that
        wait (so that one tail part walks all their nodes)."""
        index = np.flatnonzero(words)
        groups: dict[frozenset, list[int]] = {}
        for v, s in marks:
            groups.setdefault(frozenset(q for q, fr in s if fr is self.cut and self._pop[q]), []).append(v)
        resolved = []
        for waiting, nodes in groups.items():
            returns: dict[int, set[int]] = {}
            for q in waiting:
                for paren, to in self._pop[q]:
                    returns.setdefault(paren, set()).add(to)
            resolved.append((tuple(sorted(nodes)), {paren: frozenset(to) for paren, to in returns.items()}))
        return Part(words if dense else None, index, words[index], resolved)

    def _lives(self, s: frozenset) -> bool:
        """Some configuration of ``s`` reads a byte or accepts (not only pops waiting)."""
        return any(self._bytes[q] or self._final[q] for q, _ in s)

    def _waits_here(self, s: frozenset, v: int) -> bool:
        """A pop waits in ``s`` at node ``v`` that may matter (the kernel's test): ``s`` does not
        live on, or a column under ``v`` may be read after pops."""
        after = [self._after_pops[q] for q, fr in s if fr is self.cut and self._pop[q]]
        return bool(after) and (not self._lives(s) or bool((self._layout.below[v] & np.bitwise_or.reduce(after)).any()))

    def _waiting(self, s: frozenset) -> bool:
        """Some configuration of ``s`` would pop its unknown frame."""
        return any(fr is self.cut and self._pop[q] for q, fr in s)

    # ---- the walk's table (stack_kernels) ----------------------------------------------------------
    def _reset_sets(self) -> None:
        self._ids: dict[frozenset, int] = {}
        self._sets: list[frozenset] = []
        self._delta = np.full((256, max(len(self.trie.labels), 1)), -2, np.int32)
        self._marked = np.zeros(256, np.bool_)
        self._alive = np.zeros(256, np.bool_)
        self._after = np.zeros((256, self._layout.below.shape[1]), np.uint64)

    def _id(self, s: frozenset) -> int:
        """The row of a configuration set in the walk's table (a new row: nothing computed)."""
        got = self._ids.get(s)
        if got is None:
            got = self._ids[s] = len(self._sets)
            self._sets.append(s)
            if got == len(self._marked):
                self._delta = np.vstack([self._delta, np.full_like(self._delta, -2)])
                self._marked = np.concatenate([self._marked, np.zeros_like(self._marked)])
                self._alive = np.concatenate([self._alive, np.zeros_like(self._alive)])
                self._after = np.vstack([self._after, np.zeros_like(self._after)])
            self._marked[got], self._alive[got] = self._waiting(s), self._lives(s)
            for q, fr in s:
                if fr is self.cut and self._pop[q]:
                    self._after[got] |= self._after_pops[q]
        return got

    def _fill(self, starts: list[tuple[int, int, int]], words: np.ndarray) -> list[tuple[int, frozenset]]:
        """Sets in ``words`` the tokens under the prefix nodes lo..hi read from set q, for each
        (q, lo, hi) of ``starts`` (they may nest: a pop waits at a node and under it): the kernel's
        walk, the table's rows it lacks filled here, until none is lacking; returns the nodes where
        a pop waits on the unknown frame, with their sets. A call of the kernel takes starts
        spanning at most the buffers' length of nodes, so its records fit."""
        lay, k = self._layout, self._k
        todo_node, todo_set, cut_node, cut_set = self._buffers
        cuts: list[tuple[int, frozenset]] = []
        pending, cap = list(starts), len(todo_node)
        while pending:
            batch, span = [], 0
            while pending and (not batch or span + pending[-1][2] - pending[-1][1] <= cap):
                batch.append(pending.pop())
                span += batch[-1][2] - batch[-1][1]
            q, lo, hi = (np.array(x, np.int64) for x in zip(*batch))
            ntodo, ncut = k.walk(lo, hi, q, len(batch), lay.col, lay.depth, lay.size, lay.tptr, lay.toks,
                                 lay.below, self._delta, self._marked, self._alive, self._after, words, self._at,
                                 todo_node, todo_set, cut_node, cut_set)
            cuts += [(v, self._sets[c]) for v, c in zip(cut_node[:ncut].tolist(), cut_set[:ncut].tolist())]
            todo = list(zip(todo_set[:ntodo].tolist(), todo_node[:ntodo].tolist()))
            for parent in {p for p, _ in todo}:
                self._row(parent)
            pending += [(p, v, v + int(self._size[v])) for p, v in todo]
        return cuts

    def _row(self, p: int) -> None:
        """Fills set ``p``'s row of the walk's table, every column at once: one step per class of
        bytes that its configurations read alike (``_classes``), none for the bytes none reads."""
        s = self._sets[p]
        sub = self._classes[[q for q, _ in s]]
        key = sub[0].astype(np.int64)
        for i in range(1, len(sub)):
            key = key * CLASSES + sub[i]
        if len(sub) > KEYED:  # the key would overflow: classes of columns by their whole signature
            key = np.unique(sub, axis=1, return_inverse=True)[1].ravel() + sub.any(axis=0)
        row = np.full(self._delta.shape[1], -1, np.int32)
        cols = np.flatnonzero(key)
        if cols.size:
            _, first, inverse = np.unique(key[cols], return_index=True, return_inverse=True)
            ids = np.empty(len(first), np.int32)
            for g, c in enumerate(cols[first].tolist()):
                t = self.step(s, self._column_labels[c])
                ids[g] = self._id(t) if t else -1
            row[cols] = ids[inverse]
        self._delta[p] = row

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
        """``pdt_tables.exits``: per PDT state the fewest bytes to leave its rule, per open
        parenthesis its return state."""
        return exits(self._tables)
