"""Constraint engines behind one per-step interface, for ``tokfst bench masks`` (the structured-generation
practical; Koo et al. 2024 Sec. 2.4).

An :class:`Engine` is set up once per tokenizer (the peers' tokenizer objects are built then);
``compile(pattern)`` makes the ready constraint once per regex, and ``session(compiled)`` a
fresh matcher for one decoding walk, with no state, mask or class cache left from an earlier
walk. A :class:`Session` has the three calls a decoding loop makes:

    fill()         the allowed tokens as packed int32 words (bit t % 32 of word t // 32:
                   ``matcher.pack``'s layout, the one xgrammar and llguidance fill)
    accept(token)  advance; False if the engine refuses the token
    accepting()    may the sequence end here?

tokfst's engines: the agnostic index (``constraint.IndexDecoder`` of ``pipeline.build``'s
index), the lazy agnostic decoder (``lazy.LazyDecoder``, made afresh for every walk: each
mask is a walk of the trie), the canonical automaton materialized as an index (where it fits
``pipeline.Limits()``), and the factorized canonical decoder
(``pipeline.build(..., canonical=True, limits=Limits(max_arcs=1))``), reloaded from its
artifact bytes for every walk. The peers (``pip install 'tokfst[bench]'``): outlines-core
(``Index`` + ``Guide.write_mask_into``), llguidance (``LLTokenizer`` from the tokenizer.json,
``LLMatcher`` on ``grammar_from_regex``, ``llguidance.numpy.fill_next_token_bitmask``) and
xgrammar (``TokenizerInfo.from_huggingface``, ``GrammarCompiler.compile_regex``,
``GrammarMatcher.fill_next_token_bitmask``). A peer that is not installed has ``missing``
set and is never called.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any, Callable

import numpy as np

from tokfst_cli.automata.bitsets import words_for
from tokfst_cli.bench.common import timed
from tokfst_cli.bench.peers import outlines_vocabulary
from tokfst_cli.bpe import factorized
from tokfst_cli.constraint import IndexDecoder
from tokfst_cli.decoding.matcher import pack
from tokfst_cli.errors import DisallowedTokenError
from tokfst_cli.pipeline import Limits, build
from tokfst_cli.promotion.lazy import LazyDecoder
from tokfst_cli.text.regex import compile_regex
from tokfst_cli.tokenizer.model import TokenizerModel

MISSING = "not installed (pip install 'tokfst[bench]')"
INDEX, MATERIALIZED, FACTORIZED = "tokfst index", "tokfst canonical materialized", "tokfst canonical factorized"
LAZY = "tokfst lazy"
TOKFST, CANONICAL = (INDEX, LAZY, MATERIALIZED, FACTORIZED), (MATERIALIZED, FACTORIZED)
OUTLINES, LLGUIDANCE, XGRAMMAR = "outlines-core", "llguidance", "xgrammar"
PEERS = (OUTLINES, LLGUIDANCE, XGRAMMAR)
THREADS = 2  # xgrammar's compiler threads (the bench machine has 2 cores)


class Session:
    """One decoding walk: ``fill``, ``accept``, ``accepting`` (see the module docstring)."""

    def __init__(self, fill: Callable[[], np.ndarray], accept: Callable[[int], bool], accepting: Callable[[], bool]):
        self.fill, self.accept, self.accepting = fill, accept, accepting


class Engine:
    """One engine on one tokenizer; ``missing`` (a reason) when it cannot run at all."""

    name = ""
    canonical = False
    missing: str | None = None
    eos: tuple[int, ...] = ()  # the ids the engine offers to end the sequence (left out of comparisons)

    def modules(self, *names: str) -> list | None:
        """A peer's modules, or None (and ``missing`` set) when one is not installed."""
        mods = [_module(n) for n in names]
        if any(m is None for m in mods):
            self.missing = MISSING
            return None
        return mods

    def compile(self, pattern: str) -> Any:
        raise NotImplementedError

    def session(self, compiled: Any) -> Session:
        raise NotImplementedError


