"""Stage S: tokenization-agnostic promotion MIN(PROJ(A o T)) (Cognetta & Okazaki 2024 Sec. 5, Eq. 3, Lemma 1).

A is the minimal deterministic byte acceptor of the regex, T the lexicon transducer. By
Lemma 1, epsilon-removal of PROJ(A o T) is already deterministic, so no determinization is
run. When every single byte is a token (byte-level BPE, byte fallback), the result is also
already minimal: distinct states of the minimal A have distinct byte languages, and spelling
any distinguishing string byte by byte tells their token languages apart. Minimization is
then skipped; otherwise OpenFst minimizes.

For a deterministic A nothing is composed: ``trie.token_arcs`` walks A over T's trie (T, T_M,
or T'' with terminal labels) and gives the token states and arcs directly. OpenFst's
composition, with the numpy epsilon removal below, remains for a few literal strings (an
acyclic A of at most LITERAL_DEGREE arcs a state, whose composition is tiny and faster than
the walk's fixed numpy steps per trie level) and for an A or T the walk does not take (a
nondeterministic or weighted A, a table past ``trie.MAX_CELLS``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pynini

from tokfst_cli.automata.arrays import FstArrays, fst_arrays, fst_from
from tokfst_cli.automata.symbols import token_table
from tokfst_cli.errors import EmptyLanguageError, LimitError
from tokfst_cli.promotion import lexicon as lexicon_mod
from tokfst_cli.promotion.trie import signed_trie, token_arcs, with_root_arcs
from tokfst_cli.support.progress import report
from tokfst_cli.text.regex import ByteAutomaton
from tokfst_cli.text.terminals import (
    KIND_NAMES,
    PLACEHOLDER_BASE,
    TERMINAL_BASE,
    Terminal,
    mark,
    placeholder_kinds,
    with_names,
)
from tokfst_cli.tokenizer.model import TokenizerModel


@dataclass
class Promoted:
    fst: pynini.Fst
    states: int
    arcs: int
    minimized: bool
    terminals: list = field(default_factory=list)  # terminals.Terminal j is token label vocab_size + 1 + j
    arrays: FstArrays | None = None  # fst's arcs in bulk where read already (the token filters reuse them)


def covers_all_bytes(model: TokenizerModel) -> bool:
    """Is every byte 0-255 the surface of some single token? (computed once per model)"""
    cached = model.__dict__.get("_covers_all_bytes")
    if cached is None:
        singles = {s[0] for s in model.surfaces if s is not None and len(s) == 1}
        cached = model.__dict__["_covers_all_bytes"] = len(singles) == 256
    return cached


def count_arcs(fst: pynini.Fst) -> int:
    return sum(fst.num_arcs(s) for s in fst.states())


def arc_arrays(fst: pynini.Fst) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(source, input label, next state) of every arc, read in bulk (``artifacts.fst_arrays``)."""
    a = fst_arrays(fst)
    return a.src, a.ilabel, a.nextstate


def _two_byte_tokens(model: TokenizerModel) -> np.ndarray:
    """Row b: the bytes c (as a 256-bit set, 4 x uint64) such that bc is a token's surface."""
    cached = model.__dict__.get("_two_byte_tokens")
    if cached is None:
        cached = np.zeros((256, 4), np.uint64)
        for _, s in model.lexicon_items():
            if len(s) == 2:
                cached[s[0], s[1] >> 6] |= np.uint64(1) << np.uint64(s[1] & 63)
        model.__dict__["_two_byte_tokens"] = cached
    return cached


