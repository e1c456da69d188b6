"""Any JSON document (RFC 8259) as a grammar with a stack: ``promote --any-json``, the JSON Schemas
``{}`` and ``true``, ``tokfst.lazy(model, any_json=True)`` (Koo et al. 2024 Sec. 3.2: JSON is the
standard self-embedding language; a schema cuts it at ``max_depth``, this grammar does not).

Whitespace as the schema compiler spells it: ``compact`` none, ``pretty`` one space after ``,``
and ``:``, ``flexible`` any JSON whitespace between tokens and around the document.
"""

from __future__ import annotations

from tokfst_cli.errors import InputError, InternalError
from tokfst_cli.grammar.load import compile_grammar
from tokfst_cli.grammar.pushdown import Pushdown

POLICIES = ("compact", "pretty", "flexible")


def gbnf(whitespace: str = "compact") -> str:
    """The GBNF text of any JSON document under a whitespace policy."""
    if whitespace not in POLICIES:
        raise InputError(f"unknown whitespace policy {whitespace!r}", f"give one of {', '.join(POLICIES)}")
    ws = " ws " if whitespace == "flexible" else " "
    comma, colon = ('", "', '": "') if whitespace == "pretty" else ('","', '":"')
    return "\n".join([
        f"root ::={ws}value{ws}".rstrip(),
        'value ::= object | array | string | number | "true" | "false" | "null"',
        f'object ::= "{{"{ws}( member ({ws}{comma}{ws}member )*{ws})? "}}"',
        f"member ::= string{ws}{colon}{ws}value",
        f'array ::= "["{ws}( value ({ws}{comma}{ws}value )*{ws})? "]"',
        r'string ::= "\"" ( [^"\\\x00-\x1f] | "\\" ( ["\\/bfnrt] | "u" [0-9a-fA-F]{4} ) )* "\""',
        r'number ::= "-"? ( "0" | [1-9] [0-9]* ) ( "." [0-9]+ )? ( [eE] [+-]? [0-9]+ )?',
        r"ws ::= [ \t\n\r]*",
        "",
    ])


def any_json(whitespace: str = "compact", max_states: int = 1_000_000) -> Pushdown:
    """The PDT over bytes of every JSON document (``grammar.pushdown``)."""
    got = compile_grammar(gbnf(whitespace), "gbnf", source=f"any JSON ({whitespace})", max_states=max_states)
    if not isinstance(got, Pushdown):
        raise InternalError("the JSON grammar compiled to a finite automaton")
    return got
