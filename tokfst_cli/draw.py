"""Drawings of automata with Graphviz (seed 000 Fig. 3, Sec. 5; DESIGN.md, ``tokfst draw``).

``to_dot`` turns any Fst into dot source: states left to right in id order, an arrow into the
start state, finals as double circles, arc labels from the embedded symbol tables (``in:out``
for transducers, one label for acceptors, ε for epsilon). Arcs between the same two states
share one edge; past ``max_arcs`` arcs a state's remaining arcs fold into one "+N more" edge.
``stages`` builds the five panels of Fig. 3: A, T, A o T, PROJ(A o T), MIN(PROJ(A o T)).
"""

from __future__ import annotations

from collections.abc import Sequence

import graphviz
import pynini

from . import lexicon
from .errors import InputError, TokfstError
from .promote import promote
from .regex import compile_regex
from .tokenizer import from_vocab

FORMATS = ("dot", "svg", "pdf", "png")
BINARY_FORMATS = ("pdf", "png")
EPSILON = "ε"
FOLD_NODE = "\N{HORIZONTAL ELLIPSIS}"
PER_LINE = 6  # labels per line of a grouped edge label
STAGE_CAPTIONS = {
    "a": "(a) A: character automaton",
    "b": "(b) T: character-to-subword transducer",
    "c": "(c) A \N{RING OPERATOR} T",
    "d": "(d) PROJ(A \N{RING OPERATOR} T)",
    "e": "(e) MIN(PROJ(A \N{RING OPERATOR} T))",
}


def _namer(table: pynini.SymbolTableView | None):
    """label -> display text: the symbol name (already ``symbols.escape``d), ε, or the number."""

    def name(label: int) -> str:
        if label == 0:
            return EPSILON
        text = table.find(label) if table is not None else ""
        return text if text else str(label)

    return name


def _is_acceptor(fst: pynini.Fst) -> bool:
    """Input label == output label on every arc, and no two differently named symbol tables."""
    isyms, osyms = fst.input_symbols(), fst.output_symbols()
    if isyms is not None and osyms is not None and isyms.name() != osyms.name():
        return False
    return all(a.ilabel == a.olabel for s in fst.states() for a in fst.arcs(s))


def _literal(text: str) -> str:
    """``text`` made literal for Graphviz: backslashes doubled, never read as an HTML label."""
    return graphviz.escape(text)


def _edge_label(parts: Sequence[str], more: int = 0) -> str:
    """Escaped labels, comma-separated, ``PER_LINE`` to a line, then "+N more" if arcs were folded."""
    escaped = [_literal(p) for p in parts]
    lines = [", ".join(escaped[i:i + PER_LINE]) for i in range(0, len(escaped), PER_LINE)]
    if more:
        lines.append(f"+{more} more")
    return graphviz.nohtml("\\n".join(lines))


