"""The Pitfalls 2025 pipeline, regex to constraint: A -> P -> S -> C (Pitfalls 2025 Sec. 3, Fig. 1).

::

    pattern --A--> byte DFA --P--> text automaton --S--> token automaton --C--> canonical
             regex.py       preprocess (identity         promote.py:           bpe/product.py,
             Cognetta & Okazaki 2024 §5    for BPE and agnostic        MIN(PROJ(A o T))       bpe/explicit.py,
                            promotion; WordPiece:       Cognetta & Okazaki 2024 Eq. 3,        bpe/gadgets.py,
                            maxmatch/wordtext X)        Lemma 1                maxmatch/product.py,
                            Pitfalls 2025 §3.1                                      maxmatch/composition.py
                                                                               Cognetta & Okazaki 2024 §6,
                                                                               Pitfalls 2025 §3.3

A   :func:`accept`: the regex's minimal deterministic byte acceptor.
P   :func:`preprocess`: what the model sees of the text. BPE, canonical (pipeline level):
    Y = DET(PROJ_out(A o P)) with P the tokenizer.json's normalizer and pre-tokenizer
    (``pretok``), pre-tokens separated by ``symbols.MARKER``; a regex that can contain an
    added token's text is refused (``pretok.added``). WordPiece, canonical: HF's
    BertNormalizer + BertPreTokenizer, words separated by ``symbols.MARKER``, [UNK] words
    marked (``maxmatch.wordtext``); added tokens as for BPE. Agnostic promotion and the model level read surfaces,
    so P is the identity there.
S   :func:`promote`: the tokenization-agnostic token acceptor MIN(PROJ(A o T)); over Y,
    S_M = MIN(PROJ(Y o T_M)) with the boundary kept as a label (``lexicon.marker_label``).
C   :func:`canonicalize_bpe`, :func:`canonicalize_maxmatch`: only the sequences HF's tokenizer
    produces. BPE: the product with the implicit A_BPE (``implicit``), Eq. 5 with the explicit
    A_BPE (``precomputed``) or Eq. 4's gadget cascade (``gadgets``, model level only); at the
    pipeline level A_BPE restarts at every boundary (``bpe.pretokenized``). WordPiece: the
    greedy product (``product``) or MIN(PROJ(X o T_Aho)) (``aho``). Materialized while under
    ``max_arcs``, else factorized.

:func:`build` runs them all and returns a :class:`Result`; every command and the Python API
go through it. ``Result.decoder()`` gives the per-step object of :mod:`tokfst_cli.constraint`.
"""

from __future__ import annotations

import functools
import time
from dataclasses import dataclass, field, replace
from typing import Any, Callable

import numpy as np
import pynini

from tokfst_cli.errors import EmptyLanguageError, InputError, LimitError, UsageError
from tokfst_cli.filters.compose import NONE as NO_FILTERS
from tokfst_cli.filters.compose import Filters
from tokfst_cli.promotion.promote import promote as promote_agnostic
from tokfst_cli.support.progress import stage
from tokfst_cli.text.regex import ByteAutomaton, compile_regex
from tokfst_cli.tokenizer.model import TokenizerModel
from tokfst_cli.tokenizer.model import load as load_tokenizer

METHODS = {"bpe": ("implicit", "precomputed", "gadgets"), "wordpiece": ("product", "aho")}
PROBE_ARCS = 1 << 19  # max_tokens over a cyclic S: C(S) is tried up to this many arcs (_canonical_counted)
LEVELS = ("pipeline", "model")  # canonical for encode (whole pipeline) or for the BPE model on one pre-token


@dataclass(frozen=True)
class Limits:
    """Size limits checked during construction (``LimitError`` names the one reached)."""

    max_states: int = 1_000_000
    max_arcs: int = 2_000_000


