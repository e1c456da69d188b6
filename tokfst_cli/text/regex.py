"""Stage A: regex to a minimal deterministic acceptor over UTF-8 bytes (Cognetta & Okazaki 2024 Sec. 5;
Pitfalls 2025 Sec. 3).

interegular parses the pattern (Python ``re`` syntax, fullmatch semantics). pynini builds the
automaton from the parse tree: a character class becomes the UTF-8 byte-range sequences of
its code points (``utf8.sequences``; negated classes range over all of Unicode), and
concatenation, alternation and repetition are pynini's concat, union and closure, followed by
rmepsilon, determinize (with a state threshold: the ``--max-states`` guard) and minimize.
Patterns with inline flags, which interegular resolves itself, go through interegular's
character DFA instead, translated class by class (``(?i)`` then folds case per character with
str.lower/str.upper, as interegular does). Lookaround, anchors and backreferences are refused
with a one-line error. Labels: byte b is b+1.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass

import interegular
import numpy as np
import pynini
from interegular import patterns as ip
from interegular.fsm import anything_else

from tokfst_cli.automata import label_classes, utf8
from tokfst_cli.automata.arrays import FstArrays, fst_from, fst_from_arrays
from tokfst_cli.automata.fsts import ranges_acceptor, text_acceptor
from tokfst_cli.automata.symbols import byte_table
from tokfst_cli.errors import EmptyLanguageError, InputError, LimitError, UsageError
from tokfst_cli.support.progress import report
from tokfst_cli.text import anchors, fold, groups
from tokfst_cli.text.terminals import KIND_NAMES, PLACEHOLDER_BASE, TOKEN_GROUPS

Ranges = list[tuple[int, int]]


class ByteAutomaton:
    """A byte automaton and what it was built from.

    ``classed``: the same DFA over byte classes (:mod:`.label_classes`; compile_schema's), from
    which ``fst`` and ``arrays`` (its arcs in bulk) are expanded when first asked for; the lazy
    decoder's table is built on it directly (``byte_table.of_automaton``).
    """

    def __init__(self, fst: pynini.Fst | None, pattern: str, classed: label_classes.Classed | None = None):
        if fst is None and classed is None:
            raise UsageError("a ByteAutomaton needs its fst or its classed DFA")
        self._fst, self.pattern, self._arrays, self.classed = fst, pattern, None, classed

    @property
    def arrays(self) -> FstArrays | None:
        if self._arrays is None and self.classed is not None:
            self._arrays = self.classed.expand()
        return self._arrays

    @property
    def fst(self) -> pynini.Fst:
        if self._fst is None:
            self._fst = fst_from(self.arrays)
            self._fst.set_input_symbols(byte_table()).set_output_symbols(byte_table())
        return self._fst


_UNICODE_ESCAPE = re.compile(r"\\(?:u([0-9a-fA-F]{4})|U([0-9a-fA-F]{8})|N\{([^}]*)\}|(.))", re.DOTALL)


def _literal(cp: int) -> str:
    c = chr(cp)
    if cp < 0x20 or cp == 0x7F:
        return f"\\x{cp:02x}"
    return "\\" + c if c.isascii() and not c.isalnum() else c


def expand_escapes(pattern: str) -> str:
    """Python re's \\uXXXX, \\UXXXXXXXX and \\N{NAME} escapes as literals (interegular lacks them)."""
    def sub(m: re.Match) -> str:
        if m.group(4) is not None:
            return m.group(0)
        if m.group(3) is not None:
            try:
                return _literal(ord(unicodedata.lookup(m.group(3))))
            except KeyError:
                raise InputError(f"unknown character name \\N{{{m.group(3)}}}",
                                 "use a Unicode character name") from None
        cp = int(m.group(1) or m.group(2), 16)
        if cp > utf8.MAX_CODE_POINT:
            raise InputError(f"escape {m.group(0)} is beyond U+10FFFF", "use a valid code point")
        return _literal(cp)

    return _UNICODE_ESCAPE.sub(sub, pattern)


# Syntax interegular reads otherwise than Python's re: a quantifier after a quantifier (re's
# "multiple repeat", or 3.11's possessive a*+), atomic groups and comments, empty classes, braces.
_SUSPECT = re.compile(r"[*+?}][*+{]|\(\?[>#]|\[\^?\]|\{")
_REPEATS = ("POSSESSIVE_REPEAT", "ATOMIC_GROUP")


def shown(pattern: str, limit: int = 80) -> str:
    """The pattern as an error message quotes it: repr, cut to ``limit`` characters."""
    text = repr(pattern)
    return text if len(text) <= limit else text[:limit - 1] + "…"


def _python_verdict(pattern: str) -> None:
    """Python re's own parse of a pattern with :data:`_SUSPECT` syntax: what re rejects is an
    invalid regex, and possessive quantifiers and atomic groups (which interegular would read as
    ordinary ones) are refused by name, never approximated."""
    try:
        from re import _parser as sre  # deferred: Python 3.11+ has it here (sre_parse before)
    except ImportError:  # pragma: no cover - Python 3.10
        import sre_parse as sre  # deferred: sre_parse warns when imported (deprecated)
    try:
        tree = sre.parse(pattern)
    except re.error as e:
        raise InputError(f"invalid regex {shown(pattern)}: {e.msg} at position {e.pos}",
                         "fix the pattern (Python re syntax)") from None
    except RecursionError:
        raise InputError(f"regex {shown(pattern)} nests too deeply", "simplify the pattern") from None
    todo = [tree]
    while todo:
        node = todo.pop()
        if isinstance(node, (list, tuple)) or type(node).__name__ == "SubPattern":
            todo.extend(node)
        elif str(node) in _REPEATS:
            what = "possessive quantifiers" if str(node) == _REPEATS[0] else "atomic groups (?>...)"
            raise InputError(f"regex {shown(pattern)} uses {what}, which tokfst does not model",
                             "write the quantifier or group without it") from None


def parse(pattern: str) -> ip.Pattern:
    """interegular's parse tree, or a one-line InputError naming the problem."""
    if _SUSPECT.search(pattern):
        _python_verdict(pattern)
    try:
        return interegular.parse_pattern(expand_escapes(pattern))
    except ip.Unsupported as e:
        raise InputError(f"regex {shown(pattern)} uses unsupported syntax: {e}",
                         "patterns match in full: drop anchors, backreferences and lookaround") from None
    except ip.InvalidSyntax:
        try:
            re.compile(pattern)
            why = "interegular cannot parse it"
        except re.error as e:
            why = f"{e.msg} at position {e.pos}"
        raise InputError(f"invalid regex {shown(pattern)}: {why}", "fix the pattern (Python re syntax)") from None
    except AttributeError as e:  # interegular's parser on a comment (?#...), which re allows
        why = "comments (?#...) are not supported" if "(?#" in pattern else f"interegular cannot parse it: {e}"
        raise InputError(f"regex {shown(pattern)}: {why}", "drop the comment, or simplify the pattern") from None
    except (ValueError, TypeError, KeyError, RecursionError) as e:
        raise InputError(f"regex {shown(pattern)} cannot be compiled: {e}", "simplify the pattern") from None




def _single_char(node) -> str | None:
    """The one character a class of one character stands for (not negated, not a group's
    placeholder, not a surrogate, which has no UTF-8), else None."""
    if not isinstance(node, ip._CharGroup) or node.negated or len(node.chars) != 1:
        return None
    (c,) = node.chars
    if 0xD800 <= ord(c) <= 0xDFFF or groups.placeholder(node.chars, False) is not None:
        return None
    return c


def _char_class(node: ip._CharGroup) -> Ranges:
    ranges = utf8.remove_surrogates(utf8.ranges_of(ord(c) for c in node.chars))
    return utf8.complement(ranges) if node.negated else ranges


def _refuse_lookaround(pattern: str, node) -> None:
    """Lookaround has no fullmatch-exact translation here (interegular lets a trailing
    lookahead see past the end of the match), so it is refused rather than approximated."""
    if isinstance(node, ip._NonCapturing):
        kind = ("negative " if node.negate else "") + ("lookbehind" if node.backwards else "lookahead")
        raise InputError(f"regex {shown(pattern)} uses unsupported syntax: {kind}",
                         "patterns match in full: drop anchors, backreferences and lookaround")
    for child in getattr(node, "options", ()) or getattr(node, "parts", ()):
        _refuse_lookaround(pattern, child)
    if isinstance(node, ip._Repeated):
        _refuse_lookaround(pattern, node.base)


def _needs_interegular(node) -> bool:
    """Inline flags ((?i), (?s), ...) are resolved by interegular's own FSM construction."""
    if isinstance(node, ip.Pattern):
        if node.added_flags or node.removed_flags:
            return True
        return any(_needs_interegular(o) for o in node.options)
    if isinstance(node, ip._Concatenation):
        return any(_needs_interegular(p) for p in node.parts)
    if isinstance(node, ip._Repeated):
        return _needs_interegular(node.base)
    return not (isinstance(node, ip._CharGroup) or node is ip._DOT or node is ip._EMPTY)


# ---- estimate, then build --------------------------------------------------------------------
@dataclass(frozen=True)
class Lengths:
    """Word lengths in bytes of a sub-language: ``maxlen`` None = unbounded; ``empty`` = no word."""

    empty: bool
    minlen: int = 0
    maxlen: int | None = 0


def lengths(node, chars_only: bool = False) -> Lengths:
    """Shortest and longest word of ``node``'s language, from the tree alone (O(tree), no building).

    In bytes; with ``chars_only`` (inline flags: case folding may change a character's UTF-8
    length) every character counts one byte, which only lowers both numbers.
    """
    if node is ip._EMPTY:
        return Lengths(False)
    if node is ip._DOT:
        return Lengths(False, 1, 1 if chars_only else 4)
    if isinstance(node, ip._CharGroup):
        if chars_only:
            return Lengths(not node.chars and not node.negated, 1, 1)
        c = _single_char(node)
        if c is not None:
            return Lengths(False, len(c.encode("utf-8")), len(c.encode("utf-8")))
        ranges = _char_class(node)
        if not ranges:
            return Lengths(True)
        return Lengths(False, len(chr(ranges[0][0]).encode("utf-8")), len(chr(ranges[-1][1]).encode("utf-8")))
    if isinstance(node, ip._Concatenation):
        parts = [lengths(p, chars_only) for p in node.parts]
        if any(p.empty for p in parts):
            return Lengths(True)
        top = None if any(p.maxlen is None for p in parts) else sum(p.maxlen for p in parts)
        return Lengths(False, sum(p.minlen for p in parts), top)
    if isinstance(node, ip.Pattern):
        opts = [o for o in (lengths(o, chars_only) for o in node.options) if not o.empty]
        if not opts:
            return Lengths(True)
        top = None if any(o.maxlen is None for o in opts) else max(o.maxlen for o in opts)
        return Lengths(False, min(o.minlen for o in opts), top)
    if isinstance(node, ip._Repeated):
        if node.max == 0:
            return Lengths(False)
        base = lengths(node.base, chars_only)
        if base.empty:
            return Lengths(node.min > 0)
        if node.max is None or base.maxlen is None:
            top = None if (base.maxlen is None or base.maxlen > 0) else 0
        else:
            top = node.max * base.maxlen
        return Lengths(False, node.min * base.minlen, top)
    return Lengths(False, 0, None)  # a node interegular resolves itself: no bound from it


def states_at_least(tree, chars_only: bool = False) -> int:
    """A lower bound on the states of the regex's minimal byte automaton (0 if its language is empty).

    A shortest accepted word visits distinct states (a repeated state could be cut out), and
    so does every word of a finite language (a repeated state would be a cycle): at least
    ``minlen + 1`` states, and ``maxlen + 1`` when the language is finite.
    """
    ln = lengths(tree, chars_only)
    if ln.empty:
        return 0
    return (ln.minlen if ln.maxlen is None else ln.maxlen) + 1


def _unwrap(node):
    """The single repeatable inside trivial groups: ``(?:x)`` and ``(x)`` are x."""
    while True:
        if isinstance(node, ip.Pattern) and len(node.options) == 1 and not (node.added_flags or node.removed_flags):
            node = node.options[0]
        elif isinstance(node, ip._Concatenation) and len(node.parts) == 1:
            node = node.parts[0]
        else:
            return node


def flatten(node: ip._Repeated) -> tuple[object, int, int | None]:
    """``(x{c,d}){a,b}`` as ``x{ac,bd}`` when the count intervals [ic, id], a <= i <= b, leave no gap.

    Returns (base, min, max) with max None = unbounded. Languages: (x{c,d})^i is the union of
    x^k for k in [ic, id], so the repetition is x^k for k in the union of those intervals.
    """
    base, lo, hi = node.base, node.min, node.max
    while True:
        inner = _unwrap(base)
        if not isinstance(inner, ip._Repeated) or hi == 0:
            return base, lo, hi
        c, d = inner.min, inner.max
        if d == 0:  # x{0} is the empty string, and so is any repetition of it
            return ip._EMPTY, 0, 0
        # intervals i and i+1 touch when (i+1)c <= id + 1; the worst case is the smallest i >= lo
        # (for i = 0 the interval is {0}); d None: [ic, inf) touches for any i >= 1
        def touches(i: int) -> bool:
            if hi is not None and i >= hi:
                return True  # no interval i+1
            if i == 0:
                return c <= 1
            return d is None or (i + 1) * c <= i * d + 1
        if not (touches(lo) and touches(max(lo, 1))):
            return base, lo, hi
        base = inner.base
        new_hi = None if (hi is None or d is None) else hi * d
        lo, hi = lo * c, new_hi


_DFA = pynini.I_DETERMINISTIC | pynini.NO_EPSILONS


def determinize_bounded(f: pynini.Fst, max_states: int) -> pynini.Fst:
    """rmepsilon, then determinize stopping past ``max_states`` (skipped when already deterministic)."""
    if f.properties(_DFA, True) == _DFA:
        return f
    f.rmepsilon()
    if f.properties(pynini.I_DETERMINISTIC, True) == pynini.I_DETERMINISTIC:
        return f
    return pynini.determinize(f, nstate=max_states + 1)


SMALL_REPETITION = 4096  # closure(m, n) of the base's NFA up to this many states, else powers of its DFA


class _Builder:
    """Thompson-style construction over the parse tree with pynini's rational operations.

    Small repetitions (``small``: at most that many NFA states in all) are pynini's closure of
    the base, as an epsilon-NFA determinized once at the end. A larger one, x{m,n}, starts from
    the minimal DFA D of x: for a prefix-free x (a character class, a fixed word) copies of D in
    a row (:meth:`chain`, linear); else the closure of D while its copies stay within
    ``closure_budget`` states (default ``max_states``); else powers of D (:class:`_Powers`),
    each step determinized with the state threshold and minimized. No step expands the text
    m..n times, and every NFA stays within the budget.
    """

    def __init__(self, pattern: str, max_states: int, small: int | None = None, closure_budget: int | None = None,
                 chain_check=None, root=None, groups: list | None = None, fold: bool = False):
        self.pattern, self.max_states = pattern, max_states
        self.fold = fold  # concatenations built from the right, minimized at every step (text.fold)
        self.groups = groups or []  # groups.Group per placeholder (Koo et al. 2024 Sec. 2.5)
        self.small = SMALL_REPETITION if small is None else small
        self.closure_budget = max_states if closure_budget is None else closure_budget
        self.memo: dict = {}
        # chain_check(small_chain, copies) may refuse the whole regex when it is one chained
        # repetition (``root``, flattened: its base), seeing chains of 2 and 3 copies
        self.chain_check = chain_check
        self.root_base = flatten(root)[0] if isinstance(root, ip._Repeated) else None
        self.root_dfa = None

    def dfa(self, f: pynini.Fst, what: str) -> pynini.Fst:
        """The minimal DFA of ``f``; LimitError when determinizing goes past ``max_states``."""
        d = determinize_bounded(f, self.max_states)
        if d.num_states() > self.max_states:
            raise LimitError(f"{what} in regex {self.pattern!r}", "max_states", self.max_states, remedy="simplify")
        report(d.num_states())
        return d.connect().minimize()

    def build(self, node) -> pynini.Fst:
        if node is ip._EMPTY:
            return pynini.accep("")
        if node is ip._DOT:
            node = ip._CharGroup(frozenset("\n"), True)  # Python re: any character but newline
        if isinstance(node, ip._CharGroup):
            key = (node.chars, node.negated)
            if key not in self.memo:
                g = groups.placeholder(node.chars, node.negated)
                self.memo[key] = (ranges_acceptor(_char_class(node)) if g is None or g >= len(self.groups) else
                                  groups.automaton(self.groups[g], lambda p: compile_regex(p, self.max_states).fst))
            return self.memo[key].copy()
        if isinstance(node, ip._Concatenation):
            parts = self._parts(node.parts)
            if self.fold:
                return fold.concatenation(parts, self.dfa)
            f = pynini.accep("")
            for part in parts:
                f.concat(part)
            return f
        if isinstance(node, ip.Pattern):
            if not node.options:
                return pynini.Fst()  # no alternative: the empty language
            first, *rest = (self.build(o) for o in node.options)
            return first.union(*rest) if rest else first
        if isinstance(node, ip._Repeated):
            if node not in self.memo:
                self.memo[node] = self.repeat(*flatten(node))
            return self.memo[node].copy()
        raise AssertionError(f"unexpected regex node {node!r}")  # _needs_interegular routes the rest

    def _parts(self, parts: list) -> list:
        """A concatenation's parts: runs of single characters as one linear acceptor of their UTF-8;
        when folding (:func:`fold.concatenation`), a bounded repetition of a finite group followed by
        something as (its minimal DFA, m, n)."""
        out: list = []
        run: list[str] = []
        for i, part in enumerate(parts):
            c = _single_char(part)
            if c is not None:
                run.append(c)
                continue
            if run:
                out.append(text_acceptor("".join(run)))
                run = []
            folded = self.fold and isinstance(part, ip._Repeated) and i < len(parts) - 1
            base, m, n = flatten(part) if folded else (None, 0, None)
            x = self.dfa(self.build(base), "the byte automaton of a repeated group") if n else None
            finite = x is not None and x.properties(pynini.ACYCLIC, True) == pynini.ACYCLIC
            out.append((x, m, n) if finite else self.build(part))
        return out + ([text_acceptor("".join(run))] if run else [])

    def repeat(self, node, m: int, n: int | None) -> pynini.Fst:
        if n == 0:
            return pynini.accep("")
        copies = n if n is not None else m + 1
        base = self.build(node).rmepsilon()
        if base.num_states() * copies <= self.small:
            return base.closure(m, n if n is not None else 0)  # pynini: upper 0 = unbounded
        d = self.dfa(base, "the byte automaton of a repeated group")
        if _prefix_free(d):
            if node is self.root_base:
                self.root_dfa = d
            return self.chain(d, m, n)
        if d.num_states() * copies <= self.closure_budget:  # copies of the minimal base, determinized later
            return d.closure(m, n if n is not None else 0)
        return _Powers(self, d).repetition(m, n)

    def chain(self, d: pynini.Fst, m: int, n: int | None) -> pynini.Fst:
        """x{m,n} for a prefix-free x (its minimal DFA D has one final state, without arcs).

        Copies of D in a row, each entered at a junction: the arcs into D's final state go to
        the next junction, and the junctions after m..n copies are final (x{m,}: the last copy
        loops back to its own junction). Deterministic by construction and built in bulk.
        """
        start = d.start()
        (final,) = [q for q in d.states() if d.final(q) != pynini.Weight.zero(d.weight_type())]
        if start == final:
            return pynini.accep("")
        arcs = [(q, a.ilabel, a.nextstate) for q in d.states() for a in d.arcs(q)]
        entry_loops = any(t == start for _, _, t in arcs)
        inner = [q for q in d.states() if q != final]
        local = {q: i for i, q in enumerate(inner)}
        width = len(inner) + entry_loops  # per copy; the entry is a separate state when D's start has arcs in
        entry = len(inner) if entry_loops else local[start]
        junction = -1
        src = [local[q] for q, _, _ in arcs] + ([entry] * d.num_arcs(start) if entry_loops else [])
        lab = [x for _, x, _ in arcs] + ([a.ilabel for a in d.arcs(start)] if entry_loops else [])
        dst = [junction if t == final else local[t] for _, _, t in arcs]
        dst += [junction if a.nextstate == final else local[a.nextstate] for a in d.arcs(start)] if entry_loops else []
        copies = n if n is not None else m + 1
        states = copies * width + (n is not None)
        if states > self.max_states:
            what = f"the byte automaton of a repetition {{{m},{'' if n is None else n}}} in regex {self.pattern!r}"
            raise LimitError(what, "max_states", self.max_states, states, remedy="simplify")
        src, lab, dst = (np.asarray(v, np.int64) for v in (src, lab, dst))

        def build(k: int, first_final: int) -> pynini.Fst:
            return self._copies(k, first_final, n is None, width, entry, junction, src, lab, dst)

        acyclic = d.properties(pynini.ACYCLIC, True) == pynini.ACYCLIC
        if self.chain_check is not None and d is self.root_dfa and n is not None and acyclic and copies > 3:
            self.chain_check(lambda k: build(k, 0), copies)  # may refuse from 2 and 3 copies (estimate)
        report(states)
        return build(copies, m)

    @staticmethod
    def _copies(copies: int, m: int, loops: bool, width: int, entry: int, junction: int, src: np.ndarray,
                lab: np.ndarray, dst: np.ndarray) -> pynini.Fst:
        """``copies`` copies of D's arcs in a row (see :meth:`chain`), junctions from the m-th final."""
        n = None if loops else copies
        states = copies * width + (n is not None)
        base = np.arange(copies, dtype=np.int64)[:, None] * width
        next_junction = base + width + entry  # the junction after copy i: entry of copy i + 1
        if n is None:
            next_junction[-1] = base[-1] + entry  # x{m,}: the last copy loops to its own junction
        else:
            next_junction[-1] = copies * width  # the end state
        all_src = (base + src).ravel()
        all_dst = np.where(dst == junction, next_junction, base + dst).ravel()
        all_lab = np.broadcast_to(lab, (copies, len(lab))).ravel()
        finals = np.zeros(states, bool)
        junctions = np.append(np.arange(copies, dtype=np.int64) * width + entry,
                              [copies * width] if n is not None else [])
        finals[junctions[m:].astype(np.int64)] = True
        return fst_from_arrays(states, entry, finals, all_src, all_lab, all_lab, all_dst)


PROBE_STATES = 1 << 12  # subset states (at least 4 per NFA state) before the folded construction is tried


def _built(pattern: str, tree, max_states: int, chain_check, special: list) -> pynini.Fst:
    """The DFA of the parse tree: Thompson's NFA determinized once; past ``PROBE_STATES`` subsets (or
    4 per NFA state), concatenations folded from the right (:mod:`text.fold`), whose steps stay near the
    minimal size."""
    def builder(folded: bool) -> _Builder:
        return _Builder(pattern, max_states, chain_check=chain_check, root=_sole_repetition(tree), groups=special,
                        fold=folded)

    nfa = builder(False).build(tree)
    probe = min(max_states, max(PROBE_STATES, 4 * nfa.num_states()))
    f = determinize_bounded(nfa, probe)
    if f.num_states() <= probe or probe == max_states:
        return f
    return determinize_bounded(builder(True).build(tree), max_states)


def _sole_repetition(tree):
    """The repetition node that is the whole regex, or None."""
    node = tree
    while True:
        if isinstance(node, ip.Pattern) and len(node.options) == 1:
            node = next(iter(node.options))
        elif isinstance(node, ip._Concatenation) and len(node.parts) == 1:
            node = node.parts[0]
        else:
            return node if isinstance(node, ip._Repeated) else None


def _prefix_free(d: pynini.Fst) -> bool:
    """Is the minimal DFA's language prefix-free (one final state, without arcs)?"""
    zero = pynini.Weight.zero(d.weight_type())
    finals = [q for q in d.states() if d.final(q) != zero]
    return len(finals) == 1 and d.num_arcs(finals[0]) == 0


class _Powers:
    """Powers D^k (``exactly``) and E_k = (eps | D)^k (``up_to``) of a minimal DFA D, by doubling."""

    def __init__(self, builder: _Builder, d: pynini.Fst):
        self.b = builder
        self.squares = [d]  # D^(2^j)
        self.upto_squares = [None]  # E_(2^j), built on demand

    def det(self, f: pynini.Fst, lo: int, hi: int | None) -> pynini.Fst:
        count = f"{{{lo}}}" if lo == hi else f"{{{lo},{'' if hi is None else hi}}}"
        return self.b.dfa(f, f"the byte automaton of a repetition {count}")

    def square(self, j: int) -> pynini.Fst:
        while len(self.squares) <= j:
            k = 1 << (len(self.squares) - 1)
            self.squares.append(self.det(pynini.concat(self.squares[-1], self.squares[-1]), 2 * k, 2 * k))
        return self.squares[j]

    def upto_square(self, j: int) -> pynini.Fst:
        """E_(2^j): E_1 = eps | D, E_2k = E_k | D^k E_k."""
        while len(self.upto_squares) <= j:
            self.upto_squares.append(None)
        if self.upto_squares[j] is None:
            if j == 0:
                e = self.det(pynini.union(pynini.accep(""), self.squares[0]), 0, 1)
            else:
                k = 1 << (j - 1)
                half = self.upto_square(j - 1)
                e = self.det(pynini.union(half, pynini.concat(self.square(j - 1), half)), 0, 2 * k)
            self.upto_squares[j] = e
        return self.upto_squares[j]

    def exactly(self, k: int) -> pynini.Fst | None:
        """D^k (None for k = 0: the empty string)."""
        acc, done, j = None, 0, 0
        while k >> j:
            if (k >> j) & 1:
                sq = self.square(j)
                done += 1 << j
                acc = sq.copy() if acc is None else self.det(pynini.concat(acc, sq), done, done)
            j += 1
        return acc

    def up_to(self, k: int) -> pynini.Fst:
        """E_k, as E_(r+2^j) = E_r | D^r E_(2^j) over the bits of k."""
        acc, power, r, j = None, None, 0, 0
        while k >> j:
            if (k >> j) & 1:
                e = self.upto_square(j)
                if acc is None:
                    acc = e.copy()
                else:
                    acc = self.det(pynini.union(acc, pynini.concat(power, e)), 0, r + (1 << j))
                r += 1 << j
                if k >> (j + 1):
                    power = self.square(j) if power is None else self.det(pynini.concat(power, self.square(j)), r, r)
            j += 1
        return acc

    def repetition(self, m: int, n: int | None) -> pynini.Fst:
        """x{m,n} = D^m E_(n-m); x{m,} = D^m D*."""
        head = self.exactly(m)
        if n is None:
            tail = self.det(self.squares[0].copy().closure(), 0, None)
        elif n > m:
            tail = self.up_to(n - m)
        else:
            return head
        if head is None:
            return tail
        return self.det(pynini.concat(head, tail), m, n)


def _from_interegular_fsm(pattern: str, tree: ip.Pattern, max_states: int) -> pynini.Fst:
    """interegular's character DFA, each class replaced by its byte-range acceptor."""
    fsm = tree.to_fsm()
    if len(fsm.states) > max_states:
        raise LimitError(f"the character automaton of regex {shown(pattern)}", "max_states", max_states,
                         len(fsm.states), remedy="simplify")
    members: dict[int, list[int]] = {}
    other = None
    for sym, cls in fsm.alphabet._symbol_mapping.items():
        if sym is anything_else:
            other = cls
        elif len(sym) == 1:  # (?i) can add str.upper() expansions such as "SS"; re never matches those
            members.setdefault(cls, []).append(ord(sym))
    ranges = {cls: utf8.remove_surrogates(utf8.ranges_of(cps)) for cls, cps in members.items()}
    if other is not None:
        ranges[other] = utf8.complement(utf8.ranges_of(cp for cps in members.values() for cp in cps))
    classes = {cls: ranges_acceptor(r) for cls, r in ranges.items()}
    f = pynini.Fst()
    one = pynini.Weight.one(f.weight_type())
    sid = {q: f.add_state() for q in sorted(fsm.states)}
    f.set_start(sid[fsm.initial])
    for q in fsm.finals:
        f.set_final(sid[q])
    for q, trans in fsm.map.items():
        for cls, q2 in trans.items():
            c = classes[cls]
            offset = f.num_states()
            f.add_states(c.num_states())
            f.add_arc(sid[q], pynini.Arc(0, 0, one, offset + c.start()))
            for s in c.states():
                for arc in c.arcs(s):
                    f.add_arc(offset + s, pynini.Arc(arc.ilabel, arc.olabel, one, offset + arc.nextstate))
                if c.final(s) != pynini.Weight.zero(c.weight_type()):
                    f.add_arc(offset + s, pynini.Arc(0, 0, one, sid[q2]))
    return f


def compile_regex(pattern: str, max_states: int = 1_000_000, chain_check=None) -> ByteAutomaton:
    """The minimal DFA over bytes accepting the UTF-8 encodings of L(pattern).

    Estimate, then build: a lower bound on the minimal DFA's states read off the parse tree
    (:func:`states_at_least`) refuses a regex such as ``a{99999999}`` before anything is
    built; every determinization then stops past ``max_states``. ``chain_check(chain, copies)``
    (the next stage's estimate) sees a regex that is one bounded repetition x{m,n} of a finite
    prefix-free group (``.``, a class, a word), as chains of 2 and 3 copies (``chain(k)``), before the whole chain is
    built: that chain is its minimal DFA (unique factorization: every state knows how many
    copies may follow), each copy alike, so sizes extrapolate exactly. (x{m,}'s last two
    copies merge when minimized, and states of a cyclic x may: only a finite x is checked.)
    """
    rewritten, special = groups.rewrite(anchors.whole_match(pattern))  # matching is whole: edge anchors mean nothing
    tree = parse(rewritten)
    _refuse_lookaround(pattern, tree)
    flagged = _needs_interegular(tree)
    if flagged and special:
        raise InputError(f"regex {shown(pattern)} combines inline flags with the groups "
                         f"{', '.join(g.name for g in special)}",
                         "drop the inline flags ((?i) ...) or the special groups")
    at_least = states_at_least(tree, chars_only=flagged)
    if at_least > max_states:
        raise LimitError(f"the byte automaton of regex {shown(pattern)}", "max_states", max_states, at_least,
                         remedy="simplify", at_least=True)
    if flagged:
        try:
            nfa = _from_interegular_fsm(pattern, tree, max_states)
        except ip.Unsupported as e:
            raise InputError(f"regex {shown(pattern)} uses unsupported syntax: {e}",
                             "drop the inline flag or construct") from None
        except (ValueError, TypeError, KeyError, RecursionError, NotImplementedError) as e:
            raise InputError(f"regex {shown(pattern)} cannot be compiled: {e}", "simplify the pattern") from None
        f = determinize_bounded(nfa, max_states)
    else:
        f = _built(pattern, tree, max_states, chain_check, special)
    if f.num_states() > max_states:
        raise LimitError(f"the byte automaton of regex {shown(pattern)}", "max_states", max_states, remedy="simplify")
    f.connect().minimize()
    report(f.num_states())
    if f.start() == pynini.NO_STATE_ID or f.num_states() == 0:
        raise EmptyLanguageError(f"regex {shown(pattern)} matches no string", "check the pattern")
    table = byte_table()
    for g in special:
        if g.name in TOKEN_GROUPS:
            table.add_symbol(f"<{g.name}>", PLACEHOLDER_BASE + KIND_NAMES.index(TOKEN_GROUPS[g.name]))
    f.set_input_symbols(table).set_output_symbols(table)
    return ByteAutomaton(fst=f, pattern=pattern)
