"""Recursive JSON Schemas and free values with a stack (``grammar.schema.compile_json``): nothing is
cut at ``max_depth``. Oracle: ``jsonschema`` (instances Hypothesis draws, nested far deeper than
the cut, accepted token by token in HF's own encoding; texts of walks led by the masks valid) and
the cut automaton (what it accepts, the stack accepts too)."""

from __future__ import annotations

import json

import jsonschema
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tokfst_cli as tokfst
from tokfst_cli.errors import InputError
from tokfst_cli.grammar.pushdown import Pushdown
from tokfst_cli.grammar.schema import compile_json, unbounded
from tokfst_cli.promotion.stack import PushdownDecoder
from tokfst_cli.schema.serialize import serialize

from ..runner import run
from ..schema.test_suite import CASES, _writings, classify
from ..walks import accepts

TREE = {"title": "tree", "type": "object", "required": ["name"], "additionalProperties": False,
        "properties": {"name": {"type": "string", "maxLength": 3},
                       "children": {"type": "array", "items": {"$ref": "#"}, "maxItems": 3}}}
LIST = {"$defs": {"node": {"type": "object", "required": ["v"], "additionalProperties": False,
                           "properties": {"v": {"type": "integer", "minimum": 0},
                                          "next": {"anyOf": [{"$ref": "#/$defs/node"}, {"type": "null"}]}}}},
        "$ref": "#/$defs/node"}
FREE = {"type": "object", "required": ["id", "meta"], "additionalProperties": False,
        "properties": {"id": {"type": "integer"}, "meta": {}}}
MEETS = {"$defs": {"n": {"type": "object", "properties": {"next": {"$ref": "#/$defs/n"}}}},
         "oneOf": [{"$ref": "#/$defs/n"}, {"type": "object", "properties": {"a": {"type": "integer"}}}]}

NAMES = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=3)
TREES = st.recursive(st.builds(lambda n: {"name": n}, NAMES),
                     lambda c: st.builds(lambda n, ch: {"name": n, "children": ch}, NAMES, st.lists(c, max_size=3)),
                     max_leaves=12)
LEAF = st.one_of(st.none(), st.booleans(), st.integers(-10**6, 10**6), st.text(max_size=4))
DOCS = st.recursive(LEAF, lambda c: st.one_of(st.lists(c, max_size=3), st.dictionaries(st.text(max_size=3), c,
                                                                                         max_size=3)), max_leaves=10)


def depth(doc) -> int:
    if isinstance(doc, dict):
        return 1 + max((depth(v) for v in doc.values()), default=0)
    if isinstance(doc, list):
        return 1 + max((depth(v) for v in doc), default=0)
    return 0


def valid(text: str, schema) -> bool:
    try:
        jsonschema.validate(json.loads(text), schema)
    except (ValueError, jsonschema.ValidationError):
        return False
    return True


def compact(doc) -> str:
    return json.dumps(doc, separators=(",", ":"), ensure_ascii=False)


@pytest.fixture(scope="module")
def decoders(tokenizer):
    model = tokenizer("gpt2")
    return {name: tokfst.lazy(model, schema=s) for name, s in (("tree", TREE), ("list", LIST), ("free", FREE))}


def test_recursive_schemas_and_free_values_compile_to_a_stack(decoders):
    for name, decoder in decoders.items():
        assert isinstance(decoder, PushdownDecoder), name
    got = compile_json(TREE)
    assert isinstance(got.automaton, Pushdown) and got.warnings == []
    assert "tree" in got.automaton.rules
    assert not isinstance(compile_json(TREE, recursion="cut").automaton, Pushdown)
    assert not isinstance(compile_json({"type": "array", "items": {"type": "integer"}}).automaton, Pushdown)


def wrapped(doc, k: int, key: str):
    """``doc`` nested in ``k`` arrays or objects (alternately): deeper than the cut."""
    for i in range(k):
        doc = [doc] if i % 2 else {key: doc}
    return doc


@pytest.mark.parametrize("name,schema,docs", [("tree", TREE, TREES), ("free", FREE, st.builds(
    lambda d, k, key: {"id": 7, "meta": wrapped(d, k, key)}, DOCS, st.integers(0, 8), st.text(max_size=2)))])
def test_valid_instances_of_any_depth_are_accepted_in_the_tokenizers_encoding(name, schema, docs, decoders,
                                                                             tokenizer):
    hf, decoder = tokenizer.hf("gpt2"), decoders[name]
    deep = []

    @settings(max_examples=50, deadline=None)
    @given(docs)
    def check(doc):
        jsonschema.validate(doc, schema)
        assert accepts(decoder, hf.encode(compact(doc), add_special_tokens=False).ids), compact(doc)
        deep.append(depth(doc))

    check()
    assert max(deep) > 4  # past the cut (max_depth 3) on some path


def chain(n: int) -> str:
    """The compact text of a list of ``n`` nodes, the outermost last (json.dumps stops at Python's
    recursion limit)."""
    return "".join(f'{{"v":{v},"next":' for v in reversed(range(n))) + "null" + "}" * n


def test_a_linked_list_thousands_deep_is_accepted_and_broken_ones_are_not(decoders, tokenizer):
    """2,000 deep is accepted (jsonschema itself stops at Python's recursion limit, so the
    mutations are checked 120 deep, still far past the cut)."""
    hf, decoder = tokenizer.hf("gpt2"), decoders["list"]
    assert accepts(decoder, hf.encode(chain(2000), add_special_tokens=False).ids)
    text = chain(120)
    assert valid(text, LIST) and accepts(decoder, hf.encode(text, add_special_tokens=False).ids)
    for bad in [text[:-1], text.replace('"v":119', '"v":-1'), text.replace('"v":5,', '"w":5,'),
                text.replace('"next":null', '"next":{}')]:
        assert bad != text and not valid(bad, LIST)
        assert not accepts(decoder, hf.encode(bad, add_special_tokens=False).ids), bad[:60]


