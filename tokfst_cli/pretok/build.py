"""Stage P for BPE: a tokenizer.json's normalizer and pre-tokenizer as one transducer (Pitfalls 2025 Sec. 3.1).

P maps the UTF-8 text a regex describes to what HF's model sees: the normalized text (as UTF-8;
``▁`` stays ``▁``; byte-level tokenizers keep raw bytes, the bijective bytes-to-unicode map being
left to the token surfaces), cut into pre-tokens with ``symbols.MARKER`` between them. The
normalizer acts on the whole text, then each pre-tokenizer of a Sequence acts on every piece
alone (``P_k (MARKER P_k)*``), as in HF. Every component is built from its JSON block:

    normalizers     NFC, NFD, NFKC, NFKD (the identity on the texts they leave unchanged, see
                    :mod:`.unicode_norm`; P's domain is then restricted, :func:`domain`),
                    Prepend, Replace (String or Regex), Lowercase, Strip, Sequence
    pre-tokenizers  ByteLevel (add_prefix_space, use_regex), Split (Regex/String, every behaviour,
                    invert), Metaspace (replacement, prepend_scheme, split), Digits, Punctuation,
                    Whitespace, WhitespaceSplit, Sequence

Anything else is refused by name (:class:`UnsupportedComponent`), never approximated. Character
sets that are not regex classes (Digits' numeric, Punctuation's, WhitespaceSplit's whitespace)
are read off the component itself by :mod:`.charclass`.
"""

from __future__ import annotations

import json
import re
from functools import lru_cache

import pynini

from tokfst_cli.automata.fsts import linear, ranges_acceptor
from tokfst_cli.automata.symbols import MARKER, byte_table, text_byte_table
from tokfst_cli.errors import InputError
from tokfst_cli.pretok import charclass, split, unicode_norm
from tokfst_cli.text.regex import compile_regex
from tokfst_cli.tokenizer.model import load

GPT2_PATTERN = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"
BEHAVIOR = {"Isolated": "isolated", "Removed": "removed", "MergedWithPrevious": "merged_with_previous",
            "MergedWithNext": "merged_with_next", "Contiguous": "contiguous"}
REMOVES = ("Whitespace", "WhitespaceSplit")  # pre-tokenizers that can drop text (first piece may move)


class UnsupportedComponent(InputError):
    """A normalizer or pre-tokenizer that tokfst does not model."""

    def __init__(self, kind: str, name: str, detail: str = ""):
        super().__init__(f"the tokenizer's {kind} {name}{detail} is not modelled by tokfst's preprocessing P",
                         "use a tokenizer whose components are listed in the README (What canonical means)",
                         kind=kind, name=name)


def _bytes() -> pynini.Fst:
    return pynini.union(*(linear([b + 1]) for b in range(256))).optimize()


def _star() -> pynini.Fst:
    return _bytes().closure()


def _text(s: str) -> pynini.Fst:
    return linear([b + 1 for b in s.encode("utf-8")])


def _insert(s: str) -> pynini.Fst:
    return pynini.cross(pynini.accep(""), _text(s)) if s else pynini.accep("")


def _prefix_unless(prefix: str) -> pynini.Fst:
    """Non-empty text: ``prefix`` written in front unless the text already starts with it."""
    rest = pynini.difference(pynini.closure(_bytes(), 1), pynini.concat(_text(prefix), _star())).optimize()
    return pynini.union(pynini.concat(_text(prefix), _star()), pynini.concat(_insert(prefix), rest)).optimize()


def _per_piece(p: pynini.Fst, first: pynini.Fst | None = None) -> pynini.Fst:
    """A pre-tokenizer applied to every piece alone: first (MARKER p)*."""
    sep = pynini.concat(linear([MARKER]), p).closure()
    return pynini.concat((first or p).copy(), sep).optimize()


def _pattern(spec: dict, where: str) -> str:
    if "Regex" in spec:
        return spec["Regex"]
    if "String" in spec:
        return re.escape(spec["String"])
    raise UnsupportedComponent(where, "pattern", f" {spec!r}")


