"""Self-embedding grammars: the PDT (grammar.pushdown) and its decoder (promotion.stack), against
lark's LALR parser fed one character at a time as the oracle of viable prefixes.

Every terminal of the grammars here is one character, so a text is a prefix of some sentence
exactly when the LALR parser takes its characters one by one (``Prefixes``); a sentence is one
that it also ends. For each grammar and GPT-2 and Llama-2:

* walks led by tokfst's masks: every chosen token keeps the text a viable prefix, the state is
  final exactly where the oracle may end, no mask is empty at a non-final state; at each step the
  mask agrees with the oracle on every single-byte token and on samples of allowed and
  disallowed tokens;
* walks led by the oracle: sentences drawn by Hypothesis (independent generators, not the
  grammar), cut into tokens, are accepted token by token and end final;
* deep recursion (10,000 open parentheses), left recursion, nullable and mutually recursive
  rules; refusals by name (indirect left recursion, no terminating alternative, options the
  PDT cannot take).
"""

from __future__ import annotations

import json
import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from lark import Lark, Token
from lark.exceptions import UnexpectedInput

import tokfst_cli as tokfst
from tokfst_cli.errors import DisallowedTokenError, EmptyLanguageError, InputError
from tokfst_cli.grammar.load import compile_grammar
from tokfst_cli.grammar.pushdown import Pushdown
from tokfst_cli.promotion.stack import PushdownDecoder

from ..runner import run

ARITH = r"""
start: expr
expr: expr "+" term | expr "-" term | term
term: term "*" factor | factor
factor: "(" expr ")" | num
num: DIGIT | num DIGIT
DIGIT: /[0-9]/
"""

SEXP = r"""
start: sexp
sexp: "(" ")" | "(" items ")" | atom
items: sexp | items " " sexp
atom: LETTER | atom LETTER
LETTER: /[a-z]/
"""

JSON = r"""
start: value
value: object | array | string | number | "t" "r" "u" "e" | "n" "u" "l" "l"
object: "{" "}" | "{" pair ("," pair)* "}"
pair: string ":" value
array: "[" "]" | "[" value ("," value)* "]"
string: "\"" CHAR* "\""
CHAR: /[a-z ]/
number: "-"? DIGIT+
DIGIT: /[0-9]/
"""

GRAMMARS = {"arith": ARITH, "sexp": SEXP, "json": JSON}


class Prefixes:
    """lark's LALR parser over one-character terminals: the viable prefixes and the sentences."""

    def __init__(self, grammar: str):
        self.lark = Lark(grammar, parser="lalr")
        self.terms = [(t.name, re.compile(t.pattern.to_regexp())) for t in self.lark.terminals]

    def start(self) -> list:
        return [self.lark.parse_interactive("")]

    def feed(self, parsers: list, data: bytes) -> list:
        try:
            text = data.decode("ascii")
        except UnicodeDecodeError:
            return []
        for ch in text:
            nxt = []
            for ip in parsers:
                for name, rx in self.terms:
                    if rx.fullmatch(ch):
                        c = ip.copy()
                        try:
                            c.feed_token(Token(name, ch))
                        except UnexpectedInput:
                            continue
                        nxt.append(c)
            parsers = nxt
            if not parsers:
                break
        return parsers

    def ends(self, parsers: list) -> bool:
        for ip in parsers:
            try:
                ip.copy().feed_eof()
                return True
            except UnexpectedInput:
                continue
        return False


@pytest.fixture(scope="module")
def compiled():
    return {name: compile_grammar(text, "lark", source=f"{name}.lark") for name, text in GRAMMARS.items()}


@pytest.fixture(scope="module")
def oracles():
    return {name: Prefixes(text) for name, text in GRAMMARS.items()}


def _surfaces(model) -> dict[int, bytes]:
    return dict(model.lexicon_items())


def test_the_grammars_need_a_stack(compiled):
    assert all(isinstance(p, Pushdown) and p.parens for p in compiled.values())


