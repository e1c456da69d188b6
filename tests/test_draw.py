"""``tokfst_cli.analysis.draw``: Cognetta & Okazaki 2024 Fig. 3 and Fig. 4 panels, folding, labels
(``tokfst draw``: cli/test_draw.py)."""

from __future__ import annotations

import itertools
import re
import subprocess

import pynini
import pytest

from tokfst_cli.analysis import draw

from .helpers import svg_texts

PATTERN = "abaabcc"
VOCAB = ["a", "b", "c", "ab", "abc", "bc"]
DOT = "/usr/bin/dot"


def segmentations(text: str, pieces: list[str]) -> set[tuple[str, ...]]:
    """All ways to write ``text`` as a sequence of ``pieces`` (brute force)."""
    if not text:
        return {()}
    return {(p, *rest) for p in pieces if text.startswith(p) for rest in segmentations(text[len(p):], pieces)}


def paths(fst: pynini.Fst) -> set[tuple[str, ...]]:
    """Output-label names along every accepting path of an acyclic fst (epsilons skipped)."""
    syms = fst.output_symbols()
    zero = pynini.Weight.zero(fst.weight_type())
    out: set[tuple[str, ...]] = set()

    def walk(state: int, seq: tuple[str, ...]) -> None:
        if fst.final(state) != zero:
            out.add(seq)
        for arc in fst.arcs(state):
            walk(arc.nextstate, seq + ((syms.find(arc.olabel),) if arc.olabel else ()))

    walk(fst.start(), ())
    return out


def edge_labels(src: str) -> list[str]:
    """The label of every edge statement in dot source."""
    return [m.group(1) for m in re.finditer(r'-> \S+ \[label="?([^"\]]*?)"?[ \]]', src)]


def has_epsilon(fst: pynini.Fst) -> bool:
    return any(a.ilabel == 0 or a.olabel == 0 for s in fst.states() for a in fst.arcs(s))


# --- Cognetta & Okazaki 2024 Fig. 3 -------------------------------------------------------------------------

@pytest.fixture(scope="module")
def panels() -> dict[str, pynini.Fst]:
    return draw.stages(PATTERN, VOCAB)


def test_fig3_panel_e_is_the_minimal_automaton_of_all_segmentations(panels):
    expected = segmentations(PATTERN, VOCAB)
    assert len(expected) == 8
    e = panels["e"]
    assert paths(e) == expected
    assert not has_epsilon(e)
    for s in e.states():  # deterministic
        labels = [a.ilabel for a in e.arcs(s)]
        assert len(labels) == len(set(labels))
    # Myhill-Nerode: a trim minimal DFA has one state per distinct residual of a prefix.
    residuals = {frozenset(w[k:] for w in expected if w[:k] == u[:k])
                 for u in expected for k in range(len(u) + 1)}
    assert e.num_states() == len(residuals)


def test_fig3_panels_a_to_d(panels):
    expected = segmentations(PATTERN, VOCAB)
    a, t, c, d = panels["a"], panels["b"], panels["c"], panels["d"]
    assert a.num_states() == len(PATTERN) + 1 and not has_epsilon(a)
    assert paths(c) == expected  # A o T already writes the segmentations on its output side
    assert has_epsilon(d) and paths(d) == expected
    assert all(a.ilabel == a.olabel for s in d.states() for a in d.arcs(s))
    assert t.num_states() == 4  # root + trie nodes for "a", "ab", "b"
    dot_a, dot_b, dot_d = (draw.to_dot(f) for f in (a, t, d))
    assert "rankdir=LR" in dot_a and dot_a.count("doublecircle") == 1
    assert 'label="a:ε"' in dot_b and "c:abc" in dot_b  # transducers: in:out
    assert "ε" in edge_labels(dot_d) and not any(":" in lab for lab in edge_labels(dot_d))  # acceptor


# --- Cognetta & Okazaki 2024 Fig. 4 -------------------------------------------------------------------------

FIG4_VOCAB = ["a", "b", "aa", "ab"]
FIG4_PATTERN = "a[ab]{0,3}b"  # finite, so L(A) can be enumerated; the piece "a" is never greedy in it
FIG4_WORDS = ["a" + "".join(w) + "b" for k in range(4) for w in itertools.product("ab", repeat=k)]
EDGE = re.compile(r'^\s*(\d+) -> (\d+) \[label=(?:"([^"]*)"|(\S+?))(?: (.*))?\]$')
NODE = re.compile(r'^\s*(\d+) \[label=\S+ (.*)\]$')


def greedy(text: str, pieces: list[str]) -> tuple[str, ...]:
    """MaxMatch: the longest piece at each position (every piece of this vocabulary always fits)."""
    out: list[str] = []
    while text:
        out.append(max((p for p in pieces if text.startswith(p)), key=len))
        text = text[len(out[-1]):]
    return tuple(out)


