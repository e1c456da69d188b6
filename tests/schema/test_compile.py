"""compile_schema's decisions: refusals by name, leniency, limits, depth, order, whitespace and spellings."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest

from tokfst_cli.errors import EmptyLanguageError, InputError, LimitError
from tokfst_cli.schema.compile import compile_schema
from tokfst_cli.schema.serialize import serialize

from .util import accepts, compiled


@pytest.mark.parametrize("schema, hint, data", [
    ({"unevaluatedProperties": False}, "schema-keyword", {"keyword": "unevaluatedProperties"}),
    ({"items": {"$dynamicRef": "#meta"}}, "schema-keyword", {"keyword": "$dynamicRef"}),
    ({"type": "array", "uniqueItems": True}, "schema-keyword", {"keyword": "uniqueItems"}),
    ({"type": "strin"}, "schema-value", {"keyword": "type"}),
    ({"type": None}, "schema-value", {"keyword": "type"}),  # found by the battery: was a TypeError
    ({"format": None}, "schema-value", {"keyword": "format"}),
    ({"maxLength": -1}, "schema-value", {"keyword": "maxLength"}),
    ({"multipleOf": 0}, "schema-value", {"keyword": "multipleOf"}),
    ({"$ref": "other.json#/a"}, "schema-ref", {"ref": "other.json#/a"}),
    ({"$ref": "#/$defs/missing"}, "schema-ref", {"ref": "#/$defs/missing"}),
    ({"pattern": "(?<=a)b"}, "schema-pattern", {"pattern": "(?<=a)b"}),
    ({"pattern": "(a)\\1"}, "schema-pattern", {"pattern": "(a)\\1"}),
    ({"pattern": "a\\b"}, "schema-pattern", {"pattern": "a\\b"}),
    ({"pattern": "a^b"}, "schema-pattern", {"pattern": "a^b"}),
    ({"anyOf": [{"$ref": "#"}, {"type": "null"}]}, "schema-cycle", {}),
])
def test_refusals_name_the_problem(schema, hint, data):
    with pytest.raises(InputError) as e:
        compile_schema(schema)
    assert e.value.hint == hint and e.value.data == data
    assert "\n" not in str(e.value) and e.value.fix


def test_lenient_ignores_unsupported_keywords_and_lists_them():
    schema = {"type": "object", "properties": {"a": {"type": "integer"}}, "unevaluatedProperties": False,
              "x-vendor": 1, "format": "idn-email"}
    r = compile_schema(schema, lenient=True)
    assert any("unevaluatedProperties" in w for w in r.warnings)
    assert any("x-vendor" in w for w in r.warnings) and any("idn-email" in w for w in r.warnings)
    fst = r.automaton.fst.arcsort("ilabel")
    assert accepts(fst, '{"a":1,"b":2}')  # unevaluatedProperties ignored: b is allowed
    with pytest.raises(InputError):
        compile_schema(schema)


def test_lenient_relaxes_large_counts_and_drops_untranslatable_patterns():
    schema = {"type": "object", "properties": {"s": {"type": "string", "maxLength": 100, "pattern": "^(?!x)"},
                                               "a": {"type": "array", "minItems": 70}}}
    r = compile_schema(schema, lenient=True)
    assert any("maxLength 100" in w for w in r.warnings) and any("minItems 70" in w for w in r.warnings)
    assert any("(?!x)" in w for w in r.warnings)
    fst = r.automaton.fst.arcsort("ilabel")
    assert accepts(fst, '{"s":"' + "x" * 150 + '"}')  # neither the pattern nor maxLength is enforced
    assert accepts(fst, '{"a":[' + ",".join(["0"] * 64) + "]}") and not accepts(fst, '{"a":[0]}')  # at least 64
    exact = compiled({"type": "string", "maxLength": 100})
    assert accepts(exact, '"' + "é" * 100 + '"') and not accepts(exact, '"' + "a" * 101 + '"')


def test_limits_are_estimated_before_building():
    many = {"type": "object", "properties": {f"k{i}": {"type": "integer"} for i in range(30)}}
    with pytest.raises(LimitError) as e:
        compile_schema(many, any_order=True)
    assert e.value.at_least and e.value.limit == "max_states"
    with pytest.raises(LimitError) as e:
        compile_schema({"type": "integer", "multipleOf": 0.123456789})
    assert e.value.at_least
    with pytest.raises(LimitError):
        compile_schema({"type": "string", "maxLength": 5000}, max_states=10_000)


@pytest.mark.parametrize("schema", [
    {"type": "object", "properties": {f"k{i}": {"type": "integer"} for i in range(30)},
     "required": [f"k{i}" for i in range(30)]},
    {"const": {f"k{i}": i for i in range(30)}}])
def test_any_order_counts_required_keys_in_its_estimate(schema):
    """Every order of 30 keys, each written once, needs a state per set written (2^30), required
    or not: refused by the estimate, before anything is built (it ran for minutes before)."""
    with pytest.raises(LimitError) as e:
        compile_schema(schema, any_order=True)
    assert e.value.at_least and e.value.value == 2 ** 30
    assert compile_schema(schema).automaton.fst.num_states() > 0  # the stable order: one order


def test_any_order_accepts_every_order_of_the_named_keys():
    schema = {"properties": {"a": {"type": "integer"}, "b": {"type": "boolean"}, "c": {"type": "null"}},
              "required": ["a"], "additionalProperties": False}
    stable, free = compiled(schema), compiled(schema, any_order=True)
    for n in range(4):
        for keys in itertools.permutations([("a", 1), ("b", True), ("c", None)], n):
            text = json.dumps(dict(keys), separators=(",", ":"))
            valid = any(k == "a" for k, _ in keys)
            assert accepts(free, text) == valid
            assert accepts(stable, text) == (valid and [k for k, _ in keys] == sorted(k for k, _ in keys))


@pytest.mark.parametrize("keyword", ["const", "enum", "not"])
def test_any_order_writes_a_constant_object_in_every_order(keyword):
    """const/enum objects (nested too) are equal whatever their key order: any_order accepts each."""
    value = {"a": 1, "b": [{"x": None, "y": True}], "c": "s"}
    schema = {"const": value} if keyword == "const" else {"enum": [3, value]} if keyword == "enum" else \
        {"type": "object", "not": {"const": value}}
    stable, free = compiled(schema), compiled(schema, any_order=True)
    for keys in itertools.permutations(value):
        for inner in (("x", "y"), ("y", "x")):
            v = {k: [{i: value["b"][0][i] for i in inner}] if k == "b" else value[k] for k in keys}
            text = json.dumps(v, separators=(",", ":"))
            stable_order = list(keys) == ["a", "b", "c"] and inner == ("x", "y")
            assert accepts(free, text) == (keyword != "not"), text
            assert accepts(stable, text) == (keyword != "not" and stable_order), text
    assert accepts(free, '{"c":"s","a":1}') == (keyword == "not")  # a member missing: another object


def test_property_order_merges_properties_over_ref_and_allof():
    schema = {"$defs": {"base": {"properties": {"id": {"type": "integer"}}}},
              "allOf": [{"$ref": "#/$defs/base"}, {"properties": {"name": {"type": "string"}}}],
              "properties": {"tags": {"type": "array"}}, "required": ["kind"]}
    text = serialize({"extra": 0, "kind": "k", "tags": [], "name": "n", "id": 1}, schema)
    assert text == '{"id":1,"name":"n","tags":[],"kind":"k","extra":0}'
    assert accepts(compiled(schema), text)
    assert not accepts(compiled(schema), '{"name":"n","id":1,"kind":"k"}')


def test_recursion_unfolds_max_depth_times():
    tree = {"type": "object", "properties": {"value": {"type": "integer"}, "children": {"type": "array",
            "items": {"$ref": "#"}}}, "required": ["value"], "additionalProperties": False}

    def nested(n: int) -> str:
        return '{"value":1}' if n == 1 else '{"value":1,"children":[' + nested(n - 1) + "]}"

    for depth in (1, 2, 3):
        fst = compiled(tree, max_depth=depth)
        assert accepts(fst, nested(depth)) and not accepts(fst, nested(depth + 1))
    r = compile_schema(tree, max_depth=2)
    assert any("max_depth" in w for w in r.warnings)


def test_explicit_nesting_is_never_cut():
    deep = {"type": "integer"}
    for _ in range(8):
        deep = {"type": "object", "properties": {"x": deep}, "required": ["x"], "additionalProperties": False}
    assert accepts(compiled(deep, max_depth=1), '{"x":' * 8 + "1" + "}" * 8)


def test_whitespace_policies():
    schema = {"type": "object", "properties": {"a": {"type": "array", "items": {"type": "integer"}}}}
    value = {"a": [1, 2]}
    texts = {"compact": '{"a":[1,2]}', "pretty": '{"a": [1, 2]}', "flexible": ' {\n "a" :\t[ 1 ,2]\r}\n'}
    for policy, text in texts.items():
        fst = compiled(schema, whitespace=policy)
        assert accepts(fst, serialize(value, schema, policy))
        assert {p for p, t in texts.items() if accepts(fst, t)} == ({"compact", "pretty", "flexible"}
                                                                    if policy == "flexible" else {policy})
    with pytest.raises(InputError):
        compile_schema(schema, whitespace="loose")


def test_one_spelling_per_string_and_number():
    fst = compiled({"type": ["string", "number"]}, number_spellings="shortest")
    for text in ['"a\\nb"', '"\\u0001"', '"é"', '"\\"\\\\"', "0", "-1.5", "10"]:
        assert accepts(fst, text), text
    for text in ['"a\\u000ab"', '"\\u00e9"', '"\\/"', '"\\u0022"', "-0", "1.50", "1e1", "01", '"\t"', '"\x01"']:
        assert not accepts(fst, text), text
    fst = compiled({"type": ["string", "number"]})  # by default, every JSON spelling of a number
    assert all(accepts(fst, t) for t in ["-0", "1.50", "1e1", "5.0"]) and not accepts(fst, "01")


def test_empty_languages_raise():
    with pytest.raises(EmptyLanguageError):
        compile_schema(False)
    with pytest.raises(EmptyLanguageError):
        compile_schema({"type": "integer", "minimum": 3, "maximum": 2})
    with pytest.raises(EmptyLanguageError):  # a required recursion that never ends
        compile_schema({"properties": {"next": {"$ref": "#"}}, "required": ["next"], "type": "object"})


def test_formats_and_patterns_are_asserted_on_strings_only():
    fst = compiled({"format": "date", "pattern": "^2"})
    assert accepts(fst, '"2020-02-29"') and not accepts(fst, '"2021-02-29"') and not accepts(fst, '"1999-01-01"')
    assert accepts(fst, "12") and accepts(fst, "[]")  # not strings: format and pattern do not apply


def test_the_automaton_is_minimal_and_named():
    r = compile_schema({"title": "point", "type": "object", "properties": {"x": {"type": "number"}}})
    fst = r.automaton.fst
    assert r.automaton.pattern == "json-schema:point"
    assert fst.num_states() == fst.copy().minimize().num_states()
    assert fst.input_symbols().find(ord("{") + 1) == "{"


@pytest.mark.parametrize("name", ["jdt", "launchsettings", "lerna", "jest"])
def test_deferred_values_give_the_same_automaton(name, monkeypatch):
    """Values deferred as placeholders in their objects and arrays (expanded once, at the end) against
    values built into every object as before; compiled twice, as free values are shared
    between compilations and must not carry one compilation's placeholders into the next."""
    import pynini

    from tokfst_cli.schema import automata

    schema = json.loads((Path(__file__).parents[1] / "data" / "schemas" / f"{name}.json").read_text())
    deferred = [compile_schema(schema).automaton.fst for _ in range(2)]
    monkeypatch.setattr(automata, "DEFERRED_STATES", 1 << 62)
    eager = compile_schema(schema).automaton.fst
    for f in deferred:
        assert (f.num_states(), sum(f.num_arcs(s) for s in f.states())) == (
            eager.num_states(), sum(eager.num_arcs(s) for s in eager.states()))
        assert pynini.equivalent(f.arcsort("ilabel"), eager.arcsort("ilabel"))