@pytest.mark.parametrize("tok", ["gpt2", "llama2"])
@pytest.mark.parametrize("name", sorted(GRAMMARS))
def test_walks_led_by_tokfst_agree_with_the_oracle(name, tok, tokenizer, compiled, oracles):
    model = tokenizer(tok)
    decoder = PushdownDecoder(model, compiled[name])
    oracle, surface = oracles[name], _surfaces(model)
    single = np.array([t for t, s in surface.items() if len(s) == 1])
    rng = np.random.default_rng(7)
    for walk in range(3):
        state, parsers, text = decoder.initial(), oracle.start(), b""
        for _ in range(24):
            mask = decoder.mask(state)
            allowed = np.flatnonzero(mask)
            assert decoder.is_final(state) == oracle.ends(parsers), text
            assert len(allowed) or decoder.is_final(state), f"an empty mask after {text!r}"
            if not len(allowed):
                break
            denied = np.flatnonzero(~mask[: model.vocab_size])
            picks = [*single, *rng.choice(allowed, min(24, len(allowed)), replace=False),
                     *rng.choice(denied, min(24, len(denied)), replace=False)]
            for t in picks:
                viable = bool(oracle.feed(parsers, surface[int(t)]))
                assert bool(mask[t]) == viable, f"token {t} {surface[int(t)]!r} after {text!r}"
            # lean towards short tokens (which close brackets) so that walks end as well as open
            short = [t for t in allowed if len(surface[int(t)]) <= 2]
            token = int(rng.choice(short if short and rng.random() < 0.7 else allowed))
            state = decoder.advance(state, token)
            parsers = oracle.feed(parsers, surface[token])
            text += surface[token]
            assert parsers, text


def _arith():
    leaf = st.integers(0, 999).map(str)
    return st.recursive(leaf, lambda c: st.one_of(
        st.tuples(c, st.sampled_from("+-*"), c).map("".join), c.map(lambda x: f"({x})")), max_leaves=12)


def _sexp():
    atom = st.text("abcxyz", min_size=1, max_size=5)
    return st.recursive(atom, lambda c: st.lists(c, max_size=4).map(lambda xs: "(" + " ".join(xs) + ")"),
                        max_leaves=12)


def _json():
    leaf = st.one_of(st.none(), st.just(True), st.integers(-10**6, 10**6), st.text("ab z", max_size=6))
    value = st.recursive(leaf, lambda c: st.one_of(st.lists(c, max_size=4),
                                                   st.dictionaries(st.text("abc", max_size=4), c, max_size=4)),
                         max_leaves=12)
    return value.map(lambda v: json.dumps(v, separators=(",", ":")))


SENTENCES = {"arith": _arith(), "sexp": _sexp(), "json": _json()}


def _greedy(text: bytes, by_surface: dict[bytes, int]) -> list[int]:
    """Longest-match token ids spelling ``text`` (any tokenization will do: the masks are agnostic)."""
    ids, i = [], 0
    while i < len(text):
        for k in range(min(16, len(text) - i), 0, -1):
            if text[i:i + k] in by_surface:
                ids.append(by_surface[text[i:i + k]])
                i += k
                break
        else:
            raise AssertionError(f"no token spells {text[i:i + 1]!r}")
    return ids


@pytest.mark.parametrize("tok", ["gpt2", "llama2"])
@pytest.mark.parametrize("name", sorted(GRAMMARS))
def test_sentences_led_by_the_oracle_are_accepted(name, tok, tokenizer, compiled, oracles):
    model = tokenizer(tok)
    decoder = PushdownDecoder(model, compiled[name])
    by_surface = {s: t for t, s in sorted(_surfaces(model).items(), reverse=True)}

    @settings(max_examples=40, deadline=None)
    @given(SENTENCES[name])
    def check(sentence):
        data = sentence.encode()
        assert oracles[name].ends(oracles[name].feed(oracles[name].start(), data)), sentence  # the generator's own
        state = decoder.initial()
        for t in _greedy(data, by_surface):
            assert decoder.mask(state)[t], (sentence, t)
            state = decoder.advance(state, t)
        assert decoder.is_final(state), sentence

    check()


