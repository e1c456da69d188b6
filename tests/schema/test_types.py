"""Seed 004 Sec. 5.2: Python type hints as constraints: a dataclass's schema compiles, GPT-2's canonical
automaton accepts HF's encoding of serialized random instances and parse() gives the instances back."""

from __future__ import annotations

import dataclasses
import enum
import random
from typing import Literal, NotRequired, Optional, TypedDict

import pytest

from tokfst_cli import pipeline
from tokfst_cli.errors import InputError
from tokfst_cli.schema.compile import compile_schema
from tokfst_cli.schema.serialize import serialize
from tokfst_cli.schema.types import parse, schema_of

from .util import accepts


class Color(enum.Enum):
    RED = "red"
    BLUE = "blue"


@dataclasses.dataclass
class Point:
    x: int
    y: int


@dataclasses.dataclass
class Shape:
    name: Literal["circle", "square", "line"]
    color: Color
    points: list[Point]
    closed: bool
    scale: Optional[float] = None
    tag: tuple[Literal["a", "bé"], int] = ("a", 1)  # a free string could hold <|endoftext|>: refused canonically


class Meta(TypedDict):
    id: int
    note: NotRequired[str]


def _instances(n: int, seed: int = 0) -> list[Shape]:
    rng = random.Random(seed)
    return [Shape(rng.choice(["circle", "square", "line"]), rng.choice(list(Color)),
                  [Point(rng.randint(-50, 50), rng.randint(0, 9)) for _ in range(rng.randint(0, 3))],
                  rng.random() < 0.5, rng.choice([None, 0.5, 2.0]), (rng.choice(["a", "bé"]), rng.randint(0, 99)))
            for _ in range(n)]


def _json(shape: Shape) -> str:
    d = dataclasses.asdict(shape)
    d["color"] = shape.color.value
    d["tag"] = list(shape.tag)
    return serialize(d, schema_of(Shape), "compact")


def test_dataclass_schema_accepts_and_parses_back(tokenizer):
    schema = schema_of(Shape)
    assert list(schema["properties"]) == ["name", "color", "points", "closed", "scale", "tag"]
    assert schema["required"] == ["name", "color", "points", "closed"]
    a = compile_schema(schema).automaton
    model, hf = tokenizer("gpt2"), tokenizer.hf("gpt2")
    decoder = pipeline.build(model, "Shape", automaton=a, canonical=True).decoder()
    for shape in _instances(20):
        text = _json(shape)
        assert accepts(a.fst, text), text
        state = decoder.initial()
        for t in hf.encode(text, add_special_tokens=False).ids:
            state = decoder.advance(state, t)
        assert decoder.is_final(state)
        assert parse(Shape, text) == shape
    assert not accepts(a.fst, _json(_instances(1)[0]).replace('"closed"', '"open"'))


def test_typed_dict_and_refusals():
    schema = schema_of(Meta)
    assert schema["required"] == ["id"] and list(schema["properties"]) == ["id", "note"]
    assert parse(Meta, '{"id":3}') == {"id": 3}
    with pytest.raises(InputError, match="no JSON Schema"):
        schema_of(set[int])
    with pytest.raises(InputError, match="dict keys"):
        schema_of(dict[int, str])
