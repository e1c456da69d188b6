"""Output of stages S/C for decoders: the state -> allowed-token index, with coalescence (seed 003).

States with the same set of allowed tokens share one mask ("coalescence"); a state with a
single allowed token can be advanced without calling the model (seed 000 Sec. 7).

``constraint.load`` verifies the checksum and the structure (a file without ``sha256`` is still read).

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
    sha256                  sha256 of the canonical JSON of tokenizer, regex, initial, finals, masks, states
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

import pynini

from . import __version__
from .artifacts import FORMAT_VERSION
from .errors import LimitError
from .progress import report, stage
from .tokenizer import TokenizerModel

VERSION = FORMAT_VERSION


def build_index(fst: pynini.Fst, model: TokenizerModel, pattern: str, max_states: int | None = None,
                max_arcs: int | None = None) -> dict[str, Any]:
    """Export a deterministic token acceptor (labels = id + 1) as a coalesced index.

    The index has the acceptor's states and arcs, counted first: past ``max_states`` or
    ``max_arcs`` a LimitError is raised before any of it is built.
    """
    with stage("index export"):
        states = fst.num_states()
        if max_states is not None and states > max_states:
            raise LimitError("the index", "max_states", max_states, states)
        if max_arcs is not None:
            arcs = 0
            for s in fst.states():
                arcs += fst.num_arcs(s)
                if arcs > max_arcs:
                    raise LimitError("the index", "max_arcs", max_arcs)
        report(states)
        return _index(fst, model, pattern)


def _index(fst: pynini.Fst, model: TokenizerModel, pattern: str) -> dict[str, Any]:
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
    index = {
        "format": "tokfst-index",
        "version": VERSION,
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
    index["sha256"] = checksum(index)
    return index


CHECKED = ("tokenizer", "regex", "initial", "finals", "masks", "states")


def checksum(index: dict) -> str:
    """sha256 of the fields a decoder reads (canonical JSON), so damage is refused on load."""
    body = {k: index.get(k) for k in CHECKED}
    return hashlib.sha256(json.dumps(body, sort_keys=True, ensure_ascii=False, separators=(",", ":")).encode()).hexdigest()
