"""Stage P for WordPiece: the normalizer and pre-tokenizer as a byte transducer (Pitfalls 2025 Sec. 3.1).

Hugging Face's BERT pipeline normalizes the text (``BertNormalizer``: clean control
characters, map whitespace to a space, isolate CJK characters, strip accents, lowercase) and
then pre-tokenizes it (``BertPreTokenizer``: split on whitespace, which is dropped, and isolate
every punctuation character). Both act character by character, so P is built from per-code-point
tables that are read off the tokenizers library itself (the oracle), once per configuration,
and cached:

* ``norm[c]``: the normalized string of the single character c;
* ``kind[x]``: how the pre-tokenizer treats a character x of normalized text: ``o`` (part of a
  word), ``w`` (whitespace: separates words, dropped), ``p`` (punctuation: a word by itself).

P maps UTF-8 text to the pre-tokenized normalized text: the words' bytes separated by single
MARKER labels (no leading or trailing marker). It has three states: S0 (no word yet), IN
(inside a word of ``o`` characters), B (after a word, a separator is due before the next).

Modelled configurations: normalizer ``BertNormalizer`` (any flags), ``Lowercase`` or none;
pre-tokenizer ``BertPreTokenizer``, ``WhitespaceSplit`` or none. Anything else is refused.
Known limit of the per-character view: NFD's canonical reordering of several combining marks
with non-zero combining classes that are not stripped (none in ordinary text).
"""

from __future__ import annotations

import bisect
import hashlib
import json
from dataclasses import dataclass
from typing import Any

import pynini
import tokenizers

from tokfst_cli.automata import utf8
from tokfst_cli.automata.fst_io import cached_fst
from tokfst_cli.automata.fsts import linear, ranges_acceptor
from tokfst_cli.automata.symbols import MARKER, marked_pieces
from tokfst_cli.errors import InputError, TokfstError
from tokfst_cli.support import cache
from tokfst_cli.tokenizer.model import TokenizerModel

NORMALIZERS = ("BertNormalizer", "Lowercase")
PRE_TOKENIZERS = ("BertPreTokenizer", "WhitespaceSplit")
_S0, _B, _IN = 0, 1, 2
_TABLE_VERSION = 1


def check_supported(model: TokenizerModel) -> None:
    """Refuse normalizer/pre-tokenizer configurations that P does not model (never approximate)."""
    for what, spec, allowed in (("normalizer", model.normalizer, NORMALIZERS),
                                ("pre-tokenizer", model.pre_tokenizer, PRE_TOKENIZERS)):
        if spec is not None and spec.get("type") not in allowed:
            raise InputError(
                f"{model.source}: the {what} {spec.get('type')!r} is not modelled for canonical WordPiece",
                f"tokfst models the {what}s {', '.join(allowed)} (or none)")


@dataclass
class Tables:
    """Per-character behaviour of the normalizer and pre-tokenizer, as code point ranges."""

    same: dict[str, list[tuple[int, int]]]  # kind -> ranges of characters the normalizer keeps
    deleted: list[tuple[int, int]]
    wrapped: list[tuple[int, int]]  # c -> " c " with c a word character (CJK isolation)
    mapped: dict[int, str]  # every other character -> its normalized string
    kind: dict[int, str]  # kinds of the characters in mapped's values


def _oracle(model: TokenizerModel) -> tokenizers.Tokenizer:
    spec = {"version": "1.0", "truncation": None, "padding": None, "added_tokens": [],
            "normalizer": model.normalizer, "pre_tokenizer": model.pre_tokenizer, "post_processor": None,
            "decoder": None, "model": {"type": "WordLevel", "vocab": {"a": 0}, "unk_token": "a"}}
    return tokenizers.Tokenizer.from_str(json.dumps(spec))


def _kind_of(pre, x: str) -> str:
    if pre is None:
        return "o"
    pieces = [p for p, _ in pre.pre_tokenize_str("a" + x + "a")]
    if pieces == ["a" + x + "a"]:
        return "o"
    if pieces == ["a", "a"]:
        return "w"
    if pieces == ["a", x, "a"]:
        return "p"
    raise TokfstError(f"the pre-tokenizer splits {x!r} in a way tokfst does not model: {pieces}",
                      "report this tokenizer configuration")


