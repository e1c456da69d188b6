"""The serving matcher's text side and batches: ``accept_string`` (the allowed token sequences that
spell a text) and ``find_jump_forward_string`` (the longest text every continuation spells next)
against an oracle on small finite languages, regexes and a schema, GPT-2 and Llama-2, agnostic and
canonical (the continuations' texts: the language's strings, or for canonical constraints the
surfaces of HF's encode of them); a batch of 4 matchers filling one torch bitmask in one call,
accepting per row, validating and rolling back drafts; ``max_tokens`` on the lazy decoder, whose
masks equal the index path's counted masks and whose walks end within the budget."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tokfst_cli as tokfst
from tokfst_cli import constraint, pipeline
from tokfst_cli.decoding.matcher import allocate_token_bitmask, generate, unpack
from tokfst_cli.errors import EmptyLanguageError, InputError, UsageError
from tokfst_cli.schema.compile import compile_schema
from tokfst_cli.text.regex import compile_regex

from .helpers import enumerate_paths, segmentations, spell, surface_index
from .test_serving import walk
from .walks import accepts, equal_masks

SCHEMA = {"type": "object", "properties": {"k": {"enum": ["x", "yz"]}, "n": {"type": "boolean"}},
          "required": ["k", "n"], "additionalProperties": False}
PIECES: dict[str, dict[bytes, list[int]]] = {}  # tokenizer name -> its tokens by surface
WORDS = st.text(alphabet="ab 0-é\n", min_size=1, max_size=6)


def language(automaton) -> list[bytes]:
    return [bytes(b - 1 for b in p) for p in enumerate_paths(automaton.fst)]


def decoder_of(tokenizer, name: str, form: str, pattern: str, automaton=None):
    model = tokenizer(name)
    if form == "lazy":
        return tokfst.lazy(model, automaton=automaton) if automaton else tokfst.lazy(model, pattern)
    limits = pipeline.Limits(max_arcs=1) if form == "factorized" else pipeline.Limits()
    return pipeline.build(model, pattern, canonical=True, automaton=automaton, limits=limits).decoder()


def continuations(tokenizer, name: str, form: str, strings: list[bytes], ids: list[int]) -> list[bytes]:
    """The texts of every complete continuation after ``ids``: agnostic, the rest of each string
    that starts with their text; canonical, the rest of each HF encoding that starts with them."""
    model = tokenizer(name)
    if form == "lazy":
        done = spell(model, ids)
        return [w[len(done):] for w in strings if w.startswith(done)]
    encoded = [tokenizer.hf(name).encode(w.decode(), add_special_tokens=False).ids for w in strings]
    return [spell(model, e[len(ids):]) for e in encoded if e[:len(ids)] == ids]


def check_point(tokenizer, name: str, form: str, decoder, strings: list[bytes], rng) -> None:
    """A random allowed prefix, then: the jump-forward bytes are the continuations' longest common
    prefix, forced tokens spell a prefix of them, and accept_string takes each continuation (and
    nothing past the language), leaving the state as it was on a refusal."""
    model = tokenizer(name)
    stops = sorted(model.special_ids)
    m = tokfst.Matcher(decoder, eos=stops, tokenizer=model)
    for _ in range(int(rng.integers(0, 5))):
        allowed = np.setdiff1d(np.flatnonzero(m.mask()), stops)
        if not len(allowed):
            break
        m.consume(int(rng.choice(allowed)))
    rest = continuations(tokenizer, name, form, strings, m.tokens)
    assert rest, m.tokens
    jump = m.find_jump_forward_bytes()
    assert jump == os.path.commonprefix(rest), (m.tokens, rest)
    assert m.find_jump_forward_string() == jump.decode("utf-8", "ignore") or not jump.isascii()
    assert jump.startswith(spell(model, m.forced()))
    before = list(m.tokens)
    for text in rest:
        assert m.accept_string(text), (before, text)
        assert form != "lazy" or m.is_final()  # agnostic: every spelling ends at the same state
        m.rollback(len(m.tokens) - len(before))
        assert not m.accept_string(text + b"~") and m.tokens == before
    if form == "lazy":
        pieces = PIECES.get(name) or PIECES.setdefault(name, surface_index(model))  # the oracle: some segmentation
        for text in {jump, rest[0][:3], b"b0"}:
            some = any(accepts_prefix(decoder, m.state, s) for s in segmentations(text, pieces))
            assert m.accept_string(text) == some
            m.rollback(len(m.tokens) - len(before))


def accepts_prefix(decoder, state, ids) -> bool:
    try:
        for t in ids:
            state = decoder.advance(state, t)
    except tokfst.DisallowedTokenError:
        return False
    return True


@pytest.mark.parametrize("name", ["gpt2", "llama2"])
@pytest.mark.parametrize("form", ["lazy", "canonical"])
@settings(max_examples=12, deadline=None)
@given(words=st.lists(WORDS, min_size=1, max_size=5, unique=True), seed=st.integers(0, 1 << 16))
def test_jump_forward_and_accept_string_match_the_languages_texts(tokenizer, name, form, words, seed):
    pattern = "(" + "|".join(words) + ")"
    strings = language(compile_regex(pattern))
    decoder = decoder_of(tokenizer, name, form, pattern)
    if form == "canonical":  # the oracle's premise: HF's encodings are the constraint's sequences
        assert all(accepts(decoder, tokenizer.hf(name).encode(w.decode(), add_special_tokens=False).ids)
                   for w in strings)
    rng = np.random.default_rng(seed)
    for _ in range(3):
        check_point(tokenizer, name, form, decoder, strings, rng)


@pytest.mark.parametrize("name", ["gpt2", "llama2"])
@pytest.mark.parametrize("form", ["lazy", "canonical", "factorized"])
def test_jump_forward_over_a_schema(tokenizer, name, form):
    automaton = compile_schema(SCHEMA).automaton
    strings = language(automaton)
    decoder = decoder_of(tokenizer, name, form, "schema", automaton)
    rng = np.random.default_rng(5)
    for _ in range(8):
        check_point(tokenizer, name, form, decoder, strings, rng)
    m = tokfst.Matcher(decoder, tokenizer=tokenizer(name))
    assert m.find_jump_forward_string().endswith('{"k":"')  # "▁" HF prepends is Llama-2's first byte
    assert m.accept_string(m.find_jump_forward_string()) and m.accept_string("yz")
    assert m.find_jump_forward_string() == '","n":'


def test_texts_need_a_tokenizer_and_not_wordpiece(tokenizer):
    fst = pipeline.build(tokenizer("gpt2"), "ab").decoder()
    with pytest.raises(UsageError):
        tokfst.Matcher(fst).accept_string("a")
    bert = tokenizer("bert")
    with pytest.raises(UsageError):
        tokfst.Matcher(pipeline.build(bert, "ab").decoder(), tokenizer=bert).accept_string("a")
    m = fst.matcher(eos=50256, tokenizer=tokenizer("gpt2"))
    assert m.find_jump_forward_string() == "ab" and m.accept_string(b"ab") and m.find_jump_forward_string() == ""
    assert m.accept_token(50256) and not m.accept_string("") and m.find_jump_forward_string() == ""
    lines = tokfst.lazy(model := tokenizer("gpt2"), "a\nb")
    assert tokfst.Matcher(lines, tokenizer=model).accept_string("a\nb")
    assert not tokfst.Matcher(lines, eos=198).accept_string("a\nb")  # a stop id ends, never spells "\n"


@pytest.fixture(scope="module")
def kinds(tokenizer):
    model = tokenizer("gpt2")
    pattern = "[0-9]{2}(-[0-9]{2})?"
    return model, {"fst": pipeline.build(model, pattern).decoder(),
                   "canonical": pipeline.build(model, pattern, canonical=True).decoder(),
                   "lazy": tokfst.lazy(model, pattern),
                   "stack": tokfst.lazy(model, grammar='root ::= "(" root ")" | "x"')}


TEXTS = {"regex": (["12", "1", "12-", "x"], [True, True, True, False]),
         "stack": (["((", "x", "(x)", "1"], [True, True, True, False])}


@pytest.mark.parametrize("kind", ["fst", "canonical", "lazy", "stack"])
def test_a_batch_of_four_fills_one_torch_bitmask_and_speculates(kinds, kind):
    model, decoders = kinds
    decoder, vocab, stops = decoders[kind], 50304, [50256, 198]
    batch = tokfst.BatchMatcher.of(decoder, 4, eos=stops, tokenizer=model)
    rng = np.random.default_rng(3)
    for i, m in enumerate(batch.matchers):  # row i at step i of a walk
        assert m.accept_tokens(walk(decoder, rng, i, m.state))
    buf = allocate_token_bitmask(4, vocab, torch=True)
    batch.fill_next_token_bitmask(buf)  # one call, one copy
    for i, m in enumerate(batch.matchers):
        one = allocate_token_bitmask(1, vocab)
        m.fill_next_token_bitmask(one, 0)
        assert (buf[i].numpy() == one[0]).all(), (kind, i)
    rows = np.zeros((4, buf.shape[1]), np.int32)
    tokfst.fill_next_token_bitmasks(batch.matchers[::-1], rows, [3, 2, 1, 0])
    assert (rows == buf.numpy()).all()
    before = [m.state for m in batch.matchers]
    draws = [int(rng.choice(np.flatnonzero(unpack(buf[i].numpy(), vocab)))) for i in range(4)]
    assert batch.accept_token(draws) == [True] * 4
    after = [m.state for m in batch.matchers]
    bad = int(np.flatnonzero(~unpack(buf[0].numpy(), vocab))[0])
    drafts = [[] if m.is_terminated() else walk(decoder, rng, 3, m.state) for m in batch.matchers]
    assert batch.validate_tokens([d + [bad] for d in drafts]) == [len(d) for d in drafts]
    assert [m.state for m in batch.matchers] == after  # validation changes nothing
    assert batch.accept_tokens(drafts) == [True] * 4
    batch.rollback([len(d) for d in drafts])  # speculation undone
    assert [m.state for m in batch.matchers] == after
    batch.rollback(1)  # and this step's token
    assert [m.state for m in batch.matchers] == before
    with pytest.raises(UsageError):
        batch.accept_token([1, 2])
    batch.reset()
    assert batch.is_terminated() == [False] * 4 and all(m.tokens == [] for m in batch.matchers)
    texts, want = TEXTS.get(kind, TEXTS["regex"])
    if kind == "canonical":  # "1" then a digit is one token ("12"): the text would end inside it
        want = [True, False, True, False]
    assert batch.accept_string(texts) == want


@pytest.mark.parametrize("name,pattern,limit", [("gpt2", "[a-z]{1,6}( [a-z]{1,6}){0,2}", 4),
                                                ("llama2", "[a-z]{2,8}(-[0-9]{1,3})?", 4)])
def test_max_tokens_on_the_lazy_path_equals_the_index_path(tokenizer, tmp_path, name, pattern, limit):
    model = tokenizer(name)
    result = pipeline.build(model, pattern, filters=tokfst.Filters(max_tokens=limit))
    (tmp_path / "c.json").write_text(json.dumps(result.index()))
    index = constraint.load(str(tmp_path / "c.json"), model)
    lazy = tokfst.lazy(model, pattern, max_tokens=limit)
    assert equal_masks(index, lazy, 150) > 20
    rng = np.random.default_rng(0)
    for _ in range(6):  # every walk ends at a final state within the budget, never truncated
        got = generate(lambda ids: rng.normal(size=model.vocab_size), lazy.matcher(eos=0), max_tokens=50)
        assert got.finished and len(got) <= limit


def test_max_tokens_on_the_lazy_path_is_refused_where_it_cannot_apply(tokenizer):
    model = tokenizer("gpt2")
    with pytest.raises(InputError):
        tokfst.lazy(model, grammar='root ::= "(" root ")" | "x"', max_tokens=3)
    with pytest.raises(InputError):
        tokfst.lazy(model, "[0-9]+", max_tokens=-1)
    with pytest.raises(EmptyLanguageError):  # as the promoted path: no sequence within the budget
        tokfst.lazy(model, "[0-9]{3}x", max_tokens=1)
    d = tokfst.lazy(model, "[0-9]+", filters=tokfst.Filters(max_tokens=1))
    assert d.is_final(d.advance(d.initial(), model.token_id("123"))) and not d.mask(d.advance(d.initial(), 16)).any()
