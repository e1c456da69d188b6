"""Two schemas that compiled to something unintended: a ``$ref`` cycle and a nesting past the limit.

* A reference that comes back to itself through ``$ref`` and ``allOf`` only (``{"$ref": "#"}``,
  or ``a -> b -> a`` in ``$defs``) never reaches a value: it constrains nothing (before, it
  compiled to "any value" without a word). JSON Schema leaves such a schema undefined and the
  ``jsonschema`` package recurses without end on it (RecursionError on every instance, while
  ``check_schema`` accepts it); tokfst refuses it by name (hint ``schema-cycle``, the pointers of
  the cycle), as it already refused the same loop through ``anyOf``; leniently it ignores the
  reference with a warning. Recursion through properties or items is untouched.
* A document nested past ``refs.MAX_NESTING`` is refused with its depth and the limit (before,
  Python's json module stopped at about 1,000 levels and the schema was called "not JSON").
"""

from __future__ import annotations

import json

import jsonschema
import pytest

import tokfst_cli as tokfst
from tokfst_cli.errors import InputError
from tokfst_cli.grammar.schema import compile_json
from tokfst_cli.schema.compile import compile_schema
from tokfst_cli.schema.refs import MAX_NESTING, loads, nesting, text_nesting

from ..runner import run

SELF = {"$ref": "#"}
PAIR = {"$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"$ref": "#/$defs/a"}}, "$ref": "#/$defs/a"}
WITH_TYPE = {"$ref": "#", "type": "object"}
THROUGH_ALLOF = {"allOf": [{"$ref": "#/$defs/a"}], "$defs": {"a": {"allOf": [{"$ref": "#/$defs/a"}]}}}


@pytest.mark.parametrize("schema", [SELF, PAIR, WITH_TYPE])
def test_jsonschema_cannot_decide_any_instance(schema):
    """What a validator makes of these schemas: valid schemas that no instance can be checked against."""
    validator = jsonschema.Draft202012Validator(schema)
    validator.check_schema(schema)
    for instance in (1, "x", None, {"a": [1]}):
        with pytest.raises(RecursionError):
            validator.is_valid(instance)


@pytest.mark.parametrize("schema, chain", [
    (SELF, "# -> #"),
    (PAIR, "#/$defs/a -> #/$defs/b -> #/$defs/a"),
    (WITH_TYPE, "# -> #"),
    (THROUGH_ALLOF, "#/$defs/a -> #/$defs/a/allOf/0 -> #/$defs/a"),
])
@pytest.mark.parametrize("recursion", ["auto", "stack", "cut"])
def test_a_ref_cycle_is_refused_by_name(schema, chain, recursion):
    with pytest.raises(InputError) as e:
        compile_json(schema, recursion=recursion)
    assert e.value.hint == "schema-cycle" and f"$ref cycle {chain}:" in str(e.value), str(e.value)
    assert "\n" not in str(e.value) and e.value.fix


def test_leniently_the_reference_is_ignored_with_a_warning():
    got = compile_schema(PAIR, lenient=True)
    assert got.warnings == ["ignored: $ref '#/$defs/a' at #/$defs/b, which closes the cycle "
                            "#/$defs/a -> #/$defs/b -> #/$defs/a (it constrains nothing)"]


@pytest.mark.parametrize("schema", [
    {"type": "object", "properties": {"next": {"$ref": "#"}}},  # recursion through a property
    {"type": "array", "items": {"$ref": "#"}},
    {"allOf": [{"$ref": "#/$defs/x"}, {"$ref": "#/$defs/x"}], "$defs": {"x": {"type": "integer"}}},  # a diamond
])
def test_recursion_through_values_and_repeated_references_still_compile(schema):
    assert compile_json(schema).automaton is not None


def test_the_command_line_names_the_cycle(tmp_path):
    path = tmp_path / "s.json"
    path.write_text(json.dumps(SELF))
    r = run("promote", "gpt2", "--schema", path, tmp_path / "o.fst")
    assert r.rc == 2 and len(r.err_lines) == 1 and "$ref cycle # -> #" in r.err_lines[0], r.err_lines
    assert not (tmp_path / "o.fst").exists()


def nested(depth: int) -> str:
    """A schema document of JSON nesting ``depth`` (arrays of arrays)."""
    return '{"type":"array","items":' * (depth - 1) + "{}" + "}" * (depth - 1)


def test_depth_is_measured_alike_on_text_and_values():
    for text in ("{}", "[[]]", '{"a": "[[{"}', '{"a": "\\"[", "b": [[1]]}', nested(5)):
        assert text_nesting(text) == nesting(json.loads(text)), text


@pytest.mark.parametrize("depth", [MAX_NESTING + 1, 3000])
def test_a_schema_past_the_nesting_limit_says_its_depth(tmp_path, depth):
    text = nested(depth)
    message = f"nesting depth {depth} over the limit of {MAX_NESTING}"
    with pytest.raises(InputError) as e:
        loads(text)
    assert message in str(e.value) and e.value.hint == "schema-depth" and e.value.data["depth"] == depth
    for schema in (text, text.encode()):
        with pytest.raises(InputError, match=message):
            tokfst.compile("gpt2", schema=schema)
    path = tmp_path / "deep.json"
    path.write_text(text)
    r = run("promote", "gpt2", "--schema", path, tmp_path / "o.fst")
    assert r.rc == 2 and len(r.err_lines) == 1, r.err_lines
    assert r.err_lines[0].startswith(f"tokfst: error: schema file {path} nests too deeply: {message}; ")
    assert "not JSON" not in r.stderr and not (tmp_path / "o.fst").exists()


def test_a_parsed_schema_past_the_limit_is_refused_the_same_way():
    schema: dict = {}
    for _ in range(3000):
        schema = {"type": "array", "items": schema}
    for compile_ in (compile_schema, compile_json):
        with pytest.raises(InputError, match=f"nesting depth 3001 over the limit of {MAX_NESTING}"):
            compile_(schema)


def test_the_limit_itself_compiles():
    assert compile_json(json.loads(nested(MAX_NESTING)), recursion="cut").automaton is not None


def test_values_nested_past_python_s_recursion_through_defs_are_refused_by_name():
    """A shallow document whose values nest 300 deep through $defs: a one-line InputError, not a
    RecursionError (or an "internal error")."""
    defs = {f"d{i}": {"type": "array", "items": {"$ref": f"#/$defs/d{i + 1}"}, "maxItems": 1} for i in range(300)}
    defs["d300"] = {"type": "integer"}
    with pytest.raises(InputError) as e:
        compile_schema({"$defs": defs, "$ref": "#/$defs/d0"})
    assert e.value.hint == "schema-depth" and "too deeply" in str(e.value)