def _set_pattern(name: str, ranges: charclass.Ranges, plus: bool) -> tuple[str, dict]:
    atom = f"\\p{{tokfst:{name}}}"
    return atom + ("+" if plus else ""), {atom: ranges}


@lru_cache(maxsize=None)
def _probed(component: str) -> tuple[tuple[int, int], ...]:
    """The characters a set-based pre-tokenizer treats specially, read off HF itself."""
    import numpy as np  # deferred: start-up of the command line
    from tokenizers import pre_tokenizers as pt  # deferred: HF's tokenizers only where the oracle is asked (start-up)

    text = charclass._all_scalars()
    if component in ("WhitespaceSplit", "Punctuation"):  # the characters they remove
        tok = pt.WhitespaceSplit() if component == "WhitespaceSplit" else pt.Punctuation(behavior="removed")
        kept = np.zeros(len(text), bool)
        for _, lo, hi in charclass.pieces(tok, text):
            kept[lo:hi] = True
        return tuple(charclass.ranges_of(charclass._code_point(np.flatnonzero(~kept))))
    # Digits: the runs it cuts all of Unicode into are all digits or none; one probe per run
    single = pt.Digits(individual_digits=True)
    digit = np.zeros(len(text), bool)
    for piece, lo, hi in charclass.pieces(pt.Digits(individual_digits=False), text):
        digit[lo:hi] = len(single.pre_tokenize_str("a" + piece[0] + "a")) == 3
    return tuple(charclass.ranges_of(charclass._code_point(np.flatnonzero(digit))))


def pre_tokenizer(spec: dict | None, first_of_text: bool = True) -> pynini.Fst:
    """One pre-tokenizer block -> transducer over normalized bytes, MARKER between pieces."""
    if spec is None:
        return _star()
    kind = spec.get("type")
    if kind == "Sequence":
        items = spec.get("pretokenizers") or []
        out = _star()
        removed = False
        for item in items:
            if removed and item.get("type") == "Metaspace" and item.get("prepend_scheme") == "first":
                raise UnsupportedComponent("pre-tokenizer", "Metaspace", " (prepend_scheme first after a pre-tokenizer "
                                           "that removes text)")
            rest = pre_tokenizer(item, False)
            first = pre_tokenizer(item, True) if "Metaspace" in repr(item) else rest  # only Metaspace differs
            out = pynini.compose(out, _per_piece(rest, first)).optimize()
            removed = removed or item.get("type") in REMOVES or (
                item.get("type") == "Split" and item.get("behavior") == "Removed")
        return out
    if kind == "ByteLevel":
        p = _star()
        if spec.get("add_prefix_space"):
            p = pynini.union(_prefix_unless(" "), pynini.accep("")).optimize()
        if spec.get("use_regex", True):
            p = pynini.compose(p, split.split_transducer(GPT2_PATTERN)).optimize()
        return p
    if kind == "Split":
        behavior = spec.get("behavior", "Isolated")
        if behavior not in BEHAVIOR:
            raise UnsupportedComponent("pre-tokenizer", "Split", f" behavior {behavior}")
        return split.split_transducer(_pattern(spec.get("pattern", {}), "pre-tokenizer Split"), BEHAVIOR[behavior],
                                      bool(spec.get("invert")))
    if kind == "Metaspace":
        return _metaspace(spec, first_of_text)
    if kind == "Digits":
        pat, extra = _set_pattern("digits", list(_probed("Digits")), not spec.get("individual_digits"))
        return split.split_transducer(pat, "isolated", extra=extra)
    if kind == "Punctuation":
        pat, extra = _set_pattern("punctuation", list(_probed("Punctuation")), False)
        behavior = spec.get("behavior", "Isolated")
        if behavior not in BEHAVIOR:
            raise UnsupportedComponent("pre-tokenizer", "Punctuation", f" behavior {behavior}")
        return split.split_transducer(pat, BEHAVIOR[behavior], extra=extra)
    if kind == "Whitespace":
        return split.split_transducer(r"\w+|[^\w\s]+", "removed", invert=True)
    if kind == "WhitespaceSplit":
        pat, extra = _set_pattern("whitespace", list(_probed("WhitespaceSplit")), False)
        return split.split_transducer(pat, "removed", extra=extra)
    raise UnsupportedComponent("pre-tokenizer", str(kind))


