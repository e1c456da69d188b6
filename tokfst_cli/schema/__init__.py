"""Stage A for JSON Schema (Koo et al. 2024 Sec. 5.1-5.2): a schema to the byte automaton of its valid texts.

``compile_schema(schema)`` returns the minimal byte DFA of the JSON texts valid under the
schema (a ``ByteAutomaton``, stage A's output: ``pipeline.build(model, name,
automaton=...)`` promotes it), the warnings, and the time taken; ``serialize(instance,
schema)`` writes an instance the way the automaton spells it.

The texts accepted, by decision:

* numbers (``number_spellings``): "any" (default), every JSON spelling of a valid value
  (``5.0``, ``2.50``, ``-0``; exponents only where numbers are constrained by their sign at
  most), or "shortest", one per value (``1``, not ``1.0``; ``0.5``, not ``5e-1``; no ``-0``);
  either way ranges, ``multipleOf``, ``type: integer``, ``const`` and ``not`` are exact
  (:mod:`.numbers`);
* strings: one spelling per value, as ``json.dumps(ensure_ascii=False)`` writes them (only
  ``\\" \\\\ \\b \\f \\n \\r \\t`` and ``\\u00xx`` for other controls);
* whitespace: ``compact`` (none), ``pretty`` (one space after ``,`` and ``:``) or
  ``flexible`` (any ``[ \\t\\n\\r]*`` where JSON allows it);
* keys in the stable order of :mod:`.context` (the names of every ``properties`` applying,
  merged in order of appearance, then ``required`` and dependency names, then the rest in
  any order), or in any order with ``any_order``. Keys not named by the schema may repeat:
  no finite automaton tells unboundedly many keys apart;
* recursion and free values (``{}``, additional properties by default) nest at most
  ``max_depth`` deep; explicit nesting is never cut;
* ``format``: date, time, date-time, email, uuid, uri, uri-reference, ipv4, ipv6, hostname,
  json-pointer, relative-json-pointer, duration are asserted (:mod:`.formats`); others are
  annotations, named in the warnings;
* ``pattern``: ECMA-262, unanchored (:mod:`.ecma`); what has no regular translation
  (lookaround, backreferences, ``\\b``) is refused by name;
* refused by name (``InputError``, hint ``schema-keyword``): ``unevaluatedProperties``,
  ``unevaluatedItems``, ``$dynamicRef``, ``$recursiveRef``; ``uniqueItems`` over more than a
  few item values; ``$ref`` to another document (hint ``schema-ref``). ``lenient=True``
  ignores them instead, and relaxes counts above 64 (a DFA counting to N has N times the
  states), each listed in the warnings;
* limits: every automaton stays under ``max_states`` (``LimitError``), estimated first where
  the size is known beforehand (``any_order``, ``multipleOf``, ``uniqueItems``, repetitions).
"""

from tokfst_cli import compat

__getattr__ = compat.forward(__name__, {name: "compile" for name in (  # release 0.1's names, with a warning
    "compile_schema", "CompiledSchema", "MAX_DEPTH", "MAX_STATES", "LENIENT_COUNT")})
