"""Anchors at the edges of a match, read off a pattern's text: whole-match regexes accept ``^``
and ``$`` where they mean nothing else, and a JSON Schema ``pattern`` (an ECMA-262 search) splits
into alternatives that are anchored or not.

The scan sees a pattern's characters outside character classes and escapes, with the group
depth before each. A top-level alternative that is one group (plain ``(...)``, ``(?:...)``, or a
named group where ``named``) is opened, recursively: ``(^a.+)|(^b)`` is the alternatives
``^a.+`` and ``^b`` (the match of an alternation is the match of one alternative).
"""

from __future__ import annotations

from collections.abc import Iterator

STARTS = ("^", "\\A")
ENDS = ("$", "\\Z", "\\z")


def scan(p: str) -> Iterator[tuple[int, str, int]]:
    """(index, character, group depth before it) of the characters outside classes and escapes."""
    depth, in_class, j = 0, False, 0
    while j < len(p):
        c = p[j]
        if c == "\\":
            j += 2
            continue
        if in_class:
            in_class = c != "]"
        elif c == "[":
            in_class = True
        else:
            yield j, c, depth
            depth += (c == "(") - (c == ")")
        j += 1


def alternatives(p: str) -> list[str]:
    """The top-level alternatives of ``p``."""
    cuts = [j for j, c, depth in scan(p) if c == "|" and depth == 0]
    return [p[a + 1:b] for a, b in zip([-1, *cuts], [*cuts, len(p)])]


def group_body(p: str, named: bool) -> str | None:
    """The body of ``p`` if ``p`` is exactly one plain or non-capturing group (or, if ``named``,
    a named one), else None."""
    if not p.startswith("("):
        return None
    closing = next((j for j, c, depth in scan(p) if c == ")" and depth == 1), -1)
    if closing != len(p) - 1:
        return None
    if p.startswith("(?:"):
        return p[3:-1]
    if p.startswith("(?"):
        is_named = p.startswith(("(?P<", "(?<")) and not p.startswith(("(?<=", "(?<!"))
        return p[p.index(">") + 1:-1] if named and is_named else None
    return p[1:-1]


def _leading_group(alt: str, named: bool) -> tuple[str, str] | None:
    """(body, rest) when ``alt`` starts with a group (as :func:`group_body` takes) that no
    quantifier follows, else None."""
    if not alt.startswith("("):
        return None
    closing = next((j for j, c, depth in scan(alt) if c == ")" and depth == 1), -1)
    rest = alt[closing + 1:]
    if closing < 0 or rest[:1] in ("*", "+", "?", "{"):
        return None
    body = group_body(alt[:closing + 1], named)
    return None if body is None else (body, rest)


def _trailing_group(alt: str, named: bool) -> tuple[str, str] | None:
    """(head, body) when ``alt`` ends with a group (as :func:`group_body` takes), else None."""
    if not alt.endswith(")"):
        return None
    opening = [j for j, c, depth in scan(alt) if c == "(" and depth == 0]
    if not opening:
        return None
    head, group = alt[:opening[-1]], alt[opening[-1]:]
    body = group_body(group, named)
    return None if body is None else (head, body)


def _anchored(body: str) -> bool:
    return any(c in "^$" for _, c, _ in scan(body)) or any(a in body for a in (*STARTS[1:], *ENDS[1:]))


def flat(p: str, named: bool = False, limit: int = 64) -> list[str]:
    """The alternatives of ``p``, groups that are whole alternatives opened, and a group that
    starts (ends) an alternative distributed over it where it holds an anchor:
    ``(^a|b)c`` is ``^ac`` and ``bc`` (at most ``limit`` alternatives; past it, left as it is)."""
    out: list[str] = []
    for alt in alternatives(p):
        body = group_body(alt, named)
        if body is not None:
            out += flat(body, named, limit)
            continue
        lead = _leading_group(alt, named)
        if lead is not None and _anchored(lead[0]) and len(alternatives(lead[0])) <= limit:
            out += flat("|".join(x + lead[1] for x in flat(lead[0], named, limit)), named, limit)
            continue
        tail = _trailing_group(alt, named)
        if tail is not None and _anchored(tail[1]) and len(alternatives(tail[1])) <= limit:
            out += [tail[0] + x for x in flat(tail[1], named, limit)]
            continue
        out.append(alt)
    return out


def _ends_with_end(alt: str) -> str | None:
    """The end anchor that ends ``alt`` (not escaped, outside a class), or None."""
    last = None
    for j, c, _ in scan(alt):
        last = (j, c)
    if last is not None and last[1] == "$" and last[0] == len(alt) - 1:
        return "$"
    for anchor in ENDS[1:]:  # escapes: the Z (z) ends an escape when an odd run of backslashes precedes it
        body = alt[:-1]
        if alt.endswith(anchor) and (len(body) - len(body.rstrip("\\"))) % 2 == 1:
            return anchor
    return None


def whole_match(p: str) -> str:
    """A whole-match regex without the anchors that stand at the edges of its match: ``^`` or
    ``\\A`` starting, ``$``, ``\\Z`` or ``\\z`` ending an alternative (groups that are whole
    alternatives opened); anything else is left for the parser to refuse."""
    if not any(a in p for a in (*STARTS, *ENDS)):
        return p
    parts = flat(p)
    if len(parts) == 1 and parts[0] == p and not p.startswith(STARTS) and _ends_with_end(p) is None:
        return p
    out = []
    for alt in parts:
        for anchor in STARTS:
            if alt.startswith(anchor):
                alt = alt[len(anchor):]
                break
        end = _ends_with_end(alt)
        if end is not None:
            alt = alt[:-len(end)]
        out.append(f"(?:{alt})" if len(parts) > 1 else alt)
    return "|".join(out)
