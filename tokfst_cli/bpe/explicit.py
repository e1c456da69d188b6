"""Stage C for BPE, Eq. 5: A_BPE as an explicit OpenFst acceptor (Cognetta & Okazaki 2024 Sec. 6.4-6.5).

Built from the implicit form: one state per class (tokens with the same BANNED row, Cognetta & Okazaki 2024
Sec. 6.5: delta(q_u, v) = q_v unless v in BANNED(u)), paired with the byte-fallback DFA state,
plus the start state. Only for vocabularies where it fits under ``max_arcs``.
"""

from __future__ import annotations

import numpy as np
import pynini

from tokfst_cli.automata.symbols import token_table
from tokfst_cli.bpe.implicit import ImplicitBpe
from tokfst_cli.errors import LimitError
from tokfst_cli.tokenizer.model import TokenizerModel

START = -1


def successors(imp: ImplicitBpe, cls: int, rep: int, fb: int) -> np.ndarray:
    """Bool mask of tokens allowed after a token of class ``cls`` (representative ``rep``) in fallback state fb."""
    ok = imp.allowed & fallback_ok(imp, fb)
    if cls == START:
        ok &= imp.may_start
    else:
        ok &= ~imp.banned_row(rep)
    return ok


def fallback_ok(imp: ImplicitBpe, fb: int) -> np.ndarray:
    """Tokens the byte-fallback DFA lets through from state fb: inside a character only fallback
    tokens, and a fallback token only where the DFA moves."""
    is_fb = imp.fb_byte >= 0
    ok = is_fb.copy() if fb != 0 else np.ones(imp.vocab_size, bool)
    if is_fb.any():
        ok &= ~is_fb | (imp.fb_delta[fb, np.clip(imp.fb_byte, 0, 255)] >= 0)
    return ok


def ignore_merges_correction(f: pynini.Fst, imp: ImplicitBpe, single_ok) -> pynini.Fst:
    """With ignore_merges, a word spelled exactly like a token w is [w]: remove the merge
    tokenization of text(w) and add [w] (where ``single_ok(w)``), for every token w merges never make."""
    replaced = imp.derived.get("replaced")
    if not replaced:
        return f
    one = pynini.Weight.one(f.weight_type())
    drop = pynini.Fst()
    start = drop.add_state()
    drop.set_start(start)
    for seq in replaced.values():
        if len(seq) < 2:
            continue
        q = start
        for t in seq:
            nxt = drop.add_state()
            drop.add_arc(q, pynini.Arc(t + 1, t + 1, one, nxt))
            q = nxt
        drop.set_final(q)
    drop = pynini.determinize(drop).minimize().arcsort("ilabel")
    out = pynini.difference(f.copy().arcsort("olabel"), drop) if drop.num_states() else f.copy()
    add = pynini.Fst()
    a, b = add.add_state(), add.add_state()
    add.set_start(a)
    add.set_final(b)
    for w in replaced:
        if single_ok(w):
            add.add_arc(a, pynini.Arc(w + 1, w + 1, one, b))
    out = pynini.union(out, add).rmepsilon()
    return pynini.determinize(out).minimize()


def explicit_automaton(imp: ImplicitBpe, model: TokenizerModel, max_arcs: int = 5_000_000) -> pynini.Fst:
    """The explicit A_BPE acceptor over token labels (id + 1), trimmed."""
    classes = imp.classes()
    reps: dict[int, int] = {}
    for t in np.flatnonzero(classes >= 0):
        reps.setdefault(int(classes[t]), int(t))
    f = pynini.Fst()
    one = pynini.Weight.one(f.weight_type())
    ids: dict[tuple[int, int], int] = {}
    queue = [(START, 0)]
    ids[(START, 0)] = f.add_state()
    f.set_start(0)
    arcs = 0
    while queue:
        cls, fb = queue.pop()
        src = ids[(cls, fb)]
        rep = reps.get(cls, -1)
        if fb == 0 and imp.fb_final[0] and (cls == START or imp.may_end[rep]):
            f.set_final(src)
        nxt = successors(imp, cls, rep, fb)
        targets = np.flatnonzero(nxt)
        arcs += len(targets)
        if arcs > max_arcs:
            raise LimitError("A_BPE", "max_arcs", max_arcs, remedy="implicit")
        for v in targets:
            b = int(imp.fb_byte[v])
            key = (int(classes[v]), int(imp.fb_delta[fb, b]) if b >= 0 else 0)
            dst = ids.get(key)
            if dst is None:
                dst = ids[key] = f.add_state()
                queue.append(key)
            f.add_arc(src, pynini.Arc(int(v) + 1, int(v) + 1, one, dst))
    f = ignore_merges_correction(f.connect(), imp, lambda w: True)
    table = token_table(model)
    f.set_input_symbols(table).set_output_symbols(table)
    return f


def intersect(agnostic: pynini.Fst, abpe: pynini.Fst) -> pynini.Fst:
    """Eq. 5: MIN(PROJ(A o T)) intersected with the explicit A_BPE, trimmed and minimized."""
    if abpe.properties(pynini.I_LABEL_SORTED, True) != pynini.I_LABEL_SORTED:  # sorting costs O(arcs) each time
        abpe.arcsort("ilabel")
    return pynini.intersect(agnostic.copy().arcsort("olabel"), abpe).connect().minimize()


def intersect_marked(marked: pynini.Fst, abpe: pynini.Fst, marker: int) -> pynini.Fst:
    """Eq. 5 per pre-token: S_M intersected with A_BPE (boundary A_BPE)*, the boundary erased, then
    determinized and minimized (Pitfalls 2025 Sec. 3.3). ignore_merges' whole-word rule is a
    correction on one word, so such tokenizers go through the implicit product instead."""
    per_word = abpe.copy()
    one = pynini.Weight.one(per_word.weight_type())
    zero = pynini.Weight.zero(per_word.weight_type())
    for s in list(per_word.states()):
        if per_word.final(s) != zero:
            per_word.add_arc(s, pynini.Arc(marker, marker, one, per_word.start()))
    per_word.arcsort("ilabel")
    out = pynini.intersect(marked.copy().arcsort("olabel"), per_word).connect()
    out.relabel_pairs(ipairs=[(marker, 0)], opairs=[(marker, 0)]).rmepsilon()
    return pynini.determinize(out).minimize()
