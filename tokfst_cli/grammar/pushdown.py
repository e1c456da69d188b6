"""Stage A for self-embedding grammars: a pushdown transducer over bytes (Koo et al. 2024 Sec. 3.2;
Allauzen & Riley 2012, OpenFst's PDT extension).

:mod:`.regular` compiles every rule whose recursion is left- or right-linear to a byte DFA. The
rules left over need a stack: each becomes a minimal acceptor over bytes and *call labels* (a
reference to another such rule is one arc), and ``pynini.pdt_replace`` joins them into one PDT:
a call arc becomes an open parenthesis into the callee, each final state of the callee returns
through the matching close parenthesis. A configuration is (state, stack of open parentheses).

Before the PDT is built, the rule set is made safe for the runtime (:mod:`.stack`), whose
closure over parenthesis arcs must end:

* direct left recursion is removed (``A ::= A x | y`` is ``A ::= y x*``);
* rules that derive no text at all are dropped with the arcs that call them (productivity);
* a remaining left-corner cycle (``A ::= B x``, ``B ::= A y``, or through rules that may derive
  the empty text) is refused by name (``InputError``, hint ``grammar-recursion``): it would push
  without reading a byte, forever.

Every rule acceptor is trimmed and productive, so every configuration a byte string reaches
from the start can still reach acceptance: the decoder never offers a dead end.
"""

from __future__ import annotations

from dataclasses import dataclass

import pynini

from tokfst_cli.automata.calls import CALL, PAREN
from tokfst_cli.automata.graph import strongly_connected
from tokfst_cli.automata.symbols import byte_table
from tokfst_cli.errors import EmptyLanguageError, InputError

ROOT = CALL - 1  # the nonterminal of the root FST (one call of the start rule)
HINT = "grammar-recursion"


@dataclass(frozen=True)
class Pushdown:
    """A PDT over bytes: ``fst`` (byte labels b + 1, parenthesis labels from PAREN, epsilon 0) and
    ``parens`` (open label -> close label). The empty stack at a final state accepts."""

    fst: pynini.Fst
    parens: dict[int, int]
    source: str
    rules: tuple[str, ...]  # the rules that needed a stack

    @property
    def pattern(self) -> str:
        return f"grammar {self.source}"

    def paren_pairs(self) -> list[tuple[int, int]]:
        return sorted(self.parens.items())


def _arcs(f: pynini.Fst) -> list[tuple[int, int, int]]:
    return [(q, arc.ilabel, arc.nextstate) for q in f.states() for arc in f.arcs(q)]


def _finals(f: pynini.Fst) -> set[int]:
    zero = pynini.Weight.zero(f.weight_type())
    return {q for q in f.states() if f.final(q) != zero}


def _fixpoint(rules: dict[str, pynini.Fst], label: dict[str, int], through_bytes: bool) -> set[str]:
    """The least set of rules with a path to a final state over calls of rules in the set (and
    bytes, if ``through_bytes``)."""
    name_of = {v: k for k, v in label.items()}
    out: set[str] = set()
    changed = True
    while changed:
        changed = False
        for name, f in rules.items():
            if name not in out and _reaches_final(
                    f, lambda lab: (through_bytes and lab < CALL) or name_of.get(lab, "") in out):
                out.add(name)
                changed = True
    return out


def productive(rules: dict[str, pynini.Fst], label: dict[str, int]) -> set[str]:
    """The rules that derive some text: a path to a final state over bytes and productive calls."""
    return _fixpoint(rules, label, True)


def _reaches_final(f: pynini.Fst, usable) -> bool:
    start = f.start()
    if start == pynini.NO_STATE_ID:
        return False
    finals, seen, todo = _finals(f), {start}, [start]
    while todo:
        q = todo.pop()
        if q in finals:
            return True
        for arc in f.arcs(q):
            if usable(arc.ilabel) and arc.nextstate not in seen:
                seen.add(arc.nextstate)
                todo.append(arc.nextstate)
    return False


def drop_calls(f: pynini.Fst, keep: set[int]) -> pynini.Fst:
    """``f`` without the call arcs whose label is not in ``keep``, trimmed."""
    g = f.copy()
    for q in g.states():
        g.delete_arcs(q)
    for q, lab, nxt in _arcs(f):
        if lab < CALL or lab in keep:
            g.add_arc(q, pynini.Arc(lab, lab, pynini.Weight.one(g.weight_type()), nxt))
    return g.connect()


