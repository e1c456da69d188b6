"""Terminal labels (Koo et al. 2024 Sec. 2.5.1): the automaton with terminals and the one with
the expanded wildcard accept the same token sequences (GPT-2 and Llama-2), masks and steps agree
in every decoder form, the wildcard states lose their tens of thousands of arcs, and what
cannot carry terminals is refused by name."""

from __future__ import annotations

import json
import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tokfst_cli import constraint, pipeline
from tokfst_cli.bench.terminals import paired_max
from tokfst_cli.constraint import IndexDecoder
from tokfst_cli.errors import InputError
from tokfst_cli.text.regex import compile_regex
from tokfst_cli.text.terminals import Terminal, classes

from .conftest import TOKENIZER
from .walks import equal_masks

WILDCARDS = {  # patterns whose loops become terminals, each with the straddling tokens around them
    "json string": r'"(?:[^"\\\x00-\x1f]|\\["\\/bfnrt]|\\u[0-9a-fA-F]{4})*"',
    "bounded": r'"[^"\\\x00-\x1f]{2,9}",',
    "any text": r"Answer: [\s\S]*",
    "line then more": r"- [^\n]{0,20}\n[a-z]{1,3}",
    "two loops": r'\{"a": "[^"\\]*", "b": "[^"\\\x00-\x1f]{0,4}"\}',
    "quoted group": r"\[(?P<QUOTED_TEXT>)(, (?P<QUOTED_TEXT>)){0,2}\]",
    "unquoted group": r"key: (?P<UNQUOTED_TEXT>)\n",
    "number": r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?",
    "identifiers": r"[A-Za-z_][A-Za-z0-9_]{0,30}(?:\.[a-z]+)*@[0-9a-fA-F]{2,8}",
}
TOKEN_GROUPS = {  # Koo et al. 2024's examples: one token per group, bounded by delimiters outside the masks
    "paragraph bullets": r"Summary:(\n\* (?P<PARAGRAPH_TOKEN>)+){1,3}",
    "text token": r"<(?P<TEXT_TOKEN>)>",
}
NAMES = ("gpt2", "llama2")


def _pair(name: str, pattern: str):
    model = TOKENIZER(name)
    with_terms = pipeline.build(model, pattern, terminals=True)
    expanded = pipeline.build(model, pattern, terminals=False)
    return model, with_terms, expanded


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("case", sorted(WILDCARDS) + sorted(TOKEN_GROUPS))
def test_terminals_accept_the_same_sequences_as_the_expanded_wildcard(name, case):
    model, with_terms, expanded = _pair(name, {**WILDCARDS, **TOKEN_GROUPS}[case])
    assert with_terms.terminals, "no terminal label was made"
    compared = equal_masks(expanded.decoder(), with_terms.decoder(), limit=400)
    assert compared >= 3
    index = IndexDecoder(json.loads(json.dumps(with_terms.index())))  # the JSON round trip too
    equal_masks(expanded.decoder(), index, limit=200)


@settings(max_examples=20, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), name=st.sampled_from(NAMES), case=st.sampled_from(sorted(WILDCARDS)))
def test_random_walks_agree_step_by_step(seed, name, case):
    """Random walks drawn from either automaton: each step's mask, next state and finality agree."""
    model, with_terms, expanded = _pair(name, WILDCARDS[case])
    rng = random.Random(seed)
    a, b = with_terms.decoder(), expanded.decoder()
    for lead in (a, b):
        x, y = a.initial(), b.initial()
        for _ in range(30):
            ma, mb = a.mask(x), b.mask(y)
            assert (ma == mb).all()
            assert a.is_final(x) == b.is_final(y)
            assert (np.unpackbits(a.bitmask(x).view(np.uint8), bitorder="little")[:model.vocab_size] == ma).all()
            allowed = np.flatnonzero(lead.mask(x if lead is a else y))
            if not len(allowed):
                break
            t = int(allowed[rng.randrange(len(allowed))])
            x, y = a.advance(x, t), b.advance(y, t)


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("case", ["json string", "bounded", "any text", "quoted group"])
def test_wildcard_states_keep_few_arcs(name, case):
    """Seed 004's point: where the expanded wildcard's state has 10^4+ arcs, the same state (reached
    by the same tokens) has at most 1,000 with terminals."""
    _, with_terms, expanded = _pair(name, WILDCARDS[case])
    worst = paired_max(expanded, with_terms)  # the measure tokfst bench terminals reports
    assert worst is not None and worst <= 1_000


