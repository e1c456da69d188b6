"""Which properties an object has: required, counts and dependencies as constraints on words (seed 004 Sec. 5.1).

``required``, ``minProperties``, ``maxProperties`` and ``dependentRequired`` only look at
which keys are present, so on the word of member symbols (:mod:`.sequences`) they are
small automata: "contains k", "between m and n symbols", "no a without b". So are
``anyOf``/``oneOf``/``not`` over subschemas made of them alone, the common "one of these
properties is required": they are decided on the words too (:func:`split`), instead of as
Boolean operations on whole object automata, and a value that is not an object satisfies
each such subschema.
"""

from __future__ import annotations

import pynini

from . import sequences as seq
from .refs import ACTIVE

KEYWORDS = frozenset(("required", "minProperties", "maxProperties", "dependentRequired"))
Formula = tuple[str, list[tuple[dict, ...]]]  # (anyOf | oneOf | not, the conjunction of each subschema)


def _presence_only(c, schema) -> tuple[dict, ...] | None:
    """The subschema's conjunction if it has presence keywords only (else None)."""
    conj = c.flatten([schema])
    if conj is None or any(not KEYWORDS.issuperset(k for k in node if k in ACTIVE) for node in conj):
        return None
    return conj


def split(c, conj: tuple[dict, ...]) -> tuple[list[Formula], set[tuple[int, str]]]:
    """The applicators of ``conj`` over presence-only subschemas, and which (node, keyword) they are."""
    formulas, handled = [], set()
    for node in conj:
        for keyword in ("anyOf", "oneOf", "not"):
            if keyword not in node:
                continue
            branches = [_presence_only(c, s) for s in (node[keyword] if keyword != "not" else [node["not"]])]
            if all(b is not None for b in branches):
                formulas.append((keyword, branches))
                handled.add((id(node), keyword))
    return formulas, handled


def others_survive(formulas: list[Formula]) -> bool:
    """Do values that are not objects pass? (They satisfy every presence-only subschema.)"""
    return all(op == "anyOf" or (op == "oneOf" and len(branches) == 1) for op, branches in formulas)


def node_words(c, nodes, present: dict[str, int], alphabet: list[int], required: bool = True) -> pynini.Fst:
    """The words satisfying the presence keywords of ``nodes`` (``required`` too unless told not to)."""
    words = seq.star(alphabet)
    if required:
        for name in {k for x in nodes for k in x.get("required", ()) if isinstance(k, str)}:
            if name not in present:
                return pynini.Fst()
            words = seq.both(words, _contains(present[name], alphabet))
    lo = max([int(x["minProperties"]) for x in nodes if "minProperties" in x], default=0)
    hi = min([int(x["maxProperties"]) for x in nodes if "maxProperties" in x], default=None)
    lo, hi = c.count("minProperties", lo, False), c.count("maxProperties", hi, True)
    if lo or hi is not None:
        if hi is not None and hi < (lo or 0):
            return pynini.Fst()
        words = seq.both(words, seq.count(alphabet, lo or 0, hi))
    for a, needs in _dependencies(nodes):
        if a not in present:
            continue
        without_a = seq.star([x for x in alphabet if x != present[a]])
        if any(b not in present for b in needs):  # a cannot appear
            words = seq.both(words, without_a)
            continue
        for b in needs:
            words = seq.both(words, pynini.union(without_a, _contains(present[b], alphabet)))
    return words


def formula_words(c, formulas: list[Formula], present: dict[str, int], alphabet: list[int]) -> pynini.Fst:
    """The words satisfying every formula (anyOf: some branch; oneOf: exactly one; not: none)."""
    words = seq.star(alphabet)
    for op, branches in formulas:
        ws = [c.budget.dfa(node_words(c, b, present, alphabet), "the keys an object has") for b in branches]
        ws = [w if w is not None else pynini.Fst() for w in ws]
        if op == "anyOf":
            words = seq.both(words, pynini.union(*ws))
        elif op == "not":
            words = seq.minus(words, ws[0])
        else:
            one, more = pynini.Fst(), pynini.Fst()
            for w in ws:
                more = _dfa(pynini.union(more, seq.both(one.copy(), w.copy())))
                one = _dfa(pynini.union(seq.minus(one.copy(), w), seq.minus(seq.minus(w.copy(), one), more)))
            words = seq.both(words, one)
    return words


def _dfa(f: pynini.Fst) -> pynini.Fst:
    return pynini.determinize(f.rmepsilon()).minimize()


def _contains(label: int, alphabet: list[int]) -> pynini.Fst:
    return pynini.concat(pynini.concat(seq.star(alphabet), seq.symbols([label])), seq.star(alphabet))


def _dependencies(nodes) -> list[tuple[str, list[str]]]:
    """(key, the keys it requires) from dependentRequired and array-valued dependencies."""
    out = []
    for x in nodes:
        for keyword in ("dependentRequired", "dependencies"):
            deps = x.get(keyword)
            if isinstance(deps, dict):
                out += [(k, [n for n in v if isinstance(n, str)]) for k, v in deps.items() if isinstance(v, list)]
    return out
