"""Stage A: regex to a minimal deterministic acceptor over UTF-8 bytes (seed 000 Sec. 5; seed 001 Sec. 3).

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
import pynini
from interegular import patterns as ip
from interegular.fsm import anything_else

from . import utf8
from .errors import EmptyLanguageError, InputError, LimitError
from .symbols import byte_table

Ranges = list[tuple[int, int]]


@dataclass
class ByteAutomaton:
    fst: pynini.Fst
    pattern: str


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
                raise InputError(f"unknown character name \\N{{{m.group(3)}}}", "use a Unicode character name") from None
        cp = int(m.group(1) or m.group(2), 16)
        if cp > utf8.MAX_CODE_POINT:
            raise InputError(f"escape {m.group(0)} is beyond U+10FFFF", "use a valid code point")
        return _literal(cp)

    return _UNICODE_ESCAPE.sub(sub, pattern)


def parse(pattern: str) -> ip.Pattern:
    """interegular's parse tree, or a one-line InputError naming the problem."""
    try:
        return interegular.parse_pattern(expand_escapes(pattern))
    except ip.Unsupported as e:
        raise InputError(f"regex {pattern!r} uses unsupported syntax: {e}",
                         "patterns match in full: drop anchors, backreferences and lookaround") from None
    except ip.InvalidSyntax:
        try:
            re.compile(pattern)
            why = "interegular cannot parse it"
        except re.error as e:
            why = f"{e.msg} at position {e.pos}"
        raise InputError(f"invalid regex {pattern!r}: {why}", "fix the pattern (Python re syntax)") from None
    except (ValueError, TypeError, KeyError, RecursionError) as e:
        raise InputError(f"regex {pattern!r} cannot be compiled: {e}", "simplify the pattern") from None


def ranges_acceptor(ranges: Ranges) -> pynini.Fst:
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


def _char_class(node: ip._CharGroup) -> Ranges:
    ranges = utf8.remove_surrogates(utf8.ranges_of(ord(c) for c in node.chars))
    return utf8.complement(ranges) if node.negated else ranges


def _refuse_lookaround(pattern: str, node) -> None:
    """Lookaround has no fullmatch-exact translation here (interegular lets a trailing
    lookahead see past the end of the match), so it is refused rather than approximated."""
    if isinstance(node, ip._NonCapturing):
        kind = ("negative " if node.negate else "") + ("lookbehind" if node.backwards else "lookahead")
        raise InputError(f"regex {pattern!r} uses unsupported syntax: {kind}",
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


def _build(node, memo: dict) -> pynini.Fst:
    """Thompson-style construction over the parse tree with pynini's rational operations."""
    if node is ip._EMPTY:
        return pynini.accep("")
    if node is ip._DOT:
        node = ip._CharGroup(frozenset("\n"), True)  # Python re: any character but newline
    if isinstance(node, ip._CharGroup):
        key = (node.chars, node.negated)
        if key not in memo:
            memo[key] = ranges_acceptor(_char_class(node))
        return memo[key].copy()
    if isinstance(node, ip._Concatenation):
        f = pynini.accep("")
        for part in node.parts:
            f.concat(_build(part, memo))
        return f
    if isinstance(node, ip.Pattern):
        if not node.options:
            return pynini.Fst()  # no alternative: the empty language
        first, *rest = (_build(o, memo) for o in node.options)
        return first.union(*rest) if rest else first
    if isinstance(node, ip._Repeated):
        base = _build(node.base, memo).rmepsilon()
        upper = node.max if node.max is not None else 0  # pynini: upper 0 = unbounded
        if node.max == 0:
            return pynini.accep("")
        return base.closure(node.min, upper)
    raise AssertionError(f"unexpected regex node {node!r}")  # _needs_interegular routes the rest


def _from_interegular_fsm(pattern: str, tree: ip.Pattern, max_states: int) -> pynini.Fst:
    """interegular's character DFA, each class replaced by its byte-range acceptor."""
    fsm = tree.to_fsm()
    if len(fsm.states) > max_states:
        raise LimitError(f"the character automaton of regex {pattern!r}", "max_states", max_states,
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


def compile_regex(pattern: str, max_states: int = 1_000_000) -> ByteAutomaton:
    """The minimal DFA over bytes accepting the UTF-8 encodings of L(pattern)."""
    tree = parse(pattern)
    _refuse_lookaround(pattern, tree)
    if _needs_interegular(tree):
        try:
            nfa = _from_interegular_fsm(pattern, tree, max_states)
        except (ValueError, TypeError, KeyError, RecursionError, NotImplementedError) as e:
            raise InputError(f"regex {pattern!r} cannot be compiled: {e}", "simplify the pattern") from None
    else:
        nfa = _build(tree, {})
    nfa.rmepsilon()
    f = pynini.determinize(nfa, nstate=max_states + 1)
    if f.num_states() > max_states:
        raise LimitError(f"the byte automaton of regex {pattern!r}", "max_states", max_states, remedy="simplify")
    f.connect().minimize()
    if f.start() == pynini.NO_STATE_ID or f.num_states() == 0:
        raise EmptyLanguageError(f"regex {pattern!r} matches no string", "check the pattern")
    table = byte_table()
    f.set_input_symbols(table).set_output_symbols(table)
    return ByteAutomaton(fst=f, pattern=pattern)