def test_hf_tokenizations_are_accepted_on_gpt2(tokenizer, compiled):
    """The tokenizer's own encoding (any tokenization is accepted; this is the one a model sees)."""
    model, hf = tokenizer("gpt2"), tokenizer.hf("gpt2")
    decoder = PushdownDecoder(model, compiled["json"])
    for text in ['{"a":[1,2,{"b":null}],"c":"x y"}', "[[[[[]]]]]", '{"":-12}']:
        state = decoder.initial()
        for t in hf.encode(text, add_special_tokens=False).ids:
            state = decoder.advance(state, t)
        assert decoder.is_final(state), text


def test_ten_thousand_levels_deep(tokenizer):
    """Nesting 10,000 deep: the stack grows and unwinds, masks stay exact at the bottom."""
    model = tokenizer("gpt2")
    d = PushdownDecoder(model, compile_grammar('root ::= "(" root ")" | "x"\n'))
    op, cl, x = (model.token_id(s) for s in ("(", ")", "x"))
    state = d.initial()
    for _ in range(10_000):
        state = d.advance(state, op)
    assert d.depth(state) >= 10_000 and not d.is_final(state)
    state = d.advance(state, x)
    mask = d.mask(state)
    assert mask[cl] and not mask[x] and not mask[op]
    for _ in range(9_999):
        state = d.advance(state, cl)
    assert not d.is_final(state)
    state = d.advance(state, cl)
    assert d.is_final(state) and not d.mask(state).any()
    with pytest.raises(DisallowedTokenError):
        d.advance(state, cl)


def test_rollback_and_the_matcher(tokenizer, compiled):
    model = tokenizer("gpt2")
    m = PushdownDecoder(model, compiled["arith"]).matcher(eos=model.token_id("<|endoftext|>"))
    for s in ("(", "1", "+", "2", ")"):
        m.consume(model.token_id(s))
    assert m.is_final()
    before = m.mask().copy()
    m.consume(model.token_id("*"))
    assert not m.is_final()
    m.rollback(1)
    assert (m.mask() == before).all()


@pytest.mark.parametrize("gbnf, words", [
    ('root ::= a\na ::= b "x" | "(" a ")"\nb ::= a "z" | "y"\n', "left-recursive through"),
    ('root ::= "(" root ")"\n', "derives no text"),
])
def test_refusals_by_name(gbnf, words):
    with pytest.raises((InputError, EmptyLanguageError), match=words) as e:
        compile_grammar(gbnf, "gbnf", source="g.gbnf")
    assert "\n" not in str(e.value) and "g.gbnf" in str(e.value)


def test_nullable_and_mutual_recursion(tokenizer):
    """``a`` and ``b`` call each other inside brackets and may be empty."""
    model = tokenizer("gpt2")
    g = 'root ::= a\na ::= "[" b "]" a | ""\nb ::= "{" a "}" b | ""\n'
    d = PushdownDecoder(model, compile_grammar(g))
    for text, ok in [("", True), ("[]", True), ("[{}]", True), ("[{[]}{}][]", True), ("[{]}", False), ("{}", False)]:
        state, alive = d.initial(), True
        for ch in text:
            if not d.mask(state)[model.token_id(ch)]:
                alive = False
                break
            state = d.advance(state, model.token_id(ch))
        assert (alive and d.is_final(state)) == ok, text


