"""Stage C for BPE: derivations and rectangles of the implicit canonical BPE automaton (seed 000 Sec. 6.5).

A sequence is canonical iff its tokens are reachable and every adjacent pair (u, v) is, so
A_BPE is fixed by BANNED(u) = {v : BPE(text(u) text(v)) != [u, v]}.

Derivation. For a reachable token t, HF's merge trace of text(t) ends in one merge (x, y) -> t
at rank rc(t) (rc = -1 for a single character). Its right spine is y's right spine plus t, its
left spine x's left spine plus t: two forests, where a token's parent is its right (left)
operand. A trace is *monotone* when HF pops its merges in increasing (rank, position) order.

Rectangles. On text(u) text(v) with u, v monotone, a merge m = (a, b) of rank r fires across
the boundary iff a is on u's right spine, b on v's left spine, and
    rk_u(a) > max(r, rc(b))   and   rk_v(b) >= max(r, rc(a)),
where rk_u(a) is the rank at which u's derivation consumes a (infinite if a = u); ties go to
the leftmost pair, hence > on the left and >= on the right. (A cross pair is pushed when both
operands exist and pops before any pending merge of higher key; a lower-ranked merge created
late, as in Llama-2, fires at once.) Ordering each forest in post-order with children by
ascending consumption rank, each condition selects one interval, so
    BANNED = union over merges m of U_m x V_m
with U_m an interval of the right-spine order and V_m one of the left-spine order. Pairs that
involve a non-monotone or unreachable token are decided exactly by ``HfBpe`` on the text.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..tokenizer import TokenizerModel, strip_markers
from .hf import HfBpe


@dataclass
class Derivations:
    """Per token id: reachable, monotone, creation rank rc, left and right operand (-1 = none)."""

    reachable: np.ndarray
    monotone: np.ndarray
    rc: np.ndarray
    left: np.ndarray
    right: np.ndarray
    fallback: np.ndarray  # byte-fallback tokens <0xNN>: outside merges, handled by the UTF-8 rule


def model_text(model: TokenizerModel, tid: int) -> tuple[str, bool, bool]:
    """The text HF's model sees for a token, and whether it carries the continuing-subword
    prefix (word-internal start) and the end-of-word suffix (word end)."""
    return strip_markers(model.tokens[tid], model.options.get("continuing_subword_prefix") or "",
                         model.options.get("end_of_word_suffix") or "")


def derive(model: TokenizerModel, hf: HfBpe | None = None) -> Derivations:
    """HF's merge trace of every token's own text."""
    hf = hf or HfBpe(model)
    n = model.vocab_size
    reachable = np.zeros(n, bool)
    monotone = np.zeros(n, bool)
    fallback = np.zeros(n, bool)
    rc = np.full(n, -1, np.int64)
    left = np.full(n, -1, np.int64)
    right = np.full(n, -1, np.int64)
    byte_fb = bool(model.options.get("byte_fallback"))
    for tid, tok in enumerate(model.tokens):
        if not tok or tid in model.special_ids:
            continue
        if byte_fb and len(tok) == 6 and tok.startswith("<0x") and tok.endswith(">"):
            fallback[tid] = monotone[tid] = True  # a leaf: created by no merge (rc = -1)
            continue
        trace: list = []
        text, pre, suf = model_text(model, tid)
        try:
            out = hf.merge_all(hf.initial_symbols(text, prefix_first=pre, suffix_last=suf), trace)
        except Exception:  # noqa: BLE001 - a token HF cannot even start (no unk): unreachable
            continue
        if out != [tid] or tid == hf.unk_id:
            continue
        reachable[tid] = True
        keys = [(e.rank, e.pos) for e in trace]
        monotone[tid] = all(keys[i] < keys[i + 1] for i in range(len(keys) - 1))
        if trace:
            last = trace[-1]
            rc[tid], left[tid], right[tid] = last.rank, last.left, last.right
    return Derivations(reachable, monotone, rc, left, right, fallback)


@dataclass
class SpineOrder:
    """Post-order of a spine forest: order[k] = token, pos[token] = k, first[token] = subtree start."""

    order: np.ndarray
    pos: np.ndarray
    first: np.ndarray
    children: dict[int, list[int]]  # node -> children sorted by ascending rc


def spine_order(parent: np.ndarray, rc: np.ndarray, members: np.ndarray) -> SpineOrder:
    """Post-order the forest token -> parent (its right or left operand) over ``members``."""
    n = len(parent)
    children: dict[int, list[int]] = {}
    roots = []
    for t in np.flatnonzero(members):
        p = int(parent[t])
        if p >= 0 and members[p]:
            children.setdefault(p, []).append(int(t))
        else:
            roots.append(int(t))
    for kids in children.values():
        kids.sort(key=lambda c: (rc[c], c))
    order = []
    pos = np.full(n, -1, np.int64)
    first = np.full(n, -1, np.int64)
    for root in roots:
        stack = [(root, False)]
        while stack:
            node, done = stack.pop()
            if done:
                pos[node] = len(order)
                order.append(node)
                continue
            first[node] = len(order)
            stack.append((node, True))
            for c in reversed(children.get(node, ())):
                stack.append((c, False))
    return SpineOrder(np.array(order, np.int64), pos, first, children)


def _interval(so: SpineOrder, node: int, rc: np.ndarray, threshold: int, strict: bool) -> tuple[int, int]:
    """Positions of {t in subtree(node) : consumption rank of node on t's spine (>|>=) threshold}."""
    kids = so.children.get(node, ())
    lo = so.pos[node]
    for c in kids:  # ascending rc; the first qualifying child starts the interval
        if rc[c] > threshold or (not strict and rc[c] == threshold):
            lo = so.first[c]
            break
    return int(lo), int(so.pos[node])


@dataclass
class Rectangles:
    """BANNED among monotone reachable tokens: rows [u_lo, u_hi] x cols [v_lo, v_hi] (spine positions)."""

    right: SpineOrder
    left: SpineOrder
    boxes: np.ndarray  # (k, 4) int64: u_lo, u_hi, v_lo, v_hi


def rectangles(model: TokenizerModel, der: Derivations, hf: HfBpe) -> Rectangles:
    """One rectangle per effective merge (a, b) (a repeated pair keeps its last rank)."""
    mono = (der.reachable | der.fallback) & der.monotone
    right = spine_order(der.right, der.rc, mono)
    left = spine_order(der.left, der.rc, mono)
    boxes = []
    for (a, b), (r, _new) in hf.merges.items():
        if not (mono[a] and mono[b]):
            continue
        u_lo, u_hi = _interval(right, a, der.rc, max(r, int(der.rc[b])), strict=True)
        v_lo, v_hi = _interval(left, b, der.rc, max(r, int(der.rc[a])), strict=False)
        boxes.append((u_lo, u_hi, v_lo, v_hi))
    arr = np.array(boxes, np.int64).reshape(-1, 4)
    return Rectangles(right, left, arr[np.lexsort((arr[:, 2], arr[:, 0]))])
