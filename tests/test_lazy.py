"""Stage S on demand (``lazy``): the lazy decoder answers exactly as the promoted automaton.

- on GPT-2 and Llama-2, for random regexes, the bench's and JSON Schemas: equal masks and
  finality at every state both reach by the same tokens (breadth first) as the decoder of
  ``pipeline.build`` (promotion + trim);
- random mask-following walks never meet a dead end and end at a final state;
- HF's own tokenization of a valid text is accepted;
- ``advance`` refuses what the mask refuses; a Matcher rolls back;
- refused by name: a tokenizer that lacks bytes (BERT), token-level groups, no or two inputs.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import example, given, settings

from tokfst_cli import constraint, pipeline
from tokfst_cli.analysis.steering import byte_steering
from tokfst_cli.bench.schema_workers import random_text
from tokfst_cli.decoding.matcher import pack, unpack
from tokfst_cli.errors import DisallowedTokenError, InputError
from tokfst_cli.promotion import lazy
from tokfst_cli.schema.compile import compile_schema

from .helpers import SIX_REGEXES
from .test_promote import _patterns
from .walks import accepts, equal_masks, walks

SCHEMAS = Path(__file__).parent / "data" / "schemas"


@pytest.mark.parametrize("tok", ["gpt2", "llama2"])
@given(pattern=_patterns())
@settings(max_examples=25, deadline=None)
@example(pattern="(?:ab|c)*é")
@example(pattern="(?:中)?(?:[0-9]|x{2,3})+")
def test_lazy_masks_are_the_promoted_ones(tokenizer, tok, pattern):
    model = tokenizer(tok)
    dec = lazy.decoder(model, pattern)
    assert equal_masks(pipeline.build(model, pattern).decoder(), dec, 200) >= 1


@pytest.mark.parametrize("tok", ["gpt2", "llama2"])
@pytest.mark.parametrize("name", sorted(SIX_REGEXES) + ["words4"])
def test_lazy_bench_regexes(tokenizer, tok, name):
    """The bench regexes and free text: equal masks, 300 walks without dead ends, and HF's
    tokenization of a text of the language accepted."""
    pattern = SIX_REGEXES.get(name, r"[a-z]+( [a-z]+){0,3}")
    model, hf = tokenizer(tok), tokenizer.hf(tok)
    dec = lazy.decoder(model, pattern)
    equal_masks(pipeline.build(model, pattern).decoder(), dec, 400)
    walks(dec, 300, seed=3, closer=byte_steering(dec))
    text = {"decimal": "12.5", "json": '{"name":"Paul","age":30}', "date": "2024-01-31",
            "email": "john.smith@example.org", "cities": "Bonn", "words4": "the cat sat"}.get(name)
    if text is not None and tok == "gpt2":  # Llama-2's normalizer prefixes '▁': its ids spell another text
        assert accepts(dec, hf.encode(text, add_special_tokens=False).ids)


@pytest.mark.parametrize("tok", ["gpt2", "llama2"])
@pytest.mark.parametrize("name", ["claude-code-launch", "commitlintrc", "ethereum-erc1155"])
def test_lazy_schemas(tokenizer, tok, name):
    """A JSON Schema's byte automaton: the lazy masks are the promoted ones (breadth first from the
    start, string bodies included), and HF's ids of a serialized valid instance are accepted."""
    model, hf = tokenizer(tok), tokenizer.hf(tok)
    schema = json.loads((SCHEMAS / f"{name}.json").read_text(encoding="utf-8"))
    compiled = compile_schema(schema)
    dec = lazy.decoder(model, automaton=compiled.automaton)
    promoted = pipeline.build(model, name, automaton=compiled.automaton, terminals=True).decoder()
    assert equal_masks(promoted, dec, 150) == 150
    walks(dec, 20, seed=5, random_len=40, finish_len=4000, closer=byte_steering(dec))
    if tok == "gpt2":  # random texts of the byte DFA, tokenized by HF
        texts = [t for t in (random_text(compiled.automaton.fst, seed) for seed in range(8)) if t is not None]
        assert texts
        for text in texts:
            assert accepts(dec, hf.encode(text, add_special_tokens=False).ids), text