@pytest.mark.parametrize("name", NAMES)
def test_a_terminal_mask_is_what_its_name_says(name):
    """Masks from the tokenizer's surfaces: whole characters of the class, counted, after the prefix."""
    model = TOKENIZER(name)
    c = classes(model)
    for t in (Terminal("JSON_STRING", 3), Terminal("PARAGRAPH", 2, 1), Terminal("JSON_STRING", 1, 1, " "),
              Terminal("TEXT", 2, 2), Terminal("UNQUOTED", 1, 1, "n", "JSON_STRING")):
        assert Terminal.parse(t.name) == t
        mask = t.mask(model)
        for tid, surface in model.lexicon_items():
            try:
                text = surface.decode("utf-8")
            except UnicodeDecodeError:
                assert not mask[tid]
                continue
            body = text[len(t.prefix):] if text.startswith(t.prefix) else None
            bad = {"JSON_STRING": lambda ch: ch in '"\\' or ord(ch) < 0x20, "PARAGRAPH": lambda ch: ch == "\n",
                   "TEXT": lambda ch: False, "UNQUOTED": lambda ch: ch in ":#" or ord(ch) < 0x20}
            ok = body is not None and len(body) >= 1 and not any(map(bad[t.kind], body))
            n = len(body) if body is not None else 0
            ok = ok and (n == t.lo if t.period == 0 else n >= t.lo and (n - t.lo) % t.period == 0)
            if t.unless:
                ok = ok and any(map(bad[t.unless], text))
            assert mask[tid] == ok, (t.name, text)
        assert c.chars.shape == (model.vocab_size,)


def test_index_and_fst_carry_terminals(tmp_path):
    model = TOKENIZER("gpt2")
    result = pipeline.build(model, WILDCARDS["bounded"], terminals=True)
    index = result.index()
    assert index["version"] == 2 and [t["name"] for t in index["terminals"]] == [t.name for t in result.terminals]
    path = tmp_path / "c.json"
    path.write_text(json.dumps(index))
    assert constraint.load(str(path), model).terminals
    damaged = dict(index, terminals=index["terminals"][:-1])
    assert constraint.index_problem(damaged) is not None  # the checksum covers the terminals
    fst_path = tmp_path / "c.fst"
    result.fst.write(str(fst_path))
    names = [result.fst.input_symbols().find(model.vocab_size + 1 + j) for j in range(len(result.terminals))]
    assert names == [t.name for t in result.terminals]
    with pytest.raises(InputError, match="terminal labels"):
        constraint.load(str(fst_path))
    equal_masks(constraint.load(str(fst_path), model), result.decoder(), limit=100)


def test_what_cannot_carry_terminals_is_refused():
    model = TOKENIZER("gpt2")
    with pytest.raises(InputError, match="agnostic promotion only"):
        pipeline.build(model, '"[^"]*"', canonical=True, terminals=True)
    with pytest.raises(InputError, match="TEXT_TOKEN"):
        pipeline.build(model, "a(?P<TEXT_TOKEN>)", canonical=True)
    with pytest.raises(InputError, match="reserves"):
        compile_regex("a\U000F0001")
    with pytest.raises(InputError, match="takes no body"):
        compile_regex("(?P<TEXT_TOKEN>x)")
    with pytest.raises(InputError, match="not closed"):
        compile_regex("(?P<PARAGRAPH_TOKEN>")
    with pytest.raises(InputError, match="inline flags"):
        compile_regex("(?i)a(?P<TEXT_TOKEN>)")


def test_other_named_groups_stay_groups():
    assert compile_regex("(?P<word>ab)+").fst.num_states() == compile_regex("(?:ab)+").fst.num_states()
    quoted = compile_regex(r"[(?P<TEXT_TOKEN>)]")  # inside a class: characters, not a group
    assert quoted.fst.num_states() == 2


