"""``tokfst.compile``: one call from a regex, a schema (JSON text, dict, dataclass, Pydantic model)
or a grammar to a decoder, agnostic (lazy, or with a stack) or canonical (the pipeline); the
schema forms give the same language; misuse is one line."""

from __future__ import annotations

import dataclasses
import json
from typing import Optional

import pydantic
import pytest

import tokfst_cli as tokfst
from tokfst_cli.errors import InputError
from tokfst_cli.promotion.stack import PushdownDecoder

from .walks import accepts


@dataclasses.dataclass
class Point:
    x: int
    label: Optional[str] = None


class PointModel(pydantic.BaseModel):
    x: int
    label: Optional[str] = None


def test_schema_forms_give_the_same_decoder_language(tokenizer):
    model, hf = tokenizer("gpt2"), tokenizer.hf("gpt2")
    doc = pydantic.TypeAdapter(Point).json_schema()
    decoders = [tokfst.compile(model, schema=s) for s in (doc, json.dumps(doc), Point, PointModel)]
    for text, ok in (('{"x":3}', True), ('{"x":3,"label":"a"}', True), ('{"x":3,"label":null}', True),
                     ('{"label":"a"}', False), ('{"x":"3"}', False)):
        ids = hf.encode(text, add_special_tokens=False).ids
        assert [accepts(d, ids) for d in decoders] == [ok] * 4, text


def test_routes_agnostic_canonical_and_stack(tokenizer):
    model, hf = tokenizer("gpt2"), tokenizer.hf("gpt2")
    lazy = tokfst.compile(model, regex="[0-9]{2}-[0-9]{2}")
    canonical = tokfst.compile("gpt2", regex="[0-9]{2}-[0-9]{2}", canonical=True)
    ids = hf.encode("12-34", add_special_tokens=False).ids
    assert accepts(lazy, ids) and accepts(canonical, ids)
    one_by_one = [hf.token_to_id(c) for c in "12-34"]
    assert accepts(lazy, one_by_one) and not accepts(canonical, one_by_one)  # canonical: encode's ids only
    stack = tokfst.compile(model, grammar='root ::= "[" root? "]"')
    assert isinstance(stack, PushdownDecoder) and accepts(stack, hf.encode("[[[]]]", add_special_tokens=False).ids)
    nested = tokfst.compile(model, schema={"type": "array", "items": {"$ref": "#"}})  # recursive: with a stack
    deep = hf.encode("[[],[[[]]]]", add_special_tokens=False).ids
    assert isinstance(nested, PushdownDecoder) and accepts(nested, deep)


@pytest.mark.parametrize("kwargs,words", [({}, "exactly one"), ({"regex": "a", "schema": {}}, "exactly one"),
                                          ({"schema": "{nope"}, "not JSON"), ({"schema": 3.5}, "float"),
                                          ({"regex": "a", "sideways": 1}, "unknown option"),
                                          ({"grammar": 'root ::= "(" root ")" | "x"', "canonical": True},
                                           "needs a stack")])
def test_misuse_is_one_line(tokenizer, kwargs, words):
    with pytest.raises(InputError) as e:
        tokfst.compile(tokenizer("gpt2"), **kwargs)
    assert words in e.value.one_line() and "\n" not in e.value.one_line()
