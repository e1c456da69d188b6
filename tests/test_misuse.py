"""Malformed calls raise one exception type per misuse, the same in every decoder kind (docs/decoding.md).

* a token that is not an integer (``advance(s, 4.0)``, a bool, a string, None):
  ``TokenTypeError``, a TypeError; numpy integers are integers;
* an id outside the vocabulary (``-1``, ``vocab_size``, ``2**70``): ``TokenRangeError``, a
  DisallowedTokenError (so a ValueError; a Matcher's ``accept_token`` answers False);
* a state that is not one of the decoder's (another kind's, None) to ``advance``, ``mask``,
  ``bitmask`` or ``is_final``: ``ForeignStateError``, a UsageError (so a ValueError).

Every kind: the ``.fst`` and index decoders, the token-count filter over them, the factorized
canonical BPE decoders (pipeline and model level, and within a token budget), the canonical
MaxMatch decoder, the lazy and the pushdown decoders, and the Matcher over each.
"""

from __future__ import annotations

import numpy as np
import pytest

import tokfst_cli as tokfst
from tokfst_cli import pipeline
from tokfst_cli.constraint import IndexDecoder
from tokfst_cli.decoding.matcher import Matcher
from tokfst_cli.errors import (
    DisallowedTokenError,
    ForeignStateError,
    TokenRangeError,
    TokenTypeError,
    TokfstError,
    UsageError,
)
from tokfst_cli.filters.compose import Filters

PATTERN = "[0-9]{2}(-[0-9]{2})?"
FACTORIZED = pipeline.Limits(max_arcs=1)
KINDS = ["fst", "index", "counted", "bpe-pipeline", "bpe-model", "bpe-counted", "maxmatch", "lazy", "stack"]


@pytest.fixture(scope="module")
def decoders(tokenizer):
    gpt2, bert = tokenizer("gpt2"), tokenizer("bert")
    agnostic = pipeline.build(gpt2, PATTERN)
    got = {
        "fst": agnostic.decoder(),
        "index": IndexDecoder(agnostic.index()),
        "counted": pipeline.build(gpt2, PATTERN, filters=Filters(max_tokens=3)).decoder(),
        "bpe-pipeline": pipeline.build(gpt2, PATTERN, canonical=True, limits=FACTORIZED).decoder(),
        "bpe-model": pipeline.build(gpt2, PATTERN, canonical=True, level="model", limits=FACTORIZED).decoder(),
        "bpe-counted": pipeline.build(gpt2, PATTERN, canonical=True, filters=Filters(max_tokens=3),
                                      limits=FACTORIZED).decoder(),
        "maxmatch": pipeline.build(bert, "[a-z]{1,3}", canonical=True, limits=FACTORIZED).decoder(),
        "lazy": tokfst.lazy(gpt2, PATTERN),
        "stack": tokfst.lazy(gpt2, grammar='root ::= "(" root ")" | "x"'),
    }
    assert [type(d).__name__ for d in got.values()] == [
        "FstDecoder", "IndexDecoder", "CountedDecoder", "MarkedFactorized", "Factorized", "CountedFactorized",
        "Canonical", "LazyDecoder", "PushdownDecoder"]
    return got


def allowed(decoder) -> int:
    return int(np.flatnonzero(decoder.mask(decoder.initial()))[0])


def vocab(decoder) -> int:
    return len(decoder.mask(decoder.initial()))


def foreign_states(decoders, kind: str) -> list:
    """States no decoder of ``kind`` has: None, and another kind's state of another shape."""
    own = decoders[kind].initial()
    others = [decoders[k].initial() for k in ("fst", "stack", "bpe-model")]
    return [None, *(s for s in others if type(s) is not type(own))]


def one_line(e: BaseException) -> None:
    assert isinstance(e, TokfstError) and "\n" not in str(e) and e.fix


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("token", [4.0, True, "1", None, np.float32(1)])
def test_a_token_that_is_not_an_integer(decoders, kind, token):
    d = decoders[kind]
    with pytest.raises(TokenTypeError) as e:
        d.advance(d.initial(), token)
    assert isinstance(e.value, TypeError) and e.value.token is token
    one_line(e.value)
    with pytest.raises(TokenTypeError):
        Matcher(d).consume(token)
    with pytest.raises(TokenTypeError):
        Matcher(d).accept_token(token)


@pytest.mark.parametrize("kind", KINDS)
def test_numpy_integers_are_tokens(decoders, kind):
    d = decoders[kind]
    t = allowed(d)
    want = d.advance(d.initial(), t)
    for as_numpy in (np.int64, np.int32, np.uint16):
        assert d.advance(d.initial(), as_numpy(t)) == want
    m = Matcher(d)
    m.consume(np.int64(t))
    assert m.tokens == [t] and m.state == want


@pytest.mark.parametrize("kind", KINDS)
def test_an_id_outside_the_vocabulary(decoders, kind):
    d = decoders[kind]
    size = vocab(d)
    for token in (-1, size, size + 1000, 2 ** 70, np.int64(-5)):
        with pytest.raises(TokenRangeError) as e:
            d.advance(d.initial(), token)
        assert isinstance(e.value, DisallowedTokenError) and isinstance(e.value, ValueError)
        assert e.value.token == token and f"(ids 0 to {size - 1})" in str(e.value)
        one_line(e.value)
    m = Matcher(d)
    with pytest.raises(TokenRangeError):
        m.consume(size)
    assert not m.accept_token(size) and m.tokens == []


@pytest.mark.parametrize("kind", KINDS)
def test_a_state_of_another_decoder(decoders, kind):
    d = decoders[kind]
    t = allowed(d)
    for state in foreign_states(decoders, kind):
        for call in (lambda: d.advance(state, t), lambda: d.mask(state), lambda: d.bitmask(state),
                     lambda: d.is_final(state)):
            with pytest.raises(ForeignStateError) as e:
                call()
            assert isinstance(e.value, UsageError) and isinstance(e.value, ValueError) and e.value.state is state
            assert f"is not a state of this {type(d).__name__}" in str(e.value)
            one_line(e.value)
    assert not d.is_state(None) and d.is_state(d.initial()) and d.is_state(d.advance(d.initial(), t))


@pytest.mark.parametrize("kind", ["fst", "index", "counted", "lazy"])
def test_an_int_past_the_last_state(decoders, kind):
    d = decoders[kind]
    for state in (10 ** 9, 2 ** 70):
        for call in (lambda: d.advance(state, allowed(d)), lambda: d.mask(state), lambda: d.is_final(state)):
            with pytest.raises(ForeignStateError):
                call()


@pytest.mark.parametrize("kind", KINDS)
def test_a_disallowed_token_is_still_a_plain_disallowed_token(decoders, kind):
    d = decoders[kind]
    s = d.initial()
    banned = int(np.flatnonzero(~d.mask(s))[0])
    with pytest.raises(DisallowedTokenError) as e:
        d.advance(s, banned)
    assert type(e.value) is DisallowedTokenError and e.value.token == banned
