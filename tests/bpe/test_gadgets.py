"""Merge gadgets and the Eq. 4 cascade (Cognetta & Okazaki 2024 Sec. 6.3-6.4) against Hugging Face's BPE model.

The oracle is always HF (``Tokenizer.model.tokenize`` on one word): tiny tokenizers trained here
by HF's BpeTrainer (plain/Whitespace and byte-level), a hand-written tokenizer.json with (a, a)
merges, duplicate results, out-of-order ranks, shuffled ids and a repeated pair, and random
merge lists in random rank order.
"""

from __future__ import annotations

import itertools
import json
import random

import pynini
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

from tokfst_cli.bpe.gadgets import (
    MergeTable,
    block_gadget,
    canonical_automaton,
    cascade,
    gadget,
    initial_symbols_acceptor,
    promote_gadgets,
    strings_acceptor,
)
from tokfst_cli.errors import EmptyLanguageError, InputError, LimitError
from tokfst_cli.promotion import lexicon
from tokfst_cli.promotion.promote import promote
from tokfst_cli.text.regex import compile_regex
from tokfst_cli.tokenizer import model as tokenizer

from ..helpers import (
    accepts,
    count_segmentations,
    finals,
    hf_model_ids,
    segmentations,
    spell,
    surface_index,
    transitions,
)

FAST = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])

_rng = random.Random(7)
_SYL = [c + v for c in "bcdnrs" for v in "aeo"] + ["an", "er", "on", "és"]
CORPUS = [" ".join("".join(_rng.choice(_SYL) for _ in range(_rng.randint(1, 4))) for _ in range(12))
          for _ in range(40)]
LETTERS = "abcdenorsé"


# ---------------------------------------------------------------- helpers

def bytes_acceptor(text: str) -> pynini.Fst:
    """Linear acceptor of text's UTF-8 bytes (labels b + 1)."""
    f = pynini.Fst()
    one = pynini.Weight.one(f.weight_type())
    s = f.add_state()
    f.set_start(s)
    for b in text.encode("utf-8"):
        t = f.add_state()
        f.add_arc(s, pynini.Arc(b + 1, b + 1, one, t))
        s = t
    f.set_final(s)
    return f


def unique_path(f: pynini.Fst) -> list[int]:
    """The token ids on the only path of a linear acceptor."""
    out, s = [], f.start()
    while True:
        arcs = list(f.arcs(s))
        if not arcs:
            assert f.final(s) != pynini.Weight.zero(f.weight_type())
            return out
        assert len(arcs) == 1, "more than one path"
        out.append(arcs[0].ilabel - 1)
        s = arcs[0].nextstate


def run_gadget(g: pynini.Fst, ids: list[int]) -> list[int]:
    out = pynini.compose(strings_acceptor([ids]), g).project("output").rmepsilon()
    return unique_path(pynini.determinize(out).minimize())


def hf_json(merges: list[tuple[str, str]], base: str, seed: int = 0, **options) -> dict:
    """A complete tokenizer.json for a plain BPE model, token ids shuffled (not in merge order)."""
    toks = list(base)
    for left, right in merges:
        for t in (left, right, left + right):
            if t not in toks:
                toks.append(t)
    ids = list(range(len(toks)))
    random.Random(seed).shuffle(ids)
    model = {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
             "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
             "vocab": dict(zip(toks, ids)), "merges": [[a, b] for a, b in merges], **options}
    return {"version": "1.0", "truncation": None, "padding": None, "added_tokens": [], "normalizer": None,
            "pre_tokenizer": None, "post_processor": None, "decoder": None, "model": model}


