"""``tokfst promote --schema``: a JSON Schema instead of a regex, through the whole
pipeline; valid instances' HF tokenizations are accepted by the canonical constraint, invalid
ones are not; warnings and refusals on stderr."""

from __future__ import annotations

import json

import pytest

from tokfst_cli import constraint
from tokfst_cli.schema.serialize import serialize

from ..runner import run

SCHEMA = {"type": "object", "additionalProperties": False, "required": ["ok", "n", "tag"],
          "properties": {"ok": {"type": "boolean"}, "n": {"type": "integer", "minimum": 0, "maximum": 20},
                         "tag": {"enum": ["red", "green"]}}}
VALID = [{"ok": True, "n": 5, "tag": "red"}, {"ok": False, "n": 20, "tag": "green"}, {"ok": True, "n": 0, "tag": "red"}]
INVALID_TEXTS = ['{"ok":1,"n":5,"tag":"red"}', '{"ok":true,"n":21,"tag":"red"}', '{"n":5,"ok":true,"tag":"red"}',
                 '{"ok":true,"n":5}', '{"ok":true,"n":5,"tag":"blue"}', '{"ok": true,"n":5,"tag":"red"}']


def accepts(decoder, ids: list[int]) -> bool:
    s = decoder.initial()
    for t in ids:
        if not decoder.mask(s)[t]:
            return False
        s = decoder.advance(s, t)
    return decoder.is_final(s)


@pytest.mark.parametrize("name", ["gpt2", "llama2"])
def test_schema_constraint_accepts_valid_instances_only(tokenizer, tmp_path, name):
    path = tmp_path / "s.json"
    path.write_text(json.dumps(SCHEMA))
    out = tmp_path / "c.json"
    r = run("promote", tokenizer.arg(name), "--schema", str(path), "--canonical", "--format", "index", str(out))
    assert r.rc == 0, r.err
    model, hf = tokenizer(name), tokenizer.hf(name)
    dec = constraint.load(str(out), model)
    for inst in VALID:
        text = serialize(inst, SCHEMA, "compact")
        assert text == json.dumps(inst, separators=(",", ":"))  # keys in the order of properties
        assert accepts(dec, hf.encode(text, add_special_tokens=False).ids), text
    for text in INVALID_TEXTS:
        assert not accepts(dec, hf.encode(text, add_special_tokens=False).ids), text


def test_schema_warnings_and_refusals(tmp_path):
    fmt = tmp_path / "fmt.json"
    fmt.write_text(json.dumps({"type": "string", "format": "color", "maxLength": 2}))
    r = run("promote", "gpt2", "--schema", str(fmt), str(tmp_path / "a.fst"))
    assert r.rc == 0 and "warning: format 'color' is an annotation" in r.err.decode()
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"type": "object", "unevaluatedProperties": False}))
    r = run("promote", "gpt2", "--schema", str(bad), str(tmp_path / "b.fst"))
    assert r.rc == 2 and r.err.decode().count("\n") == 1 and "unevaluatedProperties" in r.err.decode()
    assert "--lenient" in r.err.decode() and not (tmp_path / "b.fst").exists()
    r = run("promote", "gpt2", "--schema", str(bad), "--lenient", str(tmp_path / "b.fst"))
    assert r.rc == 0 and "warning: ignored: keyword unevaluatedProperties" in r.err.decode()


@pytest.mark.parametrize("args,fragment", [
    (["-e", "a"], "not both"),
    ([], "not JSON"),
])
def test_schema_bad_usage_is_one_line_exit_2(tmp_path, args, fragment):
    path = tmp_path / "s.json"
    path.write_text("{not json" if not args else json.dumps(SCHEMA))
    r = run("promote", "gpt2", "--schema", str(path), *args, str(tmp_path / "o.fst"))
    assert r.rc == 2 and fragment in r.err.decode() and r.err.decode().count("\n") == 1
    assert not (tmp_path / "o.fst").exists()


def test_schema_past_a_limit_is_one_line_exit_3(tmp_path):
    """uniqueItems over 6 values needs a state per set of them (64), spelled: past --max-states 200
    it is a limit, worded for a schema, with nothing written."""
    path = tmp_path / "s.json"
    path.write_text(json.dumps({"type": "array", "uniqueItems": True, "items": {"enum": list("abcdef")}}))
    r = run("promote", "gpt2", "--schema", str(path), "--max-states", "200", str(tmp_path / "o.fst"))
    err = r.err.decode()
    assert r.rc == 3 and err.count("\n") == 1 and "--max-states 200" in err and "schema" in err, err
    assert not (tmp_path / "o.fst").exists()
