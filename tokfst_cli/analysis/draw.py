"""Drawings of the pipeline's automata with Graphviz (Cognetta & Okazaki 2024 Figs. 3 and 4: A, T, A o T, S).

``to_dot`` turns any Fst into dot source: states left to right in id order, an arrow into the
start state, finals as double circles, arc labels from the embedded symbol tables (``in:out``
for transducers, one label for acceptors, ε for epsilon). Arcs between the same two states
share one edge; past ``max_arcs`` arcs a state's remaining arcs fold into one "+N more" edge;
chosen states and arcs can be drawn dashed and red.
``stages`` builds the five panels of Fig. 3: A, T, A o T, PROJ(A o T), MIN(PROJ(A o T));
``maxmatch_stages`` those of Fig. 4: A, T_Aho (with its phi arcs), T, MIN(PROJ(A o T_Aho)),
MIN(PROJ(A o T)), the last with its non-greedy states and arcs dashed red (``not_greedy``).
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

import graphviz
import pynini

from tokfst_cli.automata.symbols import UNKSYM, byte_table, token_table
from tokfst_cli.errors import InputError, TokfstError
from tokfst_cli.maxmatch.taho import Tries, maxmatch_transducer
from tokfst_cli.promotion import lexicon
from tokfst_cli.promotion.promote import promote
from tokfst_cli.support.progress import stage
from tokfst_cli.text.regex import compile_regex
from tokfst_cli.tokenizer.model import from_vocab

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
MAXMATCH_CAPTIONS = {
    "a": "(a) A: character automaton",
    "b": "(b) T_Aho: MaxMatch-preserving transducer (\N{GREEK SMALL LETTER PHI}: failure arc)",
    "c": "(c) T: tokenization-agnostic transducer",
    "d": "(d) MIN(PROJ(A \N{RING OPERATOR} T_Aho))",
    "e": "(e) MIN(PROJ(A \N{RING OPERATOR} T)), not greedy: dashed red",
}
PHI = "\N{GREEK SMALL LETTER PHI}"
PHI_LABEL = UNKSYM + 1  # after the bytes (1-256) and maxmatch's MARKER and UNKSYM
HIGHLIGHT = {"style": "dashed", "color": "red", "fontcolor": "red"}
Arc = tuple[int, int, int, int]  # (state, ilabel, olabel, nextstate)


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


def to_dot(fst: pynini.Fst, title: str | None = None, max_arcs: int = 12,
           red_states: Collection[int] = (), red_arcs: Collection[Arc] = ()) -> str:
    """Dot source for ``fst`` (rankdir=LR, finals doublecircle, at most ``max_arcs`` arcs per state).

    ``red_states`` and ``red_arcs`` (state, ilabel, olabel, nextstate) are drawn dashed and red;
    they never share an edge with other arcs.
    """
    if max_arcs < 1:
        raise InputError(f"max_arcs must be at least 1, not {max_arcs}", "draw at least one arc per state")
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
        g.node(str(s), label=_literal(label), shape="doublecircle" if final != zero else "circle",
               **(HIGHLIGHT if s in red_states else {}))
    g.edge("start", str(start))
    for s in sorted(fst.states()):
        arcs = sorted(fst.arcs(s), key=lambda a: (a.ilabel, a.olabel, a.nextstate))
        shown, folded = arcs[:max_arcs], arcs[max_arcs:]
        groups: dict[tuple[int, bool], list[str]] = {}
        for arc in shown:
            red = (s, arc.ilabel, arc.olabel, arc.nextstate) in red_arcs
            groups.setdefault((arc.nextstate, red), []).append(arc_text(arc))
        targets = {a.nextstate for a in folded}
        lone = next(iter(targets)) if len(targets) == 1 else None
        for (dst, red), parts in groups.items():
            more = len(folded) if dst == lone and not red else 0
            g.edge(str(s), str(dst), label=_edge_label(parts, more), **(HIGHLIGHT if red else {}))
        if folded and lone is not None and (lone, False) not in groups:
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
        with stage(f"Graphviz's dot ({fmt})"):
            return graphviz.Source(dot_source).pipe(format=fmt)
    except graphviz.ExecutableNotFound:
        raise TokfstError("Graphviz's 'dot' program was not found on PATH",
                          "install Debian's graphviz package (apt-get install graphviz) or draw dot",
                          hint="graphviz") from None
    except graphviz.CalledProcessError as e:
        detail = (e.stderr or b"").decode("utf-8", "replace").strip().splitlines()
        raise TokfstError(f"Graphviz's dot failed to render {fmt}: {detail[0] if detail else e}",
                          "draw dot to inspect the source", hint="draw-format") from None


def parse_vocab(text: str) -> list[str]:
    """The pieces of ``--vocab a,b,ab`` (split on commas, kept verbatim)."""
    return text.split(",")


def vocab_lexicon(pieces: list[str]) -> pynini.Fst:
    """T of a tiny vocabulary (Cognetta & Okazaki 2024 Fig. 3b): bytes in, token names out."""
    return lexicon.build(from_vocab(pieces))


def stages(pattern: str, pieces: list[str], max_states: int = 1_000_000) -> dict[str, pynini.Fst]:
    """The five panels of Cognetta & Okazaki 2024 Fig. 3 for ``pattern`` and the vocabulary ``pieces``.

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


