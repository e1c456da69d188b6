"""Bad-input battery, sources: generated regexes, JSON Schemas and grammars given to ``promote``.

Whatever Hypothesis writes (regex syntax at random, well-formed regexes with bounded
repetitions, JSON documents built from schema keywords with values of any type, GBNF and Lark
grammars with bytes edited or cut), ``tokfst promote gpt2 ... OUT`` ends in a documented way:
exit 0 with OUT written, or exit 1 (an empty language), 2 (bad input) or 3 (a limit) with one
``tokfst: error:`` line (after any warnings), never a traceback or "internal error", and nothing written (neither OUT
nor a temporary file). The limits are small (``--max-states``), so every case ends quickly.
Profile: tests/conftest.py ``BATTERY`` (``TOKFST_BATTERY=full`` for the big one).
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from ..conftest import BATTERY
from ..runner import run

ROOT = Path(__file__).resolve().parents[2]
LIMITS = ("--max-states", "4000", "--max-arcs", "20000")
CODES = (0, 1, 2, 3)

SYNTAX = st.text(alphabet="ab01.|*+?()[]{}^$\\-,:dwsSx\"'&~ ", max_size=18)
ATOM = st.sampled_from(["a", "b", "[a-c]", "[0-9]", ".", "\\d", "\\w", "[^a]", "é", "😀", "(?:ab)", " "])


def _repeat(inner):
    return st.tuples(inner, st.integers(0, 6), st.integers(0, 6)).map(lambda t: f"(?:{t[0]}){{{t[1]},{t[1] + t[2]}}}")


REGEXES = st.recursive(ATOM, lambda inner: st.one_of(
    st.lists(inner, min_size=1, max_size=3).map("".join),
    st.lists(inner, min_size=2, max_size=3).map("|".join).map(lambda s: f"(?:{s})"),
    _repeat(inner), inner.map(lambda s: f"(?:{s})*")), max_leaves=6)

KEYWORDS = ["type", "properties", "items", "prefixItems", "enum", "const", "required", "minLength", "maxLength",
            "pattern", "format", "minimum", "maximum", "anyOf", "oneOf", "allOf", "not", "$ref", "$defs",
            "additionalProperties", "minItems", "maxItems", "uniqueItems", "if", "then", "else", "multipleOf"]
SCALARS = st.one_of(st.none(), st.booleans(), st.integers(-3, 12), st.floats(allow_nan=False, width=16),
                    st.sampled_from(["string", "integer", "number", "object", "array", "boolean", "null", "#",
                                     "#/$defs/a", "[a-z]+", "date", "email", "a"]))
JSON = st.recursive(SCALARS, lambda inner: st.one_of(
    st.lists(inner, max_size=3),
    st.dictionaries(st.one_of(st.sampled_from(KEYWORDS), st.text("abc", min_size=1, max_size=2)), inner,
                    max_size=4)), max_leaves=10)

GRAMMARS = {"gbnf": (ROOT / "examples" / "csv.gbnf").read_bytes(),
            "lark": (ROOT / "examples" / "arith.lark").read_bytes()}


def promote(source_args: list, canonical: bool, files: dict[str, bytes] | None = None):
    """``promote gpt2`` with the given source, in a fresh directory: (Run, directory)."""
    d = Path(tempfile.mkdtemp(prefix="battery-src-"))
    args = []
    for a in source_args:
        if isinstance(a, tuple):  # (file name, bytes): written into d
            (d / a[0]).write_bytes(a[1])
            a = d / a[0]
        args.append(a)
    r = run("promote", "gpt2", *args, d / "out.fst", *LIMITS, *(["--canonical"] if canonical else []))
    return r, d


def judge(r, d: Path, inputs: set[str]) -> None:
    try:
        assert r.rc in CODES, (r.rc, r.err)
        left = sorted(p.name for p in d.iterdir() if p.name not in inputs)
        if r.rc == 0:
            assert left == ["out.fst"] and (d / "out.fst").stat().st_size > 0, (left, r.err)
            return
        assert left == [], left  # nothing written: neither OUT nor a temporary file
        errors = [x for x in r.err_lines if not x.startswith("tokfst: warning: ")]
        assert r.out == b"" and len(errors) == 1, r.err_lines
        line = errors[0]
        assert line.startswith("tokfst: error: ") and "internal error" not in line, line
        assert "Traceback" not in r.stderr
    finally:
        for p in d.iterdir():
            p.unlink()
        d.rmdir()


@BATTERY
@given(st.one_of(SYNTAX, REGEXES), st.booleans())
def test_regexes(pattern, canonical):
    r, d = promote(["-e", pattern], canonical)
    judge(r, d, set())


@BATTERY
@given(JSON, st.booleans())
def test_schemas(doc, canonical):
    r, d = promote(["--schema", ("s.json", json.dumps(doc).encode())], canonical)
    judge(r, d, {"s.json"})


@BATTERY
@given(st.sampled_from(sorted(GRAMMARS)), st.data())
def test_grammars_with_bytes_edited_or_cut(kind, data):
    text = bytearray(GRAMMARS[kind])
    if data.draw(st.booleans()):
        text = text[:data.draw(st.integers(0, len(text)))]
    else:
        for _ in range(data.draw(st.integers(1, 4))):
            if text:
                text[data.draw(st.integers(0, len(text) - 1))] = data.draw(st.sampled_from(b"()|*+?\"'[]{}:=;\n x\xff"))
    r, d = promote(["--grammar", (f"g.{kind}", bytes(text))], False)
    judge(r, d, {f"g.{kind}"})


@BATTERY
@given(st.binary(max_size=200), st.sampled_from(["-f", "--schema", "--grammar"]))
def test_random_bytes_as_each_source_file(data, flag):
    name = {"-f": "p.re", "--schema": "s.json", "--grammar": "g.gbnf"}[flag]
    r, d = promote([flag, (name, data)], False)
    judge(r, d, {name})
