"""Stages S+C for WordPiece, the paper's transducer T_Aho (Cognetta & Okazaki 2024 Sec. 6.2, Fig. 4, App. C Alg. 7/8).

Greedy longest-match-first WordPiece on a single word, as Hugging Face's ``WordPiece`` model
does it: the first piece comes from the word-initial vocabulary, every later piece from the
``##`` vocabulary; a word with a position where no piece matches becomes ``[UNK]`` alone.

Construction (LinMaxMatch, Song et al. 2021 "Fast WordPiece Tokenization"; Cognetta & Okazaki 2024 Alg. 7
computes the failure link f and failure pops F, Alg. 8 turns the trie into a transducer):

* two byte tries: the word-initial trie (root ``r0``) and the suffix trie of the ``##``
  pieces (root ``r1``, standing for the "##" prefix);
* failure links: a node that is a token has ``f(v) = r1`` and ``F(v) = [token(v)]``; for any
  other node ``v = goto(u, c)``, ``F(v) = F(u) + F(z1) + ...`` and ``f(v) = goto(z, c)``
  along the failure chain ``z = f(u), f(f(u)), ...`` (null if the chain ends without ``c``);
  ``f(r0) = f(r1) = null``;
* pynini has no phi matcher, so Alg. 8's failure (phi) arcs are eliminated (:func:`_table`):
  a phi arc becomes an epsilon-input arc emitting F(v) where that cannot compete with v's
  own bytes, and otherwise leads to a shared copy of f(v) that refuses the bytes already
  claimed. A word ends by following failure arcs to ``r1``.

This gives a functional, unambiguous transducer S whose domain D (:func:`domain_acceptor`) is
exactly the words with a complete greedy parse. D is minimized by Moore partition refinement
on the LinMaxMatch successor table (computed with numpy), and its complement (a sink added,
finals flipped) carries the [UNK] branch ``(Sigma_bytes+ - D) x [UNK]``, so
``T_Aho = S | UNK`` is total on non-empty byte strings. The FST is written in bulk with
:func:`tokfst_cli.automata.arrays.fst_from_arrays`; bert-base-uncased takes about a second.

Labels follow :mod:`tokfst_cli.promotion.lexicon`: byte b is label b+1, token id t is label t+1,
0 is epsilon; :data:`tokfst_cli.automata.symbols.MARKER` separates words and
:data:`~tokfst_cli.automata.symbols.UNKSYM` stands for a whole [UNK] word in :func:`text_transducer`.

Not modelled here: ``max_input_chars_per_word`` (decided upstream at the character level,
which then feeds UNKSYM). Empty surfaces (a bare "##" token) never match, as in HF.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pynini

from tokfst_cli.automata.arrays import fst_from_arrays, unique
from tokfst_cli.automata.fsts import linear
from tokfst_cli.automata.symbols import MARKER, UNKSYM
from tokfst_cli.errors import InternalError
from tokfst_cli.tokenizer.model import TokenizerModel

_NULL = -1


class Tries:
    """Word-initial and ``##`` byte tries with LinMaxMatch failure links (Cognetta & Okazaki 2024 Alg. 7).

    Node 0 is the word-initial root r0, ``cont`` the continuation root r1: node 1 (the "##"
    trie) for WordPiece; with ``shared=True`` every piece serves at every position (a plain
    vocabulary as in Cognetta & Okazaki 2024 Fig. 4), there is one trie and ``cont`` is 0. ``level`` orders
    the nodes so that ``fail[v]`` has a lower level than ``v``.
    """

    def __init__(self, model: TokenizerModel, shared: bool = False) -> None:
        self.cont = 0 if shared else 1
        self.goto: list[dict[int, int]] = [{} for _ in range(1 if shared else 2)]
        self.token: list[int] = [_NULL] * len(self.goto)
        for tid, surface in model.lexicon_items():
            if tid in model.not_in_model:
                continue
            node = self.cont if model.word_internal[tid] else 0
            for b in surface:
                nxt = self.goto[node].get(b)
                if nxt is None:
                    nxt = len(self.goto)
                    self.goto.append({})
                    self.token.append(_NULL)
                    self.goto[node][b] = nxt
                node = nxt
            self.token[node] = tid
        n = len(self.goto)
        self.fail: list[int] = [_NULL] * n
        self.pops: list[tuple[int, ...]] = [()] * n
        self.level: list[int] = [0] * n
        # The "##" trie first: its links stay inside it and point to shallower nodes (BFS order);
        # links of the initial trie point into the "##" trie, so its levels come after.
        for root in dict.fromkeys((self.cont, 0)):
            self.level[root] = max(self.level) + 1 if root != self.cont else 0
            queue = [root]
            for u in queue:
                for c, v in self.goto[u].items():
                    queue.append(v)
                    self.level[v] = self.level[u] + 1
                    if self.token[v] != _NULL:
                        self.fail[v], self.pops[v] = self.cont, (self.token[v],)
                        continue
                    z, out = self.fail[u], list(self.pops[u])
                    while z != _NULL and c not in self.goto[z]:
                        out.extend(self.pops[z])
                        z = self.fail[z]
                    if z != _NULL:
                        self.fail[v], self.pops[v] = self.goto[z][c], tuple(out)


@dataclass
class _Table:
    """S (the success part of T_Aho) as arc arrays, and the complete table of its domain D.

    S states: the trie nodes 0..n-1 first, then restricted copies and pop chains; ``finals``
    are where a word may end (the continuation root and its restricted copies).
    """

    alphabet: np.ndarray  # bytes read by some trie edge; column c of the tables is alphabet[c]
    node_next: np.ndarray  # (n, C): LinMaxMatch node after byte alphabet[c] (phi followed), -1 = reject
    word_end: np.ndarray  # (n,) bool: a word may end at node v (v != r0, its failure chain reaches r1)
    num_states: int
    finals: list[int]
    src: np.ndarray
    ilabel: np.ndarray
    olabel: np.ndarray
    dst: np.ndarray


def _levels(level: np.ndarray) -> list[np.ndarray]:
    """Nodes grouped by ``Tries.level``, in increasing order."""
    order = np.argsort(level, kind="stable")
    bounds = np.searchsorted(level[order], np.arange(level.max() + 2))
    return [order[bounds[i]:bounds[i + 1]] for i in range(level.max() + 1)]


def _to_ints(table: np.ndarray) -> list[int]:
    """Each row of a (rows, C) bool table as a Python int bit set (bit c = column c)."""
    return [int.from_bytes(row.tobytes(), "little") for row in np.packbits(table, axis=1, bitorder="little")]


def _from_ints(sets: list[int], width: int) -> np.ndarray:
    """Inverse of :func:`_to_ints`."""
    nbytes = (width + 7) // 8
    raw = np.frombuffer(b"".join(x.to_bytes(nbytes, "little") for x in sets), dtype=np.uint8)
    return np.unpackbits(raw.reshape(len(sets), nbytes), axis=1, bitorder="little")[:, :width].astype(bool)


def _table(tries: Tries) -> _Table:
    """Alg. 8 with its phi arcs eliminated (Cognetta & Okazaki 2024 App. C; phi semantics as in Sec. 6.1).

    The phi arc of node v (to f(v), emitting F(v)) becomes an epsilon-input arc when f(v) can
    read none of v's own bytes, even through its own failure chain; otherwise it leads to a
    copy W(f(v), X) of f(v) that refuses the bytes X claimed on the way (memoized on the part
    of X that f(v) could read). Every state then has exactly one way on with each next byte,
    and a word ends by following the failure chain to the continuation root r1, the only kind
    of final state: S is functional and unambiguous. The LinMaxMatch successor table (numpy,
    one level of nodes at a time: ``row(v) = row(f(v))``, overwritten by v's goto) gives what
    each node can read and the domain D.
    """
    n, cont, fail, pops = len(tries.goto), tries.cont, tries.fail, tries.pops
    gsrc = np.array([u for u, g in enumerate(tries.goto) for _ in g], dtype=np.int64)
    gbyte = np.array([c for g in tries.goto for c in g], dtype=np.int64)
    gdst = np.array([v for g in tries.goto for v in g.values()], dtype=np.int64)
    alphabet = unique(gbyte)
    col_of = np.zeros(256, dtype=np.int64)
    col_of[alphabet] = np.arange(len(alphabet))
    goto = np.full((n, len(alphabet)), _NULL, dtype=np.int32)
    goto[gsrc, col_of[gbyte]] = gdst
    node_next = goto.copy()
    reach = np.zeros(n, dtype=bool)
    reach[cont] = True
    fail_arr = np.array(fail, dtype=np.int64)
    for batch in _levels(np.array(tries.level, dtype=np.int64)):
        batch = batch[fail_arr[batch] >= 0]
        f = fail_arr[batch]
        node_next[batch] = np.where(goto[batch] >= 0, goto[batch], node_next[f])
        reach[batch] = reach[f]
    reach[0] = False  # the empty word is not a word
    readable, own = _to_ints(node_next >= 0), _to_ints(goto >= 0)

    # In shared mode r1 is r0, the start; "a piece just ended" then needs its own final copy.
    between = n if cont == 0 else cont
    count = n + (cont == 0)
    finals = [between]
    w_state: list[int] = []
    w_node: list[int] = []
    w_refused: list[int] = []
    e_src: list[int] = []
    e_lab: list[int] = []
    e_dst: list[int] = []
    chains: dict[tuple[int, int], int] = {}
    copies: dict[tuple[int, int], int] = {}

    def new_state() -> int:
        nonlocal count
        count += 1
        return count - 1

    def target(z: int, refused: int) -> int:
        """The state for node z refusing the bytes ``refused``: z itself, or its copy W."""
        refused &= readable[z]
        if not refused:
            return between if z == cont else z
        state = copies.get((z, refused))
        if state is None:
            state = copies[(z, refused)] = new_state()
            w_state.append(state), w_node.append(z), w_refused.append(refused)
            if z == cont:
                finals.append(state)
            if fail[z] != _NULL:
                fail_arc(state, z, refused | own[z])
        return state

    def fail_arc(src: int, v: int, refused: int) -> None:
        """src --eps:F(v)--> f(v) refusing ``refused``; pops after the first on shared chains."""
        dst = target(fail[v], refused)
        for tok in reversed(pops[v][1:]):
            state = chains.get((tok, dst))
            if state is None:
                state = chains[(tok, dst)] = new_state()
                e_src.append(state), e_lab.append(tok + 1), e_dst.append(dst)
            dst = state
        e_src.append(src), e_lab.append(pops[v][0] + 1), e_dst.append(dst)

    for v in range(n):
        if fail[v] != _NULL:
            fail_arc(v, v, own[v])

    # Byte arcs: the trie's goto, r0's again from the shared-mode copy, each W's unrefused goto.
    w_node_arr = np.array(w_node, dtype=np.int64)
    rows, cols = np.nonzero((goto[w_node_arr] >= 0) & ~_from_ints(w_refused, len(alphabet)))
    b_src = [gsrc, np.array(w_state, dtype=np.int64)[rows]]
    b_col = [col_of[gbyte], cols]
    b_dst = [gdst, goto[w_node_arr[rows], cols]]
    if cont == 0:
        b_src.append(np.full(len(tries.goto[0]), between, dtype=np.int64))
        b_col.append(col_of[np.array(list(tries.goto[0]), dtype=np.int64)])
        b_dst.append(np.array(list(tries.goto[0].values()), dtype=np.int64))
    b_src, b_col, b_dst = (np.concatenate(x) for x in (b_src, b_col, b_dst))
    return _Table(
        alphabet=alphabet, node_next=node_next, word_end=reach, num_states=count, finals=finals,
        src=np.concatenate([b_src, np.array(e_src, dtype=np.int64)]),
        ilabel=np.concatenate([alphabet[b_col] + 1, np.zeros(len(e_src), dtype=np.int64)]),
        olabel=np.concatenate([np.zeros(len(b_src), dtype=np.int64), np.array(e_lab, dtype=np.int64)]),
        dst=np.concatenate([b_dst, np.array(e_dst, dtype=np.int64)]),
    )


def _moore(delta: np.ndarray, final: np.ndarray) -> np.ndarray:
    """Myhill-Nerode classes of a complete DFA (Moore partition refinement, vectorized).

    Rows (class, classes of the successors) are hashed with random 64-bit weights. The result
    is checked to be a congruence that respects finality; were it not (a hash collision), it
    is recomputed comparing whole rows.
    """
    weights = np.random.default_rng(0).integers(1, 2**62, size=delta.shape[1] + 1, dtype=np.int64)
    for exact in (False, True):
        cls = final.astype(np.int64)
        count = len(unique(cls))
        while True:
            succ = cls[delta]
            if exact:
                _, new = np.unique(np.column_stack([cls, succ]), axis=0, return_inverse=True)
            else:
                with np.errstate(over="ignore"):
                    _, new = np.unique(cls * weights[0] + succ @ weights[1:], return_inverse=True)
            new = new.reshape(-1)
            if new.max(initial=-1) + 1 == count:
                break
            cls, count = new, new.max() + 1
        _, first = np.unique(new, return_index=True)
        rep = first[new]
        if (final == final[rep]).all() and (new[delta] == new[delta[rep]]).all():
            return new
    raise AssertionError("Moore refinement did not converge to a congruence")


@dataclass
class _Domain:
    """The minimal complete DFA of D over alphabet columns plus one "any other byte" column."""

    delta: np.ndarray  # (k, C + 1) class transitions; column C: every byte outside the alphabet
    final: np.ndarray  # (k,) bool
    start: int
    sink: int  # the dead class (not in D, all of its continuations neither)


def _domain(table: _Table) -> _Domain:
    """dom S minimized: trie nodes plus a sink, completed over the alphabet, then Moore."""
    n, width = table.node_next.shape
    delta = np.full((n + 1, width), n, dtype=np.int32)
    delta[:n] = np.where(table.node_next >= 0, table.node_next, n)
    final = np.append(table.word_end, False)
    cls = _moore(delta, final)
    _, reps = np.unique(cls, return_index=True)  # one state of each class, by class
    other = np.full((len(reps), 1), cls[n])  # bytes outside the alphabet: to the sink
    return _Domain(delta=np.hstack([cls[delta[reps]], other]), final=final[reps], start=int(cls[0]),
                   sink=int(cls[n]))


def _expand(dom: _Domain, alphabet: np.ndarray, src: np.ndarray | None = None
            ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(src class, byte label, dst class) of every byte 0..255 from the classes ``src``."""
    src = np.arange(len(dom.delta)) if src is None else src
    col = np.full(256, dom.delta.shape[1] - 1, dtype=np.int64)
    col[alphabet] = np.arange(len(alphabet))
    s = np.repeat(src, 256)
    b = np.tile(np.arange(256), len(src))
    return s, b + 1, dom.delta[s, col[b]]


def domain_acceptor(model: TokenizerModel) -> pynini.Fst:
    """dom S: the minimal DFA over bytes of the words with a complete greedy parse (trim)."""
    return _domain_fst(*_build(model, False)[:2])


def _domain_fst(table: _Table, dom: _Domain) -> pynini.Fst:
    """The minimal D without its sink, as an Fst."""
    s, lab, d = _expand(dom, table.alphabet)
    keep = (s != dom.sink) & (d != dom.sink)
    fst = fst_from_arrays(len(dom.delta), dom.start, dom.final, s[keep], lab[keep], lab[keep], d[keep])
    return fst.connect().arcsort("ilabel")


def _build(model: TokenizerModel, shared: bool) -> tuple[_Table, _Domain, int | None]:
    """S, the minimal D and the unk token id (None if the vocabulary has none)."""
    table = _table(Tries(model, shared))
    return table, _domain(table), _unk_id(model)


def _unk_id(model: TokenizerModel) -> int | None:
    return model.token_id(model.options.get("unk_token") or "[UNK]")


@dataclass
class _Arcs:
    """An FST under construction as arc arrays."""

    num_states: int
    start: int
    finals: list[int]
    src: list[np.ndarray]
    ilabel: list[np.ndarray]
    olabel: list[np.ndarray]
    dst: list[np.ndarray]

    def add(self, src, ilabel, olabel, dst) -> None:
        """Arcs from arrays and scalars (broadcast)."""
        parts = [np.asarray(x, dtype=np.int64) for x in (src, ilabel, olabel, dst)]
        n = max((p.size for p in parts if p.ndim), default=1)
        for lst, p in zip((self.src, self.ilabel, self.olabel, self.dst), parts):
            lst.append(np.broadcast_to(p, (n,)))

    def fst(self) -> pynini.Fst:
        finals = np.zeros(self.num_states, dtype=bool)
        finals[self.finals] = True
        cat = [np.concatenate(x) for x in (self.src, self.ilabel, self.olabel, self.dst)]
        return fst_from_arrays(self.num_states, self.start, finals, *cat).arcsort("ilabel")


def _aho_arcs(table: _Table, dom: _Domain, unk: int | None) -> _Arcs:
    """T_Aho = S | (Sigma+ - D) x [UNK] as arcs; its finals are exactly where a word may end.

    The [UNK] branch is the complement of the minimal D (classes numbered after S's states,
    finals flipped); its first arc leaves the shared start state 0 with output [UNK], so the
    empty word stays outside both branches.
    """
    arcs = _Arcs(table.num_states, 0, list(table.finals), [], [], [], [])
    arcs.add(table.src, table.ilabel, table.olabel, table.dst)
    if unk is None:
        return arcs
    base = arcs.num_states
    arcs.num_states += len(dom.delta)
    s, lab, d = _expand(dom, table.alphabet)
    arcs.add(s + base, lab, 0, d + base)
    _, lab0, d0 = _expand(dom, table.alphabet, np.array([dom.start]))
    arcs.add(0, lab0, unk + 1, d0 + base)
    arcs.finals += (np.nonzero(~dom.final)[0] + base).tolist()
    return arcs


def success_transducer(model: TokenizerModel) -> tuple[pynini.Fst, pynini.Fst]:
    """S: words with a complete greedy parse -> their tokens (Cognetta & Okazaki 2024 Alg. 8, phi arcs eliminated).

    Also returns dom S as a minimal deterministic byte acceptor (see :func:`domain_acceptor`).
    """
    table, dom, _ = _build(model, False)
    return _aho_arcs(table, dom, None).fst(), _domain_fst(table, dom)


def maxmatch_transducer(model: TokenizerModel, shared: bool = False) -> pynini.Fst:
    """Bytes of one word -> HF WordPiece tokens: S | (Sigma+ - dom S) x [UNK] (Cognetta & Okazaki 2024 Sec. 6.2).

    Functional on every non-empty byte string (without an unk token in the vocabulary, on
    dom S only); ``shared``: see :class:`Tries`. Construction in the module docstring.
    """
    return _aho_arcs(*_build(model, shared)).fst()


def text_transducer(model: TokenizerModel) -> pynini.Fst:
    """A pre-tokenized text -> its WordPiece tokens: ``( W (MARKER:eps W)* )?``.

    W is one word: bytes through T_Aho (:func:`maxmatch_transducer`, [UNK] branch included)
    or the single label UNKSYM -> [UNK]. Words are separated by single MARKER labels (none
    leading or trailing); the empty text maps to the empty token sequence. Functional; use
    as ``pynini.compose(acceptor, text_transducer(model)).project("output")``.
    """
    table, dom, unk = _build(model, False)
    arcs = _aho_arcs(table, dom, unk)
    if unk is not None:
        arcs.num_states += 1
        arcs.add(0, UNKSYM, unk + 1, arcs.num_states - 1)
        arcs.finals.append(arcs.num_states - 1)
    arcs.add(arcs.finals, MARKER, 0, 0)
    # A fresh final start state with the arcs of state 0: state 0 itself must stay non-final,
    # or a text could end with MARKER.
    start = arcs.num_states
    arcs.num_states += 1
    for src, il, ol, dst in zip(*(list(x) for x in (arcs.src, arcs.ilabel, arcs.olabel, arcs.dst))):
        m = src == 0
        arcs.add(start, il[m], ol[m], dst[m])
    arcs.start = start
    arcs.finals.append(start)
    return arcs.fst()


def tokenize_word(fst: pynini.Fst, model: TokenizerModel, word: str) -> list[int]:
    """Token ids of one word through the MaxMatch transducer (its unique output)."""
    return tokenize_labels(fst, list(word.encode("utf-8")), offset=1)


def tokenize_labels(fst: pynini.Fst, labels: list[int], offset: int = 0) -> list[int]:
    """Token ids of the input ``labels`` (+ ``offset``) through a functional transducer."""
    acc = linear([lab + offset for lab in labels])
    out = pynini.project(pynini.compose(acc, fst), "output").rmepsilon()
    results = set()
    it = out.paths()
    while not it.done():
        results.add(tuple(lab - 1 for lab in it.olabels()))
        it.next()
    if len(results) != 1:
        raise InternalError(f"{labels!r}: expected one tokenization, got {len(results)}")
    return list(results.pop())