def to_dot(fst: pynini.Fst, title: str | None = None, max_arcs: int = 12) -> str:
    """Dot source for ``fst`` (rankdir=LR, finals doublecircle, at most ``max_arcs`` arcs per state)."""
    if max_arcs < 1:
        raise InputError(f"--max-arcs must be at least 1, not {max_arcs}", "give --max-arcs 1 or more")
    one = str(pynini.Weight.one(fst.weight_type()))
    zero = str(pynini.Weight.zero(fst.weight_type()))
    iname, oname = _namer(fst.input_symbols()), _namer(fst.output_symbols())
    acceptor = _is_acceptor(fst)

    def arc_text(arc: pynini.Arc) -> str:
        text = iname(arc.ilabel) if acceptor else f"{iname(arc.ilabel)}:{oname(arc.olabel)}"
        weight = str(arc.weight)
        return text if weight == one else f"{text}/{weight}"

    g = graphviz.Digraph("fst", graph_attr={"rankdir": "LR"},
                         node_attr={"shape": "circle", "fontname": "DejaVu Sans", "fontsize": "12"},
                         edge_attr={"fontname": "DejaVu Sans", "fontsize": "11"})
    if title:
        g.attr(label=_literal(title), labelloc="t", fontname="DejaVu Sans", fontsize="14")
    start = fst.start()
    if start == pynini.NO_STATE_ID:
        g.node("empty", label="(no start state)", shape="plaintext")
        return g.source
    g.node("start", label="", shape="none", width="0", height="0")
    for s in sorted(fst.states()):
        final = str(fst.final(s))
        label = str(s) if final in (one, zero) else f"{s}/{final}"
        g.node(str(s), label=_literal(label), shape="doublecircle" if final != zero else "circle")
    g.edge("start", str(start))
    for s in sorted(fst.states()):
        arcs = sorted(fst.arcs(s), key=lambda a: (a.ilabel, a.olabel, a.nextstate))
        shown, folded = arcs[:max_arcs], arcs[max_arcs:]
        groups: dict[int, list[str]] = {}
        for arc in shown:
            groups.setdefault(arc.nextstate, []).append(arc_text(arc))
        targets = {a.nextstate for a in folded}
        lone = next(iter(targets)) if len(targets) == 1 else None
        for dst, parts in groups.items():
            more = len(folded) if dst == lone else 0
            g.edge(str(s), str(dst), label=_edge_label(parts, more))
        if folded and lone is not None and lone not in groups:
            g.edge(str(s), str(lone), label=_edge_label([], len(folded)), style="dashed")
        elif folded and lone is None:
            fold = f"more{s}"
            g.node(fold, label=FOLD_NODE, shape="plaintext")
            g.edge(str(s), fold, label=f"+{len(folded)} more\\n(to {len(targets)} states)", style="dashed")
    return g.source


def render(dot_source: str, fmt: str) -> bytes:
    """``dot_source`` as dot (its UTF-8 text), svg, pdf or png, laid out by Graphviz's ``dot``."""
    if fmt not in FORMATS:
        raise InputError(f"unknown drawing format {fmt!r}", f"use one of {', '.join(FORMATS)}")
    if fmt == "dot":
        return dot_source.encode("utf-8")
    try:
        return graphviz.Source(dot_source).pipe(format=fmt)
    except graphviz.ExecutableNotFound:
        raise TokfstError("Graphviz's 'dot' program was not found on PATH",
                          "install Debian's graphviz package (apt-get install graphviz) or use --format dot"
                          ) from None
    except graphviz.CalledProcessError as e:
        detail = (e.stderr or b"").decode("utf-8", "replace").strip().splitlines()
        raise TokfstError(f"Graphviz's dot failed to render {fmt}: {detail[0] if detail else e}",
                          "use --format dot to inspect the source") from None


def parse_vocab(text: str) -> list[str]:
    """The pieces of ``--vocab a,b,ab`` (split on commas, kept verbatim)."""
    return text.split(",")


def vocab_lexicon(pieces: list[str]) -> pynini.Fst:
    """T of a tiny vocabulary (seed 000 Fig. 3b): bytes in, token names out."""
    return lexicon.build(from_vocab(pieces))


def stages(pattern: str, pieces: list[str], max_states: int = 1_000_000) -> dict[str, pynini.Fst]:
    """The five panels of seed 000 Fig. 3 for ``pattern`` and the vocabulary ``pieces``.

    a: A, the minimal byte acceptor of the pattern; b: T, the lexicon; c: A o T; d: its output
    projection PROJ(A o T), epsilons kept; e: MIN(PROJ(A o T)) as ``promote`` computes it.
    """
    model = from_vocab(pieces)
    automaton = compile_regex(pattern, max_states=max_states)
    t = lexicon.build(model)
    a = automaton.fst.copy().arcsort("olabel")
    composed = pynini.compose(a, t, connect=True)
    composed.set_input_symbols(a.input_symbols()).set_output_symbols(t.output_symbols())
    projected = composed.copy().project("output")
    projected.set_input_symbols(t.output_symbols()).set_output_symbols(t.output_symbols())
    minimal = promote(model, automaton, t, max_states=max_states, force_minimize=True).fst
    return {"a": automaton.fst, "b": t, "c": composed, "d": projected, "e": minimal}