@dataclass
class Result:
    """A constraint: the materialized minimal acceptor, or the factorized form (too big).

    With ``max_tokens`` on a materialized result, ``counted`` (``filters.length.Counted``) holds
    S and N: the decoder and the index walk S and count tokens, and ``fst`` (S ∩ F_N, minimal)
    is made on first use."""

    model: TokenizerModel
    pattern: str
    _fst: pynini.Fst | None = field(default=None, repr=False)
    lazy: Any = None  # the factorized decoder (bpe.product.Factorized, maxmatch.product.Canonical)
    serialize: Callable[[], bytes] | None = None
    overflow: LimitError | None = None  # why the factorized form was chosen
    seconds: float = field(default=0.0)
    limits: Limits = field(default_factory=Limits)
    canonical: bool = False
    healing: Any = None  # with a prompt: healing.Healing (the kept prefix, the re-tokenized tail)
    terminals: list = field(default_factory=list)  # terminals.Terminal j: token label vocab_size + 1 + j
    counted: Any = None  # filters.length.Counted: max_tokens kept as S and N (the product made on first use)
    arrays: Any = field(default=None, repr=False)  # artifacts.FstArrays of the acceptor decoder() reads, if read
    excluded: list[str] = field(default_factory=list)  # special tokens whose texts were left out (special_text)
    cut: list[str] = field(default_factory=list)  # non-special added tokens cut out of the text (pretok.cut)

    @property
    def fst(self) -> pynini.Fst | None:
        """The materialized acceptor (with ``counted``, S ∩ F_N made now: LimitError past max_states)."""
        if self._fst is None and self.counted is not None:
            self._fst = self.counted.materialize(self.limits.max_states)
        return self._fst

    @fst.setter
    def fst(self, value: pynini.Fst | None) -> None:
        self._fst, self.counted, self.arrays = value, None, None

    @property
    def materialized(self) -> bool:
        return self._fst is not None or self.counted is not None

    def to_bytes(self) -> bytes:
        """The factorized artifact (``tokfst-factorized`` / ``tokfst-factorized-maxmatch``)."""
        if self.serialize is None:
            raise UsageError("a materialized result has no factorized artifact; write its fst or index")
        return self.serialize()

    def index(self) -> dict:
        """The coalesced JSON index of the materialized acceptor (the structured-generation practical)."""
        from tokfst_cli.decoding.index import build_index  # deferred: start-up: only this path needs it

        fst = self.counted.fst if self.counted is not None else self.fst
        return build_index(fst, self.model, self.pattern, self.limits.max_states,
                           self.limits.max_arcs if self.canonical else None,
                           self.healing.to_json() if self.healing is not None else None, self.terminals,
                           max_tokens=self.counted.limit if self.counted is not None else None, arrays=self.arrays)

    def summary(self) -> dict:
        """What was built, as one JSON-ready object (``promote --json``): the form, states, arcs,
        distinct tokens on the arcs, terminal labels, seconds, the tokenizer's fingerprint; the
        factorized form gives its text automaton's states and why it was chosen."""
        got = {"form": "materialized" if self.materialized else "factorized", "pattern": self.pattern,
               "fingerprint": self.model.fingerprint, "canonical": self.canonical, "seconds": round(self.seconds, 6)}
        if self.materialized:
            from tokfst_cli.automata.arrays import fst_arrays  # deferred: start-up: only this path needs it

            fst = self._fst if self._fst is not None else self.counted.fst  # max_tokens: S, or its product if made
            a = self.arrays if self.arrays is not None and self.counted is None else fst_arrays(fst)
            labels = np.unique(a.ilabel)
            got.update(states=len(a.final), arcs=len(a.ilabel),
                       tokens=int(np.count_nonzero((labels > 0) & (labels <= self.model.vocab_size))),
                       terminals=len(self.terminals), max_tokens=self.counted.limit if self.counted else None)
        else:
            got.update(overflow=str(self.overflow) if self.overflow is not None else None)
        got.update(excluded=list(self.excluded), cut=list(self.cut),
                   healing=self.healing.to_json() if self.healing is not None else None)
        return got

    def decoder(self):
        """The per-step decoder (``initial``, ``mask``, ``advance``, ``is_final``)."""
        from tokfst_cli.constraint import FstDecoder  # deferred: start-up: only this path needs it

        if not self.materialized:
            live = getattr(self.lazy, "live", None)  # factorized BPE: its units' live tokens made now
            if live is not None and hasattr(live, "warm") and not live.warmed:
                live.warm()
            return self.lazy
        if self.counted is not None:
            decoder = self.counted.decoder(FstDecoder(self.counted.fst, self.model.vocab_size, arrays=self.arrays))
        else:
            decoder = FstDecoder(self.fst, self.model.vocab_size, self.model if self.terminals else None, self.arrays)
        decoder.healing = self.healing
        return decoder


# ---- the stages --------------------------------------------------------------------------------
def accept(pattern: str, limits: Limits = Limits(), model: TokenizerModel | None = None) -> ByteAutomaton:
    """A: the regex's minimal deterministic byte acceptor (Cognetta & Okazaki 2024 Sec. 5). With ``model``, the
    next stage is A o T over its lexicon, whose size bound may refuse a long repetition first."""
    from tokfst_cli.promotion.promote import chain_bound  # deferred: start-up: only this path needs it

    check = chain_bound(model, limits.max_states) if model is not None else None
    return compile_regex(pattern, max_states=limits.max_states, chain_check=check)


