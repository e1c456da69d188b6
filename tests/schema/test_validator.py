"""compile_schema against an independent validator: the ``jsonschema`` package (draft 2020-12).

Random schemas are drawn from the keywords tokfst supports (types and type lists, enum,
const, string lengths and patterns, integer and number bounds, multipleOf, arrays with
items/prefixItems/counts/uniqueItems over finite items, objects with properties, required,
additionalProperties, patternProperties, property counts and dependentRequired, the
applicators anyOf/oneOf/allOf/not/if-then-else, boolean schemas), nested two deep.

- Sound: every random text of the compiled automaton is a JSON instance the validator accepts
  (texts that write an unnamed key twice aside: the automaton allows them, README "Other keys
  may repeat").
- Complete: every random instance the validator accepts, written as the automaton spells it
  (``serialize``: stable key order, canonical numbers), is accepted by the automaton; with
  ``any_order``, in the instance's own key order. Under each whitespace policy.
"""

from __future__ import annotations

import json
import os
from decimal import Decimal, InvalidOperation, localcontext

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator, validators

from tokfst_cli.bench.schema_workers import random_text, steered_text
from tokfst_cli.errors import InputError, LimitError
from tokfst_cli.promotion.byte_table import of_automaton
from tokfst_cli.schema.formats import FORMATS
from tokfst_cli.schema.serialize import serialize

from .util import accepts, compiled

KEYS = ["a", "b", "cc", "d1"]
PATTERNS = ["^a", "b$", "^[ab]*$", "c", "^d[0-9]$"]
MAX_DEPTH = 4  # instances nest at most 3 deep: never cut
SETTINGS = settings(max_examples=int(os.environ.get("TOKFST_VALIDATOR_EXAMPLES", 120)), deadline=None)


# Numbers are read exactly (Decimal, not float: 0.1 + 17 digits is no integer), and an integer is
# any number of integral value (draft 2020-12 Sec. 6.1.1 of the validation vocabulary: 5.0 is one).
def _integer(checker, x) -> bool:
    if isinstance(x, Decimal):
        return x == x.to_integral_value()
    return Draft202012Validator.TYPE_CHECKER.is_type(x, "integer")


_CHECKER = Draft202012Validator.TYPE_CHECKER.redefine("integer", _integer)
Validator = validators.extend(Draft202012Validator, type_checker=_CHECKER)


def _decimal(text: str) -> Decimal:
    """A JSON number read exactly, but an exponent past Decimal's range (a random text's run
    long), which is brought within it keeping the sign and zero: exponents are only accepted
    where numbers are constrained by their sign at most (tests/schema/test_number_spellings.py)."""
    try:
        return Decimal(text)
    except InvalidOperation:
        mantissa, _, exponent = text.lower().partition("e")
        return Decimal(f"{mantissa}e{'-' if exponent.startswith('-') else ''}{10 ** 15}")


def _read(text: str):
    return json.loads(text, parse_float=_decimal)


def _valid(validator, instance) -> bool:
    """The validator's verdict, its Decimal arithmetic exact (a random text's numbers run long)."""
    with localcontext() as ctx:
        ctx.prec = 10_000
        return validator.is_valid(instance)

scalars = st.one_of(st.none(), st.booleans(), st.integers(-12, 12), st.text("abc", max_size=3))
bound = st.integers(-8, 8)
constants = st.recursive(scalars, lambda xs: st.lists(xs, max_size=2) | st.dictionaries(st.sampled_from(KEYS), xs,
                                                                                     max_size=3), max_leaves=4)


def _ordered(lo, hi, a: str, b: str) -> dict:
    return {a: min(lo, hi), b: max(lo, hi)}


leaf = st.one_of(
    st.just({}), st.booleans(),
    st.builds(lambda kw: {"type": "string", **kw}, st.fixed_dictionaries({}, optional={
        "minLength": st.integers(0, 2), "maxLength": st.integers(1, 3), "pattern": st.sampled_from(PATTERNS)})),
    st.builds(lambda t, kw: {"type": t, **kw}, st.sampled_from(["integer", "number"]),
              st.fixed_dictionaries({}, optional={"minimum": bound, "maximum": bound, "exclusiveMinimum": bound,
                                                  "exclusiveMaximum": bound, "multipleOf": st.sampled_from([2, 3])})),
    st.builds(lambda t: {"type": t}, st.sampled_from(["boolean", "null"])),
    st.builds(lambda ts: {"type": ts}, st.lists(st.sampled_from(["string", "integer", "null", "boolean", "array",
                                                                 "object"]), min_size=1, max_size=3, unique=True)),
    st.builds(lambda vs: {"enum": vs}, st.lists(constants, min_size=1, max_size=4, unique_by=json.dumps)),
    st.builds(lambda v: {"const": v}, constants),
)


