"""JSON Schema -> the minimal byte DFA of the valid JSON texts, compositionally (Koo et al. 2024 Sec. 5.1-5.2).

A schema's language is built from the languages of its parts with pynini's union,
concatenation, closure, intersection and difference, split by JSON type
(:mod:`.automata`): ``type`` selects parts; ``allOf`` and ``$ref`` gather their schemas into
one conjunction, compiled together (the values of one property meet as one conjunction
too); ``anyOf``, ``oneOf``, ``not``, ``if``/``then``/``else`` and ``dependentSchemas`` are
Boolean operations (:mod:`.applicators`; a part no keyword constrains is built only if one
of them needs it), or, for objects and over member-wise subschemas (properties, required,
...), constraints on the words of members (:mod:`.presence`). Scalars: :mod:`.numbers`, :mod:`.strings`,
:mod:`.formats`, :mod:`.values`; containers: :mod:`.objects`, :mod:`.arrays`.

Each conjunction is compiled once per (depth left, position): a ``$ref`` or ``$defs``
entry used many times is one automaton, reused. Nesting is bounded where it is unbounded
in the schema: recursion (a ``$ref`` back to an enclosing schema) and free values (no
schema: ``true``, ``{}``, additional properties by default) open at most ``max_depth``
levels on any path (:mod:`.context`); deeper, the recursive branch is cut, so a recursive
schema yields its unfoldings up to that depth. Explicit nesting is never cut. Within that bound,
and with the spellings fixed (numbers as ``number_spellings`` says, canonical strings, the
policy's whitespace, the stable key order of :mod:`.context`), the language is exactly that of
the valid texts;
only repeated keys among the keys a schema does not name cannot be excluded.
"""

from __future__ import annotations

import json
import time
from typing import NamedTuple

import pynini

from tokfst_cli.automata.calls import call_label
from tokfst_cli.errors import EmptyLanguageError, InputError, LimitError
from tokfst_cli.schema import applicators, arrays, formats, numbers, objects, presence, strings, values
from tokfst_cli.schema.applicators import TOP, Algebra
from tokfst_cli.schema.automata import KEYWORDS as _KEYWORDS
from tokfst_cli.schema.automata import TYPES, WHITESPACE, Budget, Lang, Policy, lang_fst, lit, regex
from tokfst_cli.schema.automata import body as body_placeholder
from tokfst_cli.schema.context import Position, Positions
from tokfst_cli.schema.ecma import search_regex
from tokfst_cli.schema.objects import ManyClasses
from tokfst_cli.schema.refs import ACTIVE, ANNOTATIONS, REFUSED, SUPPORTED, Document, Schema, check_nesting
from tokfst_cli.text.regex import ByteAutomaton

MAX_DEPTH = 3
MAX_STATES = 1_000_000
LENIENT_COUNT = 64  # leniently, larger minLength/maxLength/minItems/... are relaxed
_TYPE_NAMES = frozenset(TYPES) | {"integer"}


_APPLICATORS = frozenset(("anyOf", "oneOf", "not", "if", "dependentSchemas", "dependencies"))
_FREE: dict[tuple, Lang] = {}  # the languages of free values (no schema), by policy and depth


class CompiledSchema(NamedTuple):
    """The schema's byte automaton and the warnings (ignored keywords, formats not asserted, cuts).

    With a stack (``stack=True``) and a recursive schema, ``automaton`` reads call labels and
    ``rules`` holds what each stands for (call label -> (name, automaton over bytes and calls)):
    a recursive transition network, which :mod:`tokfst_cli.grammar.schema` makes a PDT."""

    automaton: ByteAutomaton
    warnings: list[str]
    seconds: float
    rules: dict[int, tuple[str, ByteAutomaton]] = {}


class _False(Exception):
    """A conjunction containing the schema ``false``."""