def preprocess(model: TokenizerModel, automaton: ByteAutomaton, canonical: bool = False,
               limits: Limits = Limits(), level: str = "pipeline", cache: bool = True) -> pynini.Fst:
    """P: the text as the model sees it (Pitfalls 2025 Sec. 3.1); see the module docstring."""
    if canonical and model.family == "wordpiece":
        from tokfst_cli.maxmatch.wordtext import text_automaton  # deferred: start-up: only this path needs it
        from tokfst_cli.pretok import added  # deferred: start-up: only this path needs it

        added.check_wordpiece(model, automaton.fst)
        return text_automaton(model, automaton.fst, limits.max_states)
    if not canonical:
        return automaton.fst
    from tokfst_cli.pretok import unknown  # deferred: start-up: only this path needs it

    if level == "pipeline":
        from tokfst_cli.pretok import added, build, cut, image  # deferred: start-up: only this path needs it

        p = image.for_model(model, cache)
        found = cut.occurring(automaton.fst, cut.cuttable(model))  # non-special added tokens HF cuts out
        added.check(model, automaton.fst, build.normalizer(model.normalizer) if added.contents(model, True) else None,
                    modelled=set(cut.cuttable(model)))  # cut where they occur
        if found:
            domain = image.domain(model)
            if domain is not None:
                image.check_domain(automaton.fst, domain)
            text = cut.language(model, automaton.fst, p, found, limits.max_states)
        else:
            text = image.language(automaton.fst, p, limits.max_states, image.domain(model))
        unknown.check(model, cut.without_cuts(text) if found else text)
        return text
    unknown.check(model, automaton.fst)
    return automaton.fst


def promote(model: TokenizerModel, automaton: ByteAutomaton, limits: Limits = Limits(),
            lexicon: pynini.Fst | None = None, cache: bool = True, marked: bool = False) -> pynini.Fst:
    """S: MIN(PROJ(A o T)), every tokenization of the language (Cognetta & Okazaki 2024 Eq. 3); ``marked``:
    S_M over pre-tokenized text with T_M (boundary label kept)."""
    return _promote(model, automaton, limits, lexicon, cache, marked).fst


def _promote(model: TokenizerModel, automaton: ByteAutomaton, limits: Limits, lexicon: pynini.Fst | None,
             cache: bool, marked: bool, terminals: bool = False):
    if marked and lexicon is None and model.added_tokens:  # cut added tokens in Y: T_M reads them (pretok.cut)
        from tokfst_cli.pretok import cut  # deferred: start-up: only this path needs it
        from tokfst_cli.promotion.lexicon import lexicon as read  # deferred: start-up: only this path needs it

        if cut.cuttable(model):
            lexicon = cut.marked_lexicon(model, read(model, cache=cache, marked=True), automaton.fst)
    return promote_agnostic(model, automaton, lexicon, max_states=limits.max_states, marked=marked,
                            terminals=terminals, cache=cache)


def check_method(model: TokenizerModel, canonical: bool, method: str | None, level: str = "pipeline") -> str | None:
    """The canonical method for ``model`` (its default when None); InputError for a mismatch."""
    if level not in LEVELS:
        raise InputError(f"level {level} is not known", f"use one of: {', '.join(LEVELS)}", hint="level", level=level)
    if canonical and method == "gadgets" and level == "pipeline" and model.family == "bpe":
        raise InputError("method gadgets builds the model-level automaton only",
                         "use the model level, or another method", hint="gadgets-level")
    if method is None:
        return METHODS[model.family][0] if canonical else None
    if not canonical:
        raise InputError(f"method {method} needs canonical promotion", "ask for canonical promotion, or no method",
                         hint="method-needs-canonical", method=method)
    if method not in METHODS[model.family]:
        allowed = ", ".join(METHODS[model.family])
        raise InputError(f"method {method} is not for {model.family} tokenizers", f"use one of: {allowed}",
                         hint="method-family", allowed=allowed, method=method, family=model.family)
    return method


def _materialized_or_factorized(result: Result, materialize: Callable[[], pynini.Fst],
                                factorize: Callable[[], tuple[Any, Callable[[], bytes]]],
                                factorized_ok: bool, exceeds: Callable[[], LimitError | None] | None = None) -> Result:
    """The materialized automaton; past a limit the factorized form, or the LimitError.

    ``exceeds`` may prove beforehand that
    ``materialize`` would pass a limit, from a lower bound on its size: then the factorized form
    is chosen without the attempt. It returns None when it cannot prove it (then build as
    always), so the choice is the same as without it."""
    try:
        overflow = exceeds() if exceeds is not None else None  # a proof: the same LimitError, sooner
        if overflow is not None:
            raise overflow
        result.fst = materialize()
    except LimitError as e:
        if not factorized_ok:
            raise
        result.overflow = e
        result.lazy, result.serialize = factorize()
    return result