@pytest.mark.parametrize("name", ["jest", "netlify"])
def test_a_compilation_leaves_no_placeholder_to_the_next(name, monkeypatch):
    """Free values (no schema) are kept across compilations; one built on a part that holds this
    compilation's placeholders (an object universe deferred its values) is not, or the next
    compilation would read those labels as its own bodies. After a real schema, other schemas
    compile to what they compile to alone: byte labels only, the same language."""
    import pynini

    from tokfst_cli.schema import compile as compile_module

    schema = json.loads((Path(__file__).parents[1] / "data" / "schemas" / f"{name}.json").read_text())
    later = [True, {}, {"type": "object", "properties": {"a": {}}}, {"type": "array", "items": {"type": "object"}}]
    monkeypatch.setattr(compile_module, "_FREE", {})
    alone = [compile_schema(s).automaton.fst for s in later]
    monkeypatch.setattr(compile_module, "_FREE", {})
    compile_schema(schema)
    for s, want in zip(later, alone):
        got = compile_schema(s).automaton.fst
        assert max(a.ilabel for q in got.states() for a in got.arcs(q)) <= 256, s
        assert pynini.equivalent(got.arcsort("ilabel"), want.arcsort("ilabel")), s


def test_unique_items_over_many_values_is_a_limit_not_a_blow_up():
    """uniqueItems needs a state per set of the values used. Over 15 values (aiproj's
    ProgrammingLanguages), spelled, that is millions of states: a LimitError (exit 3), met before
    the memory is spent. Before, the sets' automaton was a product of 15 automata never
    minimized on the way, which outgrew 12 GB. Run under a 3 GB address-space cap."""
    import resource
    import subprocess
    import sys

    languages = ["Java", "CSharp (Windows, Linux)", "CSharp (Windows)", "VB", "Php", "JavaScript", "Python",
                 "ObjectiveC", "Swift", "CAndCPlusPlus", "Go", "Kotlin", "Sql", "Ruby", "Solidity"]
    schema = {"type": "array", "uniqueItems": True, "items": {"enum": languages}}
    code = ("import json, sys\nfrom tokfst_cli.errors import LimitError\nfrom tokfst_cli.schema import compile_schema\n"
            "try:\n    compile_schema(json.loads(sys.argv[1]))\nexcept LimitError as e:\n"
            "    print(e.exit_code, e.limit, e.value > e.bound)\n")

    def cap() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30))

    out = subprocess.run([sys.executable, "-c", code, json.dumps(schema)], capture_output=True, text=True,
                         timeout=300, preexec_fn=cap)
    assert out.stdout.split() == ["3", "max_states", "True"], out.stderr[-2000:]
    few = compiled({"type": "array", "uniqueItems": True, "items": {"enum": languages[:6]}})
    assert accepts(few, '["Java","VB","Php"]') and accepts(few, "[]")
    assert not accepts(few, '["Java","VB","Java"]') and not accepts(few, '["Go"]')


