"""One per-step decoder protocol for every artifact kind, and one loader (the structured-generation practical;
Pitfalls 2025 Sec. 3.2).

A decoder walks a constraint one token at a time, as a language model's decoding loop does:

    initial()               the start state
    mask(state)             numpy bool array over token ids: the tokens allowed next
    advance(state, token)   the next state; ``DisallowedTokenError`` if the token is not allowed
    is_final(state)         may the sequence end here?

Misuse raises the same in every kind: ``TokenTypeError`` for a token that is not an integer,
``TokenRangeError`` for an id outside the vocabulary, ``ForeignStateError`` for a state that is
not the decoder's (``decoding.matcher.token_id`` and ``check_state``; docs/decoding.md).

Implementations: :class:`FstDecoder` (a materialized ``.fst``), :class:`IndexDecoder` (the
``tokfst-index`` JSON), ``bpe.product.Factorized`` (``tokfst-factorized``) and
``maxmatch.product.Canonical`` (``tokfst-factorized-maxmatch``). :func:`load` picks the
kind from the file's magic bytes or format field. Every form offers exactly the tokens after
which a completion reaches a final state (the factorized forms through their co-reachability:
``bpe.liveness``, ``maxmatch.liveness``). Each decoder also has ``bitmask(state)``,
``forced(state)`` and ``matcher(eos)`` (``matcher.Steps``). A loaded decoder's ``healing`` is
the artifact's token healing (``healing.Healing``: the prompt, the kept token ids, how many of
``encode(prompt)``'s tokens the constraint re-tokenizes; Pitfalls 2025 Sec. 4.4), or None: then
``initial()`` is already the state after the kept ids (a ``.fst`` file does not record it).
"""

from __future__ import annotations

import json
from dataclasses import replace
from itertools import chain
from typing import Any, NamedTuple, Protocol, runtime_checkable

import numpy as np
import pynini

from tokfst_cli.automata.arrays import FstArrays, fst_arrays
from tokfst_cli.automata.fst_io import FST_MAGIC
from tokfst_cli.decoding.healing import Healing
from tokfst_cli.decoding.matcher import Steps, check_state, int_state, pack, token_id
from tokfst_cli.errors import DisallowedTokenError, ForeignStateError, InputError, UsageError
from tokfst_cli.grammar.pushdown import Pushdown, from_fst
from tokfst_cli.support.files import read_artifact
from tokfst_cli.support.kinds import describe
from tokfst_cli.tokenizer.model import TokenizerModel, foreign

_OPENFST_MAGIC = FST_MAGIC.to_bytes(4, "little")
BITMASK_BUDGET = 64 << 20  # bytes of packed bitmasks made at load
LIST_MAX = 1 << 18  # entries of a per-state table kept as a Python list (else read through a memoryview)


@runtime_checkable
class Decoder(Protocol):
    def initial(self) -> Any: ...

    def mask(self, state: Any) -> np.ndarray: ...

    def advance(self, state: Any, token: int) -> Any: ...

    def is_final(self, state: Any) -> bool: ...


