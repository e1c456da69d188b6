"""Stages S+C for WordPiece: canonical MaxMatch promotion as a deterministic product (Cognetta & Okazaki 2024 Sec. 6.2).

A token sequence of one word, t1 ##t2 ... ##tn, is what HF's WordPiece produces iff every ti
is the *longest* piece of its kind (word-initial for i = 1, ``##`` after) that is a prefix of
the rest of the word ti ti+1 ... tn, the word has at most max_input_chars_per_word characters,
and no position is unmatched (else the word is [UNK] alone). The greedy condition is local:
a *check* starts at ti's trie node and walks down the trie along the following pieces; it
fails (ti was not the longest match) when it reaches a token node, and is done when it walks
off the trie or the word ends. This is the failure-link view of LinMaxMatch (Song et al. 2021)
read backwards: instead of running T_Aho over the text, the product verifies proposed tokens.

The text side is X = MIN(PROJ(A o P o U)) (:mod:`.preprocess`, :mod:`.wordtext`): the
normalized, pre-tokenized language of the regex, words separated by MARKER, with UNKSYM as an
alternative for every word HF turns into [UNK] (no greedy parse, or too long). The product state
is (state of X, position: word start / inside a word / after [UNK], pending checks, characters
in the word so far); transitions are deterministic, so materializing the reachable part and
minimizing gives the minimal canonical automaton, and the lazy form answers masks directly.
"""

from __future__ import annotations

import bisect
from collections import deque
from typing import Any

import numpy as np
import pynini

from tokfst_cli.automata.arrays import fst_from_arrays
from tokfst_cli.automata.symbols import MARKER, UNKSYM
from tokfst_cli.decoding.matcher import Steps, check_state, int_state, token_id
from tokfst_cli.errors import DisallowedTokenError, EmptyLanguageError, ForeignStateError, LimitError
from tokfst_cli.maxmatch import preprocess
from tokfst_cli.maxmatch.liveness import CLOSED, IN, START, Liveness
from tokfst_cli.maxmatch.taho import Tries
from tokfst_cli.maxmatch.wordtext import all_text, longest_word, max_chars, text_automaton
from tokfst_cli.tokenizer.model import TokenizerModel

BANS_KEPT = 4096  # sets of pending checks whose banned ## pieces are kept (a bool per ## piece each)
State = tuple[int, int, tuple[int, ...], int]  # (X state, position, pending checks, characters)


class Pieces:
    """Word-initial and ``##`` tries over surface bytes, with the checks' banned intervals."""

    def __init__(self, model: TokenizerModel) -> None:
        unk = model.options.get("unk_token") or "[UNK]"
        self.unk = model.token_id(unk)
        self.vocab = model.vocab_size
        tries = Tries(model)
        self.goto = tries.goto  # node 0: initial root, node 1: "##" root (shared with T_Aho's tries)
        self.token = list(tries.token)
        self.node_of = np.full(self.vocab, -1, dtype=np.int64)
        for node, tid in enumerate(self.token):
            if tid == self.unk:  # [UNK] is the whole-word verdict, never a piece
                self.token[node] = -1
            elif tid >= 0:
                self.node_of[tid] = node
        self.surface: list[bytes] = [model.surfaces[t] if self.node_of[t] >= 0 else b"" for t in range(self.vocab)]
        self.nchars = np.array([len(b.decode("utf-8", "replace")) for b in self.surface], dtype=np.int64)
        self.internal = np.array(model.word_internal, dtype=bool) & (self.node_of >= 0)
        cont = sorted(np.flatnonzero(self.internal).tolist(), key=lambda t: self.surface[t])
        self.cont_order = np.array(cont, dtype=np.int64)
        self.cont_keys = [self.surface[t] for t in cont]
        self.rank = np.full(self.vocab, -1, dtype=np.int64)
        self.rank[self.cont_order] = np.arange(len(cont))
        # the same as Python lists: what the per-token paths (step, successors) index one at a time
        self.nodes, self.chars, self.inner = self.node_of.tolist(), self.nchars.tolist(), self.internal.tolist()
        self._ban: dict[int, np.ndarray] = {}
        self._alive: dict[int, dict[int, int]] = {}

    def opens_check(self, tid: int) -> bool:
        """Does token tid's node have children (a longer piece could have been chosen)?"""
        return bool(self.goto[self.nodes[tid]])

    def ban(self, v: int) -> np.ndarray:
        """Intervals [lo, hi) of ``##`` pieces (in surface order) that complete a longer token below v."""
        got = self._ban.get(v)
        if got is None:
            out = []
            stack = [(v, b"")]
            while stack:
                u, path = stack.pop()
                for b, w in self.goto[u].items():
                    p = path + bytes([b])
                    if self.token[w] >= 0:
                        lo = bisect.bisect_left(self.cont_keys, p)
                        hi = bisect.bisect_left(self.cont_keys, p[:-1] + bytes([p[-1] + 1]))
                        if hi > lo:
                            out.append((lo, hi))
                    else:
                        stack.append((w, p))
            got = self._ban[v] = np.array(out, dtype=np.int64).reshape(-1, 2)
        return got

    def alive(self, v: int) -> dict[int, int]:
        """``##`` pieces after which the check at v is still pending, and its new node."""
        got = self._alive.get(v)
        if got is None:
            got = self._alive[v] = {}
            stack = [(v, 1)]
            while stack:
                u, c = stack.pop()
                for b, w in self.goto[u].items():
                    cw = self.goto[c].get(b)
                    if cw is None or self.token[w] >= 0:
                        continue
                    if self.token[cw] >= 0:
                        got[self.token[cw]] = w
                    stack.append((w, cw))
        return got


