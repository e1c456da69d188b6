"""What stage P writes (Pitfalls 2025 Sec. 3.1): the pre-tokenized texts of a regex's language, as DFAs.

    for_model   P of a tokenizer, built from its tokenizer.json blocks, cached by fingerprint
    domain      dom(P) when P is not total (NFC & co. are modelled on the texts they leave unchanged)
    language    Y = DET(PROJ_out(A o P)): the model texts (bytes, MARKER between pre-tokens) of L(A);
                OutsideDomain when L(A) is not contained in dom(P)
    table       a DFA as a numpy transition table (states x labels), for walking token texts

P is a function (one output per text), so Y holds exactly the outputs of the texts in L(A);
with A = every text it is R, the image of P, which canonical-check walks.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Any

import numpy as np
import pynini

from tokfst_cli.automata.fst_io import cached_fst
from tokfst_cli.automata.symbols import MARKER
from tokfst_cli.errors import InputError, LimitError
from tokfst_cli.pretok import build
from tokfst_cli.support.progress import report
from tokfst_cli.tokenizer.model import TokenizerModel


def for_model(model: TokenizerModel, cache: bool = True) -> pynini.Fst:
    """P for ``model``'s normalizer and pre-tokenizer (UnsupportedComponent names what is not modelled)."""
    data = {"normalizer": model.normalizer, "pre_tokenizer": model.pre_tokenizer}
    make = lambda: build.transducer(data)  # noqa: E731
    if not cache or not model.fingerprint:
        return make()
    p = model.__dict__.get("_pretok")  # once per loaded tokenizer (a decoding loop builds many)
    if p is None:
        p = model.__dict__["_pretok"] = cached_fst(f"pretok-{model.fingerprint}", make)
    return p


def variant(model: TokenizerModel, where: str) -> pynini.Fst:
    """P as it acts on a later segment (after an added token) or on text continuing a segment
    (:func:`inner`), cached by fingerprint."""
    data = {"normalizer": inner(model.normalizer, True, where),
            "pre_tokenizer": inner(model.pre_tokenizer, False, where)}
    make = lambda: build.transducer(data)  # noqa: E731
    return cached_fst(f"pretok-{where}-{model.fingerprint}", make) if model.fingerprint else make()


def inner(spec: Any, normalizer: bool, where: str) -> Any:
    """A normalizer or pre-tokenizer spec as it acts on a later segment (``where`` "segment":
    Metaspace's prepend_scheme first does not prepend) or on text continuing a segment after a
    pre-token boundary ("continuation": no text-start behaviour at all: Prepend, a left Strip,
    ByteLevel's and Metaspace's prefix space)."""
    if not isinstance(spec, dict):
        return spec
    kind = spec.get("type")
    key = "normalizers" if normalizer else "pretokenizers"
    if kind == "Sequence":
        return {**spec, key: [x for x in (inner(i, normalizer, where) for i in spec.get(key) or []) if x is not None]}
    if kind == "Metaspace" and (where == "continuation" or spec.get("prepend_scheme") == "first"):
        return {**spec, "prepend_scheme": "never", "add_prefix_space": False}
    if where == "segment":
        return spec
    if kind == "Prepend":
        return None
    if kind == "Strip":
        return {**spec, "strip_left": False}
    if kind == "ByteLevel":
        return {**spec, "add_prefix_space": False}
    return spec


class OutsideDomain(InputError):
    """A regex with texts outside P's domain: a normalizer modelled only on the texts it leaves
    unchanged (NFC, NFD, NFKC, NFKD) would change them."""

    def __init__(self, normalizer: str, example: str, after_others: bool = False):
        after = " once the normalizers before it have run" if after_others else ""
        super().__init__(f"{normalizer} changes some texts of this regex (e.g. {ascii(example)}){after}; tokfst "
                         f"models {normalizer} only on texts it leaves unchanged",
                         f"restrict the regex to {normalizer}-normalized text, or use the model level",
                         hint="normalizer-domain", normalizer=normalizer, example=example)


@dataclass(frozen=True)
class Domain:
    """dom(P) as the intersection of minimal DFAs over UTF-8 bytes (cheapest first), and the
    normalizer block that restricts it."""

    dfas: tuple[pynini.Fst, ...]
    normalizer: dict | None


def domain(model: TokenizerModel) -> Domain | None:
    """dom(P) for ``model``; None when P is total (every text has an output)."""
    dfas = build.domain(model.normalizer)
    return None if dfas is None else Domain(dfas, model.normalizer)


def _shortest(fst: pynini.Fst) -> bytes:
    """A shortest accepted string of a trimmed acceptor over byte labels (breadth first)."""
    zero = pynini.Weight.zero(fst.weight_type())
    back: dict[int, tuple[int, int] | None] = {fst.start(): None}
    todo = deque([fst.start()])
    while todo:
        s = todo.popleft()
        if fst.final(s) != zero:
            out = []
            while back[s] is not None:
                s, label = back[s]
                out.append(label)
            return bytes(b - 1 for b in reversed(out) if 0 < b <= 256)
        for arc in sorted(fst.arcs(s), key=lambda arc: arc.ilabel):
            if arc.nextstate not in back:
                back[arc.nextstate] = (s, arc.ilabel)
                todo.append(arc.nextstate)
    return b""


def check_domain(a: pynini.Fst, dom: Domain) -> None:
    """OutsideDomain naming the normalizer and a shortest text of L(a) outside one of dom(P)'s DFAs
    (the first that does not contain L(a)): A minus the DFA, emptiness, shortest path."""
    a = a.copy().rmepsilon().arcsort("olabel")
    for dfa in dom.dfas:
        outside = pynini.difference(a, dfa).connect()
        if outside.num_states():
            break
    else:
        return
    text = _shortest(outside)
    name, after = build.refusing(dom.normalizer, text) or (str((dom.normalizer or {}).get("type")), False)
    raise OutsideDomain(name, text.decode("utf-8", "replace"), after)


def language(a: pynini.Fst | None, p: pynini.Fst, max_states: int = 1_000_000,
             domain: Domain | None = None) -> pynini.Fst:
    """The minimal DFA of P's outputs on L(a) (on every text when ``a`` is None); with ``domain``
    (P not total), OutsideDomain unless L(a) is contained in dom(P)."""
    if a is not None and domain is not None:
        check_domain(a, domain)
    y = p.copy() if a is None else pynini.compose(a.copy().arcsort("olabel"), p, connect=True)
    if y.num_states() > max_states:
        raise LimitError("A o P", "max_states", max_states, y.num_states(), remedy="simplify")
    y.project("output").rmepsilon()
    y = pynini.determinize(y)
    report(y.num_states())
    if y.num_states() > max_states:
        raise LimitError("the pre-tokenized language", "max_states", max_states, y.num_states(), remedy="simplify")
    return y.minimize()


def table(dfa: pynini.Fst) -> tuple[np.ndarray, np.ndarray]:
    """(delta, final) of a DFA whose start is renumbered 0: delta[q, label] = next state or -1."""
    n = dfa.num_states()
    order = [dfa.start()] + [s for s in dfa.states() if s != dfa.start()]
    new = {s: i for i, s in enumerate(order)}
    delta = np.full((max(n, 1), MARKER + 2), -1, np.int32)
    final = np.zeros(max(n, 1), bool)
    zero = pynini.Weight.zero(dfa.weight_type())
    for s in order:
        final[new[s]] = dfa.final(s) != zero
        for arc in dfa.arcs(s):
            delta[new[s], arc.ilabel] = new[arc.nextstate]
    return delta, final