class _Table(Steps):
    """A deterministic token acceptor as flat arrays: state s's sorted tokens are row ``row[s]``
    of ``labels`` (CSR, rows may be shared: coalescence) and its next states ``nexts[noff[s]:noff[s+1]]``.
    Each row's packed bitmask is made at load (within ``BITMASK_BUDGET`` bytes, else on first use),
    with one read-only view per row in a list; the state -> row map and the CSR offsets are lists
    (or, past ``LIST_MAX`` entries, memoryviews of their arrays): ``bitmask(state)`` at a fresh
    state is two lookups, no numpy call, and ``advance`` one binary search in the row.

    ``terminals`` (Koo et al. 2024 Sec. 2.5.1): bool masks over token ids; label ``vocab_size + j`` in a
    row is terminal j: one token of its mask. A row's mask is its tokens and its terminals'
    masks; ``advance`` follows a token's own arc first, then the row's terminals in label order."""

    def __init__(self, vocab_size: int, start: int, final: np.ndarray, labels: np.ndarray, loff: np.ndarray,
                 row: np.ndarray | None, nexts: np.ndarray, noff: np.ndarray, terminals: list[np.ndarray] = ()):
        self.vocab_size, self.start = vocab_size, start
        self._labels, self._loff, self._row, self._nexts, self._noff = labels, loff, row, nexts, noff
        self.terminals = list(terminals)
        self._twords = [pack(t) for t in self.terminals]
        nrows = len(loff) - 1
        words = (vocab_size + 31) // 32
        self._views: list[np.ndarray] | None = None  # row -> its packed words (read-only views)
        self._lazy: dict[int, np.ndarray] = {}
        if nrows * words * 4 <= BITMASK_BUDGET:
            self._views = list(self._packed(labels, loff))
        self._rows = _readable(row)
        self._loffs, self._noffs = _readable(loff), _readable(noff)
        self._finals = _readable(np.asarray(final, bool))

    def _packed(self, labels: np.ndarray, loff: np.ndarray) -> np.ndarray:
        """:func:`_packed_rows` of the rows, each or-ed with its terminals' masks."""
        if not self.terminals:
            return _packed_rows(labels, loff, self.vocab_size)
        term = labels >= self.vocab_size
        row_of = np.repeat(np.arange(len(loff) - 1), np.diff(loff))
        kept = np.zeros(len(loff), np.int64)
        np.cumsum(np.bincount(row_of[~term], minlength=len(loff) - 1), out=kept[1:])
        words = _packed_rows(labels[~term], kept, self.vocab_size).copy()
        for r, j in zip(row_of[term].tolist(), (labels[term] - self.vocab_size).tolist()):
            words[r] |= self._twords[j]
        words.setflags(write=False)
        return words

    def is_state(self, state: Any) -> bool:
        return int_state(state, len(self._finals))

    def bitmask(self, state: int) -> np.ndarray:
        """``mask(state)`` as packed int32 words (read-only, shared by the states of one mask)."""
        try:
            r = state if self._rows is None else self._rows[state]
            if self._views is not None:
                return self._views[r]
            r = int(r)
            got = self._lazy.get(r)
            if got is None:
                got = self._lazy[r] = self._packed(self._labels[self._loff[r]:self._loff[r + 1]],
                                                   np.array([0, self._loff[r + 1] - self._loff[r]]))[0]
            return got
        except Exception:
            check_state(self, state)
            raise

    def arcs(self, state: int) -> tuple[np.ndarray, np.ndarray]:
        """Token ids (sorted) and next states of ``state``."""
        r = state if self._row is None else self._row[state]
        return self._labels[self._loff[r]:self._loff[r + 1]], self._nexts[self._noff[state]:self._noff[state + 1]]

    def initial(self) -> int:
        return self.start

    def mask(self, state: int) -> np.ndarray:
        m = np.zeros(self.vocab_size, bool)
        try:
            labels = self.arcs(state)[0]
        except Exception:
            check_state(self, state)
            raise
        if self.terminals:
            for j in labels[labels >= self.vocab_size].tolist():
                m |= self.terminals[j - self.vocab_size]
            labels = labels[labels < self.vocab_size]
        m[labels] = True
        return m

    def advance(self, state: int, token: int) -> int:
        if type(token) is not int or not 0 <= token < self.vocab_size:
            token = token_id(token, self.vocab_size)
        try:
            r = state if self._rows is None else self._rows[state]
            a, b = self._loffs[r], self._loffs[r + 1]
            row = self._labels[a:b]
            i = int(row.searchsorted(token))
            if i < b - a and row.item(i) == token:
                return self._nexts.item(self._noffs[state] + i)
            labels, nexts = self.arcs(state)
        except Exception:
            check_state(self, state)
            raise
        if self.terminals:
            at = int(np.searchsorted(labels, self.vocab_size))
            for j, nxt in zip(labels[at:].tolist(), nexts[at:].tolist()):
                if self.terminals[j - self.vocab_size][token]:
                    return int(nxt)
        raise DisallowedTokenError(token, state)

    def is_final(self, state: int) -> bool:
        if (type(state) is int and 0 <= state < len(self._finals)) or self.is_state(state):
            return bool(self._finals[state])
        raise ForeignStateError(state, type(self).__name__)


