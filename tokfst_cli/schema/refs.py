"""A schema document: its keywords, and ``$ref`` resolved within it (draft 2020-12 Sec. 8.2).

Every subschema is walked once: ``$id`` sets the base URI of its subtree (resolved against the
enclosing base), ``$anchor`` (and ``$dynamicAnchor``, read as a plain anchor, and a draft-7
``$id: "#name"``) names a subschema. A ``$ref`` is resolved against the base URI of the schema
that holds it: a JSON pointer fragment (``#/$defs/a~1b``, percent-decoded) from the resource
it names, or an anchor. Only the document itself is searched: a reference to another
document is refused by name.

The keywords: :data:`SUPPORTED` are compiled; :data:`ANNOTATIONS` never constrain; the
keywords of :data:`REFUSED` are refused (or, leniently, ignored with a warning); any other
key is not a JSON Schema keyword and is ignored with a warning.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from urllib.parse import unquote, urldefrag, urljoin

from tokfst_cli.errors import InputError

Schema = dict | bool

MAX_NESTING = 128  # JSON nesting depth of a schema document (objects and arrays inside each other)

SUPPORTED = frozenset("""
    type enum const nullable
    minimum maximum exclusiveMinimum exclusiveMaximum multipleOf
    minLength maxLength pattern format
    items prefixItems additionalItems minItems maxItems uniqueItems contains minContains maxContains
    properties required additionalProperties patternProperties propertyNames minProperties maxProperties
    dependencies dependentRequired dependentSchemas
    allOf anyOf oneOf not if then else $ref
""".split())
ACTIVE = SUPPORTED - {"$ref", "allOf"}  # what a schema constrains by itself (beside the schemas it names)
ANNOTATIONS = frozenset("""
    $schema $id $anchor $dynamicAnchor $defs definitions $comment $vocabulary
    title description default examples example deprecated readOnly writeOnly
    contentMediaType contentEncoding contentSchema discriminator externalDocs xml
""".split())
REFUSED = frozenset("""
    $dynamicRef $recursiveRef $recursiveAnchor unevaluatedProperties unevaluatedItems
    extends disallow divisibleBy