# ---- tokfst -------------------------------------------------------------------------------------
def filler(decoder) -> Callable[[Any], np.ndarray]:
    """state -> the decoder's packed mask: its own ``bitmask`` if it has one, else ``pack(mask(state))``
    (resolved once, as a decoding loop would)."""
    own = getattr(decoder, "bitmask", None)
    return own if own is not None else (lambda state: pack(decoder.mask(state)))


def bitmask(decoder, state) -> np.ndarray:
    """The decoder's packed mask at ``state`` (:func:`filler`)."""
    return filler(decoder)(state)


def decoder_session(decoder, words: int | None = None) -> Session:
    """A Session walking a ``constraint.Decoder`` from its initial state; ``words`` given, its
    masks are written into one buffer of that many int32 words (``bitmask(state, out=)``, the
    factorized decoders), allocated with the session as the peers' buffers are."""
    state = [decoder.initial()]
    if words is not None:
        buf = np.full(words, 0, np.int32)  # written now: its pages are mapped before the walk
        fill = lambda: decoder.bitmask(state[0], out=buf)  # noqa: E731
    else:
        own = filler(decoder)
        fill = lambda: own(state[0])  # noqa: E731

    def accept(token: int) -> bool:
        try:
            state[0] = decoder.advance(state[0], token)
        except DisallowedTokenError:
            return False
        return True

    return Session(fill, accept, lambda: decoder.is_final(state[0]))


class TokfstIndex(Engine):
    """A materialized automaton's coalesced index (agnostic, or canonical when ``canonical``)."""

    def __init__(self, model: TokenizerModel, lexicon, canonical: bool = False):
        self.model, self.lexicon, self.canonical = model, lexicon, canonical
        self.name = MATERIALIZED if canonical else INDEX

    def compile(self, pattern: str) -> dict:
        if self.canonical:
            return build(self.model, pattern, canonical=True, factorized_ok=False).index()
        return build(self.model, pattern, lexicon=self.lexicon).index()

    def session(self, compiled: dict) -> Session:
        return decoder_session(IndexDecoder(compiled))


class TokfstLazy(Engine):
    """The agnostic constraint expanded per state on first use; a new decoder (no state expanded,
    no class trie) for every walk, from the regex's byte DFA compiled once."""

    name = LAZY

    def __init__(self, model: TokenizerModel):
        self.model = model

    def compile(self, pattern: str):

        a = compile_regex(pattern)
        LazyDecoder(self.model, a)  # refusals now (a tokenizer that lacks bytes), and T's layout made once
        return a

    def session(self, compiled) -> Session:
        return decoder_session(LazyDecoder(self.model, compiled))


class TokfstFactorized(Engine):
    """The factorized canonical decoder, rebuilt from its artifact bytes for every walk."""

    name, canonical = FACTORIZED, True

    def __init__(self, model: TokenizerModel):
        self.model = model

    def compile(self, pattern: str) -> bytes:
        return build(self.model, pattern, canonical=True, limits=Limits(max_arcs=1)).to_bytes()

    def session(self, compiled: bytes) -> Session:
        return decoder_session(factorized.from_bytes(compiled, self.model), words_for(self.model.vocab_size))


# ---- peers --------------------------------------------------------------------------------------
def _module(name: str):
    try:
        return importlib.import_module(name)
    except ImportError:
        return None


def eos_of(model: TokenizerModel) -> int | None:
    """The end-of-sequence id the peers are given: the lowest special token id (as ``bench peers``)."""
    return min(model.special_ids) if model.special_ids else None


def _words(size: int) -> np.ndarray:
    return np.full(words_for(size), 0, np.int32)  # written now: its pages are mapped before the walk