def _readable(a: np.ndarray | None) -> list[int] | memoryview | None:
    """An integer table read one entry at a time, giving Python ints without numpy's per-call cost:
    a list up to LIST_MAX entries (the fastest lookup, 36 bytes an entry), else a memoryview of
    the array (no copy; a lookup about 50 ns slower)."""
    if a is None:
        return None
    return a.tolist() if len(a) <= LIST_MAX else memoryview(np.ascontiguousarray(a))


def _packed_rows(labels: np.ndarray, loff: np.ndarray, vocab_size: int, chunk: int = 64) -> np.ndarray:
    """(rows, words) int32: each CSR row of token ids as the packed bitmask ``matcher.pack`` makes."""
    nrows, words = len(loff) - 1, (vocab_size + 31) // 32
    out = np.zeros((nrows, words * 4), np.uint8)
    width = words * 32
    for a in range(0, nrows, chunk):
        b = min(nrows, a + chunk)
        bits = np.zeros((b - a) * width, bool)
        counts = np.diff(loff[a:b + 1])
        bits[np.repeat(np.arange(b - a, dtype=np.int64) * width, counts) + labels[loff[a]:loff[b]]] = True
        out[a:b] = np.packbits(bits, bitorder="little").reshape(b - a, words * 4)
    words_ = out.view("<i4")
    words_.setflags(write=False)
    return words_


class FstDecoder(_Table):
    """A materialized token acceptor (labels = token id + 1), its arcs read in bulk at load
    (``arrays``: read already, ``artifacts.fst_arrays``). Terminal labels (ids past the
    vocabulary, named in the symbol table) need the ``model``."""

    def __init__(self, fst: pynini.Fst, vocab_size: int, model: TokenizerModel | None = None,
                 arrays: FstArrays | None = None):
        from tokfst_cli.decoding.index import by_label  # deferred: start-up: only this path needs it
        from tokfst_cli.text.terminals import terminals_of  # deferred: start-up: only this path needs it

        terminals = terminals_of(fst.input_symbols(), vocab_size)
        if terminals and model is None:
            raise InputError("the automaton has terminal labels, whose masks come from its tokenizer",
                             "load it with its tokenizer", hint="terminals-need-tokenizer")
        a = arrays if arrays is not None else fst_arrays(fst)
        if len(a.ilabel) and (a.ilabel.min() < 1 or a.ilabel.max() > vocab_size + len(terminals)):
            raise InputError("the automaton has labels outside the tokenizer's token ids (and terminal labels)",
                             "load it with the tokenizer it was built for")
        offsets, labels, nexts = by_label(a.src, a.ilabel - 1, a.nextstate, len(a.final))
        super().__init__(vocab_size, fst.start(), a.final, labels, offsets, None, nexts, offsets,
                         [t.mask(model) for t in terminals])
        self.fst = fst


class IndexDecoder(_Table):
    """The ``tokfst-index`` JSON (masks shared between states: coalescence)."""

    def __init__(self, index: dict, arrays: _IndexArrays | None = None):
        a = arrays if arrays is not None else _index_arrays(index)
        if isinstance(a, str):
            raise UsageError(f"not a valid tokfst-index: {a}")
        masks = []
        for t in index.get("terminals", ()):
            masks.append(np.zeros(a.vocab, bool))
            masks[-1][t["mask"]] = True
        super().__init__(a.vocab, a.initial, a.final, a.labels, a.loff, a.row, a.nexts, a.noff, masks)
        self.fingerprint = index["tokenizer"]["fingerprint"]
        self.healing = Healing.from_json(index["healing"]) if "healing" in index else None