def red_parts(src: str) -> tuple[set[tuple[int, str, int]], set[int]]:
    """Arcs (src, label, dst) on dashed red edges, and dashed red states, of dot source."""
    arcs, states = set(), set()
    for line in src.splitlines():
        if m := EDGE.match(line):
            if "color=red" in (m.group(5) or "") and "style=dashed" in m.group(5):
                for label in (m.group(3) or m.group(4)).split(", "):
                    arcs.add((int(m.group(1)), label, int(m.group(2))))
        elif (m := NODE.match(line)) and "color=red" in m.group(2) and "style=dashed" in m.group(2):
            states.add(int(m.group(1)))
    return arcs, states


@pytest.fixture(scope="module")
def fig4() -> dict[str, pynini.Fst]:
    return draw.maxmatch_stages(FIG4_PATTERN, FIG4_VOCAB)


def test_fig4_panel_d_is_the_greedy_tokenizations_and_e_all_of_them(fig4):
    assert all(re.fullmatch(FIG4_PATTERN, w) for w in FIG4_WORDS)
    assert paths(fig4["d"]) == {greedy(w, FIG4_VOCAB) for w in FIG4_WORDS}
    assert paths(fig4["e"]) == set().union(*(segmentations(w, FIG4_VOCAB) for w in FIG4_WORDS))
    for panel in (fig4["d"], fig4["e"]):
        assert not has_epsilon(panel)
        assert all(len({a.ilabel for a in panel.arcs(s)}) == panel.num_arcs(s) for s in panel.states())


def test_fig4_panel_b_is_alg8_with_phi_arcs(fig4):
    b = fig4["b"]
    names = b.output_symbols()
    phi = {(s, names.find(a.olabel), a.nextstate) for s in b.states() for a in b.arcs(s)
           if b.input_symbols().find(a.ilabel) == draw.PHI}
    assert b.num_states() == 5 and {s for s in b.states() if b.final(s) != pynini.Weight.zero("tropical")} == {0}
    assert {(w, dst) for _, w, dst in phi} == {(w, 0) for w in FIG4_VOCAB}  # every piece fails back to the root
    src = draw.to_dot(b)
    assert "φ:aa" in src and 'label="a:ε"' in src


def test_fig4_red_edges_are_exactly_the_non_greedy_arcs(fig4):
    e = fig4["e"]
    names = e.input_symbols()
    delta = {s: {names.find(a.ilabel): a.nextstate for a in e.arcs(s)} for s in e.states()}
    used_arcs, used_states = set(), {e.start()}
    for word in FIG4_WORDS:
        s = e.start()
        for tok in greedy(word, FIG4_VOCAB):
            used_arcs.add((s, tok, delta[s][tok]))
            s = delta[s][tok]
            used_states.add(s)
    all_arcs = {(s, tok, t) for s, row in delta.items() for tok, t in row.items()}
    arcs, states = red_parts(draw.stage_dots(FIG4_PATTERN, FIG4_VOCAB, maxmatch=True)["e"])
    assert arcs == all_arcs - used_arcs and arcs
    assert states == set(e.states()) - used_states and states
    for key, src in draw.stage_dots(FIG4_PATTERN, FIG4_VOCAB, maxmatch=True).items():
        assert (key == "e") == ("color=red" in src)


# --- folding -------------------------------------------------------------------------------

def test_max_arcs_folds_the_rest_of_a_state():
    f = pynini.Fst()
    s, one, two = f.add_state(), f.add_state(), f.add_state()
    f.set_start(s)
    f.set_final(one)
    for lab in range(1, 21):
        f.add_arc(s, pynini.Arc(lab, lab, 0, one))
    for lab in range(1, 6):
        f.add_arc(one, pynini.Arc(lab, lab, 0, two if lab % 2 else one))
    src = draw.to_dot(f, max_arcs=3)
    assert '0 -> 1 [label="1, 2, 3\\n+17 more"]' in src  # one destination: folded into its edge
    assert "+2 more\\n(to 2 states)" in src and "…" in src  # several destinations: an ellipsis node
    assert "+" not in draw.to_dot(f, max_arcs=20)


# --- labels ----------------------------------------------------------------------------------

def test_labels_are_escaped_and_compile_with_dot():
    t = draw.vocab_lexicon([" a", "a\nb", "a\\b", 'x"y', "<s>", "▁c", "Ġd"])
    src = draw.to_dot(t, title='quote " and <b>')
    svg = subprocess.run([DOT, "-Tsvg"], input=src.encode("utf-8"), capture_output=True, check=True).stdout
    texts = svg_texts(svg)
    for shown in ["\\x20:ε", "a:\\x20a", "b:a\\x0ab", "b:a\\\\b", 'y:x"y', ">:<s>", "c:▁c", "d:Ġd",
                  'quote " and <b>']:
        assert shown in texts, shown
    assert "\\xe2:ε" in texts  # non-ASCII bytes of a plain vocabulary as escapes
