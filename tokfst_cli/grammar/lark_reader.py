"""Lark grammars read into the grammar IR (:mod:`.ir`) with lark itself, from its compiled BNF.

The dialect llguidance and xgrammar accept: lowercase rules, UPPERCASE terminals (strings or
regexes), ``%ignore``, ``%import common.X``, ``x{m,n}``, ``?rule``, aliases, start rule ``start``.
lark expands the EBNF (``x*`` becomes a left-recursive ``__start_star_0``, ``x?`` two expansions);
each nonterminal becomes one rule (the union of its expansions), each terminal a rule of its own
named as lark names it (``NUMBER``, ``__ANON_0``, ``COMMA``): a :class:`~.ir.Text` for a string,
a :class:`~.ir.Regex` for a regex, ``(?i:...)`` for the ``i`` flag.

``%ignore``: the ignored terminals may stand before every terminal and at the end, so each
terminal occurrence ``T`` reads ``IGN* T``, and the grammar starts at a rule ``%start`` =
``start IGN*``, where ``IGN`` is the rule ``%ignore`` (the union of the ignored terminals).
Errors are :class:`~tokfst_cli.errors.InputError`, one line, with the line and column where known.
"""

from __future__ import annotations

import re

import lark
import regex
from lark.grammar import NonTerminal, Terminal
from lark.lexer import PatternStr, TerminalDef
from lark.load_grammar import load_grammar

from tokfst_cli.errors import InputError
from tokfst_cli.grammar.ir import Expr, Grammar, Ref, Regex, Repeat, Text, alt, seq

START = "start"
IGNORE = "%ignore"  # the union of the ignored terminals (a name no Lark grammar can define)
IGNORE_START = "%start"  # start, then ignored terminals
DEFINITION = re.compile(r"^[ \t]*[?!]?([A-Za-z_][A-Za-z_0-9]*)(?:\.-?\d+)?(?:[ \t]*\{[^}\n]*\})?[ \t]*:", re.M)
POSITION = re.compile(r",? at line (\d+),? column (\d+)(?: in \S+)?:?\.?")
PUNCTUATION = {"_RPAR": "')'", "_RSQB": "']'", "_RBRACE": "'}'", "_COLON": "':'", "_NL": "end of line",
               "_DOT": "'.'", "_LBRACE": "'{'"}
# Lark's own lexemes, for rewriting llguidance's x{m,n} into lark's x ~ m..n
PIECES = re.compile(r"""(?P<skip>"(?:\\.|[^"\\\n])*"i?|/(?!/)(?:\\.|[^/\\\n])+/[imslux]*|//[^\n]*|\#[^\n]*)"""
                    r"|(?P<name>[?!]?[A-Za-z_][A-Za-z_0-9.]*)|(?P<open>[(\[])|(?P<close>[)\]])"
                    r"|(?P<brace>\{[ \t]*(?P<lo>\d*)[ \t]*(?P<comma>,)?[ \t]*(?P<hi>\d*)[ \t]*\})|(?P<other>.)", re.S)
FIX = "see lark's grammar reference: rules as name: ..., terminals as NAME: ..."


def _definitions(text: str) -> dict[str, list[int]]:
    """The lines defining each name, in order (scanned from the text: lark's rules carry no lines)."""
    out: dict[str, list[int]] = {}
    for m in DEFINITION.finditer(text):
        out.setdefault(m.group(1), []).append(text.count("\n", 0, m.start(1)) + 1)
    return out


def _first_line(message: str) -> str:
    """lark's (multi-line) message: its first line, whitespace squashed."""
    lines = [s for s in message.splitlines() if s.strip()]
    return " ".join(lines[0].split()) if lines else message