@pytest.mark.parametrize("patterns", [False, True])
def test_other_keys_exclude_named_keys_that_need_escapes(patterns):
    """Other keys are every spelled key but the named ones', escapes included (built on spellings
    without patternProperties, on decoded keys with them): a named key never takes the other
    keys' values."""
    schema = {"properties": {'a"b': {"type": "integer"}, "é\n": {"type": "null"}},
              "additionalProperties": {"type": "string"}}
    if patterns:
        schema["patternProperties"] = {"^z": {"type": "boolean"}}
    fst = compiled(schema)
    def ok(instance):
        return accepts(fst, json.dumps(instance, ensure_ascii=False, separators=(",", ":")))
    assert ok({'a"b': 1}) and not ok({'a"b': "s"})
    assert ok({"é\n": None}) and not ok({"é\n": "s"})
    assert ok({'x"\\\n': "s"}) and not ok({"x": 1}) and ok({'a"': "s"}) and ok({"é": "s"})
    assert ok({"z": True}) == patterns and ok({"z": "s"}) != patterns


def test_branches_that_repeat_a_subschema_split_a_value_once(monkeypatch):
    """oneOf branches giving a key the same subschema as separate JSON objects (kustomization's
    ``targets``): the value is split by one test, as when the branches share one object, and
    the language is oneOf's (a document matching both branches is refused)."""
    from tokfst_cli.schema import automata

    def schema(shared: bool) -> dict:
        item = {"type": "array", "items": {"type": "object", "properties": {"n": {"type": "integer"}}}}
        second = item if shared else json.loads(json.dumps(item))
        return {"type": "object", "additionalProperties": False,
                "oneOf": [{"required": ["a"], "properties": {"a": {"const": 1}, "t": item}},
                          {"required": ["b"], "properties": {"b": {"const": 2}, "t": second}}],
                "properties": {"a": {}, "b": {}, "t": {}}}

    got = {}
    for shared in (True, False):
        calls = []
        intersect = automata.Budget.intersect
        monkeypatch.setattr(automata.Budget, "intersect",
                            lambda self, a, b, what: calls.append(what) or intersect(self, a, b, what))
        fst = compiled(schema(shared))
        monkeypatch.undo()
        got[shared] = (fst, calls.count("property 't'"))
        def ok(instance, s=schema(shared), fst=fst):
            return accepts(fst, serialize(instance, s))  # in the stable key order
        assert ok({"a": 1, "t": [{"n": 1}]}) and ok({"b": 2, "t": []}) and ok({"a": 1})
        assert not ok({"a": 1, "b": 2}) and not ok({"t": []}) and not ok({"a": 1, "t": [{"n": "x"}]})
    assert got[False][1] == got[True][1] > 0
    import pynini
    assert pynini.equivalent(got[True][0].arcsort("ilabel"), got[False][0].arcsort("ilabel"))


