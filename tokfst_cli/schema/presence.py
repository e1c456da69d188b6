"""Which members an object has: presence and member-wise subschemas as constraints on words (Koo et al. 2024 Sec. 5.1).

``required``, ``minProperties``, ``maxProperties`` and ``dependentRequired`` only look at
which keys are present, so on the word of member symbols (:mod:`.sequences`) they are
small automata: "contains k", "between m and n symbols", "no a without b". A subschema that
asks of objects only those and ``properties``, ``patternProperties``, ``additionalProperties``
is *member-wise*: an object satisfies it iff each member's value does (the value schemas its
key gets there) and the presence keywords hold (a ``type`` without object, or constants that
are not objects, fail every object; other types' keywords do not apply to objects). Over
member-wise subschemas, ``oneOf``/``not``/``if``-``then``-``else``/``dependentSchemas`` (and
``anyOf`` where the object is shaped by other keywords) are decided for objects on the words
(:func:`split`): each member symbol is split by the value tests of those subschemas
(:mod:`.objects`, one symbol per Boolean combination that has values), a subschema becomes the
words over the symbols it allows, and the Boolean operations act on these small word
automata instead of whole object automata; the other types take the Boolean operations
(:mod:`.applicators`). With one object branch or none the operations on automata are cheaper
and are kept.
"""

from __future__ import annotations

import pynini

from tokfst_cli.schema import sequences as seq
from tokfst_cli.schema.applicators import tagged
from tokfst_cli.schema.automata import KEYWORDS as TYPE_KEYWORDS
from tokfst_cli.schema.automata import TYPES
from tokfst_cli.schema.context import Position
from tokfst_cli.schema.refs import ACTIVE

KEYWORDS = frozenset(("required", "minProperties", "maxProperties", "dependentRequired"))
MEMBERS = KEYWORDS | {"properties", "patternProperties", "additionalProperties"}
Conj = tuple[dict, ...]
Formula = tuple[str, list[Conj]]  # (anyOf | oneOf | not | if, the conjunction of each subschema)
# "if" has three: the condition, then, else (an absent one is (), every object)


NO_OBJECT: Conj = ({"minProperties": 1, "maxProperties": 0},)  # a subschema no object satisfies
_OTHER_TYPES = frozenset().union(*(TYPE_KEYWORDS[t] for t in TYPES if t != "object"))


def _member_wise(c, schema) -> Conj | None:
    """What the subschema asks of objects, if member-wise (see the module docstring): its
    conjunction, or :data:`NO_OBJECT` (``false``, a ``type`` without object, constants that are
    not objects); None if it is not member-wise. Keywords of other types do not apply to objects."""
    conj = c.flatten([schema])
    if conj is None:
        return NO_OBJECT
    for node in conj:
        types = node.get("type")
        if types is not None and "object" not in ({types} if isinstance(types, str) else set(types)):
            return NO_OBJECT
    for node in conj:
        if "const" in node or "enum" in node:
            constants = ([node["const"]] if "const" in node else []) + list(node.get("enum") or [])
            return None if any(isinstance(v, dict) for v in constants) else NO_OBJECT
    asked = {k for node in conj for k in node if k in ACTIVE} - {"type"} - _OTHER_TYPES
    return conj if MEMBERS.issuperset(asked) else None


def split(c, conj: Conj, pos: Position) -> tuple[list[Formula], set[tuple[int, str]]]:
    """The applicators of ``conj`` at ``pos`` over member-wise subschemas, and which (node, keyword)
    they are. A oneOf over objects that are TOP here and that its branches tell apart
    (:func:`.applicators.tagged`) is left to the Boolean operations: a union of the branches."""
    formulas, handled = [], set()
    shaped = any(TYPE_KEYWORDS["object"] & node.keys() for node in conj)  # else the objects are TOP

    def take(node: dict, keyword: str, op: str, schemas: list) -> None:
        if op == "oneOf" and not shaped and all(map(all, tagged(c, schemas, pos))):
            return
        branches = [_member_wise(c, s) if s is not None else () for s in schemas]
        objects = sum(b is not NO_OBJECT for b in (branches[:1] if op in ("if", "not") else branches))
        if all(b is not None for b in branches) and objects >= (1 if op in ("if", "not") else 2):
            # (with one object branch or none, the Boolean operations on automata cost less)
            formulas.append((op, branches))
            handled.add((id(node), keyword))

    for node in conj:
        for keyword in ("anyOf", "oneOf", "not") if shaped else ("oneOf", "not"):  # anyOf of TOP: a union
            if keyword in node:
                take(node, keyword, keyword, node[keyword] if keyword != "not" else [node["not"]])
        if "if" in node and ("then" in node or "else" in node):
            take(node, "if", "if", [node["if"], node.get("then"), node.get("else")])
        for keyword in ("dependentSchemas", "dependencies"):
            deps = node.get(keyword)
            if not isinstance(deps, dict) or not any(isinstance(v, (dict, bool)) for v in deps.values()):
                continue
            subs = [(k, v) for k, v in deps.items() if isinstance(v, (dict, bool))]
            if all(_member_wise(c, v) is not None for _, v in subs):  # k -> S: if "has k" then S
                for k, v in subs:
                    formulas.append(("if", [(c.has_key(k),), _member_wise(c, v), ()]))
                handled.add((id(node), keyword))
    return formulas, handled


