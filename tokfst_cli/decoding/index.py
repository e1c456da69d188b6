"""Output of stages S/C for decoders: the state -> allowed-token index, with coalescence
(the structured-generation practical).

States with the same set of allowed tokens share one mask ("coalescence"); a state with a
single allowed token can be advanced without calling the model (Cognetta & Okazaki 2024 Sec. 7).

``constraint.load`` verifies the checksum and the structure (a file without ``sha256`` is still read).

The export reads the acceptor's arcs in bulk (:func:`tokfst_cli.automata.arrays.fst_arrays`) and
builds the index with numpy: arcs sorted per state (:func:`by_label`), masks shared by hashing
and then comparing each state's tokens (:func:`coalesce`), the checksum written from the
arrays (:func:`checksum_of_arrays`, equal to :func:`checksum`). A Python object is made per
token only for the JSON lists themselves.

Built with a prompt (token healing, ``healing.py``), the index also has the optional field
``healing``: {"prompt", "kept", "retokenized"}: the caller keeps the prompt's first tokens
``kept``, and ``initial`` is the state after them (``healing`` is not in the checksum;
``initial`` is).

With ``max_tokens`` N (Pitfalls 2025 App. B; ``filters.length``) the index is version 3 and has the
field ``max_tokens``: the states and masks are S's, and a decoder counts the tokens taken (a
token is allowed where S allows it and a final state stays within the tokens left:
``filters.length.CountedDecoder``); the checksum covers it.

With terminal labels (Koo et al. 2024 Sec. 2.5.1; ``terminals.py``) the index is version 2 and has
the field ``terminals``: a list of {"name": e.g. "<JSON_STRING:1+>", "mask": sorted token ids};
in masks and states, id vocab_size + j is terminal j, one token of its mask (a state's own
tokens first, then its terminals in order); the checksum covers ``terminals`` too.

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

import numpy as np
import pynini

from tokfst_cli.automata.arrays import FstArrays, fst_arrays
from tokfst_cli.errors import LimitError
from tokfst_cli.support.files import FORMAT_VERSION
from tokfst_cli.support.meta import __version__
from tokfst_cli.support.progress import report, stage
from tokfst_cli.tokenizer.model import TokenizerModel

VERSION = FORMAT_VERSION
TERMINALS_VERSION = 2  # an index with terminal labels (field "terminals"); version 1 readers refuse it
COUNTED_VERSION = 3  # an index with a token budget (field "max_tokens"); earlier readers refuse it
SMALL = 256  # below this many values, plain Python beats numpy's fixed costs


def build_index(fst: pynini.Fst, model: TokenizerModel, pattern: str, max_states: int | None = None,
                max_arcs: int | None = None, healing: dict | None = None, terminals: list = (),
                max_tokens: int | None = None, arrays: FstArrays | None = None) -> dict[str, Any]:
    """Export a deterministic token acceptor (labels = id + 1) as a coalesced index (``arrays``:
    its arcs, if read already).

    The index has the acceptor's states and arcs, counted first: past ``max_states`` or
    ``max_arcs`` a LimitError is raised before any of it is built. ``healing``: the optional
    field of that name (``healing.Healing.to_json``); ``max_tokens``: the token budget (version 3).
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
        index = _index(fst, model, pattern, terminals, max_tokens, arrays)
        if healing is not None:
            index["healing"] = healing
        return index