def _index(data: bytes, source: str) -> IndexDecoder:
    try:
        index = json.loads(data)
    except (ValueError, UnicodeDecodeError, RecursionError):
        index = None
    if not isinstance(index, dict) or index.get("format") != "tokfst-index":
        kind = describe(data)  # another tokfst file (compile-bpe's A_BPE, a bench report) named by its kind
        what = f"is {kind}, not a constraint" if kind else "is not valid JSON" if index is None else \
            "is not a tokfst-index file"
        raise InputError(f"{source} {what}", "give an artifact written by tokfst promote (an .fst, an index, "
                                             "a lazy or factorized form)")
    arrays = _checked(index)
    if isinstance(arrays, str):
        raise InputError(f"{source} is a damaged tokfst-index file: {arrays}", "rebuild it with tokfst promote",
                         hint="rebuild-index")
    decoder = IndexDecoder(index, arrays)
    if "max_tokens" not in index:
        return decoder
    from tokfst_cli.filters import length  # deferred: start-up: only this path needs it

    a = arrays
    counted = length.CountedDecoder(decoder, index["max_tokens"], length.fewest(
        len(a.final), a.final, np.repeat(np.arange(len(a.final)), np.diff(a.noff)), a.nexts))
    counted.fingerprint = decoder.fingerprint
    return counted


class _IndexArrays(NamedTuple):
    vocab: int
    initial: int
    final: np.ndarray  # bool per state
    labels: np.ndarray  # the masks, concatenated
    loff: np.ndarray  # mask k is labels[loff[k]:loff[k + 1]]
    row: np.ndarray  # the mask of each state
    nexts: np.ndarray  # next states, concatenated per state
    noff: np.ndarray
    finals: np.ndarray  # as listed (for the checksum)


def index_problem(index: dict) -> str | None:
    """What is wrong with a parsed index (version, checksum, structure), or None."""
    got = _checked(index)
    return got if isinstance(got, str) else None


def _checked(index: dict) -> _IndexArrays | str:
    """The index's arrays after the version, checksum and structure checks, or what is wrong
    (in that order). The checksum is computed from the arrays when the structure allows it."""
    # deferred: start-up: only this path needs it
    from tokfst_cli.decoding.index import COUNTED_VERSION, TERMINALS_VERSION, VERSION, checksum, checksum_of_arrays

    expected = COUNTED_VERSION if "max_tokens" in index else TERMINALS_VERSION if "terminals" in index else VERSION
    if index.get("version") != expected:
        return f"version {index.get('version')!r}, expected {expected}"
    try:
        got = _index_arrays(index)
    except (KeyError, TypeError, ValueError, IndexError, OverflowError):
        got = "missing or mistyped fields"
    if "sha256" in index:
        if isinstance(got, str) or not set(map(len, index["states"])) <= {2}:
            digest = checksum(index)
        else:
            digest = checksum_of_arrays(index, got.finals, got.labels, got.loff, got.row, got.nexts, got.noff)
        if index["sha256"] != digest:
            return "checksum mismatch"
    if not isinstance(got, str) and "healing" in index and Healing.from_json(index["healing"]) is None:
        return "bad healing field"
    if not isinstance(got, str) and "terminals" in index and not _terminals_ok(index["terminals"], got.vocab):
        return "bad terminals field"
    if "max_tokens" in index and (type(index["max_tokens"]) is not int or index["max_tokens"] < 0
                                  or "terminals" in index):
        return "bad max_tokens field"
    return got


def _terminals_ok(terminals: Any, vocab: int) -> bool:
    """A list of {"name": str, "mask": sorted token ids}."""
    if type(terminals) is not list:
        return False
    for t in terminals:
        mask = _ints(t.get("mask")) if isinstance(t, dict) and isinstance(t.get("name"), str) else None
        if mask is None or (len(mask) and (mask[0] < 0 or mask[-1] >= vocab or (np.diff(mask) <= 0).any())):
            return False
    return True


def _ints(values: Any) -> np.ndarray | None:
    """A list of ints (a bool is not an int here) as an int64 array, else None."""
    if type(values) is not list or not set(map(type, values)) <= {int}:
        return None
    try:
        return np.array(values, np.int64).reshape(-1)
    except OverflowError:
        return None