def test_lazy_steps_and_matcher(tokenizer):
    """advance refuses what the mask refuses (and ids outside the vocabulary); bitmask is the
    packed mask and shared per state; a Matcher over the lazy decoder rolls back exactly."""
    model = tokenizer("gpt2")
    dec = constraint.lazy(model, SIX_REGEXES["date"])
    s = dec.initial()
    m = dec.mask(s)
    assert (pack(m) == dec.bitmask(s)).all() and dec.bitmask(s) is dec.bitmask(s)
    assert not dec.bitmask(s).flags.writeable
    bad = int(np.flatnonzero(~m)[0])
    for t in (bad, -1, model.vocab_size):
        with pytest.raises(DisallowedTokenError):
            dec.advance(s, t)
    eos = model.vocab_size - 1
    mt = dec.matcher(eos)
    ids = tokenizer.hf("gpt2").encode("2024-01-31", add_special_tokens=False).ids
    before = mt.bitmask().copy()
    mt.consume(ids[0])
    mid = mt.bitmask().copy()
    for t in ids[1:]:
        mt.consume(t)
    assert mt.mask()[eos]
    mt.rollback(len(ids) - 1)
    assert (mt.bitmask() == mid).all()
    mt.rollback(1)
    assert (mt.bitmask() == before).all()
    seen = dec.visited
    fresh = dec.initial()
    for t in ids:  # advance runs the token through A's table: it makes no mask
        fresh = dec.advance(fresh, t)
    assert dec.visited == seen and dec.is_final(fresh)


def test_lazy_refusals(tokenizer):
    with pytest.raises(InputError, match="every single byte") as e:
        lazy.decoder(tokenizer("bert"), "[a-z]+")
    assert e.value.hint == "lazy-bytes"
    with pytest.raises(InputError, match="token-level groups"):
        lazy.decoder(tokenizer("gpt2"), "a(?P<TEXT_TOKEN>)b")
    import pynini

    big = pynini.Fst()  # a label past the bytes
    big.add_states(2)
    big.set_start(0)
    big.set_final(1)
    big.add_arc(0, pynini.Arc(300, 300, 0, 1))
    for bad in (pynini.accep("ab", weight=2.0), pynini.cross("a", "b"), big):
        with pytest.raises(InputError, match="unweighted byte acceptors"):
            lazy.decoder(tokenizer("gpt2"), automaton=bad)
    for kwargs in ({}, {"pattern": "a", "schema": {}}):
        with pytest.raises(InputError, match="exactly one"):
            lazy.decoder(tokenizer("gpt2"), **kwargs)


def test_lazy_determinization_is_bounded(tokenizer):
    """A nondeterministic automaton given is determinized with a bound: past max_states, a
    LimitError naming it, not the whole subset construction."""
    import pynini

    from tokfst_cli.errors import LimitError

    nd = pynini.union(*(pynini.accep(w) for w in ["ab", "ac", "abc", "b", "bcd"]))
    with pytest.raises(LimitError, match="byte DFA"):
        lazy.LazyDecoder(tokenizer("gpt2"), nd, max_states=3)


def test_lazy_nondeterministic_automaton(tokenizer):
    """A byte automaton given nondeterministic (a union, with epsilons) answers as its minimal DFA."""
    import pynini

    model = tokenizer("gpt2")
    words = ["ab", "ac", "abc", "b"]
    nd = pynini.union(*(pynini.accep(w) for w in words))
    assert nd.properties(pynini.I_DETERMINISTIC, True) != pynini.I_DETERMINISTIC
    dfa = pynini.union(*(pynini.accep(w) for w in words)).optimize()
    assert equal_masks(lazy.decoder(model, automaton=dfa), lazy.decoder(model, automaton=nd), 50) >= 4


