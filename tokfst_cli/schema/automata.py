"""Byte automata for JSON texts: the size guard, per-type languages and the whitespace policy.

Every language here is a minimal DFA over bytes (byte b is label b + 1, as in stage A), or
None for the empty language. A JSON value's language is kept split by JSON type
(:data:`TYPES`): the six parts start with different bytes, so union, intersection and
difference work part by part, and ``type`` just selects parts (Koo et al. 2024 Sec. 5.1: the
JSON texts a schema allows form a regular language once nesting is bounded).

The body of an unconstrained string (every spelled string, without its quotes) is one arc
labelled :data:`BODY` while languages are put together, and so is the body of the keys an
object does not name (:meth:`Budget.placeholder`): placeholders, as the nonterminals of an
RTN, that keep the many byte arcs of string loops and key tries (a hundred-odd a state) out
of every determinization and minimization. So is a member's value in its object, or an item
in its array, once it has :data:`DEFERRED_STATES` states (:meth:`Budget.deferred`): a
container's determinization and minimization then see its own keys and separators, not every
value nested in it, and the values are expanded once, at the end (bodies may hold
placeholders of their own; an expansion's size is checked against the budget before it is
built). Union, concatenation, closure, determinization
and minimization commute with substituting the bodies for the labels; intersection and
difference do not, so :class:`Budget` expands both operands first (:meth:`Budget.expand`),
as does the compiler before it hands the automaton out (then determinized: a key body
overlaps the named keys). Those expansions, and a string language's spellings
(:meth:`Budget.wide_dfa`), are determinized and minimized over byte classes
(:mod:`..label_classes`: the 40-80 classes a schema's literals leave of the ~200 bytes a
string's body has arcs on), then copied back to bytes; the compiler's result stays over its
classes (:meth:`Budget.minimal`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from functools import cached_property

import numpy as np
import pynini

from tokfst_cli.automata import label_classes
from tokfst_cli.automata.arrays import FstArrays, fst_arrays, fst_from
from tokfst_cli.automata.calls import CALL, PAREN
from tokfst_cli.automata.fsts import text_acceptor
from tokfst_cli.errors import EmptyLanguageError, InternalError, LimitError
from tokfst_cli.support.progress import report
from tokfst_cli.text.regex import compile_regex

TYPES = ("null", "boolean", "number", "string", "array", "object")
KEYWORDS = {  # the keywords that constrain values of each type
    "null": frozenset(), "boolean": frozenset(),
    "number": frozenset("minimum maximum exclusiveMinimum exclusiveMaximum multipleOf".split()),
    "string": frozenset("minLength maxLength pattern format".split()),
    "array": frozenset("items prefixItems additionalItems minItems maxItems uniqueItems contains".split()),
    "object": frozenset(("properties required additionalProperties patternProperties propertyNames minProperties "
                         "maxProperties dependentRequired dependencies").split()),
}
Lang = dict[str, pynini.Fst]  # JSON type -> its texts (a missing type: none)
_DFA = pynini.I_DETERMINISTIC | pynini.NO_EPSILONS
BODY = 990  # placeholder label: the spelled body of any string (above the bytes, below .sequences' labels)
PLACEHOLDERS = 1 << 24  # the labels of other bodies (Budget.placeholder), above .sequences' symbols
DEFERRED_STATES = 64  # values this large stand as one placeholder arc in their objects and arrays
CLASSED_ARCS = 256  # automata of fewer arcs (about, once expanded) are determinized over bytes


def lit(text: str | bytes) -> pynini.Fst:
    """The acceptor of one text's UTF-8 bytes."""
    return text_acceptor(text)


def regex(pattern: str, budget: "Budget") -> pynini.Fst | None:
    """Stage A's minimal DFA of a Python-syntax regex (fullmatch), without symbol tables; None if empty."""
    try:
        f = compile_regex(pattern, max_states=budget.max_states).fst
    except EmptyLanguageError:
        return None
    return f.set_input_symbols(None).set_output_symbols(None)


def is_empty(f: pynini.Fst | None) -> bool:
    return f is None or f.start() == pynini.NO_STATE_ID or f.num_states() == 0


def body(label: int = BODY) -> pynini.Fst:
    """An acceptor of one placeholder arc (default: the body of any string, quotes excluded)."""
    f = pynini.Fst()
    f.add_states(2)
    f.set_start(0)
    f.set_final(1)
    f.add_arc(0, pynini.Arc(label, label, pynini.Weight.one(f.weight_type()), 1))
    return f


