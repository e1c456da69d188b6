"""Regex to a minimal deterministic acceptor over UTF-8 bytes (DESIGN.md, module ``regex``).

interegular parses the pattern (Python ``re`` syntax) into a DFA over character classes; each
class becomes the UTF-8 byte-range sequences of its code points (``utf8.sequences``) and
pynini determinizes and minimizes the byte automaton. The acceptor accepts exactly the UTF-8
encodings of L(regex), with fullmatch semantics. Labels: byte b is b+1.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import interegular
import pynini
from interegular.fsm import anything_else
from interegular.patterns import InvalidSyntax, Unsupported

from . import utf8
from .errors import EmptyLanguageError, InputError, LimitError
from .symbols import byte_table


@dataclass
class ByteAutomaton:
    fst: pynini.Fst
    pattern: str
    char_states: int


def parse(pattern: str):
    """interegular's FSM for the pattern, or a one-line InputError naming the problem."""
    try:
        return interegular.parse_pattern(pattern).to_fsm()
    except Unsupported as e:
        raise InputError(f"regex {pattern!r} uses unsupported syntax: {e}",
                         "rewrite it without backreferences or lookbehind") from None
    except InvalidSyntax:
        try:
            re.compile(pattern)
            why = "interegular cannot parse it"
        except re.error as e:
            why = f"{e.msg} at position {e.pos}"
        raise InputError(f"invalid regex {pattern!r}: {why}", "fix the pattern (Python re syntax)") from None
    except (ValueError, TypeError, KeyError, RecursionError) as e:
        raise InputError(f"regex {pattern!r} cannot be compiled: {e}", "simplify the pattern") from None


def class_ranges(fsm) -> dict[int, list[tuple[int, int]]]:
    """Code point ranges of every interegular alphabet class (anything_else = the rest of Unicode)."""
    members: dict[int, list[int]] = {}
    other = None
    for sym, cls in fsm.alphabet._symbol_mapping.items():
        if sym is anything_else:
            other = cls
        else:
            members.setdefault(cls, []).append(ord(sym))
    out = {cls: utf8.remove_surrogates(utf8.ranges_of(cps)) for cls, cps in members.items()}
    if other is not None:
        explicit = utf8.ranges_of(cp for cps in members.values() for cp in cps)
        out[other] = utf8.complement(explicit)
    return out


def compile_regex(pattern: str, max_states: int = 1_000_000) -> ByteAutomaton:
    """The minimal DFA over bytes accepting the UTF-8 encodings of L(pattern)."""
    fsm = parse(pattern)
    if len(fsm.states) > max_states:
        raise LimitError(f"regex {pattern!r} has {len(fsm.states)} character states (> --max-states {max_states})",
                         "simplify the regex or raise --max-states")
    seqs = {cls: list(utf8.sequences(r)) for cls, r in class_ranges(fsm).items()}
    f = pynini.Fst()
    one = pynini.Weight.one(f.weight_type())
    sid = {}
    for q in sorted(fsm.states):
        sid[q] = f.add_state()
    f.set_start(sid[fsm.initial])
    for q in fsm.finals:
        f.set_final(sid[q])
    for q, trans in fsm.map.items():
        inner: dict[tuple, int] = {}
        for cls, q2 in trans.items():
            for seq in seqs.get(cls, ()):
                src = sid[q]
                for k, (lo, hi) in enumerate(seq):
                    if k == len(seq) - 1:
                        dst, fresh = sid[q2], True
                    else:
                        key = (q2, seq[: k + 1])
                        dst = inner.get(key)
                        fresh = dst is None
                        if fresh:
                            dst = inner[key] = f.add_state()
                    if fresh:
                        for b in range(lo, hi + 1):
                            f.add_arc(src, pynini.Arc(b + 1, b + 1, one, dst))
                    src = dst
                if f.num_states() > max_states:
                    raise LimitError(f"regex {pattern!r} needs more than {max_states} byte states",
                                     "simplify the regex or raise --max-states")
    f = pynini.determinize(f.connect()).minimize()
    if f.start() == pynini.NO_STATE_ID or f.num_states() == 0:
        raise EmptyLanguageError(f"regex {pattern!r} matches no string", "check the pattern")
    table = byte_table()
    f.set_input_symbols(table).set_output_symbols(table)
    return ByteAutomaton(fst=f, pattern=pattern, char_states=len(fsm.states))