class Compiler:
    """One compilation: the document, its positions, the memo and the warnings."""

    def __init__(self, schema: Schema, whitespace: str, max_depth: int, lenient: bool, any_order: bool,
                 max_states: int, stack: bool = False, number_spellings: str = "any"):
        if whitespace not in WHITESPACE:
            raise InputError(f"whitespace policy {whitespace!r} is not known", f"use one of: {', '.join(WHITESPACE)}",
                             hint="schema-whitespace")
        if number_spellings not in numbers.SPELLINGS:
            raise InputError(f"number spellings {number_spellings!r} are not known",
                             f"use one of: {', '.join(numbers.SPELLINGS)}", hint="schema-option",
                             option="number_spellings")
        if not isinstance(schema, (dict, bool)):
            raise InputError("a JSON Schema is an object or a boolean", "give a JSON object", hint="schema-value")
        for name, value in (("max_depth", max_depth), ("max_states", max_states)):
            if isinstance(value, bool) or not isinstance(value, int) or value < (name == "max_states"):
                raise InputError(f"{name} must be a {'positive' if name == 'max_states' else 'nonnegative'} integer",
                                 f"give {name} a whole number", hint="schema-option", option=name)
        check_nesting(schema)  # a document too deep for the recursive walks below: its depth and the limit
        self.doc = Document(schema)
        self.positions = Positions(self.doc)
        self.policy, self.budget = Policy(whitespace), Budget(max_states, strings.any_body)
        self.max_depth, self.lenient, self.any_order = max_depth, lenient, any_order
        # how numbers are spelled: "shortest", "plain" (trailing zeros, -0) or "any" (and exponents)
        self.numbers = ("shortest" if number_spellings == "shortest"
                        else "any" if numbers.exponents_exact(schema) else "plain")
        self.warnings: dict[str, None] = {}
        self.memo: dict[tuple, Lang] = {}
        self.active: dict[tuple, int] = {}  # the languages being compiled -> the values open around them
        self.checked: set[int] = set()
        self.cache: dict[tuple, pynini.Fst | None] = {}
        # objects._split's memo: (value, tests, its classes) by the automata's ids
        self.splits: dict[tuple, tuple[pynini.Fst, list, list[tuple[frozenset[int], pynini.Fst]]]] = {}
        self.synthesized: dict[str, dict] = {}  # "has property k" schemas made here (their ids are memo keys)
        self.has_keys: dict[str, dict] = {}  # the same, member-wise (no type), for .presence
        self.string_only = {"type": "string"}
        self.constants: dict[str, dict] = {}  # members_of's schemas (their ids are memo keys)
        # with a stack: a value nested in itself is a call of its rule, (conjunction, position) -> label
        self.stack = self.budget.calls = stack
        self.opening: set[tuple] = set()  # the values being compiled, outermost first
        self.calls: dict[tuple, int] = {}
        self.rules: dict[int, pynini.Fst | None] = {}  # call label -> the value's automaton
        self.names: dict[int, str] = {}

    def members_of(self, value: dict) -> dict:
        """The schema of the objects equal to ``value`` (draft 2020-12 Sec. 4.2.2: the same keys,
        equal values): each key required and constant, no other key (``const`` under any_order)."""
        key = json.dumps(value, sort_keys=True)
        if key not in self.constants:
            self.constants[key] = {"type": "object", "properties": {k: {"const": v} for k, v in value.items()},
                                   "required": list(value), "additionalProperties": False}
        return self.constants[key]

    # ---- keywords --------------------------------------------------------------------------------
    def warn(self, message: str) -> None:
        self.warnings[message] = None

    def refuse(self, keyword: str, what: str | None = None) -> None:
        """An unsupported keyword: InputError, or (lenient) a warning and the keyword is ignored."""
        if self.lenient:
            self.warn(f"ignored: {what or 'keyword ' + keyword}")
            return
        raise InputError(f"{what or 'keyword ' + keyword} is not supported", "remove it, or compile leniently",
                         hint="schema-keyword", keyword=keyword)

    def check(self, node: dict) -> None:
        if id(node) in self.checked:
            return
        self.checked.add(id(node))
        for key, value in node.items():
            if key in REFUSED:
                self.refuse(key)
            elif key not in SUPPORTED and key not in ANNOTATIONS:
                self.warn(f"not JSON Schema keywords, ignored: {key}")
            elif key == "format" and value not in formats.FORMATS:
                self.warn(f"format {value!r} is an annotation (not asserted)")
        _check_values(node)

    def flatten(self, seeds) -> tuple[dict, ...] | None:
        """The conjunction of ``seeds`` with their ``$ref`` and ``allOf`` (None: it contains ``false``)."""
        out: dict[int, dict] = {}
        seen: set[int] = set()
        path: dict[int, dict] = {}  # the schemas being visited, outermost first: a $ref back to one is a cycle

        def visit(node: Schema) -> None:
            if node is True:
                return
            if node is False:
                raise _False
            if not isinstance(node, dict):
                raise InputError(f"a subschema must be an object or a boolean, not {node!r}", "fix the schema",
                                 hint="schema-value")
            if id(node) in seen:
                return
            seen.add(id(node))
            self.check(node)
            if not ACTIVE.isdisjoint(node):  # $ref, allOf, annotations alone add nothing themselves
                out[id(node)] = node
            path[id(node)] = node
            if "$ref" in node:
                target = self.doc.resolve(node["$ref"], node)
                if id(target) in path:
                    self.ref_cycle(list(path.values()), target, node)
                else:
                    visit(target)
            for sub in node.get("allOf", ()):
                visit(sub)
            del path[id(node)]

        try:
            for s in seeds:
                visit(s)
        except _False:
            return None
        return tuple(out[k] for k in sorted(out))

    def ref_cycle(self, path: list[dict], target: dict, holder: dict) -> None:
        """``holder``'s ``$ref`` leads back to ``target`` through ``$ref`` and ``allOf`` only: a
        cycle that never reaches a value, so it adds no constraint (``{"$ref": "#"}`` alone would
        be any value) and JSON Schema leaves it undefined (validators recurse without end: the
        ``jsonschema`` package raises RecursionError on every instance). Refused by name, as the
        same cycle through ``anyOf`` is; leniently, that reference is ignored with a warning."""
        cycle = path[next(i for i, n in enumerate(path) if n is target):]
        chain = " -> ".join(self.doc.pointer(n) for n in [*cycle, target])
        ref = holder["$ref"]
        if self.lenient:
            self.warn(f"ignored: $ref {ref!r} at {self.doc.pointer(holder)}, which closes the cycle {chain} "
                      "(it constrains nothing)")
            return
        raise InputError(f"$ref cycle {chain}: the schema refers to itself in place, without nesting (a cycle "
                         "that never reaches a value constrains nothing)", "remove a $ref of the cycle, or make "
                         "the recursion go through properties or items", hint="schema-cycle",
                         pointer=self.doc.pointer(target), ref=ref)

    # ---- languages -------------------------------------------------------------------------------
    def lang(self, conj: tuple[dict, ...] | None, depth: int, pos: Position, objects: bool = True) -> Lang:
        """The texts valid under every schema of ``conj``, nested at most ``depth`` deep, at ``pos``
        (without the objects unless ``objects``)."""
        if conj is None:
            return {}
        key = (tuple(id(n) for n in conj), depth, pos.key) + (() if objects else ("no objects",))
        if key in self.memo:
            return self.memo[key]
        if not conj and not pos.nodes and objects and not self.stack:  # a free value: the same for every schema
            free = (self.policy.name, depth, self.any_order, self.budget.max_states, self.numbers)
            got = _FREE.get(free)
            if got is None:
                self.budget.deferring, deferring = False, self.budget.deferring
                try:
                    got = self._lang(conj, depth, pos)
                finally:
                    self.budget.deferring = deferring
                # kept across compilations only without placeholders of this one's: parts built
                # earlier in this compilation (a universe, deferring) may hold some
                if not any(isinstance(f, pynini.Fst) and self.budget.owns(f) for f in got.values()):
                    _FREE[free] = got
            self.memo[key] = got
            return got
        if key in self.active:
            if self.stack and len(self.opening) > self.active[key]:  # nested in itself: a call per type
                return {kind: self._call(("lang", key, kind), conj) for kind in TYPES}
            raise InputError("the schema refers to itself without nesting (a $ref cycle through in-place "
                             "applicators)", "make the recursion go through properties or items", hint="schema-cycle")
        self.active[key] = len(self.opening)
        try:
            self.memo[key] = result = self._lang(conj, depth, pos, objects)
        finally:
            del self.active[key]
        called = [kind for kind in TYPES if ("lang", key, kind) in self.calls]
        if called:  # the rules of its calls: each type's part
            concrete = Algebra(self, depth, pos).concrete(result)
            for kind in called:
                self.rules.setdefault(self.calls["lang", key, kind], concrete.get(kind))
        return result

    def value(self, seeds, depth: int, pos: Position) -> pynini.Fst | None:
        """Every text valid under all of ``seeds`` (one automaton)."""
        conj = self.flatten(seeds)
        if conj is None:
            return None
        key = ("value", tuple(id(n) for n in conj), depth, pos.key)
        if key not in self.cache:
            rule = key[1], pos.key
            if self.stack and rule in self.opening:  # nested in itself: a call of its rule
                return self._call(rule, conj)
            self.opening.add(rule)
            try:
                lang = Algebra(self, depth, pos).concrete(self.lang(conj, depth, pos))
                self.cache[key] = lang_fst(self.budget, lang, "a value")
            finally:
                self.opening.discard(rule)
            if rule in self.calls:
                self.rules.setdefault(self.calls[rule], self.cache[key])
        return self.cache[key]

    def _call(self, rule: tuple, conj: tuple[dict, ...]) -> pynini.Fst:
        """One arc: the call of the value ``rule`` (its automaton, once compiled, is the rule's)."""
        if rule not in self.calls:
            label = self.calls[rule] = call_label(len(self.calls))
            titles = [n["title"] for n in conj if isinstance(n.get("title"), str)]
            self.names[label] = titles[0] if titles else self.doc.pointer(conj[0]) if conj else "any JSON value"
        return body_placeholder(self.calls[rule])

    def universe(self, kind: str, depth: int, pos: Position) -> pynini.Fst | None:
        """Every text of type ``kind`` at ``pos`` (what :data:`.applicators.TOP` stands for)."""
        key = ("universe", kind, depth, pos.key)
        if key not in self.cache:
            self.cache[key] = self._part(kind, (), depth, pos, False)
        return self.cache[key]

    def is_universe(self, f, kind: str, depth: int, pos: Position) -> bool:
        """Is ``f`` the automaton :meth:`universe` built (not building it)?"""
        key = ("universe", kind, depth, pos.key)
        return key in self.cache and f is self.cache[key]

    def has_key(self, name: str) -> dict:
        """The member-wise schema "has property ``name``" (one object per name: ids are keys)."""
        return self.has_keys.setdefault(name, {"required": [name]})

    def string_texts(self, seeds) -> pynini.Fst | None:
        """The string texts valid under all of ``seeds`` (for ``propertyNames``; the empty automaton if none)."""
        empty = self.positions.at([])
        lang = Algebra(self, 0, empty).concrete(self.lang(self.flatten([self.string_only, *seeds]), 0, empty))
        return lang.get("string", pynini.Fst())

    def pattern(self, pattern: str) -> pynini.Fst | None:
        """The decoded strings in which the ECMA-262 ``pattern`` matches (leniently, all strings when it
        cannot be compiled)."""
        key = ("pattern", pattern)
        if key not in self.cache:
            try:
                self.cache[key] = regex(search_regex(pattern), self.budget)
            except (InputError, LimitError) as e:
                if not self.lenient:
                    raise
                self.warn(f"ignored: pattern {pattern!r} ({e})")
                self.cache[key] = strings.any_string()
        return self.cache[key]

    def count(self, keyword: str, value: int | None, upper: bool) -> int | None:
        """A count bound as compiled: leniently, past :data:`LENIENT_COUNT` an upper bound is
        dropped and a lower one lowered to it (each counted item multiplies the automaton)."""
        if value is None or not self.lenient or value <= LENIENT_COUNT:
            return value
        self.warn(f"relaxed: {keyword} {value} (lenient: counts above {LENIENT_COUNT} are not enforced)")
        return None if upper else LENIENT_COUNT

    def _lang(self, conj: tuple[dict, ...], depth: int, pos: Position, objects: bool = True) -> Lang:
        kinds, integer = set(TYPES) if objects else set(TYPES) - {"object"}, False
        for node in conj:
            if "type" in node:
                named = {node["type"]} if isinstance(node["type"], str) else set(node["type"])
                if node.get("nullable") is True:
                    named.add("null")
                integer |= "integer" in named and "number" not in named
                kinds &= {"number" if t == "integer" else t for t in named}
        constants = [v for node in conj for v in ([[node["const"]]] if "const" in node else [])
                     + ([node["enum"]] if "enum" in node else [])]
        formulas, handled = presence.split(self, conj, pos) if "object" in kinds else ([], set())
        alg = Algebra(self, depth, pos)
        if constants:  # the values, checked against the keywords of their types only
            lang = {t: f for t, f in values.language(self, constants[0], depth, pos).items() if t in kinds}
            for more in constants[1:]:
                lang = alg.meet(lang, values.language(self, more, depth, pos), "enum")
        else:
            lang = {k: TOP for k in kinds}
        for kind in list(lang):
            shaped = any(_KEYWORDS[kind] & node.keys() for node in conj) or (kind == "number" and integer)
            if shaped or (kind == "object" and formulas):
                try:
                    part = self._part(kind, conj, depth, pos, integer, formulas)
                except ManyClasses:  # the Boolean operations on automata instead of the words
                    formulas, handled = [], set()
                    if not shaped:
                        continue
                    part = self._part(kind, conj, depth, pos, integer)
                lang = alg.meet(lang, {kind: part, **{t: TOP for t in lang if t != kind}}, kind)
        if not any(_APPLICATORS & node.keys() for node in conj):
            lang = alg.concrete(lang)  # nothing will narrow it: build the free parts now
        for node in conj:
            lang = applicators.apply(self, node, lang, depth, pos, handled)
        return lang

    def _part(self, kind: str, conj, depth: int, pos: Position, integer: bool,
              formulas: list[presence.Formula] = ()) -> pynini.Fst | None:
        if kind == "null":
            return lit("null")
        if kind == "boolean":
            return self.budget.union([lit("true"), lit("false")], "a boolean")
        if kind == "number":
            return self._number(conj, integer)
        if kind == "string":
            return self._string(conj)
        inner = self.inner(depth, pos, bool(conj))
        if inner is None:
            return None
        if ((conj or pos.nodes) and pos.plain(kind) and not formulas and not self.stack
                and not any(_KEYWORDS[kind] & node.keys() for node in conj)):
            # nothing here shapes this array or object: it is a free one (built once, shared)
            return self.lang((), inner + 1, self.positions.at([])).get(kind)
        if kind == "array":
            return arrays.array_part(self, conj, inner, pos)
        return objects.object_part(self, conj, inner, pos, formulas)

    def inner(self, depth: int, pos: Position, warn: bool = False) -> int | None:
        """The depth left for the parts of an array or object at ``pos`` (None: cut here). With a
        stack nothing is cut: every unbounded nesting comes back to a value being compiled."""
        if not pos.counted or self.stack:
            return depth
        if depth == 0:
            if warn:
                self.warn(f"nesting past max_depth {self.max_depth} (recursion, free values) is cut")
            return None
        return depth - 1

    def _number(self, conj, integer: bool) -> pynini.Fst | None:
        lower = upper = None
        multiples = []
        for node in conj:
            for key, is_lower in (("minimum", True), ("maximum", False), ("exclusiveMinimum", True),
                                  ("exclusiveMaximum", False)):
                if key not in node or isinstance(node[key], bool):
                    continue
                exclusive = key.startswith("exclusive") or node.get("exclusive" + key.capitalize()) is True
                bound = (numbers.decimal(node[key], key), exclusive)
                if is_lower:
                    lower = bound if lower is None or (bound[0], bound[1]) > lower else lower
                else:
                    upper = bound if upper is None or (-bound[0], bound[1]) > (-upper[0], upper[1]) else upper
            if "multipleOf" in node:
                multiples.append(numbers.decimal(node["multipleOf"], "multipleOf"))
        key = ("number", integer, lower, upper, tuple(sorted(set(multiples))))
        if key not in self.cache:
            self.cache[key] = numbers.number_language(self.budget, integer=integer, lower=lower, upper=upper,
                                                      multiple_of=sorted(set(multiples)), spelling=self.numbers)
        return self.cache[key]

    def _string(self, conj) -> pynini.Fst | None:
        lo = self.count("minLength", max([int(n["minLength"]) for n in conj if "minLength" in n], default=0), False)
        hi = self.count("maxLength", min([int(n["maxLength"]) for n in conj if "maxLength" in n], default=None), True)
        patterns = sorted({n["pattern"] for n in conj if "pattern" in n})
        kinds = sorted({n["format"] for n in conj if n.get("format") in formats.FORMATS})
        key = ("string", lo, hi, tuple(patterns), tuple(kinds))
        if key not in self.cache:  # intersected as spellings: the spelling is injective
            parts = [strings.spelled_length(self.budget, lo, hi)] if lo or hi is not None else []
            parts += [strings.spelled(self.budget, self.pattern(p)) for p in patterns]
            parts += [strings.spelled(self.budget, formats.language(f, self.budget)) for f in kinds]
            body = parts[0] if parts else body_placeholder()
            for p in parts[1:]:
                body = self.budget.intersect(body, p, "the constraints on a string")
            self.cache[key] = None if body is None else strings.quoted(body)
        return self.cache[key]