def _index(fst: pynini.Fst, model: TokenizerModel, pattern: str, terminals: list = (),
           max_tokens: int | None = None, arrays: FstArrays | None = None) -> dict[str, Any]:
    a = arrays if arrays is not None else fst_arrays(fst)
    offsets, labels, nexts = by_label(a.src, a.ilabel - 1, a.nextstate, len(a.final))
    mask_of, mask_first = coalesce(offsets, labels)
    counts = np.diff(offsets)
    mlabels, moff = rows(labels, offsets, mask_first)
    finals = np.flatnonzero(a.final)
    sizes = np.bincount(mask_of, minlength=len(mask_first))
    lab, mo, nxt, no = mlabels.tolist(), moff.tolist(), nexts.tolist(), offsets.tolist()
    index = {
        "format": "tokfst-index",
        "version": VERSION,
        "generator": f"tokfst {__version__}",
        "tokenizer": {"fingerprint": model.fingerprint, "source": model.source, "vocab_size": model.vocab_size},
        "regex": pattern,
        "initial": a.start,
        "finals": finals.tolist(),
        "masks": [lab[b:e] for b, e in zip(mo, mo[1:])],
        "states": [{"mask": k, "next": nxt[b:e]} for k, b, e in zip(mask_of.tolist(), no, no[1:])],
        "stats": {
            "states": len(counts),
            "arcs": len(nxt),
            "masks": len(mask_first),
            "states_in_shared_masks": int(sizes[sizes > 1].sum()),
            "single_token_states": int((counts == 1).sum()),
            "final_only_states": int((counts == 0).sum()),
        },
    }
    if terminals:  # version 2 (the checksum then covers them)
        index["version"] = TERMINALS_VERSION
        index["terminals"] = [{"name": t.name, "mask": np.flatnonzero(t.mask(model)).tolist()} for t in terminals]
    if max_tokens is not None:  # version 3 (the checksum then covers it)
        index["version"] = COUNTED_VERSION
        index["max_tokens"] = max_tokens
    index["sha256"] = checksum_of_arrays(index, finals, mlabels, moff, mask_of, nexts, offsets)
    return index