def _factorized_pair(decoder, pattern: str) -> tuple[Any, Callable[[], bytes]]:
    """A factorized BPE decoder and its artifact's serializer."""
    from tokfst_cli.bpe import factorized  # deferred: start-up: only this path needs it

    return decoder, lambda: factorized.to_bytes(decoder, pattern)


def canonicalize_bpe(model: TokenizerModel, automaton: ByteAutomaton, agnostic: pynini.Fst, method: str,
                     limits: Limits, artifact: str | None, factorized_ok: bool, result: Result,
                     level: str = "model", count: int | None = None) -> Result:
    """C for BPE (Cognetta & Okazaki 2024 Sec. 6.3-6.5): gadgets (Eq. 4), precomputed (Eq. 5) or implicit.

    ``level="pipeline"``: ``agnostic`` is S_M over pre-tokenized text; A_BPE restarts at every
    boundary (``bpe.pretokenized``). ``count`` (``max_tokens`` N): a factorized form is made
    within N tokens (``bpe.counted``); a materialized one is not (the caller counts it)."""
    from tokfst_cli.bpe import counted, implicit, product  # deferred: start-up: only this path needs it

    if method == "gadgets":
        from tokfst_cli.bpe.gadgets import promote_gadgets  # deferred: start-up: only this path needs it

        result.fst = promote_gadgets(automaton, model)
        return result
    imp = implicit.load_or_compile(model, artifact)
    if level == "pipeline":
        return _canonicalize_pretokenized(model, agnostic, imp, method, limits, factorized_ok, result, count)
    if method == "precomputed":
        from tokfst_cli.bpe.explicit import explicit_automaton, intersect  # deferred: start-up: only this path needs it

        result.fst = intersect(agnostic, explicit_automaton(imp, model, max_arcs=limits.max_arcs))
        return result
    return _materialized_or_factorized(
        result, lambda: product.materialize(agnostic, imp, max_arcs=limits.max_arcs),
        lambda: _factorized_pair(counted.factorize(agnostic, imp, count), result.pattern),
        factorized_ok)


def _canonicalize_pretokenized(model: TokenizerModel, marked: pynini.Fst, imp, method: str, limits: Limits,
                               factorized_ok: bool, result: Result, count: int | None = None) -> Result:
    from tokfst_cli.automata.symbols import token_table  # deferred: start-up: only this path needs it
    from tokfst_cli.bpe import pretokenized  # deferred: start-up: only this path needs it
    from tokfst_cli.promotion.lexicon import marker_label  # deferred: start-up: only this path needs it

    marker = marker_label(model)
    if method == "precomputed":
        # deferred: start-up: only this path needs it
        from tokfst_cli.bpe.explicit import explicit_automaton, intersect_marked

        if imp.derived.get("replaced"):
            raise InputError("method precomputed cannot apply ignore_merges per pre-token",
                             "use method implicit for this tokenizer", hint="precomputed-ignore-merges")
        result.fst = intersect_marked(marked, explicit_automaton(imp, model, max_arcs=limits.max_arcs), marker)
    else:
        def materialize() -> pynini.Fst:
            try:
                return pretokenized.materialize(marked, imp, marker, max_arcs=limits.max_arcs)
            except LimitError as e:  # with cut added tokens there is no factorized form to point to
                raise (e.with_remedy("simplify") if e.remedy == "factorized" and result.cut else e) from None

        _materialized_or_factorized(
            result, materialize, lambda: _factorized_pair(pretokenized.factorize(marked, imp, count), result.pattern),
            factorized_ok)
    if result.fst is not None:
        table = token_table(model)
        result.fst.set_input_symbols(table).set_output_symbols(table)
    return result