def _int_lists(lists: Any) -> tuple[np.ndarray, np.ndarray] | None:
    """(concatenation, offsets) of a list of lists of ints, else None."""
    if type(lists) is not list or not set(map(type, lists)) <= {list}:
        return None
    flat = _ints(list(chain.from_iterable(lists)))
    if flat is None:
        return None
    offsets = np.zeros(len(lists) + 1, np.int64)
    np.cumsum(np.fromiter(map(len, lists), np.int64, len(lists)), out=offsets[1:])
    return flat, offsets


def _first(bad: np.ndarray) -> int:
    """Index of the first True, or len(bad)."""
    hits = np.flatnonzero(bad)
    return int(hits[0]) if len(hits) else len(bad)


def _index_arrays(index: dict) -> _IndexArrays | str:
    """The structure checks of a parsed index, vectorized; the arrays a decoder reads, or what is wrong.

    Lists holding anything but plain integers (never written by tokfst) are checked element by
    element, and refused even where that check lets them pass (JSON true/false for 1/0)."""
    masks, states, finals = index.get("masks"), index.get("states"), index.get("finals")
    plain = type(states) is list and set(map(type, states)) <= {dict}
    fin, flat = _ints(finals), _int_lists(masks)
    row = _ints([st.get("mask") for st in states]) if plain else None
    nxt = _int_lists([st.get("next") for st in states]) if plain else None
    if fin is None or flat is None or row is None or nxt is None:
        return _element_problem(index) or "missing or mistyped fields"
    problem = _head_problem(index)
    if problem:
        return problem
    vocab, n = index["tokenizer"]["vocab_size"], len(states)
    if len(fin) and (fin.min() < 0 or fin.max() >= n):
        return "final state out of range"
    (labels, loff), (nexts, noff) = flat, nxt
    inner = np.ones(len(labels), bool)
    inner[loff[:-1][loff[:-1] < len(labels)]] = False  # the first token of each mask
    labels_end = vocab + len(index.get("terminals") or ())  # terminal j is label vocab + j
    if len(labels) and (labels.min() < 0 or labels.max() >= labels_end or (np.diff(labels) <= 0)[inner[1:]].any()):
        return "a mask is not a sorted list of token ids"
    fits = (row >= 0) & (row < len(loff) - 1)
    fits[fits] = np.diff(noff)[fits] == np.diff(loff)[row[fits]]
    out = (nexts < 0) | (nexts >= n)
    bad_fit = _first(~fits)
    bad_next = int(np.searchsorted(noff, _first(out), side="right")) - 1 if out.any() else n
    if bad_fit < n or bad_next < n:  # the first state with a problem, as the element-by-element check
        return "a state's mask or next states do not fit" if bad_fit <= bad_next else "a next state out of range"
    final = np.zeros(n, bool)
    final[fin] = True
    return _IndexArrays(vocab, index["initial"], final, labels, loff, row, nexts, noff, fin)


def _head_problem(index: dict) -> str | None:
    tok = index["tokenizer"]
    vocab = tok["vocab_size"]
    if not (isinstance(tok["fingerprint"], str) and isinstance(vocab, int) and vocab > 0):
        return "bad tokenizer field"
    if not (isinstance(index["initial"], int) and 0 <= index["initial"] < len(index["states"])):
        return "initial state out of range"
    return None


def _element_problem(index: dict) -> str | None:
    """The structure check element by element, for fields of any type (KeyError, TypeError, ... for
    missing or mistyped ones)."""
    problem = _head_problem(index)
    if problem:
        return problem
    vocab, masks, states, finals = index["tokenizer"]["vocab_size"], index["masks"], index["states"], index["finals"]
    n = len(states)
    if any(not isinstance(f, int) or not 0 <= f < n for f in finals):
        return "final state out of range"
    for m in masks:
        a = np.asarray(m)
        if a.ndim != 1 or (a.size and (a.dtype.kind != "i" or a[0] < 0
                                      or a[-1] >= vocab + len(index.get("terminals") or ())
                                      or (np.diff(a) <= 0).any())):
            return "a mask is not a sorted list of token ids"
    for st in states:
        k, nxt = st["mask"], np.asarray(st["next"])
        if not isinstance(k, int) or not 0 <= k < len(masks) or nxt.ndim != 1 or len(nxt) != len(masks[k]):
            return "a state's mask or next states do not fit"
        if nxt.size and (nxt.dtype.kind != "i" or nxt.min() < 0 or nxt.max() >= n):
            return "a next state out of range"
    return None