def test_lazy_masks_kept_within_the_budget(tokenizer, monkeypatch):
    """Past MASK_BUDGET bytes of masks the oldest is dropped and made again, equal, on its next use."""
    model = tokenizer("gpt2")
    monkeypatch.setattr(lazy, "MASK_BUDGET", 3 * 4 * ((model.vocab_size + 31) // 32))  # three masks
    dec = lazy.decoder(model, SIX_REGEXES["date"])
    first = dec.bitmask(dec.initial()).copy()
    equal_masks(pipeline.build(model, SIX_REGEXES["date"]).decoder(), dec, 20)
    assert dec.visited == 3
    assert (dec.bitmask(dec.initial()) == first).all()


def test_lazy_table_classes_and_limit():
    """A's table has one column per class of bytes A cannot tell apart (date: digits, '-', the
    rest dead); past max_cells it is refused with the table's own size, before it is built."""
    from tokfst_cli.automata.arrays import fst_arrays
    from tokfst_cli.errors import LimitError
    from tokfst_cli.promotion import byte_table
    from tokfst_cli.text.regex import compile_regex

    arrays = fst_arrays(compile_regex(SIX_REGEXES["date"]).fst)
    table = byte_table.of_arrays(arrays, "date")
    delta, cls = table.delta, table.label_class
    n = len(arrays.final)
    assert delta.shape == (n + 1, 3) and (delta[n] == n).all() and (delta[:, 0] == n).all()
    digits = {int(cls[b + 1]) for b in range(ord("0"), ord("9") + 1)}
    assert len(digits) == 1 and int(cls[ord("-") + 1]) not in digits | {0}
    assert {int(cls[b + 1]) for b in range(256) if not (48 <= b <= 57 or b == ord("-"))} == {0}
    with pytest.raises(LimitError) as e:
        byte_table.of_arrays(arrays, "date", max_cells=(n + 1) * 3 - 1)
    assert e.value.value == (n + 1) * 3 and e.value.limit == "max_cells"


@pytest.mark.parametrize("tok", ["gpt2", "llama2"])
def test_lazy_subtree_shortcut_is_the_walk(tokenizer, tok):
    """Where a state reads every column under a trie node back into itself, the node's whole
    subtree is taken at once: the masks equal the full walk's (no state loops), at every state of
    free text and of a schema's string fields (where states do loop)."""
    model = tokenizer(tok)
    schema = json.loads((SCHEMAS / "commitlintrc.json").read_text(encoding="utf-8"))
    for dec in (lazy.decoder(model, r"[a-z]+( [a-z]+){0,3}"), lazy.decoder(model, schema=schema)):
        plain = np.zeros_like(dec._loops)
        t = dec._t
        taken = 0
        for q in range(dec.states):
            a = np.zeros(dec._nwords, np.uint32)
            b = np.zeros(dec._nwords, np.uint32)
            at = np.empty(dec._depth, np.int32)
            n_a = dec._k.reach_from(q, t.col, t.depth, t.size, t.tptr, t.toks, t.below, dec._delta, dec._cls,
                                    dec._loops, a, at)
            n_b = dec._k.reach_from(q, t.col, t.depth, t.size, t.tptr, t.toks, t.below, dec._delta, dec._cls,
                                    plain, b, at)
            assert (a == b).all() and n_a == n_b, q
            taken += bool(dec._loops[q].any())
        assert taken


@pytest.mark.parametrize("tok", ["gpt2", "llama2"])
@given(pattern=_patterns())
@settings(max_examples=20, deadline=None)
@example(pattern=r"[a-z]+( [a-z]+){0,3}")
@example(pattern=r"[a-z0-9._%+-]+@[a-z0-9.-]+\.[a-z]{2,6}")
def test_lazy_class_trie_is_the_walk(tokenizer, tok, pattern):
    """The class trie (T's prefix nodes merged by their classes of bytes, dead class pruned) gives
    the prefix walk's tokens at every state; a decoder of few classes walks it after a wide mask."""
    model = tokenizer(tok)
    dec = lazy.decoder(model, pattern)
    t, n = dec._t, dec.states
    dec._class_trie()
    walk, at = dec._walk, np.empty(dec._depth, np.int32)
    assert walk[0].size <= t.col.size and (walk[0] > 0).all()
    for q in range(n):
        a = np.zeros(dec._nwords, np.uint32)
        b = np.zeros(dec._nwords, np.uint32)
        n_a = dec._k.reach_from(q, t.col, t.depth, t.size, t.tptr, t.toks, t.below, dec._delta, dec._cls,
                                dec._loops, a, at)
        n_b = dec._k.reach_from(q, *walk[:6], dec._delta, walk[6], walk[7], b, at)
        assert (a == b).all() and n_a == n_b, q
    fresh = lazy.decoder(model, pattern)
    first = int(unpack(fresh.bitmask(fresh.initial()), model.vocab_size).sum())
    assert not fresh._classes  # the first mask walks T: ready at once
    if fresh.states > 1:
        other = next(q for q in range(fresh.states) if q != fresh.initial())
        fresh.bitmask(other)
        wide = first >= lazy.CLASS_TRIE_TOKENS and fresh._delta.shape[1] <= lazy.CLASS_TRIE_CLASSES
        assert fresh._classes == wide


def test_lazy_masks_from_threads(tokenizer):
    """Threads asking one decoder for masks at once (the kernels release the GIL) get the masks
    one thread gets: each walk has its own scratch, the kept masks a lock, the class trie one
    switch; past the memory bound too."""
    import threading

    model = tokenizer("gpt2")
    pattern = r"[a-z ]{1,30}[.!?]"  # 32 states, most of them with wide masks
    ref = lazy.decoder(model, pattern)
    n = ref.states
    want = [ref.bitmask(q).copy() for q in range(n)]
    for keep in (1 << 20, 5):
        for _ in range(4):
            dec = lazy.decoder(model, pattern)
            dec._keep = keep
            got: list = []

            def work(order):
                got.extend((q, dec.bitmask(q).copy()) for q in order)

            orders = [list(range(n)), list(range(n))[::-1], list(range(0, n, 2)) + list(range(1, n, 2))]
            threads = [threading.Thread(target=work, args=(o,)) for o in orders + orders]
            for th in threads:
                th.start()
            for th in threads:
                th.join()
            assert len(got) == 2 * sum(map(len, orders)) and len(dec._words) <= keep
            assert all((m == want[q]).all() for q, m in got)
