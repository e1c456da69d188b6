"""Stage A for grammars whose recursion is left- or right-linear: the grammar as a byte DFA.

Koo et al. 2024 Sec. 3 observe that most of a practical grammar is regular: its terminals, and
every rule whose recursion only ever continues at the end of its text (right-linear, ``list ::=
item ("," list)?``) or only at the start (left-linear, Lark's expansion of ``item*``). Such
rules are finite automata; only self-embedding (a rule inside its own text, ``expr ::= "(" expr
")"``) needs a stack. This module compiles the rules reachable from the start rule, one strongly
connected component of the rule graph at a time (dependencies first):

* a rule outside any cycle: its expression, with the automata of the rules it names spliced in;
* a cycle whose every alternative names a member of the cycle only as its last item: one NFA
  with a state per member, ``N -> alpha M`` an alpha-path from N's state to M's, ``N -> alpha``
  a path from N's state to the final state (right-linear); only as its first item: a path from
  M's state to N's, from the start for the alternatives without a member (left-linear).

Any other cycle (a rule inside its own text, or recursion at both ends) needs a stack: its rules,
and every rule that names one of them, become acceptors over bytes and call labels, joined into a
pushdown transducer by :mod:`.pushdown` (direct left recursion removed first). A grammar whose
start rule needs no stack stays a DFA. Every automaton is determinized under ``max_states``
(:class:`~tokfst_cli.errors.LimitError`), estimated first for bounded repetitions.
"""

from __future__ import annotations

import pynini

from tokfst_cli.automata import utf8
from tokfst_cli.automata.calls import call_label, has_calls
from tokfst_cli.automata.fsts import ranges_acceptor, text_acceptor
from tokfst_cli.automata.graph import strongly_connected
from tokfst_cli.automata.symbols import byte_table
from tokfst_cli.errors import EmptyLanguageError, InternalError, LimitError
from tokfst_cli.grammar.ir import Alt, Chars, Expr, Grammar, Ref, Regex, Repeat, Seq, Text, alt, seq, walk
from tokfst_cli.grammar.pushdown import Pushdown, build
from tokfst_cli.support.progress import report
from tokfst_cli.text.regex import ByteAutomaton, compile_regex, determinize_bounded


class _NeedsStack(Exception):
    """A cycle of rules that no finite automaton spells (caught: the cycle goes to the stack)."""


def components(g: Grammar) -> list[list[str]]:
    """The strongly connected components of the rules reachable from the start, dependencies first."""
    return strongly_connected({name: [r.name for r in g.refs(name)] for name in g.rules}, [g.start])


def _mentions(x: Expr, members: set[str]) -> bool:
    return any(isinstance(y, Ref) and y.name in members for y in walk(x))


def alternatives(x: Expr, members: set[str]) -> list[list[Expr]]:
    """``x`` as a union of sequences, distributed only where a member of the cycle is involved
    (an optional part holding one becomes two alternatives); a member under ``*``, ``+`` or a
    repetition of more than one copy stays where it is (and is refused by the caller)."""
    if not _mentions(x, members):
        return [[x]]
    if isinstance(x, Alt):
        return [a for item in x.items for a in alternatives(item, members)]
    if isinstance(x, Seq):
        out: list[list[Expr]] = [[]]
        for item in x.items:
            out = [left + right for left in out for right in alternatives(item, members)]
        return out
    if isinstance(x, Repeat) and x.lo <= 1 and x.hi == 1:
        return ([[]] if x.lo == 0 else []) + alternatives(x.item, members)
    return [[x]]