class Outlines(Engine):
    name = OUTLINES

    def __init__(self, model: TokenizerModel, path: str):
        mods = self.modules("outlines_core")
        if mods is None:
            return
        self.oc = mods[0]
        self.vocabulary, eos = outlines_vocabulary(self.oc, model)
        self.size, self.eos = max(model.vocab_size, eos + 1), (eos,)

    def compile(self, pattern: str):
        return self.oc.Index(pattern, self.vocabulary)

    def session(self, index) -> Session:
        guide, buf = self.oc.Guide(index), _words(self.size)

        def fill() -> np.ndarray:
            guide.write_mask_into(buf.ctypes.data, buf.size, 4)
            return buf

        def accept(token: int) -> bool:
            try:
                guide.advance(token, return_tokens=False)
            except ValueError:
                return False
            return True

        return Session(fill, accept, guide.is_finished)


class LLGuidance(Engine):
    name = LLGUIDANCE

    def __init__(self, model: TokenizerModel, path: str):
        mods = self.modules("llguidance", "llguidance.numpy")
        if mods is None:
            return
        self.llg, self.fill_into = mods[0], mods[1].fill_next_token_bitmask
        self.tokenizer = self.llg.LLTokenizer(Path(path).read_text(encoding="utf-8"), eos_token=eos_of(model))
        self.eos = tuple(self.tokenizer.eos_tokens)  # its own choice when the tokenizer has no special token

    def compile(self, pattern: str) -> str:
        grammar = self.llg.LLMatcher.grammar_from_regex(pattern)
        failed, messages = self.llg.LLMatcher.validate_grammar_with_warnings(grammar, self.tokenizer)
        if failed:
            raise ValueError(messages[0])
        return grammar

    def session(self, grammar: str) -> Session:
        m = self.llg.LLMatcher(self.tokenizer, grammar)
        buf = _words(self.tokenizer.vocab_size).reshape(1, -1)

        def fill() -> np.ndarray:
            self.fill_into(m, buf, 0)
            return buf[0]

        return Session(fill, lambda t: bool(m.consume_token(t)), m.is_accepting)


class XGrammar(Engine):
    name = XGRAMMAR

    def __init__(self, model: TokenizerModel, path: str):
        mods = self.modules("xgrammar", "transformers")
        if mods is None:
            return
        self.xgr, eos = mods[0], eos_of(model)
        hf = mods[1].PreTrainedTokenizerFast(tokenizer_file=str(path))
        self.info = self.xgr.TokenizerInfo.from_huggingface(hf, vocab_size=model.vocab_size,
                                                            stop_token_ids=None if eos is None else [eos])
        self.compiler = self.xgr.GrammarCompiler(self.info, max_threads=THREADS)
        self.eos = tuple(self.info.stop_token_ids)

    def compile(self, pattern: str):
        return self.compiler.compile_regex(pattern)

    def session(self, compiled) -> Session:
        m = self.xgr.GrammarMatcher(compiled)
        tensor = self.xgr.allocate_token_bitmask(1, self.info.vocab_size)
        view = tensor[0].numpy()  # shares the tensor's memory

        def fill() -> np.ndarray:
            m.fill_next_token_bitmask(tensor)
            return view

        return Session(fill, lambda t: bool(m.accept_token(t)), m.is_completed)


def engines(model: TokenizerModel, path: str, lexicon, on_setup: Callable[[str, float], None]) -> list[Engine]:
    """tokfst's four engines and the three peers for one tokenizer; ``on_setup(name, seconds)``
    reports each peer's tokenizer set-up time (done once, outside the per-step timing)."""
    out: list[Engine] = [TokfstIndex(model, lexicon), TokfstLazy(model), TokfstIndex(model, lexicon, canonical=True),
                         TokfstFactorized(model)]
    for cls in (Outlines, LLGuidance, XGrammar):
        seconds, engine = timed(lambda: cls(model, path))
        if engine.missing is None:
            on_setup(engine.name, seconds)
        out.append(engine)
    return out
