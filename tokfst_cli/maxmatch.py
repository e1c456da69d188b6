"""The MaxMatch (WordPiece) transducer for one word (seed 000 Sec. 6.2, App. C Alg. 7/8).

Greedy longest-match-first WordPiece on a single word, as Hugging Face's ``WordPiece`` model
does it: the first piece comes from the word-initial vocabulary, every later piece from the
``##`` vocabulary; a word with a position where no piece matches becomes ``[UNK]`` alone.

Construction (LinMaxMatch, Song et al. 2021 "Fast WordPiece Tokenization"; seed 000 Alg. 7
computes the failure link f and failure pops F, Alg. 8 turns the trie into a transducer):

* two byte tries: the word-initial trie (root ``r0``) and the suffix trie of the ``##``
  pieces (root ``r1``, standing for the "##" prefix);
* failure links: a node that is a token has ``f(v) = r1`` and ``F(v) = [token(v)]``; for any
  other node ``v = goto(u, c)``, ``F(v) = F(u) + F(z1) + ...`` and ``f(v) = goto(z, c)``
  along the failure chain ``z = f(u), f(f(u)), ...`` (null if the chain ends without ``c``);
  ``f(r0) = f(r1) = null``;
* pynini has no phi matcher, so every failure ("else") transition is expanded explicitly:
  from node ``v`` on byte ``c`` (any of the 256 byte labels) follow the chain until some node
  ``z`` has ``goto(z, c)``, emitting the collected pops; if the chain dies there is no arc
  (the word has no complete greedy parse). At the end of the word, node ``v`` is final iff
  its failure chain reaches ``r1``; the pops on the way are emitted on epsilon-input arcs.

This gives a functional, input-deterministic (up to epsilon-input output chains) transducer
S whose domain D is exactly the words with a complete greedy parse. The [UNK] branch is the
regular relation ``(Sigma_bytes+ - D) x [UNK]`` built with pynini difference and cross, so
the result ``S | UNK`` is total on non-empty byte strings.

Labels follow :mod:`tokfst_cli.lexicon`: byte b is label b+1, token id t is label t+1,
0 is epsilon.

Not modelled: ``max_input_chars_per_word`` (a word of more than that many characters becomes
[UNK] in HF; BERT uses 100, irrelevant for ordinary words). Empty surfaces (a bare "##"
token) never match, as in HF.
"""

from __future__ import annotations

import pynini

from .tokenizer import TokenizerModel

_NULL = -1


class _Tries:
    """Word-initial and ``##`` byte tries with LinMaxMatch failure links (seed 000 Alg. 7)."""

    def __init__(self, model: TokenizerModel) -> None:
        self.goto: list[dict[int, int]] = [{}, {}]  # node 0 = r0 (initial), node 1 = r1 ("##")
        self.token: list[int] = [_NULL, _NULL]
        for tid, surface in model.lexicon_items():
            if tid in model.special_ids:
                continue
            node = 1 if model.word_internal[tid] else 0
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
        # "##" trie first: its links stay inside it and point to shallower nodes (BFS order).
        for root in (1, 0):
            queue = [root]
            for u in queue:
                for c, v in self.goto[u].items():
                    queue.append(v)
                    if self.token[v] != _NULL:
                        self.fail[v], self.pops[v] = 1, (self.token[v],)
                        continue
                    z, out = self.fail[u], list(self.pops[u])
                    while z != _NULL and c not in self.goto[z]:
                        out.extend(self.pops[z])
                        z = self.fail[z]
                    if z != _NULL:
                        self.fail[v], self.pops[v] = self.goto[z][c], tuple(out)

    def step(self, v: int, c: int, memo: dict[tuple[int, int], tuple[int, tuple[int, ...]] | None]):
        """(next node, emitted tokens) on byte c from node v, or None (no greedy parse)."""
        key = (v, c)
        if key in memo:
            return memo[key]
        nxt = self.goto[v].get(c)
        if nxt is not None:
            res = (nxt, ())
        elif self.fail[v] == _NULL:
            res = None
        else:
            sub = self.step(self.fail[v], c, memo)
            res = None if sub is None else (sub[0], self.pops[v] + sub[1])
        memo[key] = res
        return res

    def finish(self, v: int) -> tuple[int, ...] | None:
        """Tokens popped at the end of the word from node v, or None if it does not end at r1."""
        out: list[int] = []
        while v != 1:
            if self.fail[v] == _NULL:
                return None
            out.extend(self.pops[v])
            v = self.fail[v]
        return tuple(out)