def canonicalize_maxmatch(model: TokenizerModel, automaton: ByteAutomaton, text: pynini.Fst, method: str,
                          limits: Limits, artifact: str | None, factorized_ok: bool, result: Result) -> Result:
    """S + C for WordPiece (Cognetta & Okazaki 2024 Sec. 6.2): the greedy product, or MIN(PROJ(X o T_Aho))."""
    from tokfst_cli.maxmatch import composition, factorized, product  # deferred: start-up: only this path needs it
    from tokfst_cli.maxmatch.wordtext import longest_word  # deferred: start-up: only this path needs it

    machine = product.machine_of_text(model, text)
    if method == "aho":
        taho = composition.maxmatch_artifact(model, artifact)
        if longest_word(machine.text) is None:  # determinizing free text would exhaust memory first
            try:  # the size's lower bound first: it proves most refusals without the BFS (same decision)
                overflow = product.exceeds(machine, limits.max_states, limits.max_arcs)
                if overflow is not None:
                    raise overflow
                product.materialize(machine, limits.max_states, limits.max_arcs)
            except LimitError as e:
                raise e.with_remedy("product") from None
        result.fst = composition.maxmatch_promote(model, automaton.fst, taho, limits.max_states)
    else:
        _materialized_or_factorized(
            result, lambda: product.materialize(machine, limits.max_states, limits.max_arcs),
            lambda: (machine, lambda: factorized.to_bytes(machine, model, result.pattern)), factorized_ok,
            lambda: product.exceeds(machine, limits.max_states, limits.max_arcs))
    if result.fst is not None:
        from tokfst_cli.automata.symbols import token_table  # deferred: start-up: only this path needs it

        table = token_table(model)
        result.fst.set_input_symbols(table)
        result.fst.set_output_symbols(table)
    return result


# ---- the whole pipeline ------------------------------------------------------------------------
def check_options(model: TokenizerModel, canonical: bool, filters: Filters, prompt: str | None,
                  terminals: bool = False) -> None:
    """Refuse, before building, what the filters, the prompt and terminal labels cannot be combined with."""
    if terminals and (canonical or filters.token_level()):
        what = "canonical promotion" if canonical else "token filters"
        raise InputError(f"terminal labels are built by agnostic promotion only, not with {what}",
                         "drop terminals (wildcards are then expanded into token arcs)", hint="terminals-agnostic",
                         what=what)
    if prompt is not None and not canonical:
        raise InputError("a prompt is healed by canonical promotion only", "ask for canonical promotion",
                         hint="prompt-needs-canonical")
    if prompt is not None and filters.max_tokens is not None:
        raise InputError("max_tokens cannot be combined with a prompt (the kept prefix is known only after the build)",
                         "drop one of them", hint="prompt-max-tokens")


def _honours_cache(fn: Callable[..., Result]) -> Callable[..., Result]:
    """``cache=False`` bypasses the disk cache for everything the call builds (lexicon, filters,
    canonical artifacts), not only what takes the flag."""
    @functools.wraps(fn)
    def wrapper(*args: Any, cache: bool = True, **options: Any) -> Result:
        from tokfst_cli.support import cache as cache_mod  # deferred: start-up: only this path needs it

        with cache_mod.bypassed(not cache):
            return fn(*args, cache=cache, **options)
    return wrapper


