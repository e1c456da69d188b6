"""JSON Schemas with recursion as pushdown automata (Koo et al. 2024 Sec. 3.2 and 5).

The schema compiler (:mod:`tokfst_cli.schema.compile`) cuts unbounded nesting at ``max_depth``
unless it runs with a stack: then a value nested in itself (a recursive ``$ref``: trees, linked
lists, a schema of schemas; or a free value, ``{}`` or ``true``, whose arrays and objects hold
free values) is one call arc of its rule, and the rules form a recursive transition network
that :func:`tokfst_cli.grammar.pushdown.build` joins into a PDT over bytes: nothing is cut.

A stack's language is not closed under intersection and difference, so a recursive value that
meets ``allOf`` with another shape, ``not``, ``oneOf`` or ``if`` cannot be called: the schema
compiler says so (:class:`~tokfst_cli.schema.automata.StackOperand`) and this module then cuts
the recursion at ``max_depth`` with a warning (``recursion="auto"``) or refuses by name
(``recursion="stack"``). ``recursion="cut"`` is the finite automaton of today's cut.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any, NamedTuple

from tokfst_cli.automata.calls import CALL, call_label
from tokfst_cli.errors import InputError
from tokfst_cli.grammar.pushdown import Pushdown, build
from tokfst_cli.schema.automata import StackOperand
from tokfst_cli.schema.compile import MAX_DEPTH, compile_schema
from tokfst_cli.schema.refs import ACTIVE, Document, applied, check_nesting
from tokfst_cli.text.regex import ByteAutomaton

RECURSION = ("auto", "stack", "cut")
HINT = "schema-recursion"


class CompiledJson(NamedTuple):
    """A schema's automaton: a byte DFA, or a PDT when its nesting is unbounded; the warnings."""

    automaton: ByteAutomaton | Pushdown
    warnings: list[str]
    seconds: float


def _free(node: Any) -> bool:
    """A free value's schema: ``true``, or annotations only."""
    return node is True or (isinstance(node, dict) and ACTIVE.isdisjoint(node) and "$ref" not in node
                            and "allOf" not in node)


def _parts(node: dict) -> Iterator[Any]:
    """The schemas of the values of an object's properties and of an array's items."""
    for key in ("properties", "patternProperties"):
        if isinstance(node.get(key), dict):
            yield from node[key].values()
    for key in ("prefixItems", "items"):
        if isinstance(node.get(key), list):
            yield from node[key]
    for key in ("additionalProperties", "items", "additionalItems"):
        if key in node and not isinstance(node[key], list):
            yield node[key]


def unbounded(schema: Any) -> bool:
    """Does ``schema`` nest without bound by itself: a recursive ``$ref``, or a free value it
    writes (``{}``, ``true``, annotations only) as the document or as the value of a property or
    an item? (Free values a schema only implies, as additional properties by default, do not
    count: "auto" cuts them at ``max_depth`` as before.)"""
    if _free(schema):
        return True
    if not isinstance(schema, dict):
        return False
    if Document(schema).recursive_targets():
        return True
    todo, seen = [schema], set()
    while todo:
        node = todo.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        if any(_free(x) for x in _parts(node)):
            return True
        todo += [x for x in applied(node) if isinstance(x, dict)]
    return False


def compile_json(schema: Any, *, recursion: str = "auto", **options: Any) -> CompiledJson:
    """The texts valid under ``schema``: ``recursion`` "auto" (default: with a stack if the schema
    nests without bound by itself (:func:`unbounded`) and allows it, else cut at ``max_depth``
    with a warning), "stack" (with a stack, or InputError hint ``schema-recursion``) or "cut" (a
    finite automaton, nesting cut at ``max_depth``). ``options``: those of
    :func:`~tokfst_cli.schema.compile.compile_schema`."""
    if recursion not in RECURSION:
        raise InputError(f"recursion {recursion!r} is not known", f"give one of {', '.join(RECURSION)}", hint=HINT)
    check_nesting(schema)  # before the walks of unbounded(): the depth and the limit, not a RecursionError
    start = time.perf_counter()
    if recursion == "stack" or (recursion == "auto" and unbounded(schema)):
        try:
            got = compile_schema(schema, stack=True, **options)
        except StackOperand:
            if recursion == "stack":
                raise InputError("the schema's recursion (or a free value) meets allOf, not, oneOf or if, and a "
                                 "language with a stack cannot be intersected or subtracted",
                                 "cut the recursion at max_depth instead (recursion cut)", hint=HINT) from None
            got = compile_schema(schema, **options)
            depth = options.get("max_depth", MAX_DEPTH)
            warning = (f"recursion meets allOf, not, oneOf or if (no stack can be intersected): "
                       f"cut at max_depth {depth}")
            return CompiledJson(got.automaton, [*got.warnings, warning], time.perf_counter() - start)
        if got.rules:
            return CompiledJson(_pushdown(got.automaton, got.rules), got.warnings, time.perf_counter() - start)
        return CompiledJson(got.automaton, got.warnings, time.perf_counter() - start)
    got = compile_schema(schema, **options)
    return CompiledJson(got.automaton, got.warnings, time.perf_counter() - start)


def _pushdown(top: ByteAutomaton, rules: dict[int, tuple[str, ByteAutomaton]]) -> Pushdown:
    """The PDT of the schema's network: the JSON text calls the rules of its recursive values."""
    names: dict[int, str] = {}
    for label, (name, _) in rules.items():
        names[label] = name if name not in names.values() else f"{name} ({label - CALL})"
    start = "JSON text"
    fsts = {names[label]: a.fst for label, (_, a) in rules.items()}
    labels = {names[label]: label for label in rules}
    fsts[start], labels[start] = top.fst, call_label(max(labels.values()) - CALL + 1)
    return build(fsts, labels, start, top.pattern, {})