def pieces(model: TokenizerModel) -> Pieces:
    """One Pieces per loaded tokenizer."""
    if "_pieces" not in model.__dict__:
        model.__dict__["_pieces"] = Pieces(model)
    return model.__dict__["_pieces"]


class Canonical(Steps):
    """The canonical MaxMatch automaton of a text automaton X, as a lazy deterministic machine."""

    def __init__(self, model: TokenizerModel, text: pynini.Fst, max_chars: int | None) -> None:
        self.pieces = pieces(model)
        self.vocab_size = self.pieces.vocab
        self.names = model.tokens
        self.text = text
        self.max_chars = max_chars
        self.delta: list[dict[int, int]] = []
        self.finals = np.zeros(text.num_states(), dtype=bool)
        zero = pynini.Weight.zero(text.weight_type())
        for s in text.states():
            self.delta.append({arc.ilabel: arc.nextstate for arc in text.arcs(s)})
            self.finals[s] = text.final(s) != zero
        self._readable: dict[tuple, dict[int, int]] = {}
        self._bans: dict[tuple[int, ...], np.ndarray] = {}
        self._liveness = None

    def initial(self) -> State:
        return (self.text.start(), START, (), 0)

    def is_state(self, state: Any) -> bool:
        """(X's state, position in the word, pending checks, characters so far)."""
        return (type(state) is tuple and len(state) == 4 and int_state(state[0], len(self.finals))
                and isinstance(state[1], (int, np.integer)) and type(state[2]) is tuple
                and isinstance(state[3], (int, np.integer)))

    def readable(self, x: int, root: int) -> dict[int, int]:
        """Pieces of one kind (root 0: initial, 1: ``##``) that X can read from x, with X's next state."""
        key = (x, root)
        got = self._readable.get(key)
        if got is None:
            got = self._readable[key] = {}
            goto, token, delta = self.pieces.goto, self.pieces.token, self.delta
            stack = [(root, x)]
            while stack:
                u, s = stack.pop()
                for b, w in goto[u].items():
                    t = delta[s].get(b + 1)
                    if t is None:
                        continue
                    if token[w] >= 0:
                        got[token[w]] = t
                    if goto[w]:
                        stack.append((w, t))
        return got

    def _word_start(self, state: State) -> int | None:
        x, pos = state[0], state[1]
        return x if pos == START else self.delta[x].get(MARKER)

    def word_start(self, state: State) -> int | None:
        """The X state where a word after ``state`` would start (None: no word can): all that
        :meth:`step` of a token that is not a ``##`` piece ([UNK] and special tokens included)
        depends on."""
        return self._word_start(state)

    def _enter(self, tid: int, nx: int, checks: set[int], n: int) -> State:
        """The state after piece tid: X at nx, tid's own check opened, n characters in the word."""
        if self.pieces.opens_check(tid):
            checks.add(int(self.pieces.node_of[tid]))
        return (nx, IN, tuple(sorted(checks)), n if self.max_chars is not None else 0)

    def successors(self, state: State) -> dict[int, State]:
        """Every token allowed after ``state`` (possibly a dead end) and the state it leads to."""
        x, pos, checks, count = state
        pc, limit = self.pieces, self.max_chars
        out: dict[int, State] = {}
        if pos == IN:
            banned = self._banned(checks)
            alive = [pc.alive(c) for c in checks]
            for t, nx in self.readable(x, 1).items():
                n = count + pc.chars[t]
                if (limit is not None and n > limit) or (banned is not None and banned[pc.rank[t]]):
                    continue
                out[t] = self._enter(t, nx, {a[t] for a in alive if t in a}, n)
        w = self._word_start(state)
        if w is not None:
            for t, nx in self.readable(w, 0).items():
                n = pc.chars[t]
                if limit is None or n <= limit:
                    out[t] = self._enter(t, nx, set(), n)
            u = self.delta[w].get(UNKSYM)
            if u is not None and pc.unk is not None:
                out[pc.unk] = (u, CLOSED, (), 0)
        return out

    def _banned(self, checks: tuple[int, ...]) -> np.ndarray | None:
        """The ``##`` pieces (by rank) the pending checks ban; kept per set of checks (the
        last BANS_KEPT), as a walk meets the same few sets again and again."""
        if not checks:
            return None
        got = self._bans.get(checks)
        if got is None:
            banned = np.zeros(len(self.pieces.cont_order) + 1, dtype=np.int64)
            for c in checks:
                iv = self.pieces.ban(c)
                np.add.at(banned, iv[:, 0], 1)
                np.add.at(banned, iv[:, 1], -1)
            if len(self._bans) >= BANS_KEPT:
                self._bans.pop(next(iter(self._bans)))
            got = self._bans[checks] = np.cumsum(banned)[:-1] > 0
        return got

    def _candidates(self, x: int, root: int) -> tuple[np.ndarray, np.ndarray]:
        """``readable(x, root)`` as arrays: piece ids and X's state after each."""
        key = (x, root, "arrays")
        got = self._readable.get(key)
        if got is None:
            r = self.readable(x, root)
            got = self._readable[key] = (np.fromiter(r.keys(), np.int64, len(r)),
                                         np.fromiter(r.values(), np.int64, len(r)))
        return got

    def inner_candidates(self, state: State) -> tuple[np.ndarray, np.ndarray]:
        """The ``##`` pieces that may continue the word at an IN state (character limit and
        pending checks applied; dead ends included) and X's state after each."""
        x, _, checks, count = state
        pc, limit = self.pieces, self.max_chars
        ids, nxs = self._candidates(x, 1)
        keep = np.ones(len(ids), dtype=bool)
        if limit is not None:
            keep &= count + pc.nchars[ids] <= limit
        banned = self._banned(checks)
        if banned is not None:
            keep &= ~banned[pc.rank[ids]]
        return ids[keep], nxs[keep]

    @property
    def liveness(self):
        if self._liveness is None:
            self._liveness = Liveness(self)
        return self._liveness

    def mask(self, state: State) -> np.ndarray:
        """Allowed next tokens as a boolean array over token ids: those after which a canonical
        completion exists (``liveness``), vectorized."""
        if not self.is_state(state):
            raise ForeignStateError(state, type(self).__name__)
        pc, limit, live = self.pieces, self.max_chars, self.liveness
        m = np.zeros(pc.vocab, dtype=bool)
        if state[1] == IN:
            ids, nxs = self.inner_candidates(state)
            m[ids[live.keep(state, ids, nxs, True)]] = True
        w = self._word_start(state)
        if w is not None:
            ids, nxs = self._candidates(w, 0)
            if limit is not None:
                short = pc.nchars[ids] <= limit
                ids, nxs = ids[short], nxs[short]
            m[ids[live.keep(state, ids, nxs, False)]] = True
            u = self.delta[w].get(UNKSYM)
            if pc.unk is not None and u is not None and live.live((u, CLOSED, (), 0)):
                m[pc.unk] = True
        return m

    def _read(self, x: int | None, data: bytes) -> int | None:
        for b in data:
            if x is None:
                return None
            x = self.delta[x].get(b + 1)
        return x

    def step(self, state: State, tid: int) -> tuple[State | None, str]:
        """One token: (next state, "") or (None, why it is not allowed)."""
        x, pos, checks, count = state
        pc, limit = self.pieces, self.max_chars
        if tid == pc.unk:
            u = self.text_after(state, tid)
            if u is None:
                return None, "no word of the text can be [UNK] here"
            return (u, CLOSED, (), 0), ""
        if not 0 <= tid < pc.vocab or pc.nodes[tid] < 0:
            return None, "a special token never comes out of the model"
        n = pc.chars[tid]
        if pc.inner[tid]:
            if pos != IN:
                return None, "a ## piece cannot start a word"
            nc = set()
            goto, token, data = pc.goto, pc.token, pc.surface[tid]
            for c in checks:
                v = c
                for b in data:
                    v = goto[v].get(b)
                    if v is None:
                        break
                    if token[v] >= 0:
                        return None, f"not the longest match: {self.names[token[v]]!r} is longer"
                if v is not None:
                    nc.add(v)
            n += count
        else:
            x = self._word_start(state)
            nc = set()
        if limit is not None and n > limit:
            return None, f"the word has more than {limit} characters (HF gives [UNK])"
        nx = self._read(x, pc.surface[tid])
        if nx is None:
            return None, "the text cannot come out of the normalizer and pre-tokenizer here"
        return self._enter(tid, nx, nc, n), ""

    def text_after(self, state: State, tid: int) -> int | None:
        """X's state after token ``tid`` at ``state`` (the first element of :meth:`step`'s state,
        without its checks): all that steering toward a final state reads. ``tid`` must be allowed."""
        pc = self.pieces
        if tid == pc.unk:
            w = self._word_start(state)
            return None if w is None else self.delta[w].get(UNKSYM)
        return self._read(state[0] if pc.inner[tid] else self._word_start(state), pc.surface[tid])

    def advance(self, state: State, tid: int) -> State:
        """The state after token tid; DisallowedTokenError if tid is not allowed (see :meth:`step`) or
        leaves no canonical completion."""
        if type(tid) is not int or not 0 <= tid < self.vocab_size:
            tid = token_id(tid, self.vocab_size)
        try:
            nxt = self.step(state, tid)[0]
        except Exception:
            check_state(self, state)
            raise
        if nxt is None or not self.liveness.live(nxt):
            raise DisallowedTokenError(tid, state)
        return nxt

    def is_final(self, state: State) -> bool:
        if not self.is_state(state):
            raise ForeignStateError(state, type(self).__name__)
        return bool(self.finals[state[0]])

    def first_violation(self, tokens: list[int]) -> tuple[int, str] | None:
        """(index, reason) of the first token that makes the sequence non-canonical, or None."""
        state: State = self.initial()
        for i, t in enumerate(tokens):
            nxt, why = self.step(state, t)
            if nxt is None:
                return i, why
            state = nxt
        if not self.is_final(state):
            return len(tokens), "the sequence cannot end here"
        return None

    def accepts(self, tokens: list[int]) -> bool:
        return self.first_violation(tokens) is None