def deterministic(f: pynini.Fst, budget: "Budget", what: str) -> pynini.Fst:
    """``f`` (epsilon-free) if deterministic, else its determinization under ``budget``."""
    if f.properties(pynini.I_DETERMINISTIC, True) == pynini.I_DETERMINISTIC:
        return f
    budget.check(f.num_states(), what)
    f = pynini.determinize(f, nstate=budget.max_states + 1)
    if f.num_states() > budget.max_states:
        raise LimitError(what, "max_states", budget.max_states, remedy="simplify")
    return f


class StackOperand(Exception):
    """An intersection or difference with a language that holds a recursive call (a stack's
    language is not closed under them): the caller cuts the recursion instead, or refuses."""


class Budget:
    """Determinize and minimize under ``max_states``; a LimitError names what was being built.

    Before determinizing, the input's own size is checked (an estimate of the work: the
    pieces put together), then OpenFst's determinization stops past the bound.
    """

    def __init__(self, max_states: int, any_body: Callable[[], pynini.Fst] | None = None):
        self.max_states = max_states
        self.any_body = any_body  # what BODY stands for (``strings.any_body``; strings builds on this module)
        self.bodies: dict[int, pynini.Fst] = {}  # placeholder label -> what it stands for
        self._arrays: dict[int, FstArrays] = {}  # the bodies' arcs, read once
        self._sizes: dict[int, tuple[int, int]] = {}  # the bodies' arcs and states once expanded
        self._labels: dict[int, int] = {}  # id of a body (kept alive in bodies) -> its label
        self._classes: dict[tuple[bytes, ...], label_classes.Classes] = {}  # operands' digests -> their classes
        self._over: dict[tuple[bytes, bytes], pynini.Fst] = {}  # (digest, classes) -> expansion over them
        self.deferring = True  # off while building what outlives this budget (free values)
        self.calls = False  # languages may hold call labels (recursion with a stack): see _no_calls

    def _no_calls(self, *fs: pynini.Fst) -> None:
        """Raise :class:`StackOperand` if one of ``fs`` (or a body it uses) holds a call label."""
        if not self.calls:
            return
        arrays = [fst_arrays(f) for f in fs]
        bodies = [self._body_arrays(b) for b in self._used(x for a in arrays for x in self._uses(a))]
        if any(((a.ilabel >= CALL) & (a.ilabel < PAREN)).any() for a in [*arrays, *bodies]):
            raise StackOperand

    def deferred(self, f: pynini.Fst) -> pynini.Fst:
        """``f`` itself when small (or while not deferring), else :meth:`placeholder` of it."""
        return f if f.num_states() < DEFERRED_STATES or not self.deferring else self.placeholder(f)

    def placeholder(self, f: pynini.Fst) -> pynini.Fst:
        """One arc standing for ``f`` until :meth:`expand` (one label for the same automaton)."""
        label = self._labels.get(id(f))
        if label is None:
            label = self._labels[id(f)] = PLACEHOLDERS + len(self.bodies)
            self.bodies[label] = f
        return body(label)

    def _body(self, label: int) -> pynini.Fst:
        if label == BODY:
            if self.any_body is None:
                raise InternalError("a placeholder for any string in a budget made without any_body")
            return self.any_body()
        return self.bodies[label]

    def expand(self, f: pynini.Fst) -> pynini.Fst:
        """``f`` with each placeholder arc replaced by what it stands for (epsilon-free, not always
        deterministic)."""
        uses = self._uses(fst_arrays(f))
        self._check_expansion(f.num_states(), uses)  # bodies may nest: checked before it is built
        return self._replace(f, uses)

    def _replace(self, f: pynini.Fst, uses: dict[int, int]) -> pynini.Fst:
        """:meth:`expand` of ``f`` (the placeholders it ``uses``) unchecked, a copy when it uses
        none. Only the bodies used go to OpenFst's replace, which reads every piece it is given."""
        used = self._used(uses)
        if not used:
            return f.copy()
        return pynini.replace([(BODY - 1, f), *((b, self._body(b)) for b in used)],
                              epsilon_on_replace=True).rmepsilon()

    def owns(self, f: pynini.Fst | None) -> bool:
        """Does ``f`` use placeholders of this budget's (labels that mean nothing to another one)?"""
        return not is_empty(f) and bool((fst_arrays(f).ilabel >= PLACEHOLDERS).any())

    def _used(self, uses: Iterable[int]) -> list[int]:
        """The placeholders in ``uses`` and those their bodies use, in order."""
        todo, used = list(uses), set()
        while todo:
            b = todo.pop()
            if b not in used:
                used.add(b)
                todo += self._uses(self._body_arrays(b))
        return sorted(used)

    def _check_expansion(self, states: int, uses: dict[int, int]) -> None:
        self.check(states + sum(n * self._size(b)[1] for b, n in uses.items()),
                   "the automaton with its shared values written out")

    def _classed(self, arrays: list[FstArrays],
                 uses: list[dict[int, int]]) -> tuple[list[pynini.Fst], label_classes.Classes] | None:
        """Each automaton of ``arrays`` (the placeholders it ``uses``) expanded over the byte
        classes common to them and to the bodies they use (:mod:`..label_classes`), or None when
        that would not pay: few arcs, or classes nearly the bytes."""
        expanded = sum(len(a.src) + sum(n * self._size(b)[0] for b, n in u.items()) for a, u in zip(arrays, uses))
        if expanded < CLASSED_ARCS:
            return None
        keys = tuple(_digest(a) for a in arrays)
        classes = self._classes.get(keys)
        bodies = [(label, self._body_arrays(label)) for label in self._used(b for u in uses for b in u)]
        if classes is None:
            classes = self._classes[keys] = label_classes.of([*arrays, *(a for _, a in bodies)])
        if classes.trivial:
            return None
        rep = classes.rep.tobytes()
        todo = [(k, a) for k, a in zip(keys, arrays) if (k, rep) not in self._over]
        if todo:  # operands recur (oneOf's branches meet, then are subtracted): expanded once per classes
            shared = [(label, label_classes.compress(a, classes)) for label, a in bodies]
            for k, a in todo:
                self._over[k, rep] = pynini.replace([(BODY - 1, label_classes.compress(a, classes)), *shared],
                                                    epsilon_on_replace=True).rmepsilon()
        # shared, not copied: what the operations do to their operands in place (arcsort, and
        # minimal's determinization and minimization) keeps the language
        return [self._over[k, rep] for k in keys], classes

    def _uses(self, a: FstArrays) -> dict[int, int]:
        """The placeholders on the arcs of ``a``, with their numbers of arcs."""
        labels, counts = np.unique(a.ilabel[a.ilabel >= BODY], return_counts=True)
        return {x: n for x, n in zip(labels.tolist(), counts.tolist()) if x == BODY or x in self.bodies}

    def _size(self, label: int) -> tuple[int, int]:
        """The arcs and states of a placeholder's body once expanded (its own placeholders too)."""
        if label not in self._sizes:
            a = self._body_arrays(label)
            inner = [(self._size(b), n) for b, n in self._uses(a).items()]
            self._sizes[label] = (len(a.src) + sum(n * arcs for (arcs, _), n in inner),
                                  len(a.final) + sum(n * states for (_, states), n in inner))
        return self._sizes[label]

    def _body_arrays(self, label: int) -> FstArrays:
        if label not in self._arrays:
            self._arrays[label] = fst_arrays(self._body(label))
        return self._arrays[label]

    def _expanded(self, fs: Sequence[pynini.Fst], build: Callable[..., pynini.Fst],
                  what: str) -> tuple[pynini.Fst, label_classes.Classes | None] | None:
        """The minimal DFA of ``build`` over the expansions of ``fs``: over their byte classes
        where that pays (expansion puts a string's ~200 byte arcs a state in), then with those
        classes; else over bytes, with None."""
        arrays = [fst_arrays(f) for f in fs]
        uses = [self._uses(a) for a in arrays]
        for f, u in zip(fs, uses):  # the expansions' sizes, before anything is built
            self._check_expansion(f.num_states(), u)
        got = self._classed(arrays, uses)
        if got is None:
            g = self.dfa(build(*(self._replace(f, u) for f, u in zip(fs, uses))), what)
            return None if g is None else (g, None)
        expanded, classes = got
        g = self.dfa(build(*expanded), what)
        return None if g is None else (g, classes)

    def minimal(self, f: pynini.Fst | None, what: str) -> label_classes.Classed | None:
        """The minimal DFA of :meth:`expand` of ``f`` over byte classes (each byte its own class
        where they did not pay), expanded to bytes by whoever needs them."""
        got = None if is_empty(f) else self._expanded([f], lambda g: g, what)
        if got is None:
            return None
        g, classes = got
        return label_classes.Classed(fst_arrays(g), classes or label_classes.identity())

    def wide_dfa(self, f: pynini.Fst | None, what: str) -> pynini.Fst | None:
        """:meth:`dfa` of an acceptor without placeholders whose states have many byte arcs (a
        string language's spellings), over its own byte classes."""
        if is_empty(f):
            return None
        a = fst_arrays(f.rmepsilon())
        classes = None if len(a.src) < CLASSED_ARCS else label_classes.of([a])
        if classes is None or classes.trivial:
            return self.dfa(f, what)
        return _in_bytes((self.dfa(label_classes.compress(a, classes), what), classes))

    def check(self, states: int, what: str) -> None:
        if states > self.max_states:
            raise LimitError(what, "max_states", self.max_states, states, remedy="simplify", at_least=False)

    def dfa(self, f: pynini.Fst, what: str) -> pynini.Fst | None:
        """The minimal DFA of ``f`` (None when its language is empty)."""
        if is_empty(f):
            return None
        self.check(f.num_states(), what)
        if f.properties(_DFA, False) != _DFA:  # known properties first: testing reads every arc
            if f.properties(pynini.NO_EPSILONS, False) != pynini.NO_EPSILONS:  # a removal is a full pass
                f.rmepsilon()
            f = deterministic(f, self, what)
        f.connect()
        if f.num_states() == 0:
            return None
        report(f.num_states())
        return f.arcsort("ilabel").minimize()  # unsorted, OpenFst's minimize can leave equivalent states apart

    def union(self, parts: Iterable[pynini.Fst | None], what: str) -> pynini.Fst | None:
        ps = [p for p in parts if not is_empty(p)]
        if not ps:
            return None
        if len(ps) == 1:
            return ps[0]
        return self.dfa(pynini.union(*ps), what)

    def intersect(self, a: pynini.Fst | None, b: pynini.Fst | None, what: str) -> pynini.Fst | None:
        if is_empty(a) or is_empty(b):
            return None
        self._no_calls(a, b)
        return _in_bytes(self._expanded([a, b], lambda x, y: pynini.intersect(x.arcsort("olabel"), y.arcsort("ilabel")),
                                     what))

    def difference(self, a: pynini.Fst | None, b: pynini.Fst | None, what: str) -> pynini.Fst | None:
        if is_empty(a):
            return None
        if is_empty(b):
            return a
        self._no_calls(a, b)
        return _in_bytes(self._expanded([a, b], lambda x, y: pynini.difference(
            x.arcsort("olabel"), deterministic(y, self, what).arcsort("ilabel")), what))

    def concat(self, parts: Iterable[pynini.Fst | None], what: str) -> pynini.Fst | None:
        f = pynini.accep("")
        for p in parts:
            if is_empty(p):
                return None
            f.concat(p)
        return self.dfa(f, what)