def _metaspace(spec: dict, first_of_text: bool) -> pynini.Fst:
    rep = spec.get("replacement", "▁")
    scheme = spec.get("prepend_scheme", "always" if spec.get("add_prefix_space", True) else "never")
    if scheme not in ("always", "first", "never"):
        raise UnsupportedComponent("pre-tokenizer", "Metaspace", f" prepend_scheme {scheme}")
    p = split.split_transducer(" ", "isolated", content=rep.encode("utf-8"))  # every space -> replacement
    if scheme == "always" or (scheme == "first" and first_of_text):
        p = pynini.compose(p, pynini.union(_prefix_unless(rep), pynini.accep(""))).optimize()
    if spec.get("split", True):
        p = pynini.compose(p, split.split_transducer(re.escape(rep), "merged_with_next")).optimize()
    return p


def normalizer(spec: dict | None) -> pynini.Fst:
    """One normalizer block -> transducer over UTF-8 bytes (the whole text)."""
    if spec is None:
        return _star()
    kind = spec.get("type")
    if kind == "Sequence":
        optimize = not _restricting(spec)
        out = _star() if optimize else None
        for item in spec.get("normalizers") or []:
            out = normalizer(item) if out is None else _then(out, normalizer(item), optimize)
        return _star() if out is None else out
    if kind == "Prepend":
        return pynini.union(pynini.concat(_insert(spec.get("prepend", "")), pynini.closure(_bytes(), 1)),
                            pynini.accep("")).optimize()
    if kind == "Replace":
        pattern = _pattern(spec.get("pattern", {}), "normalizer Replace")
        return split.split_transducer(pattern, "isolated", content=spec.get("content", "").encode("utf-8"))
    if kind == "Lowercase":
        return _lowercase()
    if kind == "Strip":
        return _strip(bool(spec.get("strip_left", True)), bool(spec.get("strip_right", True)))
    if kind in unicode_norm.FORMS:
        return unicode_norm.normal_form(kind).copy()
    raise UnsupportedComponent("normalizer", str(kind))


def _restricting(spec: dict | None) -> bool:
    """Does the normalizer block hold a component modelled only on part of the texts (NFC...)?"""
    if not spec:
        return False
    if spec.get("type") == "Sequence":
        return any(_restricting(item) for item in spec.get("normalizers") or [])
    return spec.get("type") in unicode_norm.FORMS


def domain(spec: dict | None) -> tuple[pynini.Fst, ...] | None:
    """DFAs whose intersection is the set of texts the normalizer is modelled on (P's domain, the
    pre-tokenizers being total), cheapest first; None when that is every text."""
    return _domain(json.dumps(spec, sort_keys=True)) if _restricting(spec) else None


@lru_cache(maxsize=None)
def _domain(key: str) -> tuple[pynini.Fst, ...]:
    spec = json.loads(key)
    items = (spec.get("normalizers") or []) if spec.get("type") == "Sequence" else [spec]
    items = items[: max(i for i, item in enumerate(items) if _restricting(item)) + 1]  # the rest is total
    first = (items[0] or {}).get("type")
    quick = (unicode_norm.ordered_form(first),) if first in unicode_norm.FORMS else ()
    if len(items) == 1 and first in unicode_norm.FORMS:
        return quick + (unicode_norm.normal_form(first),)
    dom = normalizer({"type": "Sequence", "normalizers": items}).project("input").rmepsilon()
    return quick + (pynini.determinize(dom).minimize().arcsort("ilabel"),)


