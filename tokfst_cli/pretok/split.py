"""Stage P for BPE: a Split pattern's pre-token cut as a transducer (Pitfalls 2025 Sec. 3.1).

Hugging Face cuts a text with ``find_iter`` under Oniguruma; :mod:`.pattern` compiles the pattern
to a priority NFA, :mod:`.marked` builds the deterministic automaton of the marked texts (a typed
marker before every piece). Here the behaviour of HF's ``SplitDelimiterBehavior`` (Isolated,
Removed, MergedWithPrevious, MergedWithNext, Contiguous; invert) or a Replace normalizer's content
is a small transducer on the typed markers, and the composition with marker insertion is P: text
bytes -> HF's pieces with ``symbols.MARKER`` between them (:func:`split_transducer`).
"""

from __future__ import annotations

import numpy as np
import pynini

from tokfst_cli.automata.arrays import fst_arrays, fst_from_arrays
from tokfst_cli.automata.fsts import linear, text_acceptor
from tokfst_cli.automata.symbols import MARKER, marked_pieces
from tokfst_cli.errors import InputError, InternalError, UsageError
from tokfst_cli.pretok.marked import TYPED_GAP, TYPED_MATCH, marked_language

BEHAVIORS = ("isolated", "removed", "merged_with_previous", "merged_with_next", "contiguous")


def behavior_transducer(behavior: str = "isolated", invert: bool = False, content: bytes | None = None) -> pynini.Fst:
    """Typed pieces -> HF's pieces: where MARKER goes, which pieces are dropped (HF's SplitDelimiterBehavior).

    Delimiters are the matches (the gaps with ``invert``). ``content`` replaces every delimiter
    and writes no marker at all (the Replace normalizer)."""
    if behavior not in BEHAVIORS:
        raise InputError(f"Split behavior {behavior!r} is not one of {', '.join(BEHAVIORS)}",
                         "use a behaviour HF defines")
    one = pynini.Weight.one("tropical")
    f = pynini.Fst()
    # states: (type of the current piece: None/True(delimiter)/False, anything written yet)
    ids: dict[tuple, int] = {}

    def state(key: tuple) -> int:
        if key not in ids:
            ids[key] = f.add_state()
            f.set_final(ids[key])
        return ids[key]

    f.set_start(state((None, False)))
    todo = [(None, False)]
    seen = set(todo)
    while todo:
        prev, written = key = todo.pop()
        src = ids[key]
        for marker, is_match in ((TYPED_MATCH, True), (TYPED_GAP, False)):
            delim = is_match != invert
            out = _marker_output(behavior, prev, delim, written) if content is None else []
            if content is not None and delim:
                out = [b + 1 for b in content]
            nxt = (delim, written or bool(out) or not (delim and (behavior == "removed" or content is not None)))
            dst = state(nxt)
            _path(f, src, marker, out, dst, one)
            if nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
        if prev is not None:
            drop = prev and (behavior == "removed" or content is not None)
            for b in range(256):
                f.add_arc(src, pynini.Arc(b + 1, 0 if drop else b + 1, one, src))
    return f


def _marker_output(behavior: str, prev, delim: bool, written: bool) -> list[int]:
    if prev is None:
        return []
    cut = {"isolated": True,
           "removed": not delim and written,
           "merged_with_previous": not (delim and prev is False),
           "merged_with_next": not (not delim and prev is True),
           "contiguous": delim != prev}[behavior]
    return [MARKER] if cut else []


def _path(f: pynini.Fst, src: int, ilabel: int, olabels: list[int], dst: int, one) -> None:
    """src --ilabel:o1--> ... --> dst writing ``olabels`` (epsilon output when empty)."""
    olabels = olabels or [0]
    cur = src
    for k, o in enumerate(olabels):
        nxt = dst if k == len(olabels) - 1 else f.add_state()
        f.add_arc(cur, pynini.Arc(ilabel if k == 0 else 0, o, one, nxt))
        cur = nxt


def insert_typed_markers() -> pynini.Fst:
    """Bytes, with typed markers inserted anywhere (the input side of a marked language)."""
    return pynini.union(*(_label(b + 1) for b in range(256)), pynini.cross(pynini.accep(""), _label(TYPED_MATCH)),
                        pynini.cross(pynini.accep(""), _label(TYPED_GAP))).closure().optimize()


def split_transducer(pattern: str, behavior: str = "isolated", invert: bool = False, content: bytes | None = None,
                     max_states: int = 200_000, extra: dict | None = None) -> pynini.Fst:
    """P for one Split: UTF-8 text -> HF's pieces, ``symbols.MARKER`` between them (functional)."""
    marked = marked_language(pattern, max_states, extra)
    typed = pynini.compose(insert_typed_markers().arcsort("olabel"), marked.arcsort("ilabel"))
    return pynini.compose(typed.arcsort("olabel"), behavior_transducer(behavior, invert, content).arcsort("ilabel")
                          ).connect()


def _label(lab: int) -> pynini.Fst:
    return linear([lab])


def pieces(p: pynini.Fst, text: str) -> list[str]:
    """:func:`apply` for a P known to be functional (built by :mod:`.build`), in bulk: the text's
    acceptor from arrays, one composition, one path of it (all its paths write the same pieces),
    its output labels read as arrays. UsageError when the text is outside P's domain."""
    data = np.frombuffer(text.encode("utf-8"), np.uint8).astype(np.int64) + 1
    n = len(data)
    states = np.arange(n, dtype=np.int64)
    acc = fst_from_arrays(n + 1, 0, np.arange(n + 1) == n, states, data, data, states + 1)
    out = pynini.compose(acc, p, connect=True)
    if out.num_states() == 0:
        raise UsageError(f"P has no output for {text[:40]!r}: the text is outside its domain")
    path = pynini.shortestpath(out).topsort()
    labels = fst_arrays(path).olabel
    return marked_pieces(labels[labels != 0].tolist())


def apply(p: pynini.Fst, text: str) -> list[str]:
    """The pieces P cuts ``text`` into (the unique output path)."""
    out = pynini.determinize(pynini.compose(text_acceptor(text), p).project("output").rmepsilon()).minimize()
    labels, state, zero = [], out.start(), pynini.Weight.zero(out.weight_type())
    while state != pynini.NO_STATE_ID:
        arcs = list(out.arcs(state))
        final = out.final(state) != zero
        if len(arcs) + final != 1:
            raise InternalError(f"P has {'no' if not arcs and not final else 'several'} outputs for {text!r}")
        if final:
            break
        labels.append(arcs[0].olabel)
        state = arcs[0].nextstate
    if state == pynini.NO_STATE_ID:
        raise UsageError(f"P has no output for {text!r}: the text is outside its domain")
    return marked_pieces(labels)