def _array(items, counts, prefix, unique):
    out = {"type": "array", **counts}
    if prefix and not unique:
        out["prefixItems"] = prefix
    if unique:  # over a finite item language only (tokfst refuses the others by name)
        out["items"] = {"enum": unique}
        out["uniqueItems"] = True
    elif items is not None:
        out["items"] = items
    return out


def _object(props, required, additional, patterned, counts, dependent):
    out = {"type": "object", "properties": props, **counts}
    if required:
        out["required"] = required
    if additional is not None:
        out["additionalProperties"] = additional
    if patterned:
        out["patternProperties"] = patterned
    if dependent:
        out["dependentRequired"] = dependent
    return out


def _extend(children):
    counts = lambda a, b: st.fixed_dictionaries({}, optional={a: st.integers(0, 2), b: st.integers(1, 3)})  # noqa: E731
    return st.one_of(
        st.builds(_array, st.none() | children, counts("minItems", "maxItems"), st.lists(children, max_size=2),
                  st.none() | st.lists(st.integers(0, 3), min_size=1, max_size=3, unique=True)),
        st.builds(_object, st.dictionaries(st.sampled_from(KEYS), children, max_size=3),
                  st.lists(st.sampled_from(KEYS), max_size=2, unique=True), st.none() | st.booleans() | children,
                  st.dictionaries(st.sampled_from(PATTERNS[:2]), children, max_size=1),
                  counts("minProperties", "maxProperties"),
                  st.dictionaries(st.sampled_from(KEYS), st.lists(st.sampled_from(KEYS), min_size=1, max_size=2,
                                                                   unique=True), max_size=1)),
        st.builds(lambda k, xs: {k: xs}, st.sampled_from(["anyOf", "oneOf", "allOf"]),
                  st.lists(children, min_size=1, max_size=3)),
        st.builds(lambda x: {"not": x}, children),
        st.builds(lambda i, t, e: {"if": i, "then": t, "else": e}, children, children, children),
        st.builds(lambda x, kw: {"type": "array", "contains": x, **kw}, children,
                  st.fixed_dictionaries({}, optional={"minContains": st.integers(0, 2),
                                                      "maxContains": st.integers(1, 2)})),
        st.builds(lambda p, x: {"type": "object", "propertyNames": {"pattern": p}, "additionalProperties": x},
                  st.sampled_from(PATTERNS), children),
        st.builds(lambda k, x: {"dependentSchemas": {k: x}}, st.sampled_from(KEYS), children),
        st.builds(lambda xs, n: {"type": "array", "prefixItems": xs, "items": False, "minItems": n},
                  st.lists(children, min_size=1, max_size=3), st.integers(0, 2)),
        st.builds(lambda ps: {"type": "object", "patternProperties": ps, "additionalProperties": False},
                  st.dictionaries(st.sampled_from(PATTERNS), children, min_size=1, max_size=3)),
        st.builds(lambda x, n: {"type": "object", "additionalProperties": x, "maxProperties": n}, children,
                  st.integers(0, 2)),
    )


def _referenced(schema, shared, where):
    """``schema`` with ``shared`` as ``$defs/s``, referenced at ``where`` (its own place or a property)."""
    ref = {"$ref": "#/$defs/s"}
    if where == "root":
        return {"$defs": {"s": shared}, "allOf": [schema, ref]}
    return {"$defs": {"s": shared}, "type": "object", "properties": {"a": ref, "b": schema}}


schemas = st.recursive(leaf, _extend, max_leaves=int(os.environ.get("TOKFST_VALIDATOR_LEAVES", 5)))
schemas = schemas | st.builds(_referenced, schemas, schemas, st.sampled_from(["root", "property"]))
instances = st.recursive(scalars, lambda xs: st.lists(xs, max_size=3) | st.dictionaries(st.sampled_from(KEYS), xs,
                                                                                      max_size=3), max_leaves=6)


WHITESPACE = st.sampled_from(["compact", "compact", "pretty", "flexible"])
REFUSED = {"uniqueItems"}  # refused by name in some combinations (with contains, over many values)


def _compiled(schema, **options):
    """The automaton, or None where tokfst refuses the schema by name (only ``REFUSED``) or it
    passes ``max_states`` (deep free values under ``contains``, ``not``: the limit's own tests
    are in tests/schema/test_compile.py)."""
    try:
        return compiled(schema, max_depth=MAX_DEPTH, **options)
    except InputError as e:
        assert e.hint == "schema-keyword" and e.data.get("keyword") in REFUSED, e
    except LimitError as e:
        assert e.limit == "max_states", e
    return None