def refusing(spec: dict | None, text: bytes) -> tuple[str, bool] | None:
    """The component of the normalizer block that is not modelled on ``text`` (its name, and
    whether the components before it changed the text), or None when the whole block is."""
    items = (spec.get("normalizers") or []) if spec and spec.get("type") == "Sequence" else [spec]
    current = text
    for item in items:
        if not item:
            continue
        if item.get("type") == "Sequence":
            inner = refusing(item, current)
            if inner is not None:
                return inner[0], inner[1] or current != text
        out = pynini.compose(linear([b + 1 for b in current]), normalizer(item)).connect()
        if out.num_states() == 0:
            return str(item.get("type")), current != text
        current = _output(out.project("output").rmepsilon())
    return None


def _output(fst: pynini.Fst) -> bytes:
    """The one string of a linear-ish acceptor (the unique output of P's normalizer on a text)."""
    path = pynini.shortestpath(fst).topsort()
    return bytes(arc.ilabel - 1 for s in path.states() for arc in path.arcs(s) if arc.ilabel)


@lru_cache(maxsize=None)
def _lowercase_table() -> tuple[tuple[tuple[int, int], ...], tuple[tuple[str, str], ...]]:
    """HF's Lowercase per character (it maps characters one by one): kept ranges and changed pairs."""
    from tokenizers import normalizers as nm  # deferred: HF's tokenizers only where the oracle is asked (start-up)

    text = charclass._all_scalars().replace("\0", "")
    lowered = nm.Lowercase().normalize_str("\0".join(text)).split("\0")
    if len(lowered) != len(text):
        raise UnsupportedComponent("normalizer", "Lowercase", " (not character by character in this version)")
    same = [ord(c) for c, low in zip(text, lowered) if c == low] + [0]
    changed = tuple((c, low) for c, low in zip(text, lowered) if c != low)
    import numpy as np  # deferred: start-up of the command line
    return tuple(charclass.ranges_of(np.array(same, np.int64))), changed


def _lowercase() -> pynini.Fst:
    kept, changed = _lowercase_table()
    pairs = [pynini.cross(_text(c), _text(low)) for c, low in changed]
    return pynini.union(ranges_acceptor(list(kept)), *pairs).closure().optimize()


def _strip(left: bool, right: bool) -> pynini.Fst:
    """HF's Strip: whitespace (Rust's char::is_whitespace) removed at the start and/or end of the text."""
    ws = list(_probed("WhitespaceSplit"))
    space, other = ranges_acceptor(ws), ranges_acceptor(charclass.complement(ws))
    drop = pynini.cross(space, pynini.accep("")).closure()
    any_char = pynini.union(space, other)
    body = pynini.union(pynini.accep(""), other, pynini.concat(pynini.concat(other, any_char.closure()), other))
    if not left:
        body = pynini.union(pynini.accep(""), pynini.concat(any_char.closure(), other))
    if not right:
        body = pynini.union(pynini.accep(""), pynini.concat(other, any_char.closure()))
    if not left and not right:
        return any_char.closure().optimize()
    return pynini.concat(pynini.concat(drop if left else pynini.accep(""), body),
                         drop if right else pynini.accep("")).optimize()


def transducer(data: dict) -> pynini.Fst:
    """P of a whole tokenizer.json (its ``normalizer`` then its ``pre_tokenizer``)."""
    n = normalizer(data.get("normalizer"))
    return _then(n, pre_tokenizer(data.get("pre_tokenizer"), True), not _restricting(data.get("normalizer")))


def _then(first: pynini.Fst, second: pynini.Fst, optimize: bool = True) -> pynini.Fst:
    """first, then second (composition), optimized unless ``optimize`` is False: products with a
    Unicode normal form (tens of thousands of states, deterministic already) would take seconds."""
    out = pynini.compose(first, second)
    return out.optimize() if optimize else out.connect().arcsort("ilabel")


def for_tokenizer(name_or_path: str, pattern: str | None = None) -> pynini.Fst:
    """P of a tokenizer (a path or a bundled name), or A o P for a regex, with symbol tables."""

    model = load(name_or_path)  # validates the file, one-line errors
    p = transducer(json.loads(open(model.source, encoding="utf-8").read()))
    if pattern is not None:
        p = pynini.compose(compile_regex(pattern).fst, p).connect()
    return p.set_input_symbols(byte_table()).set_output_symbols(text_byte_table())