def materialize(machine: Canonical, max_states: int, max_arcs: int) -> pynini.Fst:
    """The reachable part of the machine as an OpenFst acceptor, trimmed and minimized."""
    ids: dict[State, int] = {machine.initial(): 0}
    queue = deque([machine.initial()])
    src, lab, dst, finals = [], [], [], []
    while queue:
        state = queue.popleft()
        finals.append(machine.is_final(state))
        sid = ids[state]
        for t, nxt in machine.successors(state).items():
            j = ids.get(nxt)
            if j is None:
                j = ids[nxt] = len(ids)
                if j >= max_states:
                    raise LimitError("the canonical automaton", "max_states", max_states, remedy="factorized")
                queue.append(nxt)
            src.append(sid)
            lab.append(t + 1)
            dst.append(j)
            if len(src) > max_arcs:
                raise LimitError("the canonical automaton", "max_arcs", max_arcs, remedy="factorized")
    a = np.array(lab, dtype=np.int64)
    fst = fst_from_arrays(len(ids), 0, np.array(finals, dtype=bool), np.array(src, dtype=np.int64), a, a,
                          np.array(dst, dtype=np.int64))
    fst.connect()
    if fst.num_states() == 0:
        raise EmptyLanguageError("no canonical token sequence spells a string of the language",
                                 "check the regex against the tokenizer's vocabulary")
    return fst.minimize().arcsort("ilabel")


