"""Regex extensions as specially named groups (Koo et al. 2024 Sec. 2.5, Table 1).

* token-level terminals: ``(?P<TEXT_TOKEN>)`` and ``(?P<PARAGRAPH_TOKEN>)`` match one token of
  the kind's mask (``terminals.py``); in the byte automaton they are one arc with a
  placeholder label (``terminals.PLACEHOLDER_BASE`` + kind).
* text wildcards, expanded as regex text: ``(?P<QUOTED_TEXT>)`` (a JSON-style quoted string with
  backslash escapes) and ``(?P<UNQUOTED_TEXT>)`` (a YAML-style plain scalar on one line). Their
  loops become terminal labels at promotion like any other wildcard.
* syntactic sugar (``sugar.py``): ``SUBSTRING_OF``, ``DELIMITED_LIST``,
  ``DELIMITED_SUBSEQUENCE_OF``, ``TEXT_UNTIL``, each compiled to its automaton directly.

:func:`rewrite` replaces each token-level or sugar group by a reserved code point (Supplementary
Private Use Area-A, U+F0000..), which the regex builder turns into the group's automaton.
Other named groups are ordinary groups.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable

import pynini

from tokfst_cli.errors import InputError
from tokfst_cli.text.sugar import NAMES as SUGAR_NAMES
from tokfst_cli.text.sugar import _atom, build, close
from tokfst_cli.text.terminals import KIND_NAMES, PLACEHOLDER_BASE, TOKEN_GROUPS

RESERVED = 0xF0000  # placeholders U+F0000 + i
RESERVED_END = 0xF0FFF
MACROS = {
    "QUOTED_TEXT": r'"(?:[^"\\\x00-\x1f]|\\["\\/bfnrt]|\\u[0-9a-fA-F]{4})*"',
    "UNQUOTED_TEXT": r"[^\s\x00-\x1f\"'#:\[\]{},|>&*!%@`?\-](?:[^\x00-\x1f:#])*",
}
_OPEN = re.compile(r"\(\?P<([A-Za-z_][A-Za-z0-9_]*)>")



@dataclass(frozen=True)
class Group:
    name: str
    body: str






def rewrite(pattern: str) -> tuple[str, list[Group]]:
    """The pattern with its special groups replaced (placeholders, expanded macros), and the
    groups each placeholder U+F0000 + i stands for."""
    if any(RESERVED <= ord(c) <= RESERVED_END for c in pattern):
        raise InputError(f"regex {pattern!r} uses a code point of U+F0000..U+F0FFF, which tokfst reserves",
                         "write those characters with a class range instead of literally")
    specials = set(TOKEN_GROUPS) | set(MACROS) | set(SUGAR_NAMES)
    groups: list[Group] = []
    out, i = [], 0
    while i < len(pattern):
        m = _OPEN.match(pattern, i)
        if m is None or m.group(1) not in specials:
            j = _atom(pattern, i)
            out.append(pattern[i:j])
            i = j
            continue
        name, start = m.group(1), m.end()
        end = close(pattern, start)
        if end < 0:
            raise InputError(f"regex {pattern!r}: group (?P<{name}> is not closed", "add the closing parenthesis")
        body = pattern[start:end]
        if body and (name in MACROS or name in TOKEN_GROUPS):
            raise InputError(f"regex {pattern!r}: (?P<{name}>) takes no body", f"write (?P<{name}>)")
        if name in MACROS:
            out.append(f"(?:{MACROS[name]})")
        else:
            out.append(f"(?:{chr(RESERVED + len(groups))})")
            groups.append(Group(name, body))
        i = end + 1
    return "".join(out), groups


def placeholder(chars: frozenset, negated: bool) -> int | None:
    """The group index of a placeholder character class, else None."""
    if negated or len(chars) != 1:
        return None
    (c,) = chars
    return ord(c) - RESERVED if RESERVED <= ord(c) <= RESERVED_END else None


def automaton(group: Group, compile: Callable[[str], pynini.Fst]) -> pynini.Fst:
    """The group's byte automaton: one placeholder arc (token-level terminal) or the sugar's."""
    if group.name in TOKEN_GROUPS:
        label = PLACEHOLDER_BASE + KIND_NAMES.index(TOKEN_GROUPS[group.name])
        f = pynini.Fst()
        one = pynini.Weight.one(f.weight_type())
        a, b = f.add_state(), f.add_state()
        f.set_start(a)
        f.set_final(b)
        f.add_arc(a, pynini.Arc(label, label, one, b))
        return f

    return build(group.name, group.body, compile)