def _error(e: Exception, source: str, text: str) -> InputError:
    """lark's error as one line, with the line (and column) where known."""
    where = f"grammar {source}"
    if isinstance(e, lark.exceptions.UnexpectedInput):
        if isinstance(e, lark.exceptions.UnexpectedToken) and e.token.type == "$END":
            return InputError(f"{where}: the text ends inside a rule (a group is not closed)", "close it")
        what = str(e.token if isinstance(e, lark.exceptions.UnexpectedToken) else getattr(e, "char", ""))
        shown = "end of line" if what.strip() == "" else "'" + _show(what) + "'"
        expected = getattr(e, "expected", None) or ()
        known = expected and all(x in PUNCTUATION for x in expected)
        wanted = f" (expected {' or '.join(sorted(PUNCTUATION[x] for x in expected))})" if known else ""
        return InputError(f"{where} line {e.line} column {e.column}: unexpected {shown}{wanted}", FIX)
    if isinstance(e, OSError):
        return InputError(f"{where}: %import cannot find {e.filename or e}",
                          "put the imported grammar beside this one or list its folder in import_paths")
    if isinstance(e, (re.error, regex.error)):
        pattern = getattr(e, "pattern", None)
        shown = f"/{pattern}/ " if isinstance(pattern, str) else ""
        return InputError(f"{where}: the regex {shown}does not compile ({_first_line(str(e))})",
                          "correct the regex (Python re syntax)")
    if len(e.args) == 2 and isinstance(e.args[1], TerminalDef):  # ("Dynamic Earley doesn't allow ...", t)
        return InputError(f"{where}: terminal {_named(e.args[1])} can match the empty string "
                          f"({_first_line(str(e.args[0]))})", "make it match at least one character, "
                          "and make its uses optional instead")
    message = _first_line(str(e))
    if "Using an undefined rule: NonTerminal('start')" in message:
        return InputError(f"{where} has no rule 'start'", "name the start rule start")
    lines = _definitions(text)
    m = POSITION.search(message)
    if m:
        where += f" line {m.group(1)} column {m.group(2)}"
        message = POSITION.sub("", message, count=1)
        line, column = int(m.group(1)), int(m.group(2))
        rows = text.splitlines()
        if message == "Unexpected input" and line <= len(rows) and column <= len(rows[line - 1]):
            char = rows[line - 1][column - 1]
            message = "a string is not closed on its line" if char == '"' else f"unexpected '{_show(char)}'"
    elif (m := re.search(r"\(in rule (\w+)\)", message)) and m.group(1) in lines:
        where += f" line {lines[m.group(1)][0]}"
    elif (m := re.match(r"Rule '(\w+)' defined more than once", message)) and len(lines.get(m.group(1), ())) > 1:
        where += f" line {lines[m.group(1)][1]}"
    message = message[:1].lower() + message[1:]
    return InputError(f"{where}: {message}", FIX)


def _show(s: str) -> str:
    """``s`` on one line: unprintable characters as Python escapes."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in s)


def _named(t: TerminalDef) -> str:
    """A terminal's name, with its pattern (an anonymous terminal's name alone says little)."""
    raw = getattr(t.pattern, "raw", None) or t.pattern.value
    return f"{t.name} ({_show(raw)})"


def braces(text: str) -> str:
    """``text`` with llguidance's repetitions ``x{m}``, ``x{m,n}``, ``x{,n}``, ``x{m,}`` (right after
    their operand) rewritten into lark's ``x ~ m``, ``x ~ m..n``, ``x*``, ``x+``, ``(x ~ m x*)``."""
    out: list[str] = []
    opened: list[int] = []
    atom: tuple[int, int] | None = None  # where the last operand starts in out, and len(out) after it
    for m in PIECES.finditer(text):
        kind, piece, start = m.lastgroup, m.group(), len(out)
        if kind == "brace" and m.group("hi") == "" and m.group("lo") == "" and m.group("comma") is None:
            kind = "other"  # {}: lark's own error
        if kind == "brace" and atom is not None and atom[1] == len(out):
            lo, hi, comma = m.group("lo") or "0", m.group("hi"), m.group("comma")
            operand = "".join(out[atom[0]:])
            if comma is None:
                piece = f" ~ {lo}"
            elif hi:
                piece = f" ~ {lo}..{hi}"
            elif int(lo) <= 1:
                piece = "*" if int(lo) == 0 else "+"
            else:
                del out[atom[0]:]
                again = operand if "//" in operand or "#" in operand else operand.replace("\n", " ")
                piece = f"({operand} ~ {lo} {again}*)"
            out.append(piece)
            atom = None
            continue
        out.append(piece)
        if kind == "open":
            opened.append(start)
        if kind == "skip" and piece[0] in '"/' or kind == "name":
            atom = (start, len(out))
        elif kind == "close" and opened:
            atom = (opened.pop(), len(out))
    return "".join(out)