@_honours_cache
def build(model: TokenizerModel | str | Any, pattern: str, *, canonical: bool = False, method: str | None = None,
          limits: Limits = Limits(), artifact: str | None = None, factorized_ok: bool = True,
          lexicon: pynini.Fst | None = None, cache: bool = True, level: str = "pipeline",
          filters: Filters = NO_FILTERS, prompt: str | None = None,
          automaton: ByteAutomaton | None = None, terminals: bool = False, special_text: str = "exclude") -> Result:
    """A -> P -> S -> C for ``pattern`` over ``model``'s tokens.

    ``canonical`` keeps only HF's tokenizations (stage C, ``method`` per family, default the
    first of :data:`METHODS`); ``artifact`` is a precompiled implicit A_BPE or T_Aho.
    ``factorized_ok=False`` turns a too-big canonical automaton into a ``LimitError``.
    ``level`` (BPE, canonical): "pipeline" keeps what ``encode`` produces for the text
    (normalizer, pre-tokenizer, model; stage P), "model" what the BPE model produces for the
    text as one pre-token. ``filters`` (Pitfalls 2025 Sec. 4): text-level ones restrict A, token-level
    ones S (before C). ``prompt`` (canonical only): token healing by construction (Pitfalls 2025
    Sec. 4.4): the prompt's text is prepended to A; ``Result.healing`` tells the kept prefix.
    ``automaton``: stage A's byte DFA given directly (e.g. a JSON Schema's); ``pattern`` then only
    names it. ``terminals`` (agnostic): wildcard loops as terminal labels (Koo et al. 2024 Sec. 2.5.1,
    ``terminals.py``); ``Result.terminals`` lists them. ``special_text`` (canonical, at the pipeline
    level): "exclude" (default) leaves out of the language the texts that contain a special added
    token's content (``<|endoftext|>``, ``<s>``: HF's encode cuts them out as control tokens, which a
    decoder must not spell; ``Result.excluded`` names them), "refuse" refuses such a language.
    """
    model = load_tokenizer(model)  # a path, a name, a tokenizers/transformers object: one loader
    method = check_method(model, canonical, method, level)
    check_options(model, canonical, filters, prompt, terminals)
    maxmatch = canonical and model.family == "wordpiece"  # needs no lexicon transducer T
    marked = canonical and model.family == "bpe" and level == "pipeline"
    lex = lexicon if not maxmatch and not marked else None  # None: T is read from the cache if promotion needs it
    start = time.perf_counter()
    result = Result(model, pattern, limits=limits, canonical=canonical)
    with stage("A: the regex's byte automaton"):
        a = automaton if automaton is not None else accept(pattern, limits, None if maxmatch or marked else model)
        if canonical or filters.text_level() or filters.token_level():
            _refuse_token_groups(a, "canonical promotion" if canonical else "filters")
        a = _text_filters(model, a, filters, prompt)
        if canonical and special_text == "exclude" and (maxmatch or level == "pipeline"):
            a, result.excluded = _without_specials(model, a)
        elif special_text not in SPECIAL_TEXT:
            raise InputError(f"special_text {special_text!r} is not known", "give exclude or refuse")
    with stage("P: preprocessing"):
        text = preprocess(model, a, canonical, limits, level, cache)
        if marked:
            factorized_ok, result.cut = _with_cuts(model, text, method, filters, factorized_ok)
    others = replace(filters, max_tokens=None)  # max_tokens: on the result, kept as S and N (_count_tokens)
    pending = filters.max_tokens is not None
    if maxmatch:
        with stage(f"S+C: canonical MaxMatch ({method})"):
            canonicalize_maxmatch(model, a, text, method, limits, artifact, factorized_ok, result)
            _token_filters_after(model, result, filters)
    else:
        with stage("S: promotion MIN(PROJ(A o T))"):
            promoted = _promote(model, ByteAutomaton(text, pattern), limits, lex, cache, marked, terminals)
            agnostic, result.terminals, arrays = promoted.fst, promoted.terminals, promoted.arrays
            if others.token_level() and method != "gadgets":
                # deferred: start-up: only this path needs it
                from tokfst_cli.filters.compose import apply_tokens_arrays

                agnostic, arrays = apply_tokens_arrays(model, agnostic, others, _marker(model, marked),
                                                       max_states=limits.max_states, arrays=promoted.arrays,
                                                       agnostic=True)
        if canonical:
            with stage(f"C: canonical BPE ({method}, {level} level)"):
                pending = _canonical_counted(model, a, agnostic, method, limits, artifact, factorized_ok, result,
                                             level, filters, marked)
                if method == "gadgets":
                    _token_filters_after(model, result, filters)
        else:
            result.fst = agnostic
            result.arrays = arrays  # known already (the decoder and the index reuse them)
    if pending:
        with stage("the token-count filter (max_tokens)"):
            _count_tokens(result, filters)
    if prompt is not None:
        from tokfst_cli.decoding import healing  # deferred: start-up: only this path needs it

        with stage("token healing at the prompt's end"):
            result.healing = healing.settle(result, prompt)
    result.seconds = time.perf_counter() - start
    return result


def _with_cuts(model: TokenizerModel, text: pynini.Fst, method: str, filters: Filters,
               factorized_ok: bool) -> tuple[bool, list[str]]:
    """Where Y holds cut added tokens (``pretok.cut``; stage S reads them, ``_promote``): no
    factorized form (its decoders do not model them), and the tokens cut; refused with the
    options that do not model them either."""
    from tokfst_cli.pretok import cut  # deferred: start-up: only this path needs it

    ids = cut.cut_labels(text) if cut.cuttable(model) else []
    if not ids:
        return factorized_ok, []
    what = ("method precomputed" if method == "precomputed" else "token filters" if filters.token_level()
            else None)
    if what is not None:
        raise InputError(f"{what} cannot be combined with the added token {model.tokens[ids[0]]!r} this regex "
                         "can match", "use the default method and no token filters, or exclude that text",
                         hint="added-token-options", what=what)
    return False, [model.tokens[i] for i in ids]


SPECIAL_TEXT = ("exclude", "refuse")
FALLBACK_STAGES = ("A o T", "the promoted automaton")  # past max_states there: build_auto's lazy form