PROBE_STATES = 1024  # states the size probe visits at most (one mask each, ~0.2 ms on BERT)


def size_lower_bound(machine: Canonical, max_states: int, max_arcs: int,
                     budget: int = PROBE_STATES) -> tuple[int, int]:
    """(states, arcs): a lower bound on what :func:`materialize` enumerates, found cheaply.

    :func:`materialize` is a BFS over R, the states reachable from ``initial()`` through
    ``successors``: it dequeues every state of R and appends ``len(successors(s))`` arcs for
    each, and raises LimitError as soon as it has seen more than ``max_states`` states or
    appended more than ``max_arcs`` arcs. So it raises iff |R| > max_states or
    sum_{s in R} |successors(s)| > max_arcs, and the BFS's cost is per arc (every successor
    state is built).

    The probe visits a set S of states, each reached from ``initial()`` by a chain of tokens
    that ``mask`` allows, through ``step`` (``mask(s)`` is the key set of ``successors(s)`` and
    ``step(s, t)`` is ``successors(s)[t]``: one machine, two views, checked by
    ``tests/maxmatch/test_size_bound.py``), so S is a subset of R. For each it adds the
    out-degree ``mask(s).sum() = len(successors(s))``, one vectorized call, without building
    the successors. Hence states = |S| <= |R| and arcs = sum_{s in S} |successors(s)| <= the
    BFS's total: when either passes its limit, so does the BFS, and it would raise. This holds
    whichever states S holds; the choice only decides how tight the bound is.

    The choice: the BFS's own order, truncated. States are visited first in, first out, and
    each enqueues only as many of its successors (lowest token ids first) as the budget has
    room for: in practice the initial state and up to ``budget`` - 1 states after one
    token. Free text on BERT has thousands of arcs per such state (``[a-z]+( [a-z]+){0,3}``:
    ~25,000, 81 states prove 2 M arcs). The probe stops at ``budget`` states, when the queue
    is empty, when a limit is passed, or early (after 64 states) when the average out-degree so
    far could not reach half of ``max_arcs`` within the budget.
    """
    start = machine.initial()
    seen: set[State] = {start}
    queue = deque([start])
    arcs = visited = 0
    while queue and visited < budget:
        state = queue.popleft()
        visited += 1
        allowed = machine.mask(state)
        arcs += int(allowed.sum())
        if arcs > max_arcs or len(seen) > max_states:
            break
        if visited >= 64 and arcs * budget < visited * (max_arcs // 2):
            break  # hopeless within the budget: let the BFS decide
        room = budget - len(seen)
        for t in np.flatnonzero(allowed).tolist():
            if room <= 0:
                break
            nxt = machine.step(state, t)[0]
            if nxt is not None and nxt not in seen:
                seen.add(nxt)
                queue.append(nxt)
                room -= 1
    return len(seen), arcs


def exceeds(machine: Canonical, max_states: int, max_arcs: int) -> LimitError | None:
    """The LimitError :func:`materialize` would raise, when :func:`size_lower_bound` proves it
    would raise one (None: inconclusive, build to find out)."""
    states, arcs = size_lower_bound(machine, max_states, max_arcs)
    if arcs > max_arcs:
        return LimitError("the canonical automaton", "max_arcs", max_arcs, remedy="factorized")
    if states > max_states:
        return LimitError("the canonical automaton", "max_states", max_states, remedy="factorized")
    return None


def machine_of_text(model: TokenizerModel, x: pynini.Fst) -> Canonical:
    """The lazy canonical MaxMatch automaton of a text automaton X (stage P's output)."""
    n = max_chars(model)
    longest = longest_word(x)
    return Canonical(model, x, None if longest is not None and longest <= n else n)


def canonical_machine(model: TokenizerModel, automaton: pynini.Fst, max_states: int) -> Canonical:
    """The lazy canonical MaxMatch automaton of a byte automaton A (the regex)."""
    return machine_of_text(model, text_automaton(model, automaton, max_states))


def checker(model: TokenizerModel) -> Canonical:
    """The canonical machine for all text: accepts exactly HF's WordPiece outputs (canonical-check)."""
    preprocess.check_supported(model)  # all_text may come from the cache without building P
    return Canonical(model, all_text(model), max_chars(model))
