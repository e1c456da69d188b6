"""Non-special added tokens as HF treats them (``pretok.cut``), against ``encode(text).ids``.

Tokenizers trained here under a family's blocks (``pipelines.CONFIGS``) get non-special added
tokens of the kinds real ones ship: Gemma-3's runs of newlines, tabs and "▁" and its
``<unusedN>`` (in the vocabulary), Qwen's ``<tool_call>`` (outside it), and texts after which
Llama-2's Prepend normalizer runs again. On finite languages the canonical automaton's paths
are exactly {encode(s) : s in L}; agnostic promotion spells an added token by its content.
"""

from __future__ import annotations

import json
import re
from functools import lru_cache

import pynini
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tokenizers import AddedToken, Tokenizer

from tokfst_cli import pipeline
from tokfst_cli.encoder.encode import Encoder
from tokfst_cli.errors import InputError, LimitError
from tokfst_cli.pretok import cut
from tokfst_cli.text.regex import compile_regex
from tokfst_cli.tokenizer.model import from_json, unicode_to_bytes

from ..runner import run
from . import pipelines as pl
from .test_pretokenized import paths, strings

ADDED = {
    "gemma": ["\n", "\n\n", "\n\n\n", "\t", "\t\t", "▁▁", "▁▁▁", "<unused0>", "<unused1>", "<unused12>"],
    "llama2": ["\n", "<tool>", "ab", "ÿ"],
    "qwen": ["<tool_call>", "</tool_call>", "\n\n", "ab", "€"],
}
PIECES = {  # what the drawn regexes are made of, per configuration
    "gemma": ["a", "b", "x", " ", "  ", "\n", "\t", "▁", "<unused1", ">", "2"],
    "llama2": ["a", "b", " ", "\n", "<tool>", "<tool"],
    "qwen": ["a", "b", " ", "\n", "<tool_call>", "</tool_call>", "_call>"],
}


@lru_cache(maxsize=None)
def tokenizer(name: str):
    """(path, HF Tokenizer, TokenizerModel): ``pipelines.trained(name)`` with ADDED[name] added as
    non-special tokens matched on the raw text (an id of its own where the content is no token)."""
    path, hf = pl.trained(name)
    hf = Tokenizer.from_str(hf.to_str())
    hf.add_tokens([AddedToken(t, normalized=False, special=False) for t in ADDED[name]])
    out = path.with_name(f"{path.stem}-added.json")
    out.write_text(hf.to_str())
    return out, hf, from_json(json.loads(out.read_text()), str(out))


def escape(text: str) -> str:
    return "".join({"\n": r"\n", "\t": r"\t", " ": r"\x20"}.get(c, "\\" + c if c in "()[]{}|*+?.\\^$" else c)
                   for c in text)


def regexes(name: str):
    """Finite regexes: 1-3 branches of 1-4 pieces, each piece optional or not."""
    piece = st.tuples(st.sampled_from(PIECES[name]), st.booleans()).map(
        lambda p: f"(?:{escape(p[0])})?" if p[1] else f"(?:{escape(p[0])})")
    branch = st.lists(piece, min_size=1, max_size=4).map("".join)
    return st.lists(branch, min_size=1, max_size=3).map("|".join)


def exact(name: str, pattern: str) -> None:
    _, hf, model = tokenizer(name)
    result = pipeline.build(model, pattern, canonical=True)
    want = {tuple(hf.encode(s.decode("utf-8"), add_special_tokens=False).ids)
            for s in strings(compile_regex(pattern).fst)}
    assert paths(result.fst) == want, pattern


@pytest.mark.parametrize("name", list(ADDED))
@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_canonical_paths_are_exactly_encode(name, data):
    exact(name, data.draw(regexes(name)))


@pytest.mark.parametrize("name, pattern", [
    ("gemma", "( {1,3}a|a {2,3}b)"),  # HF: ["▁▁", "a"], ["a", "▁▁", "b"]: "▁▁" made by the model's merges
    ("gemma", r"(a|b)\n{1,4}(c|\t{1,3}d)"),  # longest cut first: "\n\n\n" then "\n"
    ("gemma", "(<unused1>|<unused12>|<unused13>)x?"),  # "<unused13" is held back, then spelled as text
    ("llama2", r"a\nb|\n a|<tool>(a|<tool>)"),  # Prepend's "▁" again on every segment, none on an empty one
    ("qwen", "x</tool_call>|<tool_call>( a|ab)"),
])
def test_pinned_languages(name, pattern):
    exact(name, pattern)