class Compiler:
    """The byte automata of a grammar's rules, compiled on demand (see the module docstring)."""

    def __init__(self, g: Grammar, max_states: int = 1_000_000):
        self.g, self.max_states = g, max_states
        self.done: dict[str, pynini.Fst] = {}  # rules compiled to byte DFAs
        self.rtn: dict[str, pynini.Fst] = {}  # rules that need the stack: acceptors over bytes and calls
        self.label: dict[str, int] = {}  # their call labels

    def compile(self) -> ByteAutomaton | Pushdown:
        for comp in components(self.g):
            members = set(comp)
            if len(comp) == 1 and not _mentions(self.g.rules[comp[0]], members):
                self._keep(comp[0], self._dfa(self.expr(self.g.rules[comp[0]]), comp[0]))
                continue
            try:
                self._cycle(comp)
            except _NeedsStack:
                self._stack(comp)
        if self.g.start in self.rtn:
            return build(self.rtn, self.label, self.g.start, self.g.source, self.g.lines)
        f = self.done[self.g.start].copy()
        f.connect()
        if f.start() == pynini.NO_STATE_ID or f.num_states() == 0:
            raise EmptyLanguageError(f"grammar {self.g.source} derives no text", "check the start rule")
        report(f.num_states())
        f.set_input_symbols(byte_table()).set_output_symbols(byte_table())
        return ByteAutomaton(fst=f, pattern=f"grammar {self.g.source}")

    # ---- expressions ------------------------------------------------------------------------------
    def expr(self, x: Expr) -> pynini.Fst:
        """The (not yet determinized) byte acceptor of an expression over compiled rules."""
        if isinstance(x, Text):
            return text_acceptor(x.text)
        if isinstance(x, Chars):
            return ranges_acceptor(utf8.complement(utf8.ranges_of_ranges(x.ranges)) if x.negated else list(x.ranges))
        if isinstance(x, Regex):
            f = compile_regex(x.pattern, self.max_states).fst.copy()
            return f.set_input_symbols(None).set_output_symbols(None)
        if isinstance(x, Ref):
            if x.name in self.label:
                return _one_arc(self.label[x.name])
            return self.done[x.name].copy()
        if isinstance(x, Seq):
            f = text_acceptor("")
            for item in x.items:
                f.concat(self.expr(item))
            return f
        if isinstance(x, Alt) and not x.items:  # the empty language (a rule with only left-recursive alternatives)
            f = pynini.Fst()
            f.set_start(f.add_state())
            return f
        if isinstance(x, Alt):
            return pynini.union(*(self.expr(item) for item in x.items))
        if isinstance(x, Repeat):
            base = self._dfa(self.expr(x.item), "a repetition")
            copies = x.hi if x.hi is not None else max(x.lo, 1)
            if base.num_states() * copies > 4 * self.max_states:
                raise LimitError(f"the automaton of grammar {self.g.source}", "max_states", self.max_states,
                                 base.num_states() * copies // 4, remedy="simplify", at_least=True)
            return base.closure(x.lo, x.hi) if x.hi is not None else base.closure(x.lo)
        raise InternalError(f"not a grammar expression: {x!r}")

    def _dfa(self, f: pynini.Fst, what: str) -> pynini.Fst:
        d = determinize_bounded(f.optimize() if f.num_states() < 64 else f, self.max_states)
        if d.num_states() > self.max_states:
            raise LimitError(f"the automaton of grammar {self.g.source} ({what})", "max_states", self.max_states,
                             remedy="simplify")
        return d.minimize()

    # ---- cycles -----------------------------------------------------------------------------------
    def _cycle(self, comp: list[str]) -> None:
        members = set(comp)
        shapes: dict[str, list[tuple[str, list[Expr], str | None]]] = {}
        sides = set()
        for name in comp:
            shapes[name] = []
            for alt_items in alternatives(self.g.rules[name], members):
                side, rest, target = self._shape(name, alt_items, members)
                shapes[name].append((side, rest, target))
                if side in ("left", "right"):
                    sides.add(side)
        if len(sides) > 1:  # recursion at both ends: not regular in general
            raise _NeedsStack()
        left = sides == {"left"}
        nfa = pynini.Fst()
        one = pynini.Weight.one(nfa.weight_type())
        state = {name: nfa.add_state() for name in comp}
        edge = nfa.add_state()  # right-linear: the final state; left-linear: the start state
        for name in comp:
            for side, rest, target in shapes[name]:
                part = self.expr(Seq(tuple(rest))) if rest else text_acceptor("")
                if left:
                    _splice(nfa, state[target] if target else edge, state[name], part, one)
                else:
                    _splice(nfa, state[name], state[target] if target else edge, part, one)
        for name in comp:
            f = nfa.copy()
            if left:
                f.set_start(edge)
                f.set_final(state[name])
            else:
                f.set_start(state[name])
                f.set_final(edge)
            self._keep(name, self._dfa(f.connect(), f"rule {name}"))

    def _keep(self, name: str, f: pynini.Fst) -> None:
        """A compiled rule: a DFA, or (if it calls a rule that needs the stack) an RTN rule too."""
        if has_calls(f):
            self.label[name] = call_label(len(self.label))
            self.rtn[name] = f
        else:
            self.done[name] = f

    def _stack(self, comp: list[str]) -> None:
        """A cycle that needs the stack: each member an acceptor over bytes and call labels, its
        direct left recursion removed (``A ::= A x | y`` is ``A ::= y x*``)."""
        members = set(comp)
        for name in comp:
            self.label[name] = call_label(len(self.label))
        for name in comp:
            alts = alternatives(self.g.rules[name], members)
            left = [bool(items) and isinstance(items[0], Ref) and items[0].name == name for items in alts]
            tails = [items[1:] for items, is_left in zip(alts, left) if is_left]
            heads = [items for items, is_left in zip(alts, left) if not is_left]
            x = alt([seq(items) for items in heads]) if heads else Alt(())
            if tails:
                x = seq([x, Repeat(alt([seq(t) for t in tails]), 0, None)])
            self.rtn[name] = self._dfa(self.expr(x), f"rule {name}")

    def _shape(self, name: str, items: list[Expr], members: set[str]) -> tuple[str, list[Expr], str | None]:
        """(``"exit"``, ``"left"``, ``"right"`` or ``"unit"``; the items besides the member; the member)."""
        at = [i for i, x in enumerate(items) if _mentions(x, members)]
        if not at:
            return "exit", items, None
        if len(at) == 1 and isinstance(items[at[0]], Ref):
            target = items[at[0]].name
            rest = items[:at[0]] + items[at[0] + 1:]
            if len(items) == 1:
                return "unit", [], target
            if at[0] == len(items) - 1:
                return "right", rest, target
            if at[0] == 0:
                return "left", rest, target
        raise _NeedsStack()  # self-embedding: a member inside the text, or under a repetition


def _splice(big: pynini.Fst, src: int, dst: int, part: pynini.Fst, one) -> None:
    """A copy of ``part`` between states ``src`` and ``dst`` of ``big`` (epsilon arcs in and out)."""
    if part.start() == pynini.NO_STATE_ID:
        return
    zero = pynini.Weight.zero(part.weight_type())
    base = big.num_states()
    big.add_states(part.num_states())
    for q in range(part.num_states()):
        for arc in part.arcs(q):
            big.add_arc(base + q, pynini.Arc(arc.ilabel, arc.olabel, one, base + arc.nextstate))
        if part.final(q) != zero:
            big.add_arc(base + q, pynini.Arc(0, 0, one, dst))
    big.add_arc(src, pynini.Arc(0, 0, one, base + part.start()))


def _one_arc(label: int) -> pynini.Fst:
    f = pynini.Fst()
    s, t = f.add_state(), f.add_state()
    f.set_start(s)
    f.set_final(t)
    f.add_arc(s, pynini.Arc(label, label, pynini.Weight.one(f.weight_type()), t))
    return f


def compile_grammar(g: Grammar, max_states: int = 1_000_000) -> ByteAutomaton | Pushdown:
    """The minimal byte DFA of the grammar's language where its recursion is left- or right-linear,
    else its PDT (:mod:`.pushdown`)."""
    return Compiler(g, max_states).compile()