def load(path: str, tokenizer: TokenizerModel | str | None = None) -> Decoder:
    """The decoder of any tokfst artifact: ``.fst``, index JSON, BPE or WordPiece factorized, lazy.

    ``tokenizer`` (anything ``tokenizer.model.load`` takes: a model, a path, a directory, a
    bundled or cached hub name, a tokenizers or transformers tokenizer) is checked against the artifact's
    fingerprint; the WordPiece factorized form and the lazy form (``promote --format lazy``:
    a ``lazy.LazyDecoder``) need it, the first to rebuild its tries, the second for its trie.
    """
    from tokfst_cli.bpe import factorized as bpe_factorized  # deferred: start-up: only this path needs it
    from tokfst_cli.maxmatch import factorized as mm_factorized  # deferred: start-up: only this path needs it
    from tokfst_cli.promotion import byte_table  # deferred: start-up: only this path needs it
    from tokfst_cli.tokenizer.model import load as load_tokenizer  # deferred: start-up: only this path needs it

    model = load_tokenizer(tokenizer) if tokenizer is not None else None
    data = read_artifact(path)
    if data.startswith(bpe_factorized.MAGIC):
        return bpe_factorized.from_bytes(data, model, path)
    for magic, kind in ((mm_factorized.MAGIC, "WordPiece factorized"), (byte_table.MAGIC, "lazy")):
        if data.startswith(magic) and model is None:
            raise InputError(f"{path} is a {kind} artifact", "load it with its tokenizer",
                             hint="artifact-needs-tokenizer")
    if data.startswith(mm_factorized.MAGIC):
        return mm_factorized.from_bytes(data, model, path)
    if data.startswith(byte_table.MAGIC):
        from tokfst_cli.promotion.lazy import from_artifact  # deferred: start-up: only this path needs it

        return from_artifact(data, model, path)
    if data.startswith(_OPENFST_MAGIC):
        from tokfst_cli.automata.fst_io import parse_fst  # deferred: start-up: only this path needs it

        fst = parse_fst(data, path)  # the bytes already read: '-' (stdin) is read once
        pdt = from_fst(fst, path)
        if pdt is not None:  # promote --grammar's pushdown automaton over bytes
            if model is None:
                raise InputError(f"{path} is a pushdown automaton over bytes", "load it with its tokenizer",
                                 hint="artifact-needs-tokenizer")
            from tokfst_cli.promotion.stack import PushdownDecoder  # deferred: start-up: only this path needs it

            return PushdownDecoder(model, pdt)
        _same_tokenizer(fst, model, path)
        if model is not None:  # compact symbol tables (promote's compact symbols) made whole again
            from tokfst_cli.automata.symbols import full_tables  # deferred: start-up: only this path needs it

            fst = full_tables(fst, model)
        size = model.vocab_size if model is not None else _vocab_of(fst, path)
        return FstDecoder(fst, size, model)
    decoder = _index(data, path)
    if model is not None and model.fingerprint != decoder.fingerprint:
        raise foreign(path, decoder.fingerprint, model)
    return decoder