def test_cli_writes_the_pdt_and_load_decodes_it(tmp_path, tokenizer):
    g = tmp_path / "arith.lark"
    g.write_text(ARITH)
    out = tmp_path / "arith.fst"
    r = run("promote", "gpt2", "--grammar", g, out)
    assert r.rc == 0, r.stderr
    d = tokfst.load(str(out), "gpt2")
    assert isinstance(d, PushdownDecoder)
    with pytest.raises(InputError, match="pushdown automaton over bytes") as e:  # the tokens come from the tokenizer
        tokfst.load(str(out))
    assert "tokenizer" in e.value.fix
    model = tokenizer("gpt2")
    direct = PushdownDecoder(model, compile_grammar(ARITH, "lark"))
    s1, s2 = d.initial(), direct.initial()
    for ch in "(12*":
        s1, s2 = d.advance(s1, model.token_id(ch)), direct.advance(s2, model.token_id(ch))
        assert (d.mask(s1) == direct.mask(s2)).all()
    refused = run("promote", "gpt2", "--grammar", g, "--format", "index", tmp_path / "x.json")
    assert refused.rc == 2 and len(refused.err_lines) == 1 and "grammar-pushdown" not in refused.stderr
    assert "needs a stack" in refused.stderr and not (tmp_path / "x.json").exists()


def test_lazy_takes_a_pushdown_grammar(tokenizer):
    d = tokfst.lazy(tokenizer("gpt2"), grammar=SEXP, grammar_format="lark")
    assert isinstance(d, PushdownDecoder) and not d.is_final(d.initial())


@pytest.mark.parametrize(("tok", "eager"), [("gpt2", True), ("llama2", False)])
@pytest.mark.parametrize("name", sorted(GRAMMARS))
def test_masks_from_parts_equal_masks_on_whole_stacks(name, tok, eager, tokenizer, compiled, monkeypatch):
    """Masks made of parts (context-independent per PDT state, the pops resolved against the stack
    frame by frame; made up front, or on first use with the memos bounded tight): the same as a
    walk of T on the whole stacks, along walks that nest deep and close several frames per token
    (arith: three frames per bracket), and never empty."""
    from tokfst_cli.promotion import stack

    monkeypatch.setattr(stack, "EAGER", eager)
    if not eager:  # and the memos made anew mid-walk
        monkeypatch.setattr(stack, "PARTS", 3)
        monkeypatch.setattr(stack, "SETS", 300)
    model = tokenizer(tok)
    d = PushdownDecoder(model, compiled[name])
    reference = PushdownDecoder(model, compiled[name])
    surface = _surfaces(model)
    rng = np.random.default_rng(len(name))
    state, deepest = d.initial(), 0
    for i in range(60):
        words = d.bitmask(state)
        assert (words == reference.whole_bitmask(state)).all()
        allowed = np.flatnonzero(d.mask(state))
        assert len(allowed) or d.is_final(state)
        if not len(allowed):
            break
        opening = [t for t in allowed if surface[int(t)].strip(b" ") and set(surface[int(t)]) <= set(b" ([")]
        closing = [t for t in allowed if len(surface[int(t)]) > 1 and set(surface[int(t)]) <= set(b")]} ,")]
        pool = opening if opening and i < 30 else closing if closing and rng.random() < 0.6 else allowed
        token = int(rng.choice(pool))
        state = d.advance(state, token)
        deepest = max(deepest, d.depth(state))
    assert deepest > 6


BRACKETS = 'root ::= "(" root ")" | "[" root* "]" | "{" "x" ("," root)? "}" | "x" | "xy"\n'


@settings(max_examples=20, deadline=None)
@given(st.lists(st.sampled_from(["(", "[", "[(", "{x,", "((", "x", "xy", ")", "]", "}", ")]", "])", "))", "]]"]),
                max_size=24))
def test_masks_from_parts_equal_whole_stack_masks_on_any_prefix(tokenizer, pieces):
    """Hypothesis: along any sequence of bracket tokens (those the state allows), the mask made
    of parts equals the walk on whole stacks (nullable repetition, two-byte closers, a rule that
    ends in a final state that reads on: "x" | "xy")."""
    model = tokenizer("gpt2")
    d = _brackets(model)
    state = d.initial()
    for piece in pieces:
        assert (d.bitmask(state) == d.whole_bitmask(state)).all()
        t = model.token_id(piece)
        if t is not None and d.mask(state)[t]:
            state = d.advance(state, t)
    assert (d.bitmask(state) == d.whole_bitmask(state)).all()


_BRACKETS: dict = {}