def composition_at_least(model: TokenizerModel, a: pynini.Fst) -> int | None:
    """A lower bound on the states of connect(A o T), from A's arcs alone (None: no bound).

    Applies when every byte is a token and A is trim (then every (q, root) pair is reachable and
    co-reachable). Besides those, for every arc p -b-> q of A, the pair (q, trie node of b) is a
    state of A o T whenever some token bc has c on an arc leaving q: reachable through b from
    (p, root), co-reachable through c back to the root. Distinct (q, b) give distinct states.
    """
    trim = pynini.ACCESSIBLE | pynini.COACCESSIBLE
    if not covers_all_bytes(model) or a.properties(trim, True) != trim:
        return None
    n = a.num_states()
    src, label, dst = arc_arrays(a)
    byte = label - 1
    ok = byte >= 0
    src, byte, dst = src[ok], byte[ok], dst[ok]
    out = np.zeros((n, 4), np.uint64)  # the bytes on the arcs leaving each state (arcs come grouped by state)
    if len(src):
        first = np.flatnonzero(np.r_[True, src[1:] != src[:-1]])
        bit = np.left_shift(np.uint64(1), (byte & 63).astype(np.uint64))
        for k in range(4):
            out[src[first], k] = np.bitwise_or.reduceat(np.where(byte >> 6 == k, bit, np.uint64(0)), first)
    pairs = np.sort(dst * 256 + byte)  # distinct (q, b); np.unique is much slower here (numpy 2.4)
    pairs = pairs[np.r_[True, pairs[1:] != pairs[:-1]]]
    q, b = pairs // 256, pairs % 256
    inner = (_two_byte_tokens(model)[b] & out[q]).any(axis=1)
    return n + int(inner.sum())


def chain_bound(model: TokenizerModel, max_states: int):
    """A ``regex.compile_regex`` chain check: refuse a repetition whose A o T would pass
    ``max_states``, from :func:`composition_at_least` on chains of 2 and 3 copies (each further
    copy adds what the third added), before the whole byte automaton is built."""
    def check(chain, copies: int) -> None:
        b2, b3 = composition_at_least(model, chain(2)), composition_at_least(model, chain(3))
        if b2 is None or b3 is None:
            return
        at_least = b2 + (copies - 2) * (b3 - b2)
        if at_least > max_states:
            raise LimitError("A o T", "max_states", max_states, at_least, remedy="simplify", at_least=True)
    return check


def promote(
    model: TokenizerModel,
    automaton: ByteAutomaton,
    lexicon: pynini.Fst | None = None,
    max_states: int = 1_000_000,
    force_minimize: bool = False,
    marked: bool = False,
    terminals: bool = False,
    cache: bool = True,
) -> Promoted:
    """The minimal acceptor of token sequences whose concatenated surfaces are in L(A).

    ``lexicon``: T (``lexicon.lexicon``), read from the cache when None and needed (a byte DFA
    is walked over the token trie instead: ``trie``).
    ``marked``: A is pre-tokenized text (bytes and ``symbols.MARKER``) and ``lexicon`` is T_M
    over model texts (``lexicon.build(marked=True)``); the result also carries the boundary.
    ``terminals``: wildcard loops become terminal labels (``terminals.py``, Koo et al. 2024 Sec. 2.5.1);
    the token-level groups of A (``(?P<TEXT_TOKEN>)``) are terminal labels then, else their
    tokens' arcs."""
    a = automaton.fst
    labels = []
    plain = True  # T is the tokenizer's own (kept per model by the walk), not one made for this A
    if not marked and (terminals or placeholder_kinds(a)):
        lexicon = lexicon if lexicon is not None else lexicon_mod.lexicon(model, cache=cache)
        a, lexicon, labels = _with_terminals(model, a, lexicon, terminals, cache)
        plain = False
    force_minimize = force_minimize or marked  # terminal labels regroup tokens: minimality carries over
    if 257 * a.num_states() > max_states and not marked and not labels:  # else the bound below cannot pass max_states
        at_least = composition_at_least(model, a)
        if at_least is not None and at_least > max_states:
            raise LimitError("A o T", "max_states", max_states, at_least, remedy="simplify", at_least=True)
    arrays = _walked(model, a, max_states, marked, lexicon, cache, plain, labels)
    if arrays is not None:
        report(len(arrays.final))
        c = fst_from(arrays) if len(arrays.final) else pynini.Fst()
    else:
        lexicon = lexicon if lexicon is not None else lexicon_mod.lexicon(model, cache=cache, marked=marked)
        c = pynini.compose(a.copy().arcsort("olabel"), lexicon, connect=True)  # the caller's A stays as it is
        report(c.num_states())
        if c.num_states() > max_states:
            raise LimitError("A o T", "max_states", max_states, c.num_states(), remedy="simplify")
        projected = c.project("output").set_input_symbols(None).set_output_symbols(None)
        arrays = trie_epsilon_arrays(projected)
        c = projected.rmepsilon() if arrays is None else fst_from(arrays)
    minimize = force_minimize or not covers_all_bytes(model)
    if minimize:
        c.minimize()
        arrays = None
    if c.start() == pynini.NO_STATE_ID or c.num_states() == 0:
        raise EmptyLanguageError(
            f"no sequence of {model.source} tokens spells a string matching {automaton.pattern!r}",
            "the vocabulary cannot write this language (e.g. upper case for an uncased model)")
    if c.num_states() > max_states:
        raise LimitError("the promoted automaton", "max_states", max_states, c.num_states())
    table = lexicon.output_symbols() if lexicon is not None else token_table(model)
    if labels:
        table = with_names(table.copy(), model.vocab_size, labels)
    c.set_input_symbols(table)
    c.set_output_symbols(table)
    arcs = count_arcs(c) if arrays is None else len(arrays.src)
    return Promoted(fst=c, states=c.num_states(), arcs=arcs, minimized=minimize, terminals=labels, arrays=arrays)