@dataclass
class LazyForm:
    """The lazy form :func:`build_auto` chose: the byte DFA's table (``byte_table.ByteTable``), promoted
    state by state at decoding, and ``reason``, the limit the promoted automaton passed."""

    model: TokenizerModel
    table: Any
    reason: LimitError | None = None
    seconds: float = 0.0

    def to_bytes(self) -> bytes:
        """The lazy artifact (``tokfst-lazy``; ``constraint.load`` reads it with the tokenizer)."""
        from tokfst_cli.promotion.byte_table import to_bytes  # deferred: start-up: only this path needs it

        return to_bytes(self.table, self.model.fingerprint)

    def decoder(self):
        """The lazy decoder (``lazy.LazyDecoder``)."""
        from tokfst_cli.promotion.lazy import LazyDecoder  # deferred: start-up: only this path needs it

        return LazyDecoder(self.model, self.table)

    def summary(self) -> dict:
        """As :meth:`Result.summary`: the byte DFA's states and classes of bytes, and why."""
        return {"form": "lazy", "pattern": self.table.source, "fingerprint": self.model.fingerprint,
                "canonical": False, "seconds": round(self.seconds, 6), "states": self.table.states,
                "classes": int(self.table.delta.shape[1]), "fallback": str(self.reason) if self.reason else None}


def lazy_possible(canonical: bool = False, filters: Filters = NO_FILTERS, prompt: str | None = None,
                  terminals: bool | None = None, method: str | None = None, artifact: str | None = None) -> bool:
    """Does the lazy form take these options? (agnostic, text filters at most, terminal labels not asked for)"""
    return not (canonical or filters.token_level() or prompt is not None or terminals is True or method is not None
                or artifact is not None)


def build_lazy(model: TokenizerModel | str | Any, pattern: str, *, automaton: ByteAutomaton | None = None,
               limits: Limits = Limits(), cache: bool = True, filters: Filters = NO_FILTERS,
               reason: LimitError | None = None) -> LazyForm:
    """The lazy form of ``pattern`` (or ``automaton``): its byte DFA as a table (``lazy.table_for``)."""
    from tokfst_cli.promotion import lazy  # deferred: start-up: only this path needs it

    model = load_tokenizer(model)
    start = time.perf_counter()
    with stage("A: the byte DFA's table (lazy form)"):
        a = automaton if automaton is not None else compile_regex(pattern, limits.max_states)
        table = lazy.table_for(model, a, limits.max_states, cache=cache, filters=filters)
    return LazyForm(model, table, reason, time.perf_counter() - start)


def build_auto(model: TokenizerModel | str | Any, pattern: str, *, fallback: bool = True,
               **options: Any) -> Result | LazyForm:
    """:func:`build` (``options``), or where the promoted automaton passes ``limits.max_states``
    (A o T's size is bounded before it is built), the lazy form (:func:`build_lazy`, ``reason`` set)
    when ``fallback`` and the options allow it (:func:`lazy_possible`; terminal labels are a form of
    the promoted automaton, which the lazy form does not need); otherwise the LimitError."""
    try:
        return build(model, pattern, **options)
    except LimitError as e:
        names = ("canonical", "filters", "prompt", "method", "artifact")
        if (not fallback or e.limit != "max_states" or e.stage not in FALLBACK_STAGES
                or not lazy_possible(**{k: options[k] for k in names if k in options})):
            raise
        return build_lazy(model, pattern, automaton=options.get("automaton"), limits=options.get("limits", Limits()),
                          cache=options.get("cache", True), filters=options.get("filters", NO_FILTERS), reason=e)


def _without_specials(model: TokenizerModel, a: ByteAutomaton) -> tuple[ByteAutomaton, list[str]]:
    """A without the texts holding a special token's content (``added.without_specials``)."""
    from tokfst_cli.pretok import added  # deferred: start-up: only this path needs it

    fst, found = added.without_specials(model, a.fst)
    if not found:
        return a, []
    if fst.num_states() == 0:
        raise EmptyLanguageError(f"every text of {a.pattern} contains a special token ({', '.join(found)})",
                                 "allow text without it, or give special_text refuse to see the refusal",
                                 hint="special-text")
    return ByteAutomaton(fst.minimize(), a.pattern), found


def _refuse_token_groups(a: ByteAutomaton, what: str) -> None:
    """Token-level groups ((?P<TEXT_TOKEN>)) are single tokens, not text: agnostic promotion only."""
    from tokfst_cli.text.terminals import placeholder_kinds  # deferred: start-up: only this path needs it

    kinds = placeholder_kinds(a.fst)
    if kinds:
        raise InputError(f"the token-level groups ({', '.join(k + '_TOKEN' for k in kinds)}) stand for one token of "
                         f"any tokenization and cannot be combined with {what}",
                         "use agnostic promotion, or a text wildcard such as [^\\n]+", hint="token-groups")