def _brackets(model) -> PushdownDecoder:
    """One decoder per model for the Hypothesis examples (its parts kept between them)."""
    if id(model) not in _BRACKETS:
        _BRACKETS[id(model)] = PushdownDecoder(model, compile_grammar(BRACKETS))
    return _BRACKETS[id(model)]


def test_a_keyword_may_be_spelled_in_any_tokens(tokenizer):
    """After "[" and "f" in the bench's JSON grammar every token extending "false" is allowed, not
    only the one spelling its rest (llguidance's mask narrows to "alse" there, though it consumes
    "a"): the agnostic mask; lark parses the sentence."""
    from tokfst_cli.bench.grammars import JSON as BENCH_JSON

    model = tokenizer("gpt2")
    d = PushdownDecoder(model, compile_grammar(BENCH_JSON, "lark"))
    state = d.advance(d.advance(d.initial(), model.token_id("[")), model.token_id("f"))
    mask = d.mask(state)
    assert all(mask[model.token_id(s)] for s in ("a", "al", "als", "alse"))
    assert not mask[model.token_id("r")]
    assert Lark(BENCH_JSON, parser="lalr").parse("[false]")


def test_bench_grammars_runs_and_agrees_with_llguidance(tmp_path):
    """``tokfst bench grammars`` on a short walk: a row per grammar and engine, every one measured,
    llguidance (a test extra) follows the walk and its masks equal tokfst's at every step (xgrammar
    too where it is installed; the bench extra); the JSON names its columns."""
    out = tmp_path / "g.json"
    r = run("bench", "grammars", "--tokenizer", "gpt2", "--steps", "30", "--repeat", "3", "--json", out)
    assert r.rc == 0, r.stderr
    doc = json.loads(out.read_text())
    (table,) = doc["tables"]
    assert [(row["grammar"], row["engine"]) for row in table["rows"]] == [
        (g, e) for g in ("arith", "sexp", "json") for e in ("tokfst", "llguidance", "xgrammar")]
    for row in table["rows"]:
        assert row["steps"] == 30, row
        if row["engine"] == "xgrammar" and row["median"]["status"] == "skipped":
            continue
        assert row["median"]["status"] == "ok" and row["first"]["status"] == "ok", row
        if row["engine"] != "tokfst":
            assert row["agree"] == 31, row


@pytest.mark.parametrize("name", sorted(GRAMMARS))
def test_the_bench_gbnf_texts_are_the_lark_languages(name, tokenizer):
    """The bench gives xgrammar GBNF and the others Lark: tokfst compiles both texts of each grammar
    to the same mask at every step of a walk led by the Lark one (short tokens first, so that
    strings, numbers and brackets close as well as open)."""
    from tokfst_cli.bench.grammars import GBNF
    from tokfst_cli.bench.grammars import GRAMMARS as LARK

    model = tokenizer("gpt2")
    a = PushdownDecoder(model, compile_grammar(LARK[name], "lark"))
    b = PushdownDecoder(model, compile_grammar(GBNF[name], "gbnf"))
    surface, rng = _surfaces(model), np.random.default_rng(3)
    for _ in range(3):
        sa, sb = a.initial(), b.initial()
        for _ in range(40):
            ma, mb = a.mask(sa), b.mask(sb)
            assert np.array_equal(ma, mb) and a.is_final(sa) == b.is_final(sb)
            allowed = np.flatnonzero(ma)
            if not len(allowed):
                break
            short = [t for t in allowed if len(surface[int(t)]) <= 2]
            t = int(rng.choice(short if short and rng.random() < 0.8 else allowed))
            sa, sb = a.advance(sa, t), b.advance(sb, t)


def test_a_token_automaton_whose_tokens_look_like_parentheses_is_not_a_pdt(tmp_path, tokenizer):
    """GPT-2 has a token "(_": a token automaton reading it loads as tokens, not as a PDT."""
    model = tokenizer("gpt2")
    assert model.token_id("(_") is not None
    out = tmp_path / "p.fst"
    assert run("promote", "gpt2", "-e", r"\(_x", out).rc == 0
    d = tokfst.load(str(out), "gpt2")
    assert not isinstance(d, PushdownDecoder) and d.mask(d.initial())[model.token_id("(_")]


