"""Small pynini constructions shared by the modules: linear paths (string acceptors/transducers)."""

from __future__ import annotations

from collections.abc import Sequence

import pynini

from tokfst_cli.automata import utf8


def linear(ilabels: Sequence[int], olabels: Sequence[int] | None = None) -> pynini.Fst:
    """One path reading ``ilabels`` and writing ``olabels`` (default: the same; the shorter side is
    padded with epsilons). ``linear([])`` accepts only the empty string."""
    olabels = ilabels if olabels is None else olabels
    n = max(len(ilabels), len(olabels))
    f = pynini.Fst()
    one = pynini.Weight.one(f.weight_type())
    f.add_states(n + 1)
    f.set_start(0)
    f.set_final(n)
    for i in range(n):
        il = ilabels[i] if i < len(ilabels) else 0
        ol = olabels[i] if i < len(olabels) else 0
        f.add_arc(i, pynini.Arc(il, ol, one, i + 1))
    return f


def text_acceptor(text: str | bytes) -> pynini.Fst:
    """The UTF-8 bytes of ``text`` as an acceptor (byte b is label b + 1)."""
    data = text.encode("utf-8") if isinstance(text, str) else text
    return linear([b + 1 for b in data])


def ranges_acceptor(ranges: list[tuple[int, int]]) -> pynini.Fst:
    """Acceptor of the UTF-8 encodings of the code points in ``ranges`` (one or more bytes)."""
    f = pynini.Fst()
    one = pynini.Weight.one(f.weight_type())
    start, final = f.add_state(), f.add_state()
    f.set_start(start)
    f.set_final(final)
    inner: dict[tuple, int] = {}
    for seq in utf8.sequences(ranges):
        src = start
        for k, (lo, hi) in enumerate(seq):
            if k == len(seq) - 1:
                dst, fresh = final, True
            else:
                dst = inner.get(seq[: k + 1])
                fresh = dst is None
                if fresh:
                    dst = inner[seq[: k + 1]] = f.add_state()
            if fresh:
                for b in range(lo, hi + 1):
                    f.add_arc(src, pynini.Arc(b + 1, b + 1, one, dst))
            src = dst
    return f