def test_a_tagged_union_is_not_intersected(monkeypatch):
    """oneOf over objects told apart by a constant tag or by a key one requires and another
    lacks: each branch's objects meet the object's own once, no other branch's, and the
    language is oneOf's."""
    from tokfst_cli.schema import automata

    calls = []
    intersect = automata.Budget.intersect
    monkeypatch.setattr(automata.Budget, "intersect",
                        lambda self, a, b, what: calls.append(what) or intersect(self, a, b, what))
    kinds = ["circle", "square", "line"]
    branches = [{"type": "object", "propertyNames": {}, "required": ["kind", "size"],
                 "properties": {"kind": {"const": k}, "size": {"type": "integer"}}} for k in kinds]
    branches.append({"type": "object", "propertyNames": {}, "required": ["ref"], "not": {"required": ["kind"]}})
    schema = {"type": "object", "properties": {"kind": {}, "size": {}, "ref": {"type": "string"}},
              "additionalProperties": False, "oneOf": branches}
    fst = compiled(schema)
    assert calls.count("oneOf") == len(branches), calls

    def ok(instance):
        return accepts(fst, serialize(instance, schema))

    assert ok({"kind": "circle", "size": 1}) and ok({"kind": "line", "size": 2, "ref": "r"}) and ok({"ref": "r"})
    assert not ok({"kind": "dot", "size": 1}) and not ok({"size": 1}) and not ok({"kind": "circle"})