@pytest.mark.parametrize("seed", [1, 2])
def test_tokens_that_pop_several_frames_are_judged_on_the_whole_stack(seed, tokenizer):
    """Two kinds of brackets nested 12 deep: a token closing several ("])", ")]", ")))") is
    allowed exactly when the stack closes in its order (its pops resolved frame by frame)."""
    model = tokenizer("gpt2")
    d = PushdownDecoder(model, compile_grammar('root ::= "(" root ")" | "[" root "]" | "x"\n'))
    rng = np.random.default_rng(seed)
    for _ in range(5):
        opened = "".join(rng.choice(["(", "["], 12))
        state = d.initial()
        for ch in opened + "x":
            state = d.advance(state, model.token_id(ch))
        closes = "".join({"(": ")", "[": "]"}[c] for c in reversed(opened))
        mask = d.mask(state)
        present = [(s, model.token_id(s)) for s in ("])", ")]", "))", "]]", ")))", "]]]", "))))")
                   if model.token_id(s) is not None]
        assert len(present) >= 5
        for surface, t in present:
            assert bool(mask[t]) == closes.startswith(surface), (opened, surface)


def test_sample_walks_end_in_sentences_and_count_refuses(tmp_path, oracles):
    """``tokfst sample`` on a PDT: steered walks (the fewest bytes to the end: the rule's exit and
    every open frame's) end final, and the oracle parses their texts; count and inspect refuse by name."""
    g = tmp_path / "sexp.lark"
    g.write_text(SEXP)
    out = tmp_path / "sexp.fst"
    assert run("promote", "gpt2", "--grammar", g, out).rc == 0
    r = run("sample", "gpt2", out, "-n", "12", "--seed", "4", "--max-tokens", "24", "--output", "text")
    assert r.rc == 0, r.stderr
    texts = r.stdout.splitlines()
    assert len(texts) == 12
    oracle = oracles["sexp"]
    for text in texts:
        assert oracle.ends(oracle.feed(oracle.start(), text.encode())), text
    for command in ("count", "inspect"):
        r = run(command, "gpt2", out)
        assert r.rc == 2 and len(r.err_lines) == 1 and "pushdown automaton" in r.stderr


def test_distance_is_the_shortest_completion(tokenizer):
    """After k unclosed brackets and an atom, the fewest bytes to the end is k (one ")" each)."""
    model = tokenizer("gpt2")
    d = PushdownDecoder(model, compile_grammar('root ::= "(" root ")" | "x"\n'))
    state = d.initial()
    assert d.distance(state) == 1
    for k in range(1, 30):
        state = d.advance(state, model.token_id("("))
        assert d.distance(state) == k + 1
    state = d.advance(state, model.token_id("x"))
    assert d.distance(state) == 29


def test_draw_labels_the_parentheses(tmp_path):
    """``tokfst draw`` of a PDT file: every parenthesis pair appears by name, bytes as characters."""
    g = tmp_path / "b.gbnf"
    g.write_text('root ::= "(" root ")" | "[" root "]" | "x"\n')
    assert run("promote", "gpt2", "--grammar", g, tmp_path / "b.fst").rc == 0
    r = run("draw", tmp_path / "b.fst", tmp_path / "b.dot")
    assert r.rc == 0, r.stderr
    dot = (tmp_path / "b.dot").read_text()
    pairs = len(pdt_of(tmp_path / "b.fst").parens)
    assert pairs >= 2 and all(f'"(_{k}"' in dot and f'")_{k}"' in dot for k in range(pairs))


def pdt_of(path):
    from tokfst_cli.automata.fst_io import parse_fst
    from tokfst_cli.grammar.pushdown import from_fst

    return from_fst(parse_fst(path.read_bytes(), str(path)), str(path))
