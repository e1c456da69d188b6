"""One call from a constraint's source to its decoder, as xgrammar's ``compile_json_schema``:
``tokfst.compile(tokenizer, regex=... | schema=... | grammar=..., canonical=..., filters=...)``.

The source picks the route (Koo et al. 2024 Sec. 3, 5; Pitfalls 2025 Sec. 3): agnostic, it is
the lazy decoder (``constraint.lazy``: a regex's or a schema's byte DFA promoted state by state,
a self-embedding grammar or a recursive schema with a stack); canonical or with token filters,
the pipeline (``pipeline.build``: A -> P -> S -> C, materialized or factorized). A schema may be
JSON text, a parsed document (dict or bool), a dataclass or a Pydantic model class (their JSON
Schema from pydantic, an optional dependency).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from tokfst_cli import constraint, pipeline
from tokfst_cli.errors import InputError
from tokfst_cli.filters.compose import NONE, Filters
from tokfst_cli.grammar.pushdown import Pushdown
from tokfst_cli.schema.refs import loads
from tokfst_cli.tokenizer.model import load as load_tokenizer

SCHEMA_OPTIONS = ("whitespace", "max_depth", "lenient", "any_order", "max_states", "recursion", "number_spellings")


def schema_document(schema: Any) -> dict | bool:
    """A JSON Schema document from JSON text, a parsed document, a dataclass or a Pydantic model."""
    if isinstance(schema, (dict, bool)):
        return schema
    if isinstance(schema, (str, bytes)):
        return loads(schema)  # InputError: not JSON, or nested past the limit (its depth and the limit)
    if isinstance(schema, type) and hasattr(schema, "model_json_schema"):  # a Pydantic model class
        return schema.model_json_schema()
    if isinstance(schema, type) and dataclasses.is_dataclass(schema):
        try:
            import pydantic  # deferred: an optional dependency
        except ImportError:
            raise InputError("a dataclass's JSON Schema comes from pydantic, which is not installed",
                             "pip install pydantic, or give the JSON Schema") from None
        return pydantic.TypeAdapter(schema).json_schema()
    raise InputError(f"cannot read a schema from a {type(schema).__name__}",
                     "give JSON Schema text, a dict, a dataclass or a Pydantic model class")


def compile(tokenizer: Any, *, regex: str | None = None, schema: Any = None, grammar: str | None = None,
            grammar_format: str = "gbnf", canonical: bool = False, filters: Filters | None = None,
            level: str = "pipeline", max_states: int = 1_000_000, **schema_options: Any):
    """The decoder of one constraint (module docstring): exactly one of ``regex``, ``schema`` and
    ``grammar`` (GBNF or Lark text, ``grammar_format``); ``schema_options``: those of the schema
    compiler (whitespace, max_depth, lenient, any_order, recursion, number_spellings)."""
    if sum(x is not None for x in (regex, schema, grammar)) != 1:
        raise InputError("give exactly one of regex, schema and grammar", "pass one of them")
    unknown = sorted(set(schema_options) - set(SCHEMA_OPTIONS))
    if unknown:
        raise InputError(f"unknown option {unknown[0]}", f"give only {', '.join(SCHEMA_OPTIONS)}")
    model = load_tokenizer(tokenizer)
    doc = None if schema is None else schema_document(schema)
    if not canonical and (filters is None or not filters.token_level()):
        extra = {"filters": filters} if filters is not None else {}
        if grammar is not None:
            return constraint.lazy(model, grammar=grammar, grammar_format=grammar_format, **extra)
        if doc is not None:
            return constraint.lazy(model, schema=doc, **extra, **schema_options)
        return constraint.lazy(model, regex, **extra)
    automaton, name = None, regex
    if doc is not None:
        from tokfst_cli.grammar.schema import compile_json  # deferred: start-up: only this path needs it

        automaton, name = compile_json(doc, **{"recursion": "cut", **schema_options}).automaton, "schema"
    elif grammar is not None:
        from tokfst_cli.grammar.load import compile_grammar  # deferred: start-up: only this path needs it

        automaton, name = compile_grammar(grammar, grammar_format), "grammar"
    if isinstance(automaton, Pushdown):
        raise InputError(f"{automaton.pattern} needs a stack, which canonical promotion and token filters do not "
                         "take", "drop canonical and the token filters", hint="grammar-pushdown")
    result = pipeline.build(model, name, canonical=canonical, automaton=automaton, level=level,
                            filters=filters or NONE, limits=pipeline.Limits(max_states))
    return result.decoder()