def nullable(rules: dict[str, pynini.Fst], label: dict[str, int]) -> set[str]:
    """The rules that derive the empty text: a path to a final state over calls of nullable rules."""
    return _fixpoint(rules, label, False)


def left_corners(rules: dict[str, pynini.Fst], label: dict[str, int], empty: set[str]) -> dict[str, list[str]]:
    """Rule -> the rules it may call before reading any byte (through nullable calls)."""
    name_of = {v: k for k, v in label.items()}
    out: dict[str, list[str]] = {}
    for name, f in rules.items():
        calls: list[str] = []
        seen, todo = {f.start()}, [f.start()]
        while todo:
            q = todo.pop()
            for arc in f.arcs(q):
                callee = name_of.get(arc.ilabel)
                if callee is None:
                    continue
                if callee not in calls:
                    calls.append(callee)
                if callee in empty and arc.nextstate not in seen:
                    seen.add(arc.nextstate)
                    todo.append(arc.nextstate)
        out[name] = calls
    return out


def build(rules: dict[str, pynini.Fst], label: dict[str, int], start: str, source: str,
          lines: dict[str, int]) -> Pushdown:
    """The PDT of the RTN ``rules`` (name -> minimal acceptor over bytes and call labels) rooted at
    ``start`` (see the module docstring for the checks)."""
    good = productive(rules, label)
    if start not in good:
        raise EmptyLanguageError(f"grammar {source} derives no text: its recursion never ends",
                                 "give each recursive rule an alternative without itself")
    keep = {label[g] for g in good}
    rules = {n: drop_calls(f, keep) for n, f in rules.items() if n in good}
    corners = left_corners(rules, label, nullable(rules, label))
    for comp in strongly_connected(corners, list(rules)):
        if len(comp) > 1 or comp[0] in corners[comp[0]]:
            names = " -> ".join([*comp, comp[0]])
            where = f" (line {lines[comp[0]]})" if comp[0] in lines else ""
            raise InputError(f"grammar {source}: rule '{comp[0]}'{where} is left-recursive through {names} "
                             "(indirectly, or after rules that may derive the empty text)",
                             "make the left recursion direct (a ::= a x | y) or turn it into a repetition",
                             hint=HINT)
    root = pynini.Fst()
    s, t = root.add_state(), root.add_state()
    root.set_start(s)
    root.set_final(t)
    root.add_arc(s, pynini.Arc(label[start], label[start], pynini.Weight.one(root.weight_type()), t))
    pairs = [(ROOT, root)] + [(label[n], f) for n, f in rules.items()]
    fst, parens = pynini.pdt_replace(pairs, pdt_parser_type="left", start_paren_labels=PAREN)
    fst.connect()
    return Pushdown(fst=fst, parens={int(o): int(c) for o, c in parens}, source=source, rules=tuple(rules))


OPEN, CLOSE = "(_", ")_"  # the names of parenthesis k's labels in the file form: "(_k", ")_k"


def with_symbols(p: Pushdown) -> pynini.Fst:
    """The PDT as one OpenFst file: bytes named as everywhere in tokfst, parenthesis k's labels
    named ``(_k`` and ``)_k`` (OpenFst's pdt tools take the pairs as a file; :func:`from_fst`
    reads them back from these names)."""
    table = byte_table()
    for k, (o, c) in enumerate(p.paren_pairs()):
        table.add_symbol(f"{OPEN}{k}", o)
        table.add_symbol(f"{CLOSE}{k}", c)
    f = p.fst.copy()
    return f.set_input_symbols(table).set_output_symbols(table)


def from_fst(fst: pynini.Fst, source: str) -> Pushdown | None:
    """The Pushdown of :func:`with_symbols`'s file form, None for an automaton without parentheses."""
    table = fst.input_symbols()
    if table is None or table.name() != byte_table().name():  # a token automaton: its tokens may read "(_"
        return None
    names = {name: label for label, name in table if label >= PAREN}
    parens = {label: names.get(CLOSE + name[len(OPEN):]) for name, label in names.items() if name.startswith(OPEN)}
    if not parens:
        return None
    if None in parens.values():
        raise InputError(f"{source} has an open parenthesis without its close", "rebuild it with tokfst promote")
    return Pushdown(fst=fst, parens={int(o): int(c) for o, c in parens.items()}, source=source, rules=())
