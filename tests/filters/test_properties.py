"""Property tests of the token filters on cyclic languages: paths sampled uniformly
(``tokfst_cli.analysis.sample``) from the filtered automaton satisfy the filter's definition and are paths
of the unfiltered one; paths sampled from the unfiltered automaton are accepted by the filtered
one exactly when they satisfy it. Agnostic (model level) and canonical (pipeline level)."""

from __future__ import annotations

from functools import cache

from hypothesis import given, settings
from hypothesis import strategies as st

from tokfst_cli import pipeline
from tokfst_cli.analysis.sample import sample
from tokfst_cli.constraint import FstDecoder
from tokfst_cli.errors import EmptyLanguageError
from tokfst_cli.filters.compose import Filters

from ..conftest import TOKENIZER
from ..helpers import accepts, finals, transitions
from .test_tokens import FILTERS

PATTERNS = ["[a-zé中 ]{1,3}", "( ?[a-dé]+)+", "[0-9. 켤]+"]  # canonical ones materialized, a few hundred states


@cache
def built(name: str, pattern: str, canonical: bool, fname: str | None):
    """(automaton, its transitions, finals and decoder), or None if the filter leaves nothing."""
    filters = FILTERS[fname][0] if fname else Filters()
    try:
        fst = pipeline.build(TOKENIZER(name), pattern, canonical=canonical, filters=filters).fst
    except EmptyLanguageError:
        return None
    return fst, transitions(fst), finals(fst), FstDecoder(fst, TOKENIZER(name).vocab_size)


def draws(entry, n: int, seed: int) -> list[tuple[int, ...]]:
    """n label sequences of at most 12 tokens, uniformly."""
    return [tuple(t + 1 for t in ids) for ids in sample(entry[3], n, 12, seed)]


def takes(entry, path: tuple[int, ...]) -> bool:
    return entry is not None and accepts(entry[0], list(path), entry[1], entry[2])


@given(st.sampled_from(["gpt2", "llama2"]), st.sampled_from(PATTERNS), st.booleans(),
       st.sampled_from(sorted(FILTERS)), st.integers(0, 2**32 - 1))
@settings(max_examples=25, deadline=None)
def test_sampled_paths_satisfy_the_definition(name, pattern, canonical, fname, seed):
    model, passes = TOKENIZER(name), FILTERS[fname][1]
    plain, filtered = built(name, pattern, canonical, None), built(name, pattern, canonical, fname)
    if filtered is not None:
        for path in draws(filtered, 10, seed):
            assert passes(model, path) and takes(plain, path), path
    for path in draws(plain, 20, seed):
        assert takes(filtered, path) == passes(model, path), path