def branches(formulas: list[Formula]) -> list[Conj]:
    """The distinct subschemas of ``formulas``, in order of first use."""
    out: dict[tuple[int, ...], Conj] = {}
    for _, bs in formulas:
        for b in bs:
            out.setdefault(tuple(id(n) for n in b), b)
    return list(out.values())


def node_words(c, nodes, present: dict[str, list[int]], alphabet: list[int], words: pynini.Fst,
               required: bool = True) -> pynini.Fst:
    """The ``words`` satisfying the presence keywords of ``nodes`` (``required`` too unless told
    not to). Start from the ordered words of the object: "contains k" for n keys over all words
    has 2^n states, over the ordered ones a few."""
    words = _dfa(words)
    if required:
        for name in {k for x in nodes for k in x.get("required", ()) if isinstance(k, str)}:
            if not present.get(name):
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
        if not present.get(a):
            continue
        without_a = seq.star([x for x in alphabet if x not in present[a]])
        if any(not present.get(b) for b in needs):  # a cannot appear
            words = seq.both(words, without_a)
            continue
        for b in needs:
            words = seq.both(words, pynini.union(without_a, _contains(present[b], alphabet)))
    return words


def formula_words(c, formulas: list[Formula], present: dict[str, list[int]], alphabet: list[int],
                  allowed: dict[tuple[int, ...], list[int]], words: pynini.Fst) -> pynini.Fst:
    """The ``words`` satisfying every formula (anyOf: some branch; oneOf: exactly one; not: none;
    if: the condition and then, or not the condition and else); ``allowed``: per subschema (by
    its nodes' ids), the symbols whose values it accepts. Each subschema's words are taken
    within ``words`` (Boolean operations commute with that intersection)."""
    words = _dfa(words)
    for op, bs in formulas:
        ws = []
        for b in bs:
            w = node_words(c, b, present, alphabet, seq.both(seq.star(allowed[tuple(id(n) for n in b)]), words.copy()))
            ws.append(w if w.num_states() else pynini.Fst())
        if op == "anyOf":
            words = _dfa(pynini.union(*ws))
        elif op == "not":
            words = seq.minus(words, ws[0])
        elif op == "if":
            cond, then, otherwise = ws
            words = _dfa(pynini.union(seq.both(cond.copy(), then), seq.minus(otherwise, cond)))
        else:
            one, more = pynini.Fst(), pynini.Fst()
            for w in ws:
                more = _dfa(pynini.union(more, seq.both(one.copy(), w.copy())))
                one = _dfa(pynini.union(seq.minus(one.copy(), w), seq.minus(seq.minus(w.copy(), one), more)))
            words = seq.both(words, one)
    return words


def _dfa(f: pynini.Fst) -> pynini.Fst:
    return pynini.determinize(f.rmepsilon()).minimize()


def _contains(labels: list[int], alphabet: list[int]) -> pynini.Fst:
    return pynini.concat(pynini.concat(seq.star(alphabet), seq.symbols(labels)), seq.star(alphabet))


def _dependencies(nodes) -> list[tuple[str, list[str]]]:
    """(key, the keys it requires) from dependentRequired and array-valued dependencies."""
    out = []
    for x in nodes:
        for keyword in ("dependentRequired", "dependencies"):
            deps = x.get(keyword)
            if isinstance(deps, dict):
                out += [(k, [n for n in v if isinstance(n, str)]) for k, v in deps.items() if isinstance(v, list)]
    return out