def _depth(x) -> int:
    if isinstance(x, list):
        return 1 + max(map(_depth, x), default=0)
    if isinstance(x, dict):
        return 1 + max(map(_depth, x.values()), default=0)
    return 0


@SETTINGS
@given(schema=schemas, seeds=st.lists(st.integers(0, 2**31), min_size=4, max_size=4), whitespace=WHITESPACE)
def test_every_text_of_the_automaton_is_valid(schema, seeds, whitespace):
    fst = _compiled(schema, whitespace=whitespace)
    validator = Validator(schema)
    if fst is None or fst.num_states() == 0:
        return  # no valid text: the other test checks that the validator accepts none of the instances
    texts = _texts(fst, seeds, 64)
    for text in texts:
        if _repeats_a_key(text):
            continue  # other keys may repeat (README, "Other keys may repeat"): no instance to validate
        assert _valid(validator, _read(text)), (schema, text)


def _texts(fst, seeds, budget: int) -> list[str]:
    """A random text of ``fst`` per seed: uniform (``randgen``), or steered to an end where a
    uniform one runs too long (the DFA's table made once)."""
    table, out = None, []
    for s in seeds:
        text = random_text(fst, s)
        if text is None:
            table = table or of_automaton(fst)
            text = steered_text(table, s, budget=budget)
        out.append(text)
    return out


def _repeats_a_key(text: str) -> bool:
    """Does some object of the JSON text write a key twice?"""
    repeated = []
    json.loads(text, object_pairs_hook=lambda pairs: repeated.append(len({k for k, _ in pairs}) < len(pairs)))
    return any(repeated)


@SETTINGS
@given(schema=schemas, values=st.lists(instances, min_size=8, max_size=8), order=st.randoms(use_true_random=False),
       whitespace=WHITESPACE)
def test_every_valid_instance_is_accepted(schema, values, order, whitespace):
    validator = Validator(schema)
    valid = [v for v in values if _depth(v) < MAX_DEPTH and validator.is_valid(v)]
    fst = _compiled(schema, whitespace=whitespace)
    if fst is None:
        return
    for v in valid:
        text = serialize(v, schema, whitespace)
        assert accepts(fst, text), (schema, v, text)
    any_order = _compiled(schema, any_order=True) if valid else None
    if any_order is not None:
        for v in valid:
            text = json.dumps(_shuffled(v, order), separators=(",", ":"), ensure_ascii=False)
            assert accepts(any_order, text), (schema, text)


def _shuffled(x, rng):
    """``x`` with every object's keys in a random order."""
    if isinstance(x, list):
        return [_shuffled(v, rng) for v in x]
    if isinstance(x, dict):
        keys = list(x)
        rng.shuffle(keys)
        return {k: _shuffled(x[k], rng) for k in keys}
    return x


@pytest.mark.parametrize("schema", [{"type": "integer", "minimum": 3}, {"type": "object", "required": ["a"]}])
def test_the_validator_is_draft_2020_12(schema):
    """The oracle reads the draft tokfst implements (a check of the test's own footing)."""
    v = Validator(schema)
    assert v.is_valid(3 if "minimum" in schema else {"a": 1})
    assert not v.is_valid(2 if "minimum" in schema else {"b": 1})


def test_the_oracle_reads_numbers_exactly():
    integer = Validator({"type": "integer"})
    assert integer.is_valid(_read("5.0")) and integer.is_valid(_read("-12")) and not integer.is_valid(_read("true"))
    assert not integer.is_valid(_read("-777104808714556545.773526347682699304849552855"))


# jsonschema 4.26's relative-json-pointer check refuses a digit after a 0 ("904", "1005#"):
# it compares every digit with the one before, not the first alone (the draft's
# non-negative-integer is "0" / %x31-39 *DIGIT), so it is no oracle for that format.
CHECKED_FORMATS = [f for f in FORMATS if f != "relative-json-pointer"]


@pytest.mark.parametrize("name", CHECKED_FORMATS)
def test_every_text_of_a_format_is_valid_under_its_checker(name):
    """Formats are asserted: every random text of {"format": F} passes the validator's draft
    2020-12 checker for F (``jsonschema[format-nongpl]``: rfc3339, rfc3986, fqdn, ...)."""
    schema = {"type": "string", "format": name}
    assert name in Draft202012Validator.FORMAT_CHECKER.checkers  # the oracle checks it
    validator = Validator(schema, format_checker=Draft202012Validator.FORMAT_CHECKER)
    fst = compiled(schema)
    texts = _texts(fst, range(200), 40)
    assert not [t for t in texts if not validator.is_valid(json.loads(t))]
    assert not validator.is_valid("not a " + name)  # the checker rejects, so the check above can fail