def _digest(a: FstArrays) -> bytes:
    """A digest of an automaton's arcs and final states (equal digests: equal automata)."""
    h = hashlib.blake2b(digest_size=16)
    h.update(np.int64(a.start).tobytes())
    for x in (a.final, a.src, a.ilabel, a.nextstate):
        h.update(np.ascontiguousarray(x).tobytes())
        h.update(b"|")
    return h.digest()


def _in_bytes(got: tuple[pynini.Fst, label_classes.Classes | None] | None) -> pynini.Fst | None:
    """:meth:`Budget._expanded`'s DFA over bytes."""
    g, classes = got or (None, None)
    return g if g is None or classes is None else fst_from(label_classes.expand(fst_arrays(g), classes))


# ---- per-type languages ----------------------------------------------------------------------
def lang_fst(budget: Budget, lang: Lang, what: str) -> pynini.Fst | None:
    """One automaton for every value of the language (the parts are disjoint)."""
    return budget.union(lang.values(), what)


# ---- whitespace --------------------------------------------------------------------------------
WHITESPACE = ("compact", "pretty", "flexible")


@dataclass(frozen=True)
class Policy:
    """Where JSON texts put whitespace.

    compact   none: ``{"a":1,"b":[1,2]}`` (separators "," and ":")
    pretty    one space after "," and ":", none elsewhere: ``{"a": 1, "b": [1, 2]}`` (Python's
              json.dumps default)
    flexible  any run of [ \\t\\n\\r] wherever JSON allows whitespace (unbounded, as in RFC 8259:
              a token budget bounds it at decoding time), before and after the value too
    """

    name: str

    @cached_property
    def ws(self) -> pynini.Fst:
        if self.name != "flexible":
            return pynini.accep("")
        f = pynini.union(*(lit(c) for c in " \t\n\r")).closure()
        return pynini.determinize(f.rmepsilon()).minimize()

    def _around(self, char: str, after: str = "") -> pynini.Fst:
        if self.name == "flexible":
            return pynini.concat(pynini.concat(self.ws, lit(char)), self.ws)
        return lit(char + (after if self.name == "pretty" else ""))

    @cached_property
    def comma(self) -> pynini.Fst:
        return self._around(",", " ")

    @cached_property
    def colon(self) -> pynini.Fst:
        return self._around(":", " ")

    def open(self, char: str) -> pynini.Fst:
        return pynini.concat(lit(char), self.ws) if self.name == "flexible" else lit(char)

    def close(self, char: str) -> pynini.Fst:
        return pynini.concat(self.ws, lit(char)) if self.name == "flexible" else lit(char)

    def top(self, value: pynini.Fst) -> pynini.Fst:
        if self.name != "flexible":
            return value
        return pynini.concat(pynini.concat(self.ws, value), self.ws)