def _compute_tables(model: TokenizerModel) -> Tables:
    tok = _oracle(model)
    norm, pre = tok.normalizer, tok.pre_tokenizer
    same: dict[str, list[int]] = {"o": [], "w": [], "p": []}
    deleted, wrapped, mapped = [], [], {}
    for cp in range(utf8.MAX_CODE_POINT + 1):
        if utf8.SURROGATES[0] <= cp <= utf8.SURROGATES[1]:
            continue
        c = chr(cp)
        out = norm.normalize_str(c) if norm is not None else c
        if out == c:
            same[_kind_of(pre, c)].append(cp)
        elif out == "":
            deleted.append(cp)
        elif out == f" {c} " and _kind_of(pre, " ") == "w" and _kind_of(pre, c) == "o":
            wrapped.append(cp)
        else:
            mapped[cp] = out
    kind = {ord(x): _kind_of(pre, x) for out in mapped.values() for x in out}
    return Tables({k: utf8.ranges_of(v) for k, v in same.items()}, utf8.ranges_of(deleted),
                  utf8.ranges_of(wrapped), mapped, kind)


def _config_key(model: TokenizerModel, *extra: Any) -> str:
    """A cache key for what P depends on: the normalizer and pre-tokenizer specs (and ``extra``)."""
    spec = json.dumps([*extra, model.normalizer, model.pre_tokenizer], sort_keys=True)
    return hashlib.sha256(spec.encode()).hexdigest()[:20]


def tables(model: TokenizerModel) -> Tables:
    """The per-character tables, from the cache (sealed, verified on read) or computed with the
    tokenizers library (~4 s)."""
    path = cache.cache_dir() / (f"v{_TABLE_VERSION}-pretables-"
                                f"{_config_key(model, _TABLE_VERSION, tokenizers.__version__)}.json")
    data = cache.load(path)
    if data is not None:
        try:
            d = json.loads(data)
            return Tables({k: [tuple(r) for r in v] for k, v in d["same"].items()},
                          [tuple(r) for r in d["deleted"]], [tuple(r) for r in d["wrapped"]],
                          {int(k): v for k, v in d["mapped"].items()}, {int(k): v for k, v in d["kind"].items()})
        except (ValueError, KeyError, TypeError, AttributeError, UnicodeDecodeError):
            pass
    t = _compute_tables(model)
    cache.store(path, json.dumps({"same": t.same, "deleted": t.deleted, "wrapped": t.wrapped,
                                  "mapped": t.mapped, "kind": t.kind}).encode())
    return t


def _step(state: int, kinds: list[tuple[str, str]]) -> tuple[int, list[int]]:
    """Run the word splitter over normalized characters: (next state, output labels)."""
    out: list[int] = []
    for k, x in kinds:
        if k == "w":
            state = _S0 if state == _S0 else _B
            continue
        if state == _B or (state == _IN and k == "p"):
            out.append(MARKER)
        out.extend(b + 1 for b in x.encode("utf-8"))
        state = _IN if k == "o" else _B
    return state, out


class _Builder:
    """P's three states plus spliced pieces (class acceptors, explicit character paths)."""

    def __init__(self) -> None:
        self.f = pynini.Fst()
        self.one = pynini.Weight.one(self.f.weight_type())
        self.f.add_states(3)
        self.f.set_start(_S0)
        for s in (_S0, _B, _IN):
            self.f.set_final(s)

    def path(self, src: int, ilabels: list[int], olabels: list[int], dst: int) -> None:
        """src --ilabels:olabels--> dst with arcs straight into dst (no epsilon: dst's other
        pieces must not be copied onto 40k path ends by rmepsilon)."""
        n = max(len(ilabels), len(olabels), 1)
        states = [src] + [self.f.add_state() for _ in range(n - 1)] + [dst]
        for i in range(n):
            il = ilabels[i] if i < len(ilabels) else 0
            ol = olabels[i] if i < len(olabels) else 0
            self.f.add_arc(states[i], pynini.Arc(il, ol, self.one, states[i + 1]))

    def splice(self, src: int, piece: pynini.Fst, dst: int) -> None:
        """Copy ``piece`` between src and dst (epsilon arcs in and out)."""
        offset = self.f.num_states()
        self.f.add_states(piece.num_states())
        for s in piece.states():
            for arc in piece.arcs(s):
                self.f.add_arc(s + offset, pynini.Arc(arc.ilabel, arc.olabel, self.one, arc.nextstate + offset))
            if piece.final(s) != pynini.Weight.zero(piece.weight_type()):
                self.f.add_arc(s + offset, pynini.Arc(0, 0, self.one, dst))
        self.f.add_arc(src, pynini.Arc(0, 0, self.one, piece.start() + offset))


def _insert(labels: list[int]) -> pynini.Fst:
    return linear([], labels)


def _identity_piece(ranges: list[tuple[int, int]], before: list[int], after: list[int]) -> pynini.Fst:
    return pynini.concat(pynini.concat(_insert(before), ranges_acceptor(ranges)), _insert(after))