LITERAL_DEGREE = 4  # arcs per state of an acyclic A up to which promotion composes (words, names, keys)


def _walked(model: TokenizerModel, a: pynini.Fst, max_states: int, marked: bool, lexicon: pynini.Fst | None,
            cache: bool, plain: bool, labels: list) -> FstArrays | None:
    """The token arcs of A o T without composing (``trie.token_arcs``; ``plain``: T is the
    tokenizer's T or T_M, else one made for this A; ``labels``: A'' with these terminal labels,
    walked over the signed T's trie, kept per model, and one root arc per terminal), None
    where A or T has another shape."""

    arrays = fst_arrays(a)
    if len(arrays.src) <= LITERAL_DEGREE * a.num_states() and a.properties(pynini.ACYCLIC, True) == pynini.ACYCLIC:
        return None  # a few literal strings: OpenFst composes their few paths faster than a walk's numpy steps
    given = None
    if labels:
        j = np.arange(len(labels))
        given = with_root_arcs(signed_trie(model, cache), TERMINAL_BASE + j, model.vocab_size + 1 + j)
    trim = pynini.ACCESSIBLE | pynini.COACCESSIBLE
    return token_arcs(model, arrays, max_states, marked, a.properties(trim, True) == trim, lexicon, cache,
                      keep=plain, trie=given)


def remove_trie_epsilons(c: pynini.Fst, block: int = 1 << 14) -> pynini.Fst:
    """RmEpsilon of PROJ(A o T): :func:`trie_epsilon_arrays`, else OpenFst's rmepsilon."""
    a = trie_epsilon_arrays(c, block)
    return c.rmepsilon() if a is None else fst_from(a)