def test_member_wise_branches_told_apart_are_unioned_not_split(monkeypatch):
    """abc-supply-plan's analytics items: a oneOf of closed objects, one requiring a key the
    other does not allow. The branches are compiled alone and unioned: no member's value is
    cut by the other branch's tests (.presence), and the language is oneOf's."""
    from tokfst_cli.schema import automata

    cuts = []
    for op in ("intersect", "difference"):
        orig = getattr(automata.Budget, op)
        monkeypatch.setattr(automata.Budget, op, lambda self, a, b, what, _o=orig: cuts.append(what)
                            or _o(self, a, b, what))
    shared = {"type": "array", "items": {"type": "object", "properties": {"n": {"type": "integer"}}}}
    schema = {"oneOf": [
        {"type": "object", "properties": {"id": {"type": "string"}, "metrics": shared}, "required": ["id", "metrics"],
         "additionalProperties": False},
        {"type": "object", "properties": {"id": {"type": "string"}, "text": {"type": "string"}},
         "required": ["id", "text"], "additionalProperties": False}]}
    fst = compiled(schema)
    assert not [c for c in cuts if c.startswith("property")], cuts

    def ok(instance):
        return accepts(fst, serialize(instance, schema))

    assert ok({"id": "a", "metrics": [{"n": 1}]}) and ok({"id": "a", "text": "t"}) and not ok("a string")
    assert not ok({"id": "a"}) and not ok({"id": "a", "metrics": [], "text": "t"}) and not ok({"text": "t"})