def build_transducer(model: TokenizerModel, outputs_only: bool = False) -> pynini.Fst:
    """P: UTF-8 text -> words of the normalized, pre-tokenized text separated by MARKER.

    ``outputs_only``: a DFA of P's output language (PROJ of P over all text); characters that
    map to one character join the range pieces instead of getting a path each.
    """
    t = tables(model)
    b = _Builder()
    pieces: dict[tuple[int, tuple[int, ...], int], list[tuple[int, int]]] = {}
    paths: set[tuple[int, tuple[int, ...], tuple[int, ...], int]] = set()
    for s in (_S0, _B, _IN):
        for k, ranges in t.same.items():
            if ranges and k != "w":
                nxt, out = _step(s, [(k, "a")])
                pieces.setdefault((s, tuple(out[:-1]), nxt), []).extend(ranges)
        if t.wrapped:
            nxt, out = _step(s, [("w", " "), ("o", "a"), ("w", " ")])
            pieces.setdefault((s, tuple(out[:-1]), nxt), []).extend(t.wrapped)
        # Deleted characters change nothing; kept whitespace ends a word (IN -> B), else nothing.
        dropped = t.deleted + (t.same["w"] if s != _IN else [])
        if dropped:
            b.splice(s, pynini.cross(ranges_acceptor(utf8.ranges_of_ranges(dropped)), _insert([])), s)
        if s == _IN and t.same["w"]:
            b.splice(s, pynini.cross(ranges_acceptor(t.same["w"]), _insert([])), _B)
        for cp, normalized in t.mapped.items():
            nxt, out = _step(s, [(t.kind[ord(x)], x) for x in normalized])
            word = bytes(x - 1 for x in out if x != MARKER).decode("utf-8")
            if outputs_only and len(word) == 1 and out[-1] != MARKER:
                pieces.setdefault((s, tuple(out[:-len(word.encode())]), nxt), []).append((ord(word), ord(word)))
            else:
                ilabels = () if outputs_only else tuple(x + 1 for x in chr(cp).encode("utf-8"))
                paths.add((s, ilabels, tuple(out), nxt))
    for (s, before, nxt), ranges in pieces.items():
        b.splice(s, _identity_piece(utf8.ranges_of_ranges(ranges), list(before), []), nxt)
    trie: dict[tuple, int] = {}
    for s, ilabels, out, nxt in paths:
        if not outputs_only or not out:
            b.path(s, list(ilabels), list(out), nxt)
            continue
        node = s  # outputs only: share prefixes (Hangul syllables decompose to 11k jamo triples)
        for i, lab in enumerate(out[:-1]):
            key = (s, nxt, out[:i + 1])
            if key not in trie:
                trie[key] = b.f.add_state()
                b.f.add_arc(node, pynini.Arc(0, lab, b.one, trie[key]))
            node = trie[key]
        b.f.add_arc(node, pynini.Arc(0, out[-1], b.one, nxt))
    if outputs_only:
        return pynini.determinize(b.f.project("output").rmepsilon()).minimize()
    return b.f.rmepsilon().arcsort("ilabel")


_LOADED: dict[str, pynini.Fst] = {}


def transducer(model: TokenizerModel) -> pynini.Fst:
    """P for this tokenizer's normalizer and pre-tokenizer, cached on disk and in memory by their configuration."""
    check_supported(model)
    key = _config_key(model)
    if key not in _LOADED:
        _LOADED[key] = cached_fst(f"pre-{key}", lambda: build_transducer(model))
    return _LOADED[key]


def output_language(model: TokenizerModel) -> pynini.Fst:
    """Every pre-tokenized normalized text (PROJ(Sigma* o P)) as a minimal DFA, cached."""
    check_supported(model)
    return cached_fst(f"preout-{_config_key(model)}", lambda: build_transducer(model, outputs_only=True))


def apply(model: TokenizerModel, text: str) -> list[str]:
    """Words of the pre-tokenized normalized text, from the tables (a reference for tests and checks)."""
    t = tables(model)
    state, labels = _S0, []
    for c in text:
        cp = ord(c)
        if cp in t.mapped:
            kinds = [(t.kind[ord(x)], x) for x in t.mapped[cp]]
        elif _in(cp, t.deleted):
            kinds = []
        elif _in(cp, t.wrapped):
            kinds = [("w", " "), ("o", c), ("w", " ")]
        else:
            kinds = [(next(k for k, r in t.same.items() if _in(cp, r)), c)]
        state, out = _step(state, kinds)
        labels.extend(out)
    return marked_pieces(labels)


def _in(cp: int, ranges: list[tuple[int, int]]) -> bool:
    i = bisect.bisect_right(ranges, (cp, utf8.MAX_CODE_POINT + 1)) - 1
    return i >= 0 and ranges[i][0] <= cp <= ranges[i][1]