def _terminal(t: TerminalDef, source: str) -> Expr:
    """A terminal's pattern as an expression."""
    p = t.pattern
    flags = set(p.flags)
    if flags - {"i"}:
        raise InputError(f"grammar {source}: terminal {_named(t)} uses the regex flag(s) "
                         f"{''.join(sorted(flags - {'i'}))}, which tokfst does not read",
                         "drop the flag (only i is read), e.g. write [\\s\\S] for . under s")
    if isinstance(p, PatternStr):
        return Regex(f"(?i:{re.escape(p.value)})") if flags else Text(p.value)
    return Regex(f"(?i:{p.value})") if flags else Regex(p.value)


def read_lark(text: str, source: str = "<grammar>", import_paths: list[str] = ()) -> Grammar:
    """The grammar IR of a Lark grammar's text; ``source`` names it in errors, ``import_paths``
    are the folders ``%import`` looks in (besides lark's own ``common``)."""
    try:
        loaded, _ = load_grammar(braces(text), source, list(import_paths), False)  # rules, no parser built
        terminals, rules, ignore_tokens = loaded.compile([START], set())
    except KeyError as e:  # compile() of a start rule the grammar does not define
        raise InputError(f"grammar {source} has no rule {e.args[0]!r}", "name the start rule start") from None
    except (lark.exceptions.LarkError, OSError, re.error, regex.error) as e:
        raise _error(e, source, text) from None
    if not any(r.origin.name == START for r in rules):
        raise InputError(f"grammar {source} has no rule '{START}'", "name the start rule start")
    defined = {t.name: t for t in terminals}
    ignored = [str(name) for name in ignore_tokens]
    lines = _definitions(text)

    def symbol(s: Terminal | NonTerminal, origin: str) -> Expr:
        if isinstance(s, NonTerminal):
            return Ref(str(s.name), 0)
        if s.name not in defined:
            decl = re.search(rf"^%declare\b[^\n]*\b{re.escape(s.name)}\b", text, re.M)
            at = f" line {text.count(chr(10), 0, decl.start()) + 1}" if decl else ""
            raise InputError(f"grammar {source}{at}: terminal {s.name} is declared but never defined "
                             f"(used in rule {origin})", f"define it ({s.name}: ...) instead of %declare")
        term = Ref(str(s.name), 0)
        return seq([Repeat(Ref(IGNORE), 0, None), term]) if ignored else term

    bodies: dict[str, list[Expr]] = {}
    for r in rules:
        origin = str(r.origin.name)
        bodies.setdefault(origin, []).append(seq([symbol(s, origin) for s in r.expansion]))
    g = Grammar({name: alt(items) for name, items in bodies.items()}, START, source)
    for t in terminals:
        g.rules[t.name] = _terminal(t, source)
    for name in g.rules:  # a rule lark generates (__item_star_0) is where the rule it came from is
        parents = [n for n in lines if name.startswith(f"__{n}") and name[len(n) + 2:len(n) + 3] in ("_", "{")]
        at = lines.get(name) or (lines[max(parents, key=len)] if parents else None)
        if at:
            g.lines[name] = at[0]
    if ignored:
        g.rules[IGNORE] = alt([Ref(name, 0) for name in ignored])
        g.rules[IGNORE_START] = seq([Ref(START, 0), Repeat(Ref(IGNORE), 0, None)])
        g.start = IGNORE_START
    return g
