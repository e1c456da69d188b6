"""Stage P for BPE, step 1: an HF Split pattern as a priority NFA (Pitfalls 2025 Sec. 3.1).

The pattern is parsed with Python's own regex parser (HF's ``\\p{..}``, ``\\s``, ... stand in as
placeholder characters whose sets are read off HF's engine, :mod:`.charclass`), then compiled
Thompson-style with *ordered* epsilon branches: alternatives left to right, greedy loops before
their exit, lazy ones after, bounded repetitions as nested optional copies. Lookahead is kept when
its body is one character class (an assertion on the next character or the end of the text).
Refused by name: look-behind, longer lookahead, anchors, back-references, possessive quantifiers,
atomic groups, inline flags other than ``(?i)``.
"""

from __future__ import annotations

import re
import re._constants as C
import re._parser as sre
from dataclasses import dataclass, field

from tokfst_cli.errors import InputError
from tokfst_cli.pretok import charclass

_PLACEHOLDER = 0xF0000  # plane 15 private use: stands for HF's class escapes while Python parses
_CLASS_ESCAPE = re.compile(r"\\(p\{[^}]*\}|P\{[^}]*\}|p[A-Za-z]|P[A-Za-z]|[sSdDwWh])|\\.", re.S)
CHAR, SPLIT, MATCH, ASSERT = 0, 1, 2, 3
EOT = None


def _refuse(pattern: str, what: str) -> InputError:
    return InputError(f"Split pattern {pattern!r} uses {what}, which tokfst does not model",
                      "only patterns without it can be compiled exactly")


@dataclass
class Nfa:
    """Priority NFA: ``kind[i]``; CHAR/ASSERT carry a set index; SPLIT ordered targets."""

    pattern: str
    kind: list[int] = field(default_factory=list)
    arg: list = field(default_factory=list)  # CHAR: set id; ASSERT: (set id, negate); SPLIT: None
    out: list[list[int]] = field(default_factory=list)
    sets: list[charclass.Ranges] = field(default_factory=list)
    start: int = -1

    def node(self, kind: int, arg=None, out: list[int] | None = None) -> int:
        self.kind.append(kind)
        self.arg.append(arg)
        self.out.append(out or [])
        return len(self.kind) - 1

    def charset(self, ranges: charclass.Ranges) -> int:
        self.sets.append(ranges)
        return len(self.sets) - 1