def reference_cut(text: bytes, contents: dict[bytes, int]) -> list[bytes | int]:
    """Leftmost-longest by ``re``: at the leftmost start, the alternatives longest first."""
    pattern = re.compile(b"|".join(re.escape(w) for w in sorted(contents, key=lambda w: (-len(w), w))))
    out: list[bytes | int] = []
    pos = 0
    for m in pattern.finditer(text):
        out += [text[pos:m.start()]] if m.start() > pos else []
        out.append(contents[m.group()])
        pos = m.end()
    return out + ([text[pos:]] if pos < len(text) else [])


def test_the_scan_is_leftmost_longest():
    """The transducer's output equals a reference leftmost-longest cut on every string tried."""
    contents = {b"ab": 1, b"abc": 2, b"bcd": 3, b"\n": 4, b"\n\n": 5}
    alphabet = [b + 1 for b in b"abcd\nx"]
    scan = cut.scanner(contents, alphabet)
    for text in [b"abcd", b"abcdx", b"xbcd", b"\n\n\n", b"aabcbcd", b"ab\n", b"bcdab", b"abcab", b""]:
        a = compile_regex("".join(escape(chr(b)) for b in text)).fst
        got = strings_of(a.copy().arcsort("olabel"), scan)
        want = [[s + 1 for s in p] if isinstance(p, bytes) else [cut.CUT_BASE + p]
                for p in reference_cut(text, contents)]
        assert got == [label for part in want for label in part], text


def strings_of(a: pynini.Fst, scan: pynini.Fst) -> list[int]:
    """The one output of the scan on the one string of ``a``."""
    out = pynini.compose(a, scan, connect=True).project("output").rmepsilon()
    out = pynini.determinize(out).minimize().topsort()
    labels = [arc.ilabel for s in out.states() for arc in out.arcs(s)]
    assert out.num_states() == len(labels) + 1, "one output per text"
    return labels


def test_agnostic_promotion_spells_added_tokens_by_their_content():
    """Agnostic: a non-special added token is one of the sequences that spell its content, in the
    vocabulary (Gemma-style ``<unused1>``) or outside it (``<tool>``); the BPE model makes only the
    former (``model_items``)."""
    for name, content in [("gemma", "<unused1>"), ("llama2", "<tool>")]:
        _, hf, model = tokenizer(name)
        tid = hf.token_to_id(content)
        got = paths(pipeline.build(model, escape(content)).fst)
        assert (tid,) in got and len(got) > 1, name
    _, hf, model = tokenizer("llama2")
    assert hf.token_to_id("<tool>") not in dict(model.model_items())
    assert hf.token_to_id("\n") in dict(model.model_items())  # in the vocabulary: the model makes it too


@pytest.mark.parametrize("name, content, method", [("llama2", "ÿ", "implicit"), ("qwen", "€", "implicit"),
                                                   ("qwen", "€", "gadgets")])
def test_the_model_level_never_makes_an_added_token_outside_the_vocabulary(name, content, method):
    """An added token outside the vocabulary ("ÿ" with byte fallback, "€" byte-level): HF's BPE model
    spells its text with other tokens, and so does the model-level automaton."""
    _, hf, model = tokenizer(name)
    pattern = f"a{content}|{content}|b{content}a"
    got = paths(pipeline.build(model, pattern, canonical=True, level="model", method=method).fst)
    if model.style == "byte-level":
        alphabet = {b: c for c, b in unicode_to_bytes().items()}
        text = lambda s: "".join(alphabet[b] for b in s)  # noqa: E731
    else:
        text = lambda s: s.decode("utf-8")  # noqa: E731
    want = {tuple(t.id for t in hf.model.tokenize(text(s))) for s in strings(compile_regex(pattern).fst)}
    assert got == want and hf.token_to_id(content) not in {t for p in got for t in p}


@pytest.mark.parametrize("name", ["metaspace-first", "metaspace-always"])
def test_metaspace_prepends_as_hf_after_a_cut(name):
    """prepend_scheme first prepends "▁" on the text's first segment only, always on every one."""
    _, hf = pl.trained(name)
    hf = Tokenizer.from_str(hf.to_str())
    hf.add_tokens([AddedToken("\n", normalized=False, special=False), AddedToken("<t>", normalized=False)])
    model = from_json(json.loads(hf.to_str()), name)
    for pattern in [r"a\nb", r"\n a|a<t>b c", r"(ab|\n)(<t>| b)?"]:
        want = {tuple(hf.encode(s.decode("utf-8"), add_special_tokens=False).ids)
                for s in strings(compile_regex(pattern).fst)}
        assert paths(pipeline.build(model, pattern, canonical=True).fst) == want, pattern