def test_a_branch_of_every_object_is_not_intersected(monkeypatch):
    """github-workflow's ``"oneOf": [{"type": "object"}, {"type": "null"}]`` under an object with
    properties: the branch that allows every object takes the object's own automaton, with no
    intersection or difference, and the language is oneOf's."""
    from tokfst_cli.schema import automata

    calls = []
    for op in ("intersect", "difference"):
        orig = getattr(automata.Budget, op)
        monkeypatch.setattr(automata.Budget, op, lambda self, a, b, what, _o=orig: calls.append(what)
                            or _o(self, a, b, what))
    schema = {"properties": {"a": {"type": "integer"}}, "additionalProperties": False,
              "oneOf": [{"type": "object"}, {"type": "null"}]}
    fst = compiled(schema)
    assert "oneOf" not in calls, calls

    def ok(instance):
        return accepts(fst, serialize(instance, schema))

    assert ok({"a": 1}) and ok({}) and ok(None)
    assert not ok({"a": "x"}) and not ok({"b": 1}) and not ok(1) and not ok("s")


def test_branches_apart_from_some_meet_only_the_others(monkeypatch):
    """starlake's ``extract``: a JDBC branch that lacks ``openAPI`` and ``restAPI``, and OpenAPI and
    REST branches requiring one each, which overlap (an object with both keys). Only the two
    that may overlap are intersected with each other; the language is oneOf's."""
    from tokfst_cli.schema import automata

    calls = []
    for op in ("intersect", "difference"):
        orig = getattr(automata.Budget, op)
        monkeypatch.setattr(automata.Budget, op, lambda self, a, b, what, _o=orig, _op=op: calls.append((_op, what))
                            or _o(self, a, b, what))
    props = {"jdbc": {"type": "integer"}, "openAPI": {"type": "string"}, "restAPI": {"type": "string"}}
    schema = {"type": "object", "properties": props, "oneOf": [
        {"not": {"anyOf": [{"required": ["openAPI"]}, {"required": ["restAPI"]}]}},
        {"required": ["openAPI"], "propertyNames": {}},
        {"required": ["restAPI"], "propertyNames": {}}]}
    fst = compiled(schema)
    # each branch meets the object's own, then openAPI's part meets restAPI's, and each loses the
    # other: the JDBC part (and the union of those before) is not touched
    assert calls.count(("intersect", "oneOf")) == 3 + 1 and calls.count(("difference", "oneOf")) == 2, calls

    def ok(instance):
        return accepts(fst, serialize(instance, schema))

    assert ok({}) and ok({"jdbc": 1}) and ok({"openAPI": "o"}) and ok({"jdbc": 2, "restAPI": "r"})
    assert not ok({"openAPI": "o", "restAPI": "r"}) and not ok({"jdbc": "x"})