def rows(values: np.ndarray, offsets: np.ndarray, which: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Rows ``which`` of a CSR (values, offsets), as a CSR."""
    counts = offsets[which + 1] - offsets[which]
    out = np.zeros(len(which) + 1, np.int64)
    np.cumsum(counts, out=out[1:])
    return values[np.repeat(offsets[which] - out[:-1], counts) + np.arange(out[-1])], out


def by_label(src: np.ndarray, labels: np.ndarray, nexts: np.ndarray, num_states: int
             ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Arcs grouped by state (``src`` nondecreasing) as CSR: state offsets, and the labels and next
    states with each state's arcs sorted by (label, next state)."""
    offsets = np.zeros(num_states + 1, np.int64)
    np.cumsum(np.bincount(src, minlength=num_states), out=offsets[1:])
    if len(src) > 1 and ((src[1:] == src[:-1]) & (labels[1:] <= labels[:-1])).any():  # not yet sorted
        low, high = int(labels.min()), int(labels.max())
        key = src * (high - low + 1) + (labels - low) if num_states * (high - low + 1) < 1 << 62 else None
        order = np.argsort(key) if key is not None else None
        if order is None or (key[order][1:] == key[order][:-1]).any():  # a repeated label: by next state too
            order = np.lexsort((nexts, labels, src))
        labels, nexts = labels[order], nexts[order]
    return offsets, labels, nexts


_MIX = (np.uint64(0x9E3779B97F4A7C15), np.uint64(0xBF58476D1CE4E5B9), np.uint64(0x94D049BB133111EB))


def _mix(x: np.ndarray) -> np.ndarray:
    """splitmix64 of each value (uint64 arithmetic wraps)."""
    z = x.astype(np.uint64) * _MIX[0]
    z = (z ^ (z >> np.uint64(30))) * _MIX[1]
    z = (z ^ (z >> np.uint64(27))) * _MIX[2]
    return z ^ (z >> np.uint64(31))


def coalesce(offsets: np.ndarray, labels: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Coalescence (the structured-generation practical): per state the id of its allowed-token set, ids numbered
    by first use, and the first state of each set. Many arcs: states are grouped by a hash of their
    label sets in numpy, then every state is compared with its group's first state; few arcs,
    or a hash collision (never seen): the exact label tuples are grouped."""
    inverse = None
    if len(labels) >= SMALL:
        counts = np.diff(offsets)
        sums = np.concatenate(([np.uint64(0)], np.cumsum(_mix(labels + 1), dtype=np.uint64)))
        key = _mix(sums[offsets[1:]] - sums[offsets[:-1]] + counts.astype(np.uint64))
        _, first, inverse = np.unique(key, return_index=True, return_inverse=True)
        rep = first[inverse]
        arc_state = np.repeat(np.arange(len(counts)), counts)
        if not ((counts[rep] == counts).all() and (
                labels[offsets[rep[arc_state]] + np.arange(len(labels)) - offsets[arc_state]] == labels).all()):
            inverse = None
    if inverse is None:
        ids: dict[tuple[int, ...], int] = {}
        lab, off = labels.tolist(), offsets.tolist()
        inverse = np.array([ids.setdefault(tuple(lab[b:e]), len(ids)) for b, e in zip(off, off[1:])], np.int64)
        first = np.unique(inverse, return_index=True)[1]
    order = np.argsort(first, kind="stable")
    rank = np.empty(len(order), np.int64)
    rank[order] = np.arange(len(order))
    return rank[inverse.reshape(-1)], first[order]


CHECKED = ("tokenizer", "regex", "initial", "finals", "masks", "states")
OPTIONAL = ("terminals", "max_tokens")  # checked where present


def checksum(index: dict) -> str:
    """sha256 of the fields a decoder reads (canonical JSON), so damage is refused on load; with
    terminal labels or a token budget, also ``terminals`` or ``max_tokens``."""
    body = {k: index.get(k) for k in CHECKED + tuple(k for k in OPTIONAL if k in index)}
    return hashlib.sha256(json.dumps(body, sort_keys=True, ensure_ascii=False,
                                     separators=(",", ":")).encode()).hexdigest()


def _json(value: Any) -> bytes:
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":")).encode()


def checksum_of_arrays(index: dict, finals: np.ndarray, labels: np.ndarray, loff: np.ndarray, mask_of: np.ndarray,
                       nexts: np.ndarray, noff: np.ndarray) -> str:
    """:func:`checksum` of ``index``, whose finals, masks and states these arrays hold (masks and
    next states as CSR; states ``{"mask", "next"}`` only). A large index's canonical JSON is
    written from the arrays, its integer lists by :func:`decimal` (json.dumps costs ~0.1 µs per
    integer); a small one's by json.dumps."""
    if len(labels) + len(nexts) < 8 * SMALL or "terminals" in index:
        return checksum(index)
    states = (b'{"mask":%d,"next":%b}' % (k, t) for k, t in zip(mask_of.tolist(), _lists(nexts, noff)))
    body = b"".join([b'{"finals":', _lists(finals, np.array([0, len(finals)]))[0], b',"initial":',
                     _json(index["initial"]), b',"masks":[', b",".join(_lists(labels, loff)), b"]",
                     b',"max_tokens":%b' % _json(index["max_tokens"]) if "max_tokens" in index else b"", b',"regex":',
                     _json(index["regex"]), b',"states":[', b",".join(states), b'],"tokenizer":',
                     _json(index["tokenizer"]), b"}"])
    return hashlib.sha256(body).hexdigest()


def _lists(values: np.ndarray, offsets: np.ndarray) -> list[bytes]:
    """The JSON text ``[a,b,...]`` of each row of a CSR of integers."""
    text, at = decimal(values)
    b = at[offsets].tolist()
    return [b"[" + text[x + 1:y] + b"]" for x, y in zip(b, b[1:])]


_TRIPLES = np.array([list(b"%03d" % i) for i in range(1000)], np.uint8)  # "000" .. "999"


def decimal(values: np.ndarray) -> tuple[bytes, np.ndarray]:
    """``,v0,v1,...``: integers as JSON text, each led by a comma, and where each starts (n + 1 offsets).

    Vectorized: three digits at a time from a table into fixed-width cells, then the leading
    zeros dropped (``np.compress``)."""
    v = np.asarray(values, np.int64)
    if len(v) < SMALL or v.min() < 0:  # few (numpy's fixed costs dominate), or negative (never in an index)
        items = [b",%d" % x for x in v.tolist()]
        return b"".join(items), np.concatenate(([0], np.cumsum([len(x) for x in items]))).astype(np.int64)
    top = int(v.max()) if len(v) else 0
    chunks = (len(str(top)) + 2) // 3
    width = 3 * chunks + 1
    cells = np.empty((len(v), width), np.uint8)
    cells[:, 0] = ord(",")
    rest = v.astype(np.int32) if top < 1 << 31 else v.copy()
    for c in range(chunks, 0, -1):
        cells[:, 3 * c - 2:3 * c + 1] = _TRIPLES[rest % 1000]
        rest //= 1000
    digits = np.searchsorted(10 ** np.arange(1, min(width - 1, 19), dtype=np.int64), v, side="right") + 1
    keep = np.arange(width) >= width - digits[:, None]
    keep[:, 0] = True
    at = np.zeros(len(v) + 1, np.int64)
    np.cumsum(digits + 1, out=at[1:])
    return np.compress(keep.reshape(-1), cells.reshape(-1)).tobytes(), at