def _emit(f: pynini.Fst, src: int, ilabel: int, tokens: tuple[int, ...], dst: int, one,
          tails: dict[tuple[tuple[int, ...], int], int]) -> None:
    """An arc ilabel:tokens[0], then epsilon-input arcs for the rest (tails shared via ``tails``)."""
    if not tokens:
        f.add_arc(src, pynini.Arc(ilabel, 0, one, dst))
        return
    f.add_arc(src, pynini.Arc(ilabel, tokens[0] + 1, one, _tail(f, tokens[1:], dst, one, tails)))


def _tail(f: pynini.Fst, tokens: tuple[int, ...], dst: int, one, tails) -> int:
    """A state that emits ``tokens`` on epsilon-input arcs and then is at ``dst``."""
    if not tokens:
        return dst
    key = (tokens, dst)
    state = tails.get(key)
    if state is None:
        state = tails[key] = f.add_state()
        f.add_arc(state, pynini.Arc(0, tokens[0] + 1, one, _tail(f, tokens[1:], dst, one, tails)))
    return state


def success_transducer(model: TokenizerModel) -> tuple[pynini.Fst, pynini.Fst]:
    """S: words with a complete greedy parse -> their tokens (seed 000 Alg. 8, phi expanded).

    Also returns dom S as a deterministic byte acceptor on the same trie states.
    """
    tries = _Tries(model)
    memo: dict = {}
    tails: dict = {}
    f, dom = pynini.Fst(), pynini.Fst()
    one = pynini.Weight.one(f.weight_type())
    n = len(tries.goto)
    f.add_states(n)
    dom.add_states(n)
    f.set_start(0)
    dom.set_start(0)
    final = f.add_state()
    f.set_final(final)
    # Bytes that can ever be read: labels of some trie edge (any other byte always fails).
    alphabet = sorted({c for g in tries.goto for c in g})
    for v in range(n):
        for c in alphabet:
            res = tries.step(v, c, memo)
            if res is not None:
                _emit(f, v, c + 1, res[1], res[0], one, tails)
                dom.add_arc(v, pynini.Arc(c + 1, c + 1, one, res[0]))
        if v != 0:  # the empty word is not a word
            end = tries.finish(v)
            if end is not None:
                _emit(f, v, 0, end, final, one, tails)
                dom.set_final(v)
    f.connect()
    dom.connect()
    return f.arcsort("ilabel"), dom.arcsort("ilabel")


def maxmatch_transducer(model: TokenizerModel) -> pynini.Fst:
    """Bytes of one word -> HF WordPiece tokens: S | (Sigma+ - dom S) x [UNK] (seed 000 Sec. 6.2).

    Functional on every non-empty byte string; see the module docstring for the construction
    (LinMaxMatch, Song et al. 2021; seed 000 Alg. 7/8) and for what is not modelled.
    """
    s, dom = success_transducer(model)
    unk = model.options.get("unk_token") or "[UNK]"
    unk_id = model.token_id(unk)
    if unk_id is None:
        return s
    sigma = pynini.Fst()
    one = pynini.Weight.one(sigma.weight_type())
    a, b = sigma.add_state(), sigma.add_state()
    sigma.set_start(a)
    sigma.set_final(b)
    for lab in range(1, 257):
        sigma.add_arc(a, pynini.Arc(lab, lab, one, b))
        sigma.add_arc(b, pynini.Arc(lab, lab, one, b))
    rest = pynini.difference(sigma, dom)
    rest.connect().minimize()  # difference of two DFAs is a DFA
    unk_fst = pynini.Fst()
    p, q = unk_fst.add_state(), unk_fst.add_state()
    unk_fst.set_start(p)
    unk_fst.set_final(q)
    unk_fst.add_arc(p, pynini.Arc(unk_id + 1, unk_id + 1, one, q))
    unk_path = pynini.cross(rest, unk_fst)
    out = pynini.union(s, unk_path)  # disjoint domains: still functional
    return out.arcsort("ilabel")


def tokenize_word(fst: pynini.Fst, model: TokenizerModel, word: str) -> list[int]:
    """Token ids of one word through the MaxMatch transducer (its unique output)."""
    data = word.encode("utf-8")
    acc = pynini.Fst()
    one = pynini.Weight.one(acc.weight_type())
    acc.add_states(len(data) + 1)
    acc.set_start(0)
    acc.set_final(len(data))
    for i, b in enumerate(data):
        acc.add_arc(i, pynini.Arc(b + 1, b + 1, one, i + 1))
    out = pynini.project(pynini.compose(acc, fst), "output").rmepsilon()
    results = set()
    it = out.paths()
    while not it.done():
        results.add(tuple(l - 1 for l in it.olabels()))
        it.next()
    if len(results) != 1:
        raise ValueError(f"{word!r}: expected one tokenization, got {len(results)}")
    return list(results.pop())