class _Compiler:
    """sre parse tree -> priority NFA, placeholders resolved through HF's tables."""

    def __init__(self, pattern: str, extra: dict[str, charclass.Ranges] | None = None):
        self.pattern = pattern
        self.extra = extra or {}
        self.atoms: list[str] = []
        text = _CLASS_ESCAPE.sub(self._placeholder, pattern)
        try:
            tree = sre.parse(text)
        except re.error as e:
            raise InputError(f"Split pattern {pattern!r} cannot be parsed: {e}", "fix the pattern") from None
        self.nfa = Nfa(pattern)
        match = self.nfa.node(MATCH)
        self.nfa.start = self.seq(list(tree), match, False)

    def _placeholder(self, m: re.Match) -> str:
        if m.group(1) is None:
            return m.group(0)
        if m.group(1) == "h":
            raise _refuse(self.pattern, "\\h")
        self.atoms.append("\\" + m.group(1))
        return chr(_PLACEHOLDER + len(self.atoms) - 1)

    def char(self, cp: int, ic: bool) -> charclass.Ranges:
        if _PLACEHOLDER <= cp < _PLACEHOLDER + len(self.atoms):
            atom = self.atoms[cp - _PLACEHOLDER]
            if atom in self.extra:
                return list(self.extra[atom])
            return list(charclass.members(f"(?i:{atom})" if ic else atom))
        if ic:
            c = chr(cp)
            lit = c if c.isalnum() else f"\\x{{{cp:x}}}"
            return list(charclass.members(f"(?i:{lit})"))
        return [(cp, cp)]

    def item_set(self, op, av, ic: bool) -> charclass.Ranges:
        if op is C.LITERAL:
            return self.char(av, ic)
        if op is C.NOT_LITERAL:
            return charclass.complement(self.char(av, ic))
        if op is C.ANY:
            return charclass.complement([(10, 10)])
        if op is C.IN:
            negate = bool(av) and av[0][0] is C.NEGATE
            parts = []
            for sub, sav in av[1:] if negate else av:
                if sub is C.LITERAL:
                    parts.append(self.char(sav, ic))
                elif sub is C.RANGE:
                    lo, hi = sav
                    if ic and hi - lo > 64:
                        raise _refuse(self.pattern, "a long range under (?i)")
                    parts.append(charclass.union(*(self.char(c, ic) for c in range(lo, hi + 1))) if ic
                                 else [(lo, hi)])
                else:
                    raise _refuse(self.pattern, f"the class item {sub}")
            s = charclass.union(*parts)
            return charclass.complement(s) if negate else charclass.remove_surrogates(s)
        raise _refuse(self.pattern, str(op))

    def seq(self, items: list, nxt: int, ic: bool) -> int:
        for op, av in reversed(items):
            nxt = self.item(op, av, nxt, ic)
        return nxt

    def item(self, op, av, nxt: int, ic: bool) -> int:
        nfa = self.nfa
        if op in (C.LITERAL, C.NOT_LITERAL, C.ANY, C.IN):
            return nfa.node(CHAR, nfa.charset(self.item_set(op, av, ic)), [nxt])
        if op is C.BRANCH:
            return nfa.node(SPLIT, None, [self.seq(list(alt), nxt, ic) for alt in av[1]])
        if op is C.SUBPATTERN:
            _, add, remove, sub = av
            flags_ic = (ic or bool(add & re.IGNORECASE)) and not (remove & re.IGNORECASE)
            if (add | remove) & ~re.IGNORECASE & ~re.UNICODE:
                raise _refuse(self.pattern, "an inline flag other than (?i)")
            return self.seq(list(sub), nxt, flags_ic)
        if op in (C.MAX_REPEAT, C.MIN_REPEAT):
            return self.repeat(op is C.MAX_REPEAT, *av, nxt=nxt, ic=ic)
        if op in (C.ASSERT, C.ASSERT_NOT):
            direction, sub = av
            if direction != 1:
                raise _refuse(self.pattern, "look-behind")
            body = list(sub)
            if len(body) != 1 or body[0][0] not in (C.LITERAL, C.NOT_LITERAL, C.ANY, C.IN):
                raise _refuse(self.pattern, "lookahead longer than one character")
            s = nfa.charset(self.item_set(*body[0], ic))
            return nfa.node(ASSERT, (s, op is C.ASSERT_NOT), [nxt])
        names = {C.AT: "anchors", C.GROUPREF: "back-references", C.POSSESSIVE_REPEAT: "possessive quantifiers",
                 C.ATOMIC_GROUP: "atomic groups"}
        raise _refuse(self.pattern, names.get(op, str(op)))

    def repeat(self, greedy: bool, lo: int, hi, sub, nxt: int, ic: bool) -> int:
        nfa = self.nfa
        body = list(sub)
        if hi is C.MAXREPEAT:
            loop = nfa.node(SPLIT)
            enter = self.seq(body, loop, ic)
            nfa.out[loop] = [enter, nxt] if greedy else [nxt, enter]
            tail = loop
        else:
            tail = nxt
            for _ in range(hi - lo):  # (x (x ...)?)?: every optional copy exits to nxt
                enter = self.seq(body, tail, ic)
                tail = nfa.node(SPLIT, None, [enter, nxt] if greedy else [nxt, enter])
        for _ in range(lo):
            tail = self.seq(body, tail, ic)
        return tail


def compile_pattern(pattern: str, extra: dict[str, charclass.Ranges] | None = None) -> Nfa:
    """The priority NFA of an HF Split pattern (Oniguruma syntax as HF's patterns use it).

    ``extra`` binds escapes such as ``\\p{tokfst:digits}`` to explicit character sets."""
    return _Compiler(pattern, extra).nfa