def test_counts_expand_terminals_into_their_tokens():
    """tokfst count and sample read an artifact with terminals through its decoder: same counts."""
    from tokfst_cli.analysis import counting

    model = TOKENIZER("gpt2")
    with_terms = pipeline.build(model, r'"[^"\\\x00-\x1f]{0,2}"', terminals=True)
    expanded = pipeline.build(model, r'"[^"\\\x00-\x1f]{0,2}"', terminals=False)
    got = counting.by_length(counting.explore(with_terms.decoder()), 6)
    assert got == counting.by_length(expanded.fst, 6) and sum(got) > 10**6


def test_command_line_defaults_and_refusals(tmp_path):
    """--schema and token groups get terminals by default, --no-terminals expands, refusals exit 2."""
    from .runner import run

    model = TOKENIZER("gpt2")
    schema = tmp_path / "s.json"
    schema.write_text(json.dumps({"type": "object", "properties": {"name": {"type": "string", "maxLength": 12}},
                                  "required": ["name"], "additionalProperties": False}))
    forms = {}
    for flag in ((), ("--no-terminals",)):
        out = tmp_path / f"s{len(flag)}.json"
        r = run("promote", "gpt2", "--schema", str(schema), "--format", "index", *flag, str(out))
        assert r.rc == 0, r.err
        forms[flag] = json.loads(out.read_text())
    assert forms[()]["version"] == 2 and forms[()]["terminals"]
    assert "terminals" not in forms[("--no-terminals",)]
    equal_masks(IndexDecoder(forms[("--no-terminals",)]), IndexDecoder(forms[()]), limit=200)
    r = run("promote", "gpt2", "-e", "a(?P<TEXT_TOKEN>)", "--format", "index", str(tmp_path / "t.json"))
    assert r.rc == 0 and json.loads((tmp_path / "t.json").read_text())["terminals"][0]["name"] == "<TEXT:1+>"
    for args in (("-e", '"[^"]*"', "--terminals", "--canonical"), ("-e", "a(?P<TEXT_TOKEN>)", "--canonical")):
        r = run("promote", "gpt2", *args, str(tmp_path / "x.fst"))
        assert r.rc == 2 and r.err.count(b"\n") == 1 and b"Traceback" not in r.err
        assert not (tmp_path / "x.fst").exists()
    fst = tmp_path / "w.fst"
    assert run("promote", "gpt2", "-e", r'"[^"\\]{0,2}"', "--terminals", str(fst)).rc == 0
    counted = run("count", "gpt2", "-", stdin=fst.read_bytes())  # an .fst with terminals read from stdin
    assert counted.rc == 0, counted.err
    assert model.vocab_size  # the tokenizer gives the masks


def test_bench_terminals_rows():
    """tokfst bench terminals: both forms per pattern, sizes as built, the paired maximum under 1,000."""
    from tokfst_cli.bench.terminals import run

    rows = run(["gpt2"], {"json string": WILDCARDS["json string"]}, repeat=1)
    assert [r["form"] for r in rows] == ["expanded", "terminals"]
    expanded, with_terms = rows
    built = pipeline.build(TOKENIZER("gpt2"), WILDCARDS["json string"], terminals=True)
    assert with_terms["states"] == built.fst.num_states() and with_terms["terminals"] == len(built.terminals)
    assert expanded["big_states"] >= 1 and with_terms["big_states"] == 0
    assert with_terms["max_at_big"] <= 1_000
    assert with_terms["mask"]["status"] == "ok" and with_terms["load"]["status"] == "ok"


def test_labels_past_the_vocabulary_are_refused(tmp_path):
    """An automaton with a label no token or terminal has (another tokenizer's): one line, exit 2."""
    import pynini

    from .runner import run

    f = pynini.Fst()
    a, b = f.add_state(), f.add_state()
    f.set_start(a)
    f.set_final(b)
    f.add_arc(a, pynini.Arc(TOKENIZER("gpt2").vocab_size + 7, TOKENIZER("gpt2").vocab_size + 7, 0, b))
    f.write(str(tmp_path / "far.fst"))
    with pytest.raises(InputError, match="outside the tokenizer"):
        constraint.load(str(tmp_path / "far.fst"), TOKENIZER("gpt2"))
    r = run("sample", "gpt2", str(tmp_path / "far.fst"))
    assert r.rc == 2 and r.err.count(b"\n") == 1 and b"Traceback" not in r.err