def lazy(tokenizer: TokenizerModel | str, pattern: str | None = None, *, schema: Any = None,
         automaton: Any = None, grammar: str | None = None, grammar_format: str = "gbnf", any_json: bool = False,
         max_tokens: int | None = None, **schema_options: Any):
    """The agnostic constraint of a regex, a JSON Schema, a grammar (its text, in ``grammar_format``:
    ``gbnf`` or ``lark``; a self-embedding one decodes with a stack, ``stack.PushdownDecoder``) or a
    byte automaton, expanded per state on first use (``lazy.LazyDecoder``: no promotion); ``tokenizer``
    a model, a path or a bundled
    name; ``any_json=True``: every JSON document, nested to any depth (``whitespace=`` compact,
    pretty or flexible); a schema's recursion and free values nest to any depth too, with a stack
    (``recursion=`` "auto", "stack" or "cut": ``grammar.schema.compile_json``; with ``filters`` "cut");
    ``filters=`` text-level ``Filters`` (``lazy.decoder``) and ``max_tokens`` (also a keyword of its
    own: at most N tokens, ``counted_lazy.CountedLazy``; not with a stack); ``promote --format lazy``
    writes the same decoder's artifact (without a token budget), which :func:`load` reads."""
    from tokfst_cli.filters.compose import Filters  # deferred: start-up: only this path needs it
    from tokfst_cli.promotion import lazy as lazy_mod  # deferred: start-up: only this path needs it
    from tokfst_cli.tokenizer.model import load as load_tokenizer  # deferred: start-up: only this path needs it

    model = load_tokenizer(tokenizer)
    if max_tokens is not None:  # one more filter (Filters checks the count)
        schema_options["filters"] = replace(schema_options.get("filters") or Filters(), max_tokens=max_tokens)
    if grammar is not None:
        from tokfst_cli.grammar.load import compile_grammar  # deferred: start-up: only this path needs it

        automaton = compile_grammar(grammar, grammar_format)
    if any_json:
        from tokfst_cli.grammar.any_json import any_json as json_grammar  # deferred: start-up: only this path

        automaton = json_grammar(schema_options.pop("whitespace", "compact"))
    if schema is not None:
        from tokfst_cli.grammar.schema import compile_json  # deferred: start-up: only this path needs it

        own = {k: schema_options.pop(k) for k in ("filters", "cache") if k in schema_options}  # the decoder's
        recursion = schema_options.pop("recursion", "auto" if own.get("filters") is None else "cut")
        automaton, schema = compile_json(schema, recursion=recursion, **schema_options).automaton, None
        schema_options = own
    if isinstance(automaton, Pushdown):
        from tokfst_cli.promotion.stack import PushdownDecoder  # deferred: start-up: only this path needs it

        if schema_options.get("filters") is not None:
            raise InputError(f"{automaton.pattern} needs a stack: filters do not apply to it",
                             "drop the filters, or cut the recursion (recursion='cut')", hint="grammar-pushdown")
        return PushdownDecoder(model, automaton)
    filters = schema_options.get("filters")
    budget = filters.max_tokens if filters is not None else None
    if budget is not None:  # the lazy decoder's own filters are text-level; the count wraps it
        schema_options["filters"] = replace(filters, max_tokens=None)
    decoder = lazy_mod.decoder(model, pattern, schema=schema, automaton=automaton, **schema_options)
    if budget is None:
        return decoder
    from tokfst_cli.promotion.counted_lazy import CountedLazy  # deferred: start-up: only this path needs it

    return CountedLazy(decoder, budget)


def _same_tokenizer(fst: pynini.Fst, model: TokenizerModel | None, path: str) -> None:
    """Refuse an automaton whose token symbol table (``symbols.token_table_name``: it names the
    tokenizer's fingerprint) is another tokenizer's; one without tokfst's table cannot be told."""
    # deferred: start-up: only this path needs it
    from tokfst_cli.automata.symbols import TOKEN_TABLE_PREFIX, token_table_name

    table = fst.input_symbols()
    name = table.name() if table is not None else ""
    if model is not None and name.startswith(TOKEN_TABLE_PREFIX) and name != token_table_name(model):
        raise foreign(path, name[len(TOKEN_TABLE_PREFIX):] or None, model)


def _vocab_of(fst: pynini.Fst, path: str) -> int:
    table = fst.input_symbols()
    if table is None:
        raise InputError(f"{path} has no symbol table to size its vocabulary", "load it with its tokenizer")
    from tokfst_cli.text.terminals import Terminal  # deferred: start-up: only this path needs it

    last = table.available_key() - 1  # a compact table (promote's compact symbols) keeps the last token
    if Terminal.parse(table.find(last)) is not None:
        raise InputError(f"{path} has terminal labels, whose masks come from its tokenizer",
                         "load it with its tokenizer", hint="terminals-need-tokenizer")
    return last
