"""Python type hints as JSON Schemas, and JSON texts back as values (Koo et al. 2024 Sec. 5.2, dataclasses).

:func:`schema_of` reflects on a type: a dataclass or TypedDict (fields in order, required unless
they have a default or are ``NotRequired``), ``int``, ``float``, ``str``, ``bool``, ``None``,
``Literal[...]``, an ``Enum`` (its values), ``Optional``/``Union``, ``list[T]``,
``tuple[T, ...]`` and ``tuple[A, B]``, ``dict[str, T]``. The schema then goes through
``compile_schema`` like any other; :func:`parse` reads a constrained model's JSON text back into
the type (dataclasses and enums rebuilt, lists for tuples made tuples).
"""

from __future__ import annotations

import dataclasses
import enum
import json
import types
import typing
from typing import Any

from tokfst_cli.errors import InputError, UsageError

_SCALARS = {int: {"type": "integer"}, float: {"type": "number"}, str: {"type": "string"},
            bool: {"type": "boolean"}, type(None): {"type": "null"}}


def schema_of(tp: Any) -> dict:
    """The JSON Schema of the JSON values of type ``tp`` (object fields in declaration order)."""
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if tp in _SCALARS:
        return dict(_SCALARS[tp])
    if origin is typing.Literal:
        return {"enum": list(args)}
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return {"enum": [m.value for m in tp]}
    if origin in (typing.Union, types.UnionType):
        return {"anyOf": [schema_of(a) for a in args]}
    if origin is list:
        return {"type": "array", "items": schema_of(args[0]) if args else {}}
    if origin is tuple:
        if len(args) == 2 and args[1] is Ellipsis:
            return {"type": "array", "items": schema_of(args[0])}
        return {"type": "array", "prefixItems": [schema_of(a) for a in args], "items": False}
    if origin is dict:
        if args and args[0] is not str:
            raise InputError(f"dict keys of type {args[0]!r} cannot be JSON object keys", "use dict[str, ...]")
        return {"type": "object", "additionalProperties": schema_of(args[1]) if args else {}}
    if dataclasses.is_dataclass(tp) or typing.is_typeddict(tp):
        return _object(tp)
    raise InputError(f"type {tp!r} has no JSON Schema here", "use dataclasses, TypedDicts, scalars, Literal, "
                     "Enum, Optional, list, tuple and dict[str, ...]")


def _object(tp: Any) -> dict:
    hints = typing.get_type_hints(tp, include_extras=True)
    if dataclasses.is_dataclass(tp):
        fields = [f.name for f in dataclasses.fields(tp)]
        optional = {f.name for f in dataclasses.fields(tp)
                    if f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING}
    else:
        fields, optional = list(hints), set(tp.__optional_keys__)
    props = {}
    for name in fields:
        hint = hints[name]
        if typing.get_origin(hint) in (typing.NotRequired, typing.Required):
            if typing.get_origin(hint) is typing.NotRequired:
                optional.add(name)
            hint = typing.get_args(hint)[0]
        props[name] = schema_of(hint)
    return {"type": "object", "properties": props, "required": [n for n in fields if n not in optional],
            "additionalProperties": False}


def parse(tp: Any, text: str) -> Any:
    """The value of type ``tp`` that a JSON text (valid under :func:`schema_of`'s schema) spells."""
    return _value(tp, json.loads(text))


def _value(tp: Any, v: Any) -> Any:
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return tp(v)
    if origin in (typing.Union, types.UnionType):
        for a in sorted(args, key=lambda a: a is int and isinstance(v, float)):  # 5.0 is a float first
            if _fits(a, v):
                try:
                    return _value(a, v)
                except (TypeError, ValueError, KeyError):
                    continue
        raise UsageError(f"{v!r} is none of {args}")
    if origin is list:
        return [_value(args[0], x) for x in v] if args else list(v)
    if origin is tuple:
        items = args[:1] * len(v) if len(args) == 2 and args[1] is Ellipsis else args
        return tuple(_value(a, x) for a, x in zip(items, v))
    if origin is dict:
        return {k: _value(args[1], x) for k, x in v.items()} if args else dict(v)
    if dataclasses.is_dataclass(tp):
        hints = typing.get_type_hints(tp)
        return tp(**{k: _value(hints[k], x) for k, x in v.items()})
    if typing.is_typeddict(tp):
        hints = typing.get_type_hints(tp)
        return {k: _value(hints[k], x) for k, x in v.items()}
    if tp is int and _integral(v):  # also spelled 5.0 (numbers in any spelling: .numbers)
        return int(v)
    return float(v) if tp is float else v


def _integral(v: Any) -> bool:
    """Is the JSON value ``v`` an integer (``5`` or ``5.0``; not ``true``)?"""
    return not isinstance(v, bool) and (isinstance(v, int) or isinstance(v, float) and v.is_integer())


def _fits(tp: Any, v: Any) -> bool:
    """Could JSON value ``v`` be of type ``tp`` (the first member of a union that fits is taken)?"""
    if tp is type(None):
        return v is None
    if tp in (int, float):
        return _integral(v) or (tp is float and isinstance(v, float))
    if tp in _SCALARS:
        return isinstance(v, tp)
    origin = typing.get_origin(tp)
    if origin is typing.Literal:
        return v in typing.get_args(tp)
    if origin in (list, tuple):
        return isinstance(v, list)
    if origin is dict or dataclasses.is_dataclass(tp) or typing.is_typeddict(tp):
        return isinstance(v, dict)
    return True
