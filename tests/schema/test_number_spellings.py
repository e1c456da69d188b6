"""Numbers in every JSON spelling (``number_spellings="any"``, the default) against ``jsonschema``.

A spelling of a drawn number (``json.dumps`` of its float, trailing zeros, ``-0``, exponents,
and malformed ones: ``05``, ``1.``, ``.5``, ``+1``) is accepted iff it is a JSON number and
the value it spells is valid (Draft 2020-12 and Draft 7, read exactly: Decimal, an integer
being any number with a zero fraction). Exponents are accepted only where the document
constrains numbers by their sign at most (elsewhere they are left out, never accepted
wrongly); ``number_spellings="shortest"`` accepts the shortest spelling of each valid value alone.
"""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Optional

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from jsonschema import Draft7Validator, Draft202012Validator, validators

from tokfst_cli import constraint, pipeline, sources
from tokfst_cli.errors import InputError
from tokfst_cli.schema.compile import compile_schema
from tokfst_cli.schema.types import parse

from ..conftest import TOKENIZER
from ..runner import run
from ..walks import accepts as accepts_ids
from .test_properties import _plain
from .test_validator import _integer, _read
from .util import accepts, compiled

SETTINGS = settings(max_examples=40, deadline=None)
VALIDATORS = [validators.extend(v, type_checker=v.TYPE_CHECKER.redefine("integer", _integer))
              for v in (Draft202012Validator, Draft7Validator)]


def _valid(schema: dict, text: str) -> bool:
    """Both drafts' verdict on the JSON text (they agree on these keywords), or False if it is not JSON."""
    try:
        instance = _read(text)
    except ValueError:
        return False
    exact = json.loads(json.dumps(schema), parse_float=Decimal)  # multipleOf 0.1 read as Decimal, not float
    verdicts = {v(exact).is_valid(instance) for v in VALIDATORS}
    assert len(verdicts) == 1, (schema, text)
    return verdicts.pop()


def _spellings(v: Decimal, zeros: int, shift: int) -> list[str]:
    """Spellings of ``v``: shortest, json.dumps of its float, with trailing zeros, -0, with exponents,
    and malformed ones."""
    short = _plain(v)
    padded = short + ("." if "." not in short else "") + "0" * zeros
    digits, point = short.lstrip("-").replace(".", ""), len(short.lstrip("-").partition(".")[2])
    sign = "-" if short.startswith("-") else ""
    out = [short, json.dumps(float(v)), padded, short + ".0", f"{sign}{digits}e-{point}",
           f"{sign}{digits}E{shift - point:+d}", f"{short}e0", f"{padded}E-0", "-" + padded.lstrip("-")]
    out += ["0" + short.lstrip("-"), short + ".", "." + digits, "+" + short.lstrip("-"), short + "e", "-" + short]
    return out


BOUND = st.none() | st.just(0) | st.decimals(-20, 20, places=1).map(lambda d: int(d) if d == int(d) else float(d))
NUMBERS = st.decimals(-30, 30, places=3) | st.integers(-30, 30).map(Decimal) | st.just(Decimal("-0.0"))


@st.composite
def schemas(draw) -> dict:
    """A number or integer schema with bounds and multipleOf, or bounds at 0 alone, or a constant,
    under a wrapper."""
    kind = draw(st.sampled_from(["range", "range", "signs", "const", "enum"]))
    if kind == "signs":  # bounds at 0 at most: exponents too
        s = {"type": "number", **{k: 0 for k in ("minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum")
                                  if draw(st.integers(0, 3)) == 0}}
    elif kind == "const":
        s = {"const": float(draw(NUMBERS))}
    elif kind == "enum":
        s = {"enum": [*map(float, draw(st.lists(NUMBERS, min_size=1, max_size=3))), "x"]}
    else:
        s = {"type": draw(st.sampled_from(["number", "integer"]))}
        for key in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"):
            if (b := draw(BOUND)) is not None:
                s[key] = b
        if (m := draw(st.sampled_from([None, None, 0.5, 0.25, 3, 1.5, 0.1]))) is not None:
            s["multipleOf"] = m
    return draw(st.sampled_from([s, {"not": s}, {"anyOf": [s, {"type": "string"}]}, {"allOf": [s, {}]}]))