def test_what_the_cut_accepts_the_stack_accepts_and_deeper_ones_only_the_stack(tokenizer):
    hf, model = tokenizer.hf("gpt2"), tokenizer("gpt2")
    cut, stack = tokfst.lazy(model, schema=FREE, recursion="cut"), tokfst.lazy(model, schema=FREE)
    shallow, deep = {"id": 1, "meta": {"a": [1, {"b": None}]}}, {"id": 1, "meta": [[[[[["x"]]]]]]}
    for doc, in_cut in ((shallow, True), (deep, False)):
        ids = hf.encode(compact(doc), add_special_tokens=False).ids
        assert accepts(cut, ids) is in_cut and accepts(stack, ids)


def test_walks_led_by_the_masks_give_valid_instances(decoders, tokenizer):
    """Random walks (past 40 bytes, leaning to closing bytes) end final with valid instances; no
    mask is empty before the end."""
    model = tokenizer("gpt2")
    surface = dict(model.lexicon_items())
    rng = np.random.default_rng(5)
    for name, schema in (("tree", TREE), ("list", LIST), ("free", FREE)):
        decoder = decoders[name]
        for _ in range(3):
            state, text = decoder.initial(), b""
            while len(text) < 4000 and not (decoder.is_final(state) and text):
                allowed = np.flatnonzero(decoder.mask(state))
                assert len(allowed), text
                closing = [t for t in allowed if surface[int(t)] in (b"]", b"}", b'"', b"null", b"[]", b"}]", b",")]
                short = [t for t in allowed if len(surface[int(t)]) <= 2]
                pool = closing if closing and len(text) > 40 else short or allowed
                token = int(rng.choice(pool))
                state, text = decoder.advance(state, token), text + surface[token]
            assert decoder.is_final(state), text
            jsonschema.validate(json.loads(text), schema)


def test_recursion_that_meets_an_intersection_is_cut_or_refused():
    got = compile_json(MEETS)
    assert not isinstance(got.automaton, Pushdown)
    assert any("cut at max_depth 3" in w for w in got.warnings)
    with pytest.raises(InputError) as e:
        compile_json(MEETS, recursion="stack")
    assert e.value.hint == "schema-recursion"
    with pytest.raises(InputError):
        compile_json(TREE, recursion="sideways")


def test_the_command_line_writes_the_pushdown_automaton_and_load_decodes_it(tmp_path, tokenizer):
    schema = tmp_path / "tree.json"
    schema.write_text(json.dumps(TREE))
    r = run("promote", "gpt2", "--schema", schema, tmp_path / "tree.fst", "-v")
    assert r.returncode == 0 and "parenthesis pairs" in r.stderr, r.stderr
    decoder = tokfst.load(str(tmp_path / "tree.fst"), tokenizer=tokenizer("gpt2"))
    doc = {"name": "a", "children": [{"name": "b", "children": [{"name": "c", "children": [{"name": "d", "children": [
        {"name": "e"}]}]}]}]}
    assert accepts(decoder, tokenizer.hf("gpt2").encode(compact(doc), add_special_tokens=False).ids)
    r = run("promote", "gpt2", "--schema", schema, "--recursion", "stack", "--canonical", tmp_path / "x.fst")
    assert r.returncode == 2 and len(r.stderr.splitlines()) == 1 and "--recursion cut" in r.stderr, r.stderr
    r = run("promote", "gpt2", "--schema", schema, "--recursion", "cut", tmp_path / "cut.fst")
    assert r.returncode == 0 and "max_depth 3" in r.stderr and "parenthesis" not in r.stderr


def byte_accepts(decoder: PushdownDecoder, text: str) -> bool:
    """Does the PDT accept the UTF-8 bytes of ``text`` (stepped byte by byte, no tokens)?"""
    state = decoder.initial()
    for b in text.encode("utf-8"):
        state = decoder.step(state, b + 1)
        if not state:
            return False
    return decoder.is_final(state)


def test_the_json_schema_test_suite_with_a_stack(tokenizer):
    """Every compiled group of the official suite whose schema nests without bound (a recursive
    $ref, a written free value) compiled with a stack: valid instances accepted, invalid ones
    rejected however their keys are ordered; where the stack cannot be had, "auto" cuts with
    a warning and "stack" refuses by name."""
    model = tokenizer("gpt2")
    stacked = refused = 0
    for name, _, group in CASES:
        schema = group["schema"]
        if classify(name, group)[0] != "compiled" or not unbounded(schema):
            continue
        try:
            pdt = compile_json(schema, recursion="stack").automaton
        except InputError as e:
            assert e.hint == "schema-recursion", (name, e)
            assert any("cut at max_depth" in w for w in compile_json(schema).warnings), name
            refused += 1
            continue
        if not isinstance(pdt, Pushdown):
            continue
        stacked += 1
        decoder = PushdownDecoder(model, pdt)
        for test in group["tests"]:
            if test["valid"]:
                text = serialize(test["data"], schema, "compact")
                assert byte_accepts(decoder, text), (name, group["description"], text)
            else:
                for text in _writings(test["data"], schema, "compact"):
                    assert not byte_accepts(decoder, text), (name, group["description"], text)
    assert stacked >= 20, (stacked, refused)
