"""The official JSON Schema Test Suite (draft 2020-12, tests/data/json-schema-test-suite) on the byte automata.

Every group of every file is classified, and the classification is checked:

* compiled: each valid instance, serialized under the whitespace policy (``serialize``:
  canonical numbers and strings, the schema's stable key order), is accepted; each invalid
  one is rejected however it is written (stable order, sorted keys, reversed keys);
* refused: the schema uses a refused keyword (:data:`REFUSED_KEYWORDS`), or is listed in
  :data:`REFUSED` with the reason (another document, a limit): compiling raises, by name;
* different: listed in :data:`DIFFERENT` with the reason (the suite tests another meaning
  than the one compiled, e.g. ``format`` as an annotation): some check of the group fails.

Each group is compiled with ``max_depth`` its deepest valid instance's nesting (counted
levels never exceed it, so every valid instance fits). Compact runs on every group,
pretty and flexible on every third group each (the runtime budget). ``python -m tests.schema.test_suite`` prints the
table of groups per file and the compile times.
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from pathlib import Path

import pytest

from tokfst_cli.errors import EmptyLanguageError, InputError, LimitError
from tokfst_cli.schema.compile import compile_schema
from tokfst_cli.schema.serialize import serialize

from .util import accepts as accepts_text
from .util import compiled

SUITE = Path(__file__).parents[1] / "data" / "json-schema-test-suite" / "draft2020-12"

REFUSED_KEYWORDS = {"$dynamicRef", "unevaluatedProperties", "unevaluatedItems"}
_REMOTE = "$ref to another document (the suite's remotes/ or a metaschema)"
REFUSED = {  # file -> {group description: reason}, refused by name although no refused keyword is used
    "defs.json": {"validate definition against metaschema": _REMOTE},
    "ref.json": {"remote ref, containing refs itself": _REMOTE},
    "refRemote.json": "*",  # every group: remote documents
    "dynamicRef.json": {d: _REMOTE for d in ("$ref to $dynamicRef finds detached $dynamicAnchor",
                                             "$dynamicRef skips over intermediate resources - direct reference",
                                             "tests for implementation dynamic anchor and reference link",
                                             "$ref and $dynamicAnchor are independent of order - $defs first",
                                             "$ref and $dynamicAnchor are independent of order - $ref first")},
    "optional/cross-draft.json": {"refs to historic drafts are processed as historic drafts": _REMOTE},
    "multipleOf.json": {"float division = inf":
                        "multipleOf 0.123456789: a digit automaton of 1.4e9 states (LimitError)"},
    "uniqueItems.json": {
        "uniqueItems validation": "uniqueItems over an infinite item language is not regular",
        "uniqueItems with an array of items": "uniqueItems over an infinite item language is not regular",
    },
}
_ANNOTATION = "format {} is not asserted (an annotation): invalid strings are accepted"
DIFFERENT = {  # file -> {group description: reason}: compiled, but with another meaning than the suite tests
    "format.json": {f"{name} format": "format is asserted here; format.json tests the 2020-12 default (annotation only)"
                    for name in ("email", "ipv4", "ipv6", "hostname", "date", "date-time", "time", "json-pointer",
                                 "relative-json-pointer", "uri", "uri-reference", "uuid", "duration")},
    "vocabulary.json": {"schema that uses custom metaschema with with no validation vocabulary":
                        "$schema is not read: every keyword asserts, whatever the metaschema's vocabularies"},
    "optional/format/time.json": {"validation of time strings": "leap seconds with a non-UTC offset are rejected"},
    "optional/format/date-time.json": {"validation of date-time strings":
                                       "leap seconds with a non-UTC offset are rejected"},
    "optional/format/hostname.json": {"validation of A-label (punycode) host names":
                                      "A-labels (xn--) are not decoded as Punycode"},
    "optional/format/idn-email.json": "*",
    "optional/format/idn-hostname.json": "*",
    "optional/format/iri.json": "*",
    "optional/format/iri-reference.json": "*",
    "optional/format/regex.json": "*",
    "optional/format/uri-template.json": "*",
    "optional/format/ecmascript-regex.json": {d: _ANNOTATION.format("regex") for d in (
        "\\a is not an ECMA 262 control escape", "Python-specific regular expression syntax is not valid ECMA 262",
        "global inline flag groups are not valid ECMA 262")},
}


def _files() -> list[str]:
    return sorted(str(p.relative_to(SUITE)) for p in SUITE.rglob("*.json"))


def _cases() -> list[tuple[str, int, dict]]:
    return [(name, i, g) for name in _files() for i, g in enumerate(json.loads((SUITE / name).read_text()))]


CASES = _cases()
_IDS = [f"{name}:{i}" for name, i, _ in CASES]


def _keywords(schema) -> set[str]:
    if isinstance(schema, dict):
        return set(schema).union(*(_keywords(v) for v in schema.values()))
    if isinstance(schema, list):
        return set().union(*(_keywords(v) for v in schema))
    return set()


def _nesting(value) -> int:
    if isinstance(value, dict):
        return 1 + max(map(_nesting, value.values()), default=0)
    if isinstance(value, list):
        return 1 + max(map(_nesting, value), default=0)
    return 0


def max_depth(group: dict) -> int:
    """Deep enough for every valid instance of the group (counted levels never exceed the nesting)."""
    return max([1] + [_nesting(t["data"]) for t in group["tests"] if t["valid"]])


def _listed(table: dict, name: str, group: dict) -> str | None:
    entry = table.get(name)
    if entry == "*":
        return "every group of the file"
    return (entry or {}).get(group["description"])


def classify(name: str, group: dict) -> tuple[str, str]:
    """("refused" | "different" | "compiled", reason)."""
    used = REFUSED_KEYWORDS & _keywords(group["schema"])
    if used:
        return "refused", f"keyword {', '.join(sorted(used))}"
    reason = _listed(REFUSED, name, group)
    if reason:
        return "refused", _REMOTE if name == "refRemote.json" else reason
    reason = _listed(DIFFERENT, name, group)
    if reason:
        fmt = group["schema"].get("format") if isinstance(group["schema"], dict) else None
        return "different", _ANNOTATION.format(fmt) if reason == "every group of the file" else reason
    return "compiled", ""


def _writings(instance, schema, whitespace: str) -> set[str]:
    """The instance written in the stable order, with sorted keys and with reversed keys."""
    def order(v, key):
        if isinstance(v, dict):
            return {k: order(v[k], key) for k in key(list(v))}
        return [order(x, key) for x in v] if isinstance(v, list) else v

    style = {"compact": {"separators": (",", ":")}, "pretty": {}, "flexible": {"indent": 1}}[whitespace]
    out = {serialize(instance, schema, whitespace)}
    for key in (sorted, lambda ks: ks[::-1]):
        out.add(json.dumps(order(instance, key), ensure_ascii=False, **style))
    return out


def wrong_checks(name: str, group: dict, whitespace: str) -> list[str]:
    """The tests of a compiled group the automaton gets wrong."""
    fst = compiled(group["schema"], whitespace=whitespace, max_depth=max_depth(group))

    def accepts(text: str) -> bool:
        return accepts_text(fst, text)

    wrong = []
    for test in group["tests"]:
        if test["valid"]:
            text = serialize(test["data"], group["schema"], whitespace)
            if not accepts(text):
                wrong.append(f"rejects valid {text!r} ({test['description']})")
        else:
            wrong += [f"accepts invalid {t!r} ({test['description']})" for t in _writings(test["data"], group["schema"],
                                                                                           whitespace) if accepts(t)]
    return wrong


def _check(case: tuple[str, int, dict], whitespace: str) -> None:
    name, _, group = case
    kind, reason = classify(name, group)
    if kind == "refused":
        with pytest.raises((InputError, LimitError)) as refusal:
            compile_schema(group["schema"], whitespace=whitespace, max_depth=max_depth(group))
        e = refusal.value
        if reason.startswith("keyword"):  # (some of these schemas also name another document)
            assert e.hint == "schema-ref" or e.hint == "schema-keyword" and e.data["keyword"] in REFUSED_KEYWORDS, e
        elif reason == _REMOTE:
            assert e.hint == "schema-ref", e
        return
    wrong = wrong_checks(name, group, whitespace)
    if kind == "different":
        assert wrong, f"listed as different ({reason}) but every check passes"
    else:
        assert not wrong, "\n".join(wrong)


@pytest.mark.parametrize("case", CASES, ids=_IDS)
def test_compact(case):
    _check(case, "compact")


@pytest.mark.parametrize("case", CASES[::3], ids=_IDS[::3])
def test_pretty(case):
    _check(case, "pretty")


@pytest.mark.parametrize("case", CASES[1::3], ids=_IDS[1::3])
def test_flexible(case):
    _check(case, "flexible")


def test_every_listed_group_exists():
    """The tables name real files and groups (no stale entries)."""
    groups = {(name, g["description"]) for name, _, g in CASES}
    for table in (REFUSED, DIFFERENT):
        for name, entry in table.items():
            assert (SUITE / name).exists(), name
            if entry != "*":
                assert all((name, d) in groups for d in entry), name


def table() -> str:
    """Markdown: per file, the groups compiled (and passing), refused and different, with the reasons."""
    rows = ["| file | groups | compiled | refused | different | reasons |", "|---|---|---|---|---|---|"]
    for name in _files():
        groups = [g for n, _, g in CASES if n == name]
        kinds = [classify(name, g) for g in groups]
        reasons = sorted({r for k, r in kinds if k != "compiled"})
        counts = [sum(k == kind for k, _ in kinds) for kind in ("compiled", "refused", "different")]
        rows.append(f"| {name} | {len(groups)} | " + " | ".join(map(str, counts)) + f" | {'; '.join(reasons)} |")
    return "\n".join(rows)


def timings() -> str:
    """Compile times (compact) of the compiled groups' schemas, in this process (free values shared)."""
    seconds = []
    for name, _, group in CASES:
        if classify(name, group)[0] != "refused":
            start = time.perf_counter()
            try:
                compile_schema(group["schema"], max_depth=max_depth(group))
            except EmptyLanguageError:
                pass
            seconds.append(time.perf_counter() - start)
    seconds.sort()
    return (f"{len(seconds)} schemas: median {statistics.median(seconds) * 1000:.1f} ms, "
            f"p95 {seconds[int(0.95 * len(seconds))] * 1000:.1f} ms, max {seconds[-1] * 1000:.0f} ms")


if __name__ == "__main__":
    print(table())
    print(timings() if "--times" in sys.argv else "")
