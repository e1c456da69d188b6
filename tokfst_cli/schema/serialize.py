"""JSON texts as the schema's automaton spells them: canonical values, stable key order, the policy's whitespace.

``serialize(instance, schema, whitespace)`` writes numbers and strings canonically
(:func:`.numbers.canonical`, :func:`.strings.quote`), the keys of each object in the order of
its position (:mod:`.context`: the named keys first, in order, then the others as given),
compact as ``{"a":1}``, pretty as ``{"a": 1}`` and flexible indented by two spaces (one of
the texts the flexible automaton accepts). When the instance is valid under the schema and
nests at most ``max_depth`` deep, the compiled automaton accepts this text.
"""

from __future__ import annotations

from tokfst_cli.errors import UsageError
from tokfst_cli.schema import numbers, strings
from tokfst_cli.schema.automata import WHITESPACE
from tokfst_cli.schema.context import Position, Positions
from tokfst_cli.schema.refs import Document, Schema
from tokfst_cli.schema.values import json_type


def serialize(instance, schema: Schema, whitespace: str = "compact") -> str:
    """The text of ``instance`` the automaton of ``schema`` accepts (see the module docstring)."""
    if whitespace not in WHITESPACE:
        raise UsageError(f"whitespace must be one of {WHITESPACE}")
    return _write(instance, Positions(Document(schema)).root(), whitespace, 0)


def _write(value, pos: Position, whitespace: str, level: int) -> str:
    kind = json_type(value)
    if kind == "number":
        return numbers.canonical(value)
    if kind == "string":
        return strings.quote(value)
    if kind in ("null", "boolean"):
        return {None: "null", True: "true", False: "false"}[value]
    if kind == "array":
        parts = [_write(v, pos.item(i), whitespace, level + 1) for i, v in enumerate(value)]
        return _join("[", parts, "]", whitespace, level)
    colon = ":" if whitespace == "compact" else ": "
    order = {k: i for i, k in enumerate(pos.names)}
    keys = sorted(value, key=lambda k: order.get(k, len(order)))  # stable: the others keep their order
    parts = [strings.quote(k) + colon + _write(value[k], pos.child(k), whitespace, level + 1) for k in keys]
    return _join("{", parts, "}", whitespace, level)


def _join(open_: str, parts: list[str], close: str, whitespace: str, level: int) -> str:
    if not parts:
        return open_ + close
    if whitespace == "flexible":
        inner, outer = "\n" + "  " * (level + 1), "\n" + "  " * level
        return open_ + inner + ("," + inner).join(parts) + outer + close
    return open_ + ("," if whitespace == "compact" else ", ").join(parts) + close
