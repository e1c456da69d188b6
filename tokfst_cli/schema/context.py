"""Positions in an instance and the stable key order there (the peers' order, Koo et al. 2024 Sec. 5.1).

A :class:`Position` is the set of schemas that apply at one place of the instance: at the root
the schema, and from there, through ``$ref``, ``allOf``, ``anyOf``, ``oneOf``, ``not``,
``if``/``then``/``else`` and ``dependentSchemas`` (depth first, in the order the keywords
appear). The position of a property's value gathers the parents' ``properties[k]``, the
``patternProperties`` matching k and otherwise ``additionalProperties``; an item's gathers
``prefixItems[i]`` or ``items``/``additionalItems``, and ``contains``.

Depth: an array or object opens a *counted* level unless its schemas describe its parts
(``properties``, ``patternProperties``, ``additionalProperties``, ``items``, ``prefixItems``,
``additionalItems``, ``contains``, a constant array or object), or when a recursion enters
there (see :meth:`.refs.Document.recursive_targets`). ``max_depth`` bounds the counted
levels on any path: free values (``{}``, ``true``, additional properties by default) nest
at most that deep, recursion unfolds at most that often, and explicit nesting is never cut.

Key order at a position: the names of those schemas' ``properties`` (merged over all of
them, in the order they appear), then ``required`` names not listed, then the names of
``dependentRequired``/``dependencies``/``dependentSchemas`` and of ``const``/``enum`` object
values; then every other key, in any order. Every schema compiled at a position uses the
same order, so the languages compiled there are comparable: intersection (allOf),
difference (oneOf) and complement (not) are exact. Constant values are followed into nested
positions (as ``{"enum": [...]}`` of their parts), so every key a schema names is ordered.
"""

from __future__ import annotations

from collections.abc import Iterable

from tokfst_cli.schema import ecma
from tokfst_cli.schema.refs import Document, Schema


def _constants(node: dict) -> list:
    """The values ``const``/``enum`` allow (none when neither is present)."""
    values = [node["const"]] if "const" in node else []
    if isinstance(node.get("enum"), list):
        values += node["enum"]
    return values


def _prefix(node: dict) -> list:
    """The per-position item schemas (2020-12 ``prefixItems``, or a draft-7 ``items`` array)."""
    if isinstance(node.get("prefixItems"), list):
        return node["prefixItems"]
    return node["items"] if isinstance(node.get("items"), list) else []


def tail_schema(node: dict) -> tuple[bool, Schema | None]:
    """(has one, the schema) for the items after the prefix."""
    if isinstance(node.get("items"), list):
        return ("additionalItems" in node), node.get("additionalItems")
    return ("items" in node), node.get("items")


def value_schemas(node: dict, key: str) -> list[Schema]:
    """The schemas of ``node`` that apply to the value of property ``key``."""
    props = node.get("properties")
    out = [props[key]] if isinstance(props, dict) and key in props else []
    patterns = node.get("patternProperties")
    if isinstance(patterns, dict):
        out += [s for p, s in patterns.items() if ecma.search(p, key)]
    if not out and "additionalProperties" in node:
        out.append(node["additionalProperties"])
    return out


def class_schemas(node: dict, matched: frozenset[str]) -> list[Schema]:
    """The schemas of ``node`` for a key outside ``properties`` matching exactly the patterns ``matched``."""
    patterns = node.get("patternProperties")
    out = [s for p, s in patterns.items() if p in matched] if isinstance(patterns, dict) else []
    if not out and "additionalProperties" in node:
        out.append(node["additionalProperties"])
    return out


def item_schemas(node: dict, index: int) -> list[Schema]:
    """The schemas of ``node`` for item ``index`` (``contains`` aside)."""
    prefix = _prefix(node)
    if index < len(prefix):
        return [prefix[index]]
    has, tail = tail_schema(node)
    return [tail] if has else []


_STRUCTURE = ("properties", "patternProperties", "additionalProperties", "items", "prefixItems", "additionalItems",
              "contains")


def _describes(node: dict) -> bool:
    """Does ``node`` give the parts of an array or object their own schemas (or values)?"""
    return any(k in node for k in _STRUCTURE) or any(isinstance(v, (list, dict)) for v in _constants(node))


_NAMING = ("required", "dependentRequired", "dependencies", "dependentSchemas")


def _structural(node: dict) -> bool:
    """Does ``node`` shape the positions (key names and order, patterns, parts)?"""
    return _describes(node) or any(k in node for k in _NAMING)


def _names_of(node: dict) -> Iterable[str]:
    """The names ``node`` orders after ``properties``: required, dependencies, constant keys."""
    for key in ("required",):
        if isinstance(node.get(key), list):
            yield from (k for k in node[key] if isinstance(k, str))
    for key in ("dependentRequired", "dependencies", "dependentSchemas"):
        deps = node.get(key)
        if isinstance(deps, dict):
            for k, v in deps.items():
                yield k
                if isinstance(v, list):
                    yield from (x for x in v if isinstance(x, str))
    for value in _constants(node):
        if isinstance(value, dict):
            yield from value