def _text_filters(model: TokenizerModel, a: ByteAutomaton, filters: Filters, prompt: str | None) -> ByteAutomaton:
    """A restricted by the text-level filters, then the prompt's text before it."""
    fst = a.fst
    if filters.text_level():
        from tokfst_cli.filters.compose import apply_text  # deferred: start-up: only this path needs it

        fst = apply_text(model, fst, filters)
    if prompt is not None:
        from tokfst_cli.decoding import healing  # deferred: start-up: only this path needs it

        fst = healing.prefixed(model, fst, prompt)
    return a if fst is a.fst else ByteAutomaton(fst, a.pattern)


def _marker(model: TokenizerModel, marked: bool) -> int | None:
    from tokfst_cli.promotion.lexicon import marker_label  # deferred: start-up: only this path needs it

    return marker_label(model) if marked else None


def _canonical_counted(model: TokenizerModel, a: ByteAutomaton, agnostic: pynini.Fst, method: str, limits: Limits,
                       artifact: str | None, factorized_ok: bool, result: Result, level: str, filters: Filters,
                       marked: bool) -> bool:
    """C for BPE with ``max_tokens`` placed where it costs least (C(S ∩ F_N) = C(S) ∩ F_N); whether
    the count is still to be applied to the (materialized) result.

    C(S) is built as without the count, then the count is kept beside it, no product: a
    materialized C(S) with N (``_count_tokens``), a factorized one walked within N tokens
    (``bpe.counted``). Only where no factorized form is allowed (an ``.fst`` is asked for) and
    C(S) passes a limit is C(S ∩ F_N) built instead; for a cyclic S (free text, whose C(S) is
    mostly too big) C(S) is then tried up to PROBE_ARCS arcs only, so a failed try costs little."""
    if filters.max_tokens is None or method == "gadgets":
        canonicalize_bpe(model, a, agnostic, method, limits, artifact, factorized_ok, result, level)
        return filters.max_tokens is not None
    if factorized_ok:
        canonicalize_bpe(model, a, agnostic, method, limits, artifact, True, result, level, filters.max_tokens)
        if result.lazy is not None and result.lazy.empty():
            raise _no_sequence(filters)
        return result.lazy is None
    acyclic = agnostic.properties(pynini.ACYCLIC, True) == pynini.ACYCLIC
    probe = limits if acyclic else replace(limits, max_arcs=min(limits.max_arcs, PROBE_ARCS))
    try:
        canonicalize_bpe(model, a, agnostic, method, probe, artifact, False, result, level)
        return True
    except LimitError:
        result.lazy = result.serialize = result.overflow = None
    from tokfst_cli.filters.compose import apply_tokens  # deferred: start-up: only this path needs it

    counted = apply_tokens(model, agnostic, Filters(max_tokens=filters.max_tokens), _marker(model, marked),
                           max_states=limits.max_states)
    canonicalize_bpe(model, a, counted, method, limits, artifact, factorized_ok, result, level)
    return False


def _count_tokens(result: Result, filters: Filters) -> None:
    """max_tokens on a materialized result (C(S ∩ F_N) = C(S) ∩ F_N), kept as itself and N
    (``filters.length.Counted``: no product unless its fst is asked for); a factorized
    (WordPiece) one is refused by name."""
    from tokfst_cli.filters import length  # deferred: start-up: only this path needs it

    if result._fst is None:
        _refuse_factorized(filters)
    counted = length.Counted(result._fst, filters.max_tokens, result.arrays)
    if counted.empty():
        raise _no_sequence(filters)
    result.fst = None  # kept even where no sequence is longer: the index records N
    result.counted, result.arrays = counted, counted.arrays


def _no_sequence(filters: Filters) -> Exception:
    """No token sequence passes the token filters (the text filters are named where they act)."""
    from tokfst_cli.filters import tokens  # deferred: start-up: only this path needs it

    return tokens.no_sequence([n for n in filters.names() if n not in ("scripts", "ascii", "nfc")])


def _refuse_factorized(filters: Filters) -> None:
    raise InputError(f"the token filters ({', '.join(filters.names())}) need the materialized automaton "
                     "of this tokenizer, which passes a limit", "raise max_arcs, or drop the token filters",
                     hint="filters-factorized", names=", ".join(filters.names()))


def _token_filters_after(model: TokenizerModel, result: Result, filters: Filters) -> None:
    """Token-level filters but max_tokens (:func:`_count_tokens`) on a canonical automaton built
    without stage S's automaton (WordPiece, gadgets): on the materialized result; a factorized
    one is refused by name."""
    if not filters.token_level():
        return
    if result.fst is None:
        _refuse_factorized(filters)
    filters = replace(filters, max_tokens=None)
    if not filters.token_level():
        return
    from tokfst_cli.filters.compose import apply_tokens  # deferred: start-up: only this path needs it

    result.fst = apply_tokens(model, result.fst, filters, max_states=result.limits.max_states)