class Case:
    """A tokenizer under test: our model, HF's tokenizer, and A_BPE with its transition table."""

    def __init__(self, data_or_path):
        if isinstance(data_or_path, dict):
            self.hf = Tokenizer.from_str(json.dumps(data_or_path))  # HF accepts the file
            self.model = tokenizer.from_json(data_or_path)
        else:
            self.hf = Tokenizer.from_file(str(data_or_path))
            self.model = tokenizer.load(str(data_or_path))
        self.canonical = canonical_automaton(self.model)
        self.delta, self.fin = transitions(self.canonical), finals(self.canonical)
        self.pieces = surface_index(self.model)

    def hf_ids(self, word: str) -> list[int]:
        return hf_model_ids(self.hf, self.model, word)

    def cascade_ids(self, word: str, exact: bool = True) -> list[int]:
        """The path of Eq. 4 on the word (ignore_merges lives in promote_gadgets, not in the cascade)."""
        if self.model.options.get("ignore_merges"):
            return unique_path(promote_gadgets(bytes_acceptor(word), self.model, exact=exact))
        init = initial_symbols_acceptor(bytes_acceptor(word), self.model)
        return unique_path(cascade(init, self.model, exact=exact))

    def check_word(self, word: str) -> None:
        expected = self.hf_ids(word)
        assert spell(self.model, expected) == word.encode("utf-8")
        assert self.cascade_ids(word) == expected, word
        assert accepts(self.canonical, [i + 1 for i in expected], self.delta, self.fin), word
        text = word.encode("utf-8")
        if count_segmentations(text, self.pieces) <= 5000:
            for seg in segmentations(text, self.pieces):
                if list(seg) != expected:
                    assert not accepts(self.canonical, [i + 1 for i in seg], self.delta, self.fin), (word, seg)