class Position:
    """The schemas applying at one place of the instance (see the module docstring)."""

    def __init__(self, world: "Positions", nodes: tuple[dict, ...], properties: list[str], counted: bool, key: tuple):
        self.world, self.nodes, self.counted, self.key = world, nodes, counted, key
        names = dict.fromkeys(properties)
        for node in nodes:
            names.update(dict.fromkeys(_names_of(node)))
        self.names: list[str] = list(names)
        self.patterns: list[str] = list(dict.fromkeys(p for n in nodes if isinstance(n.get("patternProperties"), dict)
                                                      for p in n["patternProperties"]))
        self.prefix = max([len(_prefix(n)) for n in nodes]
                          + [len(v) for n in nodes for v in _constants(n) if isinstance(v, list)], default=0)
        self.cache: dict = {}  # what the compiler derives from the position (key classes)

    def plain(self, kind: str) -> bool:
        """Do the parts of an array or object here (``kind``) have no schema, as at a free position?"""
        if kind == "object":
            return not self.names and not self.patterns and not any("additionalProperties" in n for n in self.nodes)
        return not self.prefix and not any(k in n for n in self.nodes for k in ("items", "additionalItems",
                                                                                  "prefixItems", "contains"))

    def child_key(self, key: str) -> "Position":
        """The position of the value of a property named in :attr:`names` (made once per key)."""
        got = self.cache.get(("child", key))
        if got is None:
            got = self.cache[("child", key)] = self._child_key(key)
        return got

    def _child_key(self, key: str) -> "Position":
        seeds = []
        for node in self.nodes:
            seeds += value_schemas(node, key)
            parts = [v[key] for v in _constants(node) if isinstance(v, dict) and key in v]
            if parts:
                seeds.append(self.world.virtual(("key", id(node), key), parts))
        return self.world.at(seeds)

    def child_class(self, matched: frozenset[str]) -> "Position":
        """The position of the value of another key, matching exactly the patterns ``matched``."""
        got = self.cache.get(("class", matched))
        if got is None:
            got = self.cache[("class", matched)] = self.world.at(s for node in self.nodes
                                                                for s in class_schemas(node, matched))
        return got

    def item(self, index: int) -> "Position":
        """The position of item ``index`` (items past :attr:`prefix` share one)."""
        index = min(index, self.prefix)
        seeds = []
        for node in self.nodes:
            seeds += item_schemas(node, index)
            if "contains" in node:
                seeds.append(node["contains"])
            parts = [v[index] for v in _constants(node) if isinstance(v, list) and len(v) > index]
            if parts:
                seeds.append(self.world.virtual(("item", id(node), index), parts))
        return self.world.at(seeds)

    def class_of(self, key: str) -> frozenset[str]:
        return frozenset(p for p in self.patterns if ecma.search(p, key))

    def child(self, key: str) -> "Position":
        """The position of the value of any property."""
        return self.child_key(key) if key in self.names else self.child_class(self.class_of(key))


class Positions:
    """Positions of one document, each built once."""

    def __init__(self, doc: Document):
        self.doc = doc
        self._cache: dict[tuple, Position] = {}
        self._virtual: dict[tuple, dict] = {}

    def root(self) -> Position:
        return self.at([self.doc.root])

    def virtual(self, key: tuple, values: list) -> dict:
        """The ``{"enum": values}`` standing for the parts of constants (one object per key)."""
        if key not in self._virtual:
            self._virtual[key] = {"enum": values}
        return self._virtual[key]

    def at(self, seeds: Iterable[Schema]) -> Position:
        """The position where ``seeds`` apply; one object for every set of seeds with the same
        structure (the schemas giving names, patterns, parts: ``{"$ref": ...}`` or
        ``{"type": "string"}`` change nothing here)."""
        nodes, properties = self.expand(seeds)
        recursive = self.doc.recursive_targets()
        # a container here opens a counted level unless the schemas describe its parts (and no recursion enters)
        counted = not any(_describes(n) for n in nodes) or any(id(n) in recursive for n in nodes)
        structure = tuple(n for n in nodes if _structural(n))
        key = (tuple(id(n) for n in structure), counted, tuple(properties))
        if key not in self._cache:
            self._cache[key] = Position(self, structure, properties, counted, key)
        return self._cache[key]

    def expand(self, seeds: Iterable[Schema]) -> tuple[list[dict], list[str]]:
        """The schemas applying with ``seeds``, depth first, and their property names in order."""
        nodes: list[dict] = []
        properties: list[str] = []
        seen: set[int] = set()

        def visit(node: Schema) -> None:
            if not isinstance(node, dict) or id(node) in seen:
                return
            seen.add(id(node))
            nodes.append(node)
            for key, value in node.items():
                if key == "properties" and isinstance(value, dict):
                    properties.extend(value)
                elif key == "$ref" and isinstance(value, str):
                    visit(self.doc.resolve(value, node))
                elif key in ("allOf", "anyOf", "oneOf") and isinstance(value, list):
                    for v in value:
                        visit(v)
                elif key in ("not", "if", "then", "else"):
                    visit(value)
                elif key in ("dependentSchemas", "dependencies") and isinstance(value, dict):
                    for v in value.values():
                        visit(v)

        for seed in seeds:
            visit(seed)
        return nodes, properties