def _check_values(node: dict) -> None:
    """A one-line InputError for a keyword value of the wrong kind."""
    def bad(key: str, what: str) -> InputError:
        return InputError(f"keyword {key} must be {what}, not {node[key]!r}", f"fix {key}", hint="schema-value",
                          keyword=key)

    t = node.get("type")
    if "type" in node and not (t in _TYPE_NAMES if isinstance(t, str)
                              else isinstance(t, list) and all(x in _TYPE_NAMES for x in t)):
        raise bad("type", "a type name or a list of them")
    for key in ("minLength", "maxLength", "minItems", "maxItems", "minProperties", "maxProperties",
                "minContains", "maxContains"):
        v = node.get(key)
        if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float)) or v < 0 or v != int(v)):
            raise bad(key, "a nonnegative integer")
    for key in ("required", "enum"):
        if key in node and not isinstance(node[key], list):
            raise bad(key, "an array")
    for key in ("allOf", "anyOf", "oneOf", "prefixItems"):
        if key in node and not (isinstance(node[key], list) and node[key]):
            raise bad(key, "a nonempty array of schemas")
    for key in ("properties", "patternProperties", "dependentSchemas", "dependentRequired", "dependencies"):
        if key in node and not isinstance(node[key], dict):
            raise bad(key, "an object")
    for key in ("$ref", "pattern", "format"):
        if key in node and not isinstance(node[key], str):
            raise bad(key, "a string")
    if "multipleOf" in node and numbers.decimal(node["multipleOf"], "multipleOf") <= 0:
        raise bad("multipleOf", "a number above 0")


