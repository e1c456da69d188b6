"""Output of stages S/C for decoders: the state -> allowed-token index, with coalescence (seed 003).

States with the same set of allowed tokens share one mask ("coalescence"); a state with a
single allowed token can be advanced without calling the model (seed 000 Sec. 7).

Format ``tokfst-index`` version 1 (JSON):
    format, version         "tokfst-index", 1
    generator               "tokfst <version>"
    tokenizer               {fingerprint, source, vocab_size}
    regex                   the pattern
    initial                 initial state number
    finals                  sorted final states
    masks                   list of masks; each a sorted list of allowed token ids
    states                  per state: {"mask": index into masks, "next": [next state per token of the mask]}
    stats                   {states, arcs, masks, states_in_shared_masks, single_token_states, final_only_states}
"""

from __future__ import annotations

from typing import Any

import pynini

from . import __version__
from .artifacts import FORMAT_VERSION
from .tokenizer import TokenizerModel


def build_index(fst: pynini.Fst, model: TokenizerModel, pattern: str) -> dict[str, Any]:
    """Export a deterministic token acceptor (labels = id + 1) as a coalesced index."""
    zero = pynini.Weight.zero(fst.weight_type())
    mask_ids: dict[tuple[int, ...], int] = {}
    masks: list[list[int]] = []
    states: list[dict[str, Any]] = []
    finals: list[int] = []
    group_size: dict[int, int] = {}
    for s in fst.states():
        pairs = sorted((arc.ilabel - 1, arc.nextstate) for arc in fst.arcs(s))
        key = tuple(t for t, _ in pairs)
        k = mask_ids.get(key)
        if k is None:
            k = mask_ids[key] = len(masks)
            masks.append(list(key))
        group_size[k] = group_size.get(k, 0) + 1
        states.append({"mask": k, "next": [n for _, n in pairs]})
        if fst.final(s) != zero:
            finals.append(s)
    shared = sum(n for n in group_size.values() if n > 1)
    return {
        "format": "tokfst-index",
        "version": FORMAT_VERSION,
        "generator": f"tokfst {__version__}",
        "tokenizer": {"fingerprint": model.fingerprint, "source": model.source, "vocab_size": model.vocab_size},
        "regex": pattern,
        "initial": fst.start(),
        "finals": finals,
        "masks": masks,
        "states": states,
        "stats": {
            "states": len(states),
            "arcs": sum(len(st["next"]) for st in states),
            "masks": len(masks),
            "states_in_shared_masks": shared,
            "single_token_states": sum(1 for st in states if len(st["next"]) == 1),
            "final_only_states": sum(1 for st in states if not st["next"]),
        },
    }