def _signs_only(schema: dict) -> bool:
    """Does the drawn schema constrain numbers by their sign at most (so exponents are exact)?"""
    inner = schema.get("not") or (schema.get("anyOf") or schema.get("allOf") or [schema])[0]
    return (inner.get("type") == "number" and "multipleOf" not in inner
            and all(inner.get(k, 0) == 0 for k in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum")))


@given(schema=schemas(), values=st.lists(NUMBERS, min_size=1, max_size=4), zeros=st.integers(1, 3),
       shift=st.integers(-2, 2))
@example(schema={"type": "number", "exclusiveMaximum": 5}, values=[Decimal(5)], zeros=2, shift=0)
@example(schema={"type": "integer", "minimum": 0}, values=[Decimal("128")], zeros=1, shift=1)
@example(schema={"not": {"type": "number", "minimum": 0}}, values=[Decimal("-2.5")], zeros=1, shift=1)
@SETTINGS
def test_every_spelling_of_a_valid_number_is_accepted(schema, values, zeros, shift):
    fst, shortest = compiled(schema), compiled(schema, number_spellings="shortest")
    exponents = _signs_only(schema)
    for v in values:
        for text in _spellings(v, zeros, shift):
            valid = _valid(schema, text)
            if "e" in text.lower() and not exponents:  # left out: documented, never accepted
                assert not accepts(fst, text), (schema, text)
            else:
                assert accepts(fst, text) == valid, (schema, text, valid)
            short = valid and text == _plain(Decimal(_read(text)))
            assert accepts(shortest, text) == short, (schema, text)


@pytest.mark.parametrize("schema, yes, no", [
    ({"type": "integer"}, ["5.0", "128.0", "-0", "-0.0", "5.000"], ["5.5", "5.10", "1e3"]),
    ({"type": "number", "exclusiveMaximum": 5}, ["4.990", "-0.0"], ["5", "5.0", "5.00"]),
    ({"type": "number"}, ["1e3", "2.5E-1", "-0e0", "1E+2"], ["01", "1.", ".5", "1e", "+1"]),
    ({"type": "number", "exclusiveMinimum": 0}, ["1e-300", "0.5e1"], ["0e5", "-0.0", "-1e-5"]),
    ({"type": "array", "items": {"enum": [1, 2.5]}, "uniqueItems": True}, ["[1.0,2.50]", "[2.5]"], ["[1,1.0]"]),
    ({"type": "object", "properties": {"p": {"type": "number"}, "q": {"type": "integer"}}},
     ['{"p":2.50,"q":5.0}'], ['{"p":1e3}']),  # an integer in the document: no exponent anywhere
])
def test_spellings_by_construct(schema, yes, no):
    fst = compiled(schema)
    for text in yes:
        assert accepts(fst, text) and _valid(schema, text), text
    for text in no:
        assert not accepts(fst, text), text


def test_unknown_spelling_option_is_refused():
    with pytest.raises(InputError, match="number spellings"):
        compile_schema({"type": "number"}, number_spellings="plain")


PRICE = {"type": "object", "properties": {"price": {"type": "number", "minimum": 0, "maximum": 1000}},
         "required": ["price"], "additionalProperties": False}


@pytest.mark.parametrize("canonical", [False, True])
def test_gpt2_tokens_of_a_price_written_5_0(canonical):
    """Through GPT-2 tokens, agnostic and canonical: ``5.0`` is a price, ``1000.5`` is not."""
    model, hf = TOKENIZER("gpt2"), TOKENIZER.hf("gpt2")
    a = compile_schema(PRICE).automaton
    decoder = pipeline.build(model, "price", automaton=a, canonical=canonical).decoder()
    for text, valid in [('{"price":5.0}', True), ('{"price":2.50}', True), ('{"price":5}', True),
                        ('{"price":-0.0}', True), ('{"price":1000.5}', False), ('{"price":1e2}', False)]:
        assert accepts_ids(decoder, hf.encode(text, add_special_tokens=False).ids) == valid, text


def test_python_number_spellings():
    """``tokfst.compile`` (the lazy decoder here) takes the option; ``types.parse`` reads 5.0 as an int."""
    model, hf = TOKENIZER("gpt2"), TOKENIZER.hf("gpt2")
    ids = hf.encode('{"price":5.0}', add_special_tokens=False).ids
    assert accepts_ids(sources.compile(model, schema=PRICE), ids)
    assert not accepts_ids(sources.compile(model, schema=PRICE, number_spellings="shortest"), ids)
    assert parse(Optional[int], "5.0") == 5 and parse(int | float, "5.0") == 5.0 and parse(int, "-0.0") == 0


def test_cli_number_spellings(tmp_path):
    """``promote --schema --number-spellings shortest`` keeps one spelling per value."""
    path = tmp_path / "price.json"
    path.write_text(json.dumps(PRICE))
    model, hf = TOKENIZER("gpt2"), TOKENIZER.hf("gpt2")
    ids = hf.encode('{"price":5.0}', add_special_tokens=False).ids
    for option, valid in (("any", True), ("shortest", False)):
        out = tmp_path / f"{option}.fst"
        r = run("promote", "gpt2", "--schema", str(path), "--number-spellings", option, str(out))
        assert r.rc == 0, r.err
        assert accepts_ids(constraint.load(str(out), model), ids) == valid