def test_many_contents_in_free_text_are_a_limit_before_the_scan_is_built():
    _, _, model = tokenizer("gemma")
    with pytest.raises(LimitError, match="non-special added tokens"):
        pipeline.build(model, "[^x]{0,2}", canonical=True, limits=pipeline.Limits(max_states=50))


def test_cli_promotes_a_newline_regex_and_refuses_at_the_limit(tmp_path):
    path = tokenizer("gemma")[0]
    out = tmp_path / "nl.fst"
    done = run("promote", str(path), "-e", r"a\n\nb", "--canonical", str(out), "--json")
    assert done.returncode == 0 and out.stat().st_size > 0, done.stderr
    assert json.loads(done.stdout)["cut"] == ["\n\n"]  # the cut, named
    refused = run("promote", str(path), "-e", "[^x]{0,2}", "--canonical", "--max-states", "50", str(tmp_path / "x"))
    assert refused.returncode == 3 and "non-special added tokens" in refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1 and not (tmp_path / "x").exists()


@pytest.mark.parametrize("name", list(ADDED))
@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_the_encoder_cuts_as_hf_does(name, data):
    """``tokfst encode``'s encoder on texts made of the pieces and the added contents equals HF."""
    _, hf, model = tokenizer(name)
    text = "".join(data.draw(st.lists(st.sampled_from(PIECES[name] + ADDED[name]), max_size=8)))
    assert Encoder(model).encode(text) == hf.encode(text, add_special_tokens=False).ids, repr(text)


def test_normalized_added_tokens_without_a_normalizer_are_one_pass_of_their_own():
    """HF matches ``normalized: true`` contents after the raw ones, on each normalized piece: with no
    normalizer that is one pass (modelled) unless a raw content can overlap one of them (refused)."""
    path, hf = pl.trained("gpt2")
    hf = Tokenizer.from_str(hf.to_str())
    hf.add_tokens([AddedToken("<x>", normalized=True, special=False), AddedToken("<xy>", normalized=True)])
    model = from_json(json.loads(hf.to_str()), "gpt2-normalized")
    for pattern in ["a<x>|<xy>b|<x>y", "( <x>){1,2}"]:
        want = {tuple(hf.encode(s.decode("utf-8"), add_special_tokens=False).ids)
                for s in strings(compile_regex(pattern).fst)}
        assert paths(pipeline.build(model, pattern, canonical=True).fst) == want, pattern
    hf.add_tokens([AddedToken("<z>", normalized=False, special=False)])  # no overlap with <x>, <xy>: one pass
    model = from_json(json.loads(hf.to_str()), "gpt2-both")
    for pattern in ["a<x>|<xy><z>", "<z><x>y"]:
        want = {tuple(hf.encode(s.decode("utf-8"), add_special_tokens=False).ids)
                for s in strings(compile_regex(pattern).fst)}
        assert paths(pipeline.build(model, pattern, canonical=True).fst) == want, pattern
    hf.add_tokens([AddedToken("x>y", normalized=False, special=False)])  # HF: "<x>y" is ['<', 'x>y']
    model = from_json(json.loads(hf.to_str()), "gpt2-overlap")
    with pytest.raises(InputError, match="'<x>'"):
        pipeline.build(model, "a<x>", canonical=True)
    with pytest.raises(InputError, match="'<x>'"):
        Encoder(model)
    assert paths(pipeline.build(model, "a<z>", canonical=True).fst)


def test_options_that_do_not_model_cuts_are_refused_by_name():
    _, _, model = tokenizer("gemma")
    with pytest.raises(InputError, match="method precomputed cannot be combined with the added token"):
        pipeline.build(model, r"a\nb", canonical=True, method="precomputed")
    assert paths(pipeline.build(model, "ab", canonical=True, method="precomputed").fst)  # no cut: as before


def test_the_agnostic_automaton_over_pre_tokenized_text_reads_cuts():
    """``tokfst inspect``'s A -> P -> S (no C) holds each cut as the added token's id, and the
    canonical automaton is inside it."""
    from tokfst_cli.analysis.inspection import agnostic_preprocessed

    _, hf, model = tokenizer("gemma")
    pattern = r"a\n\nb|<unused1>x"
    got = paths(agnostic_preprocessed(model, pipeline.accept(pattern)))
    want = {tuple(hf.encode(s.decode("utf-8"), add_special_tokens=False).ids)
            for s in strings(compile_regex(pattern).fst)}
    assert want <= got and all(hf.token_to_id("\n\n") in p or hf.token_to_id("<unused1>") in p for p in got)