""".split())

# keywords whose value is a subschema / a list of them / a name -> subschema map
SUBSCHEMA = ("additionalProperties", "additionalItems", "contains", "propertyNames", "not", "if", "then", "else",
             "unevaluatedProperties", "unevaluatedItems", "contentSchema", "items")
SUBSCHEMA_LISTS = ("allOf", "anyOf", "oneOf", "prefixItems", "items")
SUBSCHEMA_MAPS = ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas", "dependencies")

_DEFAULT_BASE = "https://tokfst.invalid/schema.json"  # the base URI of a document without $id


def nesting(value: object) -> int:
    """The JSON nesting depth of ``value``: 0 for a scalar, 1 for ``{}`` or ``[]``, one more per
    container inside (walked without recursion)."""
    deepest, todo = 0, [(value, 1)]
    while todo:
        v, d = todo.pop()
        if isinstance(v, (dict, list)):
            deepest = max(deepest, d)
            todo.extend((x, d + 1) for x in (v.values() if isinstance(v, dict) else v))
    return deepest


_BRACKETS = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{}]', re.S)


def text_nesting(text: str) -> int:
    """The nesting depth of JSON text (brackets outside strings), for text too deep to parse."""
    deepest = depth = 0
    for m in _BRACKETS.finditer(text):
        c = m.group()
        if c in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif c in "]}":
            depth -= 1
    return deepest


def too_deep(depth: int, what: str = "the schema") -> InputError:
    return InputError(f"{what} nests too deeply: nesting depth {depth} over the limit of {MAX_NESTING}",
                      "flatten it: name deep parts in $defs and refer to them with $ref", hint="schema-depth",
                      depth=depth, limit=MAX_NESTING)


def check_nesting(schema: object, what: str = "the schema") -> None:
    """InputError (hint ``schema-depth``) for a document nested deeper than :data:`MAX_NESTING`
    (the compiler walks nesting recursively; Python's recursion limit is far below JSON's)."""
    depth = nesting(schema)
    if depth > MAX_NESTING:
        raise too_deep(depth, what)


def loads(text: str | bytes, what: str = "the schema") -> Schema:
    """A schema document from JSON text: InputError for text that is not JSON (naming ``what``),
    or nested deeper than :data:`MAX_NESTING` (its depth and the limit: Python's json module
    itself stops near depth 1,000 with a RecursionError)."""
    try:
        doc = json.loads(text)
    except RecursionError:
        raise too_deep(text_nesting(text.decode("utf-8", "replace") if isinstance(text, bytes) else text),
                       what) from None
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise InputError(f"{what} is not JSON: {e}", "give a JSON Schema document", hint="schema-json") from None
    check_nesting(doc, what)
    return doc


def subschemas(node: dict) -> Iterator[Schema]:
    """The subschemas directly inside ``node`` (all keywords, including refused ones)."""
    for key, value in node.items():
        if key in SUBSCHEMA and isinstance(value, (dict, bool)):
            yield value
        elif key in SUBSCHEMA_LISTS and isinstance(value, list):
            yield from (v for v in value if isinstance(v, (dict, bool)))
        elif key in SUBSCHEMA_MAPS and isinstance(value, dict):
            yield from (v for v in value.values() if isinstance(v, (dict, bool)))


def applied(node: dict) -> Iterator[Schema]:
    """The subschemas applied to the instance or its parts (``$defs`` and annotations aside)."""
    for key, value in node.items():
        if key in ("$defs", "definitions", "contentSchema", "propertyNames"):
            continue
        if key in SUBSCHEMA and isinstance(value, (dict, bool)):
            yield value
        elif key in SUBSCHEMA_LISTS and isinstance(value, list):
            yield from value
        elif key in SUBSCHEMA_MAPS and isinstance(value, dict):
            yield from value.values()


def _join(base: str, ref: str) -> str:
    if ref.startswith("#"):
        return urldefrag(base)[0] + ref
    if ":" in ref.split("/")[0]:  # absolute (http:, urn:, file:, ...)
        return ref
    return urljoin(base, ref)


class Document:
    """The resources, anchors and base URIs of one schema document."""

    def __init__(self, root: Schema):
        self.root = root
        self.resources: dict[str, Schema] = {}
        self.anchors: dict[str, Schema] = {}
        self.base: dict[int, str] = {}
        self._walk(root, _DEFAULT_BASE)
        self.resources.setdefault(_DEFAULT_BASE, root)

    def _walk(self, node: Schema, base: str) -> None:
        if not isinstance(node, dict) or id(node) in self.base:
            return
        ident = node.get("$id")
        if isinstance(ident, str):
            if ident.startswith("#"):  # draft 7: a location-independent name
                self.anchors[urldefrag(base)[0] + ident] = node
            else:
                base = urldefrag(_join(base, ident))[0]
                self.resources[base] = node
        self.base[id(node)] = base
        for key in ("$anchor", "$dynamicAnchor"):
            if isinstance(node.get(key), str):
                self.anchors.setdefault(f"{urldefrag(base)[0]}#{node[key]}", node)
        for sub in subschemas(node):
            self._walk(sub, base)

    def pointer(self, target: dict) -> str:
        """The JSON pointer of the subschema ``target`` in the document ("#" for the root; "#?" if
        it is not inside, as a constant's virtual schema)."""
        todo: list[tuple[object, str]] = [(self.root, "#")]
        while todo:
            node, path = todo.pop()
            if node is target:
                return path
            items = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else ()
            for k, v in items:
                if isinstance(v, (dict, list)):
                    todo.append((v, f"{path}/{str(k).replace('~', '~0').replace('/', '~1')}"))
        return "#?"

    def resolve(self, ref: str, holder: dict) -> Schema:
        """The subschema ``ref`` names, seen from the schema ``holder`` that holds it."""
        uri = _join(self.base.get(id(holder), _DEFAULT_BASE), ref)
        doc, fragment = urldefrag(uri)
        if uri in self.anchors:
            return self.anchors[uri]
        resource = self.resources.get(doc)
        if resource is None:
            raise InputError(f"$ref {ref!r} names another document ({doc})", "put the referenced schema in $defs",
                             hint="schema-ref", ref=ref)
        if not fragment:
            return resource
        if not fragment.startswith("/"):
            raise InputError(f"$ref {ref!r}: no anchor {fragment!r} in the schema", "fix the reference",
                             hint="schema-ref", ref=ref)
        node = resource
        for token in fragment[1:].split("/"):
            token = unquote(token).replace("~1", "/").replace("~0", "~")
            if isinstance(node, dict) and token in node:
                node = node[token]
            elif isinstance(node, list) and token.isdigit() and int(token) < len(node):
                node = node[int(token)]
            else:
                raise InputError(f"$ref {ref!r} points to nothing", "fix the reference", hint="schema-ref", ref=ref)
        if not isinstance(node, (dict, bool)):
            raise InputError(f"$ref {ref!r} points to a value that is not a schema", "fix the reference",
                             hint="schema-ref", ref=ref)
        if isinstance(node, dict) and id(node) not in self.base:
            self._walk(node, self.base.get(id(resource), doc))
        return node

    def recursive_targets(self) -> set[int]:
        """The ids of the schemas where recursion re-enters: every cycle passes through one.

        Edges go from a schema to its ``$ref`` target and to the subschemas applied to the
        same instance or to its parts (not to ``$defs``, which apply to nothing). A depth
        first search from the root marks the targets of its back edges: every cycle holds
        a back edge, so these cut every cycle, and a plain recursion counts once per turn.
        """
        if not hasattr(self, "_recursive"):
            self._recursive = set()
            if isinstance(self.root, dict):
                self._back_edges(self.root)
        return self._recursive

    def _edges(self, node: dict) -> list[dict]:
        out = [v for v in applied(node) if isinstance(v, dict)]
        if isinstance(node.get("$ref"), str):
            try:
                target = self.resolve(node["$ref"], node)
            except InputError:  # reported when (if) the reference is compiled
                target = None
            if isinstance(target, dict):
                out.append(target)
        return out

    def _back_edges(self, root: dict) -> None:
        state: dict[int, int] = {id(root): 1}  # 1: on the stack, 2: done
        work = [(root, iter(self._edges(root)))]
        while work:
            node, it = work[-1]
            for nxt in it:
                seen = state.get(id(nxt))
                if seen == 1:
                    self._recursive.add(id(nxt))
                elif seen is None:
                    state[id(nxt)] = 1
                    work.append((nxt, iter(self._edges(nxt))))
                    break
            else:
                state[id(node)] = 2
                work.pop()