def train(path, size: int, byte_level: bool = False) -> Case:
    tok = Tokenizer(models.BPE())
    if byte_level:
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        tok.decoder = decoders.ByteLevel()
        trainer = trainers.BpeTrainer(vocab_size=size, show_progress=False,
                                      initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    else:
        tok.pre_tokenizer = pre_tokenizers.Whitespace()
        trainer = trainers.BpeTrainer(vocab_size=size, show_progress=False)
    tok.train_from_iterator(CORPUS, trainer)
    tok.save(str(path))
    return Case(path)


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    d = tmp_path_factory.mktemp("bpe")
    cases = {"plain40": train(d / "p40.json", 40), "plain120": train(d / "p120.json", 120),
             "bytes300": train(d / "b300.json", 300, byte_level=True)}
    assert len(cases["plain120"].model.tokens) == 120
    assert cases["bytes300"].model.style == "byte-level"
    return cases


# The synthetic tokenizer: every feature that separates HF from a naive reading of Alg. 4.
SYNTH_MERGES = [
    ("x", "yz"),   # 0: ranked before its operand yz exists (rank 3)
    ("c", "c"),    # 1: repeated at rank 10; HF keeps the last rank
    ("a", "a"),    # 2: (a, a)
    ("y", "z"),    # 3
    ("ab", "a"),   # 4: ranked before ab exists: it steals the a of the next "ab"
    ("a", "b"),    # 5
    ("b", "c"),    # 6
    ("a", "bc"),   # 7: abc ...
    ("ab", "c"),   # 8: ... made by two merges
    ("aa", "a"),   # 9
    ("c", "c"),    # 10: the repeat
    ("aa", "aa"),  # 11
    ("aba", "b"),  # 12
    ("xyz", "x"),  # 13
]
SYNTH = hf_json(SYNTH_MERGES, "abcxyz", seed=3)


@pytest.fixture(scope="module")
def synth():
    return Case(SYNTH)


# ---------------------------------------------------------------- gadgets (Fig. 5)

@pytest.mark.parametrize("ids,out", [
    ([0, 0, 0], [9, 0]),            # a a a -> aa a (leftmost first)
    ([0, 0, 0, 0], [9, 9]),         # a a a a -> aa aa
    ([0, 0, 0, 0, 0], [9, 9, 0]),
    ([2, 0, 0, 2, 0], [2, 9, 2, 0]),  # a pending at the end is emitted
    ([0], [0]), ([], []),
])
def test_aa_gadget_is_left_to_right(ids, out):
    assert run_gadget(gadget(0, 0, 9, [0, 1, 2]), ids) == out


@pytest.mark.parametrize("ids,out", [
    ([0, 1, 0, 1], [9, 9]),
    ([0, 0, 1], [0, 9]),        # a postponed by another a
    ([0, 2, 1, 0], [0, 2, 1, 0]),
    ([1, 0], [1, 0]), ([0], [0]), ([0, 0], [0, 0]),
])
def test_ab_gadget(ids, out):
    assert run_gadget(gadget(0, 1, 9, [0, 1, 2]), ids) == out


def test_block_gadget_without_cleanup_is_fig5(trained):
    """For a trainer-made vocabulary no rank needs cleanup, and the generated block acts as Fig. 5's gadget."""
    model = trained["plain120"].model
    table = MergeTable.of(model)
    alphabet = sorted({i for i, t in enumerate(model.tokens) if t})
    assert not any(table.has_cleanup(r, t) for r, _, _, t in table.ordered)
    rng = random.Random(0)
    for rank, a, b, t in table.ordered[::15]:
        blk, fig5 = block_gadget(table, rank, alphabet), gadget(a, b, t, alphabet)
        for _ in range(20):
            ids = [rng.choice([a, b, rng.choice(alphabet)]) for _ in range(rng.randint(0, 8))]
            assert run_gadget(blk, ids) == run_gadget(fig5, ids)


# ---------------------------------------------------------------- trained tokenizers

words = st.text(alphabet=LETTERS, min_size=1, max_size=10)


@FAST
@given(word=words)
def test_plain120_matches_hf(trained, word):
    trained["plain120"].check_word(word)


@FAST
@given(word=words)
def test_plain40_matches_hf(trained, word):
    trained["plain40"].check_word(word)


@FAST
@given(word=words, space=st.booleans())
def test_byte_level_matches_hf(trained, word, space):
    trained["bytes300"].check_word((" " if space else "") + word)  # "Ġ" words too


def test_corpus_words_match_hf(trained):
    case = trained["plain120"]
    for w in sorted(set(" ".join(CORPUS).split()))[:80]:
        case.check_word(w)


# ---------------------------------------------------------------- the synthetic tokenizer

def test_synthetic_has_the_features(synth):
    m = synth.model
    ids = {t: i for i, t in enumerate(m.tokens)}
    table = MergeTable.of(m)
    assert table.merges[(ids["c"], ids["c"])][0] == 10  # the repeated pair's last rank
    assert table.merges[(ids["a"], ids["bc"])][1] == table.merges[(ids["ab"], ids["c"])][1] == ids["abc"]
    assert ids["xyz"] < ids["yz"] or ids["ab"] > ids["aba"]  # ids are not in merge order
    assert table.has_cleanup(3, ids["yz"]) and table.has_cleanup(5, ids["ab"])


@pytest.mark.parametrize("word,expected", [
    ("xyz", ["xyz"]),              # (x, yz) fires right after yz is made
    ("ababc", ["aba", "bc"]),      # (ab, a) steals the a of the second "ab" (Alg. 4: ab abc)
    ("abac", ["aba", "c"]), ("ababab", ["abab", "ab"]),
    ("bcc", ["bc", "c"]),          # (c, c) at its last rank (10) loses to (b, c) (6)
    ("aaaaa", ["aa", "aaa"]),
    ("abc", ["abc"]), ("xyzx", ["xyzx"]),
])
def test_synthetic_examples(synth, word, expected):
    toks = [synth.model.tokens[i] for i in synth.hf_ids(word)]
    assert toks == expected  # what HF does ...
    synth.check_word(word)   # ... and what the cascade and A_BPE do


def test_literal_alg4_is_not_exact(synth):
    """Fig. 5 gadgets in rank order miss the out-of-order merges (documented in gadgets.py)."""
    for word in ("xyz", "ababc", "abac", "xyzx"):
        assert synth.cascade_ids(word, exact=False) != synth.hf_ids(word)
        assert synth.cascade_ids(word) == synth.hf_ids(word)


# Duplicate results alone break Alg. 4: ccc is made by (c, cc) (rank 2) and (cc, c) (rank 4); when
# the latter makes it, (ccc, bb) (rank 3) fires at once.
DUPLICATES = hf_json([("c", "c"), ("b", "b"), ("c", "cc"), ("ccc", "bb"), ("cc", "c")], "abc", seed=1)


def test_duplicate_results_need_the_cleanup():
    case = Case(DUPLICATES)
    names = lambda ids: [case.model.tokens[i] for i in ids]  # noqa: E731
    assert names(case.hf_ids("cccbb")) == ["cccbb"]
    assert names(case.cascade_ids("cccbb", exact=False)) == ["ccc", "bb"]
    for n in range(1, 8):
        for w in itertools.product("bc", repeat=n):
            case.check_word("".join(w))


def test_synthetic_all_short_words(synth):
    for n in range(1, 5):
        for w in itertools.product("abcxyz", repeat=n):
            synth.check_word("".join(w))


@FAST
@given(word=st.text(alphabet="abcxyz", min_size=1, max_size=10))
def test_synthetic_matches_hf(synth, word):
    synth.check_word(word)


@st.composite
def merge_lists(draw):
    """Random merges over {a, b, c}, in random rank order, with some pairs repeated."""
    toks, merges = ["a", "b", "c"], []
    for _ in range(draw(st.integers(3, 20))):
        left, right = draw(st.sampled_from(toks)), draw(st.sampled_from(toks))
        if len(left) + len(right) <= 6 and (left, right) not in merges:
            merges.append((left, right))
            if left + right not in toks:
                toks.append(left + right)
    merges = draw(st.permutations(merges))
    for pair in draw(st.lists(st.sampled_from(merges), max_size=2)):
        merges.insert(draw(st.integers(0, len(merges))), pair)
    return merges


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(merges=merge_lists(), words=st.lists(st.text(alphabet="abc", min_size=1, max_size=10), min_size=1, max_size=8))
def test_random_out_of_order_vocabularies(merges, words):
    case = Case(hf_json(merges, "abc", seed=len(merges)))
    for w in words:
        case.check_word(w)


def test_ignore_merges():
    """abc is unreachable by merges ((a, b) wins), but ignore_merges takes the whole word."""
    case = Case(hf_json([("a", "b"), ("b", "c"), ("a", "bc")], "abc", ignore_merges=True))
    ids = {t: i for i, t in enumerate(case.model.tokens)}
    assert case.hf_ids("abc") == [ids["abc"]] and case.hf_ids("abca") == [ids["ab"], ids["c"], ids["a"]]
    for n in range(1, 6):
        for w in itertools.product("abc", repeat=n):
            case.check_word("".join(w))


# ---------------------------------------------------------------- promotion of a regex

def strings_up_to(fst: pynini.Fst, bound: int) -> set[bytes]:
    out, stack = set(), [(fst.start(), b"")]
    fin = finals(fst)
    while stack:
        s, text = stack.pop()
        if s in fin:
            out.add(text)
        if len(text) < bound:
            stack.extend((a.nextstate, text + bytes([a.ilabel - 1])) for a in fst.arcs(s))
    return out


def token_paths_up_to(fst: pynini.Fst, model, bound: int) -> set[tuple[int, ...]]:
    out, stack = set(), [(fst.start(), (), 0)]
    fin = finals(fst)
    while stack:
        s, path, n = stack.pop()
        if s in fin:
            out.add(path)
        for a in fst.arcs(s):
            k = n + len(model.surfaces[a.ilabel - 1])
            if k <= bound:
                stack.append((a.nextstate, path + (a.ilabel - 1,), k))
    return out


@pytest.mark.parametrize("which,pattern", [("synth", "(ab|ba)+c?"), ("synth", "(x|yz|a)+"),
                                           ("plain120", "(ba|ne|sé)+s?"), ("bytes300", "(ba|ne|é)+ ?")])
def test_promote_gadgets_is_hf_on_the_language(which, pattern, synth, trained):
    case = synth if which == "synth" else trained[which]
    automaton = compile_regex(pattern)
    result = promote_gadgets(automaton, case.model)
    assert result.output_symbols().name() == lexicon.build(case.model).output_symbols().name()
    bound = 9
    expected = {tuple(case.hf_ids(s.decode())) for s in strings_up_to(automaton.fst, bound)}
    assert len(expected) > 10
    assert token_paths_up_to(result, case.model, bound) == expected
    # Eq. 5: MIN(PROJ(A o T)) o A_BPE recognizes the same language
    agnostic = promote(case.model, automaton, lexicon.build(case.model)).fst
    eq5 = pynini.intersect(agnostic.arcsort("olabel"), case.canonical.copy().arcsort("ilabel"))
    eq5 = pynini.determinize(eq5.rmepsilon()).minimize()
    assert pynini.equivalent(eq5, result)


def test_errors(synth, trained):
    with pytest.raises(EmptyLanguageError):
        promote_gadgets(compile_regex("q+"), synth.model)
    with pytest.raises(LimitError):
        canonical_automaton(trained["plain120"].model, max_states=5)
    fallback = hf_json([("a", "b")], "ab")
    fallback["model"]["byte_fallback"] = True
    with pytest.raises(InputError, match="byte_fallback"):
        canonical_automaton(tokenizer.from_json(fallback))