def trie_epsilon_arrays(c: pynini.Fst, block: int = 1 << 14) -> FstArrays | None:
    """The arcs of RmEpsilon(PROJ(A o T)), by a breadth-first walk of T's trie from every token
    state; None where OpenFst must remove the epsilons.

    A state of A o T is a *token state* (q, root) or an inner state (q, trie node); epsilons
    lead from a state to a deeper trie node (acyclic), labels back to a token state. From each
    token state the epsilon paths form a tree (A is deterministic, T a trie), so the labelled
    arcs at its leaves are exactly the token state's arcs after epsilon removal, with no
    duplicates. The walk runs ``block`` token states at once, one trie level per numpy step
    (OpenFst's generic rmepsilon, shortest distances per state, took twice as long). Any other
    shape (an epsilon cycle, an inner final state) and any weight but One go to OpenFst.
    """
    a = fst_arrays(c)
    n = len(a.final)
    if n == 0 or a.weighted:  # nothing to walk; the walk drops weights (OpenFst sums them along paths)
        return None
    label, eps = a.olabel, a.olabel == 0
    if not eps.any():
        return a
    real = np.zeros(n, bool)
    real[a.start] = True
    real[a.nextstate[~eps]] = True
    if (a.final & ~real).any():
        return None
    offsets = np.searchsorted(a.src, np.arange(n + 1))
    renumber = (np.cumsum(real) - 1).astype(np.int32)
    label, target = label.astype(np.int32), renumber[a.nextstate]  # target: a labelled arc's token state
    tokens = np.flatnonzero(real)
    blocks = []
    for first in range(0, len(tokens), block):
        walked = _walk(tokens[first:first + block], offsets, eps, label, target, a.nextstate, n)
        if walked is None:  # an epsilon cycle
            return None
        blocks.append(walked)
    counts, lab, dst = (np.concatenate(x) for x in zip(*blocks))
    src = np.repeat(np.arange(len(tokens), dtype=np.int32), counts)
    return FstArrays(int(renumber[a.start]), a.final[real], src, lab, lab, dst)


def _walk(states: np.ndarray, offsets: np.ndarray, eps: np.ndarray, label: np.ndarray, target: np.ndarray,
          nextstate: np.ndarray, depth: int):
    """The labelled arcs reached from ``states`` through epsilons, grouped by origin: (arcs per
    origin, labels, targets); None past ``depth`` levels (a cycle).

    Each level's arcs come in origin order (``np.repeat`` keeps it), so an arc's place is its
    origin's start, plus the origin's arcs on earlier levels, plus its rank on its level: no sort."""
    n = len(states)
    origin, parts = np.arange(n, dtype=np.int32), []
    for _ in range(depth):
        degree = offsets[states + 1] - offsets[states]
        total = int(degree.sum())
        if total == 0:
            break
        arc = np.repeat(offsets[states] - np.cumsum(degree) + degree, degree) + np.arange(total)
        origin = np.repeat(origin, degree)
        step = eps[arc]
        done = arc[~step]
        parts.append((origin[~step], label[done], target[done]))
        origin, states = origin[step], nextstate[arc[step]]
    else:
        return None
    counts = np.array([np.bincount(o, minlength=n) for o, _, _ in parts], np.int64).reshape(len(parts), n)
    per_origin = counts.sum(axis=0)
    level_start = np.cumsum(counts, axis=0) - counts + (np.cumsum(per_origin) - per_origin)
    lab, dst = np.empty(int(per_origin.sum()), np.int32), np.empty(int(per_origin.sum()), np.int32)
    for level, (o, l, d) in enumerate(parts):
        place = (level_start[level] - (np.cumsum(counts[level]) - counts[level]))[o] + np.arange(len(o))
        lab[place], dst[place] = l, d
    return per_origin, lab, dst


def _with_terminals(model: TokenizerModel, a: pynini.Fst, lexicon: pynini.Fst, loops: bool, cache: bool):
    """(A'', T'', terminals) for terminal labels; or, without ``loops``, A and T with each token-level
    group's tokens as arcs (``terminals.py``)."""

    one = pynini.Weight.one(lexicon.weight_type())
    if not loops:
        t = lexicon.copy()
        root = t.start()
        for kind in placeholder_kinds(a):
            k = KIND_NAMES.index(kind)
            for tid in np.flatnonzero(Terminal(kind, 1, 1).mask(model)).tolist():
                t.add_arc(root, pynini.Arc(PLACEHOLDER_BASE + k, tid + 1, one, root))
        return a.copy().set_input_symbols(None).set_output_symbols(None), t.arcsort("ilabel"), []
    marked = mark(model, a)
    if marked is None:
        return a, lexicon, []
    t = lexicon_mod.lexicon(model, cache=cache, signed=True).copy()
    root = t.start()
    for j in range(len(marked.terminals)):
        t.add_arc(root, pynini.Arc(TERMINAL_BASE + j, model.vocab_size + 1 + j, one, root))
    return marked.fst, t.arcsort("ilabel"), marked.terminals