def compile_schema(schema: Schema, *, whitespace: str = "compact", max_depth: int = MAX_DEPTH, lenient: bool = False,
                   any_order: bool = False, max_states: int = MAX_STATES, stack: bool = False,
                   number_spellings: str = "any") -> CompiledSchema:
    """The minimal byte DFA of the JSON texts valid under ``schema`` (a parsed JSON Schema). It is
    kept over byte classes (``automaton.classed``, :mod:`..label_classes`): the lazy
    decoder's table is built on them, and ``automaton.fst`` expands them to bytes on first use.

    ``whitespace``: "compact", "pretty" or "flexible" (:class:`.automata.Policy`).
    ``max_depth``: recursion and free values nest at most this deep (cut there; see above).
    ``lenient``: best effort, every approximation listed in the warnings: unsupported keywords
    and patterns are ignored instead of refused, and counts above :data:`LENIENT_COUNT`
    (minLength, maxItems, ...) are relaxed (an automaton counting to N has N times the states).
    ``any_order``: properties in any order instead of the stable order (:mod:`.context`).
    ``max_states``: the size limit of every automaton built (LimitError past it).
    ``stack``: nothing is cut; a value nested in itself (recursion, free values) is a call of its
    rule (``CompiledSchema.rules``, a recursive transition network; ``max_depth`` unused), or
    :class:`.automata.StackOperand` where such a value meets an intersection or difference.
    ``number_spellings``: "any" (every JSON spelling of a valid number: ``5.0``, ``2.50``,
    ``-0``; exponents where only signs are constrained) or "shortest" (one text per number, for
    generation): :mod:`.numbers`.
    Raises InputError (hint ``schema-keyword``, ``schema-value``, ``schema-ref``,
    ``schema-pattern``, ``schema-cycle``, ``schema-depth``), LimitError, or EmptyLanguageError when no JSON
    text is valid.
    """
    start = time.perf_counter()
    c = Compiler(schema, whitespace, max_depth, lenient, any_order, max_states, stack, number_spellings)
    try:
        value = c.value([schema], max_depth, c.positions.root())
    except RecursionError:  # values nested (through $ref) deeper than Python's recursion allows
        raise InputError("the schema nests its values too deeply to compile (past Python's recursion limit)",
                         "flatten the schema", hint="schema-depth") from None
    result = None if value is None else c.budget.minimal(c.policy.top(value), "the schema's automaton")
    if result is None:
        raise EmptyLanguageError("no JSON text is valid under the schema", "check the schema, or raise max_depth")
    name = schema.get("title") if isinstance(schema, dict) and isinstance(schema.get("title"), str) else "schema"
    automaton = ByteAutomaton(None, f"json-schema:{name}", classed=result)  # bytes expanded when asked for
    rules = {}
    for label, f in c.rules.items():
        got = None if f is None else c.budget.minimal(f, f"the automaton of {c.names[label]}")
        if got is not None:
            rules[label] = (c.names[label], ByteAutomaton(None, c.names[label], classed=got))
    return CompiledSchema(automaton, list(c.warnings), time.perf_counter() - start, rules)