def aho_phi_form(pieces: list[str]) -> pynini.Fst:
    """T_Aho of a plain vocabulary as Cognetta & Okazaki 2024 Alg. 8 draws it: trie arcs c:ε, failure arcs φ:w.

    Every piece serves at every position (no "##"; the shared
    :class:`~tokfst_cli.maxmatch.taho.Tries`). A node's failure pops F(v) are a chain of φ arcs
    ending at f(v); the root is the start and the only final state (Fig. 4b). The φ label
    (``PHI_LABEL``) only exists for drawing: pynini cannot compose with it.
    """
    model = from_vocab(pieces)
    tries = Tries(model, shared=True)
    f = pynini.Fst()
    one = pynini.Weight.one(f.weight_type())
    f.add_states(len(tries.goto))
    f.set_start(0)
    f.set_final(0)
    for v, children in enumerate(tries.goto):
        for c, child in children.items():
            f.add_arc(v, pynini.Arc(c + 1, 0, one, child))
        if tries.fail[v] < 0:
            continue
        src = v
        for k, tok in enumerate(tries.pops[v]):
            dst = tries.fail[v] if k == len(tries.pops[v]) - 1 else f.add_state()
            f.add_arc(src, pynini.Arc(PHI_LABEL, tok + 1, one, dst))
            src = dst
    isyms = byte_table()
    isyms.add_symbol(PHI, PHI_LABEL)
    f.set_input_symbols(isyms)
    f.set_output_symbols(token_table(model))
    return f


def _token_dfa(automaton: pynini.Fst, transducer: pynini.Fst, table: pynini.SymbolTable) -> pynini.Fst:
    """MIN(PROJ(A o T')) for any character-to-subword transducer T', determinized.

    T_Aho emits a token only once the next byte (or the end) shows it is the longest match, so
    Lemma 1 does not apply and PROJ(A o T_Aho) needs determinization.
    """
    c = pynini.compose(automaton.copy().arcsort("olabel"), transducer, connect=True)
    c.project("output").rmepsilon()
    out = pynini.determinize(c).minimize()
    return out.set_input_symbols(table).set_output_symbols(table)


def maxmatch_stages(pattern: str, pieces: list[str], max_states: int = 1_000_000) -> dict[str, pynini.Fst]:
    """The five panels of Cognetta & Okazaki 2024 Fig. 4 for ``pattern`` and the plain vocabulary ``pieces``.

    a: A; b: T_Aho in its φ form (:func:`aho_phi_form`); c: T, the lexicon; d: the greedy
    (MaxMatch) token automaton MIN(PROJ(A o T_Aho)); e: MIN(PROJ(A o T)), every tokenization.
    """
    fig3 = stages(pattern, pieces, max_states=max_states)
    t = fig3["b"]
    d = _token_dfa(fig3["a"], maxmatch_transducer(from_vocab(pieces), shared=True), t.output_symbols())
    return {"a": fig3["a"], "b": aho_phi_form(pieces), "c": t, "d": d, "e": fig3["e"]}


def not_greedy(d: pynini.Fst, e: pynini.Fst) -> tuple[set[int], set[Arc]]:
    """States and arcs of the DFA ``e`` on no path of a word of L(d) ⊆ L(e) (Fig. 4e's red).

    Walks d and e in step from their starts: an arc of e is used iff a reachable pair (x, p)
    has it at p and x has an arc with its label (d is trim, so the pair lies on a word of d).
    """
    d_arcs = {x: {a.ilabel: a.nextstate for a in d.arcs(x)} for x in d.states()}
    used_states: set[int] = set()
    used_arcs: set[Arc] = set()
    stack = [(d.start(), e.start())] if d.start() != pynini.NO_STATE_ID else []
    seen = set(stack)
    while stack:
        x, p = stack.pop()
        used_states.add(p)
        for arc in e.arcs(p):
            nxt = d_arcs[x].get(arc.ilabel)
            if nxt is None:
                continue
            used_arcs.add((p, arc.ilabel, arc.olabel, arc.nextstate))
            if (nxt, arc.nextstate) not in seen:
                seen.add((nxt, arc.nextstate))
                stack.append((nxt, arc.nextstate))
    all_arcs = {(p, a.ilabel, a.olabel, a.nextstate) for p in e.states() for a in e.arcs(p)}
    return set(e.states()) - used_states, all_arcs - used_arcs


def stage_dots(pattern: str, pieces: list[str], maxmatch: bool = False, title: str | None = None,
               max_arcs: int = 12) -> dict[str, str]:
    """Dot source of each panel of Cognetta & Okazaki 2024 Fig. 3, or with ``maxmatch`` of Fig. 4."""
    panels = (maxmatch_stages if maxmatch else stages)(pattern, pieces)
    captions = MAXMATCH_CAPTIONS if maxmatch else STAGE_CAPTIONS
    red_states, red_arcs = not_greedy(panels["d"], panels["e"]) if maxmatch else (set(), set())
    return {key: to_dot(fst, title=f"{title}: {captions[key]}" if title else captions[key], max_arcs=max_arcs,
                        red_states=red_states if key == "e" else (), red_arcs=red_arcs if key == "e" else ())
            for key, fst in panels.items()}
