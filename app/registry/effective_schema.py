"""Effective schemas: what events of an event type are validated against, per category.

- business: the custom schema's top-level properties plus the category's `metadata`.
- data: `metadata`, `data_type`, `data_op` (C/U/D/S) and `data`, which the custom schema describes.
- undefined: the custom schema as given.
A custom schema whose root is a `$ref` has it moved into `allOf` first (`_lift_root_ref`): draft 4
ignores what is added beside a `$ref`.
In compatible and none modes no undeclared property is accepted (`additionalProperties: false`
wherever the schema does not say otherwise); a property is declared when the object's
`properties` or its `allOf`/`anyOf`/`oneOf` branches declare it (`_Strict`). Forward mode
accepts undeclared properties.

Compiling and running the validator is `event_validator`; caching it, `validator_cache`.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from referencing.exceptions import Unresolvable
from referencing.jsonschema import DRAFT4

from app.domain.event_type import EventType
from app.registry.choices import DATA_OPERATIONS
from app.registry.json_schema import parse_schema_text, resolver_for, subschemas, walk

if TYPE_CHECKING:  # referencing does not export the type at its top level
    from referencing._core import Resolver

# Base URI given to the custom part of a data event type's schema when it has none, so that
# its `#/definitions/...` references keep meaning its own root once it is nested under `data`.
DATA_SCHEMA_ID = "urn:nakadi:event-type:data"
# The spec: "compatible" and "none" accept no additional properties unless the schema says so.
STRICT_MODES = ("compatible", "none")
_OBJECT_KEYWORDS = ("properties", "required", "minProperties", "maxProperties")
_COMPOSITION_KEYWORDS = ("allOf", "anyOf", "oneOf")
# Draft 4 ignores every keyword beside a `$ref`; these are the ones that would validate (or,
# for `id`, change what references mean) were they moved away from it.
_IGNORED_BESIDE_REF = frozenset({
    "$ref", "id", "type", "enum", "format", "multipleOf", "maximum", "exclusiveMaximum",
    "minimum", "exclusiveMinimum", "maxLength", "minLength", "pattern", "items",
    "additionalItems", "maxItems", "minItems", "uniqueItems", "maxProperties", "minProperties",
    "required", "properties", "patternProperties", "additionalProperties", "dependencies",
    "allOf", "anyOf", "oneOf", "not",
})
# Strict modes add a definition per composed `$ref` target and set of names (see `_Strict`).
MAX_COMPOSED_DEFINITIONS = 256
# ... and give branches the names declared across their composition: at most this many in all.
MAX_BRANCH_NAMES = 20_000
_COMPOSED_PREFIX = "nakadi-composed-"


def metadata_schema(event_type_name: str, cleanup_policy: str, strict: bool) -> dict[str, Any]:
    """The `metadata` object of business and data events (the spec's EventMetadata). In the
    strict modes it takes no field that EventMetadata does not declare, as every object of
    the event; `forward` accepts them, as it accepts undeclared properties elsewhere."""
    required = ["eid", "occurred_at"]
    # The spec's partition_compaction_key: "Required when 'cleanup_policy' of event type is
    # set to 'compact'. Must be absent otherwise." Nakadi refuses an empty one. An annotation
    # alone is valid for every value: `not` of it refuses any, and the error names why.
    compaction_key: dict[str, Any] = {
        "not": {"description": "only compacted event types take a compaction key"}}
    if cleanup_policy == "compact":
        required.append("partition_compaction_key")
        compaction_key = {"type": "string", "minLength": 1}
    return {
        "type": "object",
        "properties": {
            "eid": {"type": "string", "format": "uuid"},
            "event_type": {"type": "string", "enum": [event_type_name]},
            "occurred_at": {"type": "string", "format": "date-time"},
            "received_at": {"type": "string", "format": "date-time"},
            "version": {"type": "string"},
            "parent_eids": {"type": "array", "items": {"type": "string", "format": "uuid"}},
            "flow_id": {"type": "string"},
            "partition": {"type": "string"},
            "partition_compaction_key": compaction_key,
            "span_ctx": {"type": "object", "additionalProperties": {"type": "string"}},
        },
        "required": required,
        **({"additionalProperties": False} if strict else {}),
    }


def _is_object_schema(node: Mapping[str, Any]) -> bool:
    declared = node.get("type")
    if declared == "object" or (isinstance(declared, list) and "object" in declared):
        return True
    return declared is None and any(keyword in node for keyword in _OBJECT_KEYWORDS)


class SchemaNotComposable(ValueError):
    """The strict-mode effective schema would need more composed definitions, or give
    branches more names, than allowed (see `_Strict`); the message says so. Creation
    refuses such a schema."""


def _lift_root_ref(custom: dict[str, Any]) -> dict[str, Any]:
    """`custom` with a root `$ref` moved into `allOf`, so that keywords can be added to the root.

    Draft 4 ignores every keyword beside a `$ref`: `properties.metadata`, `required`, `id` or
    `additionalProperties` added there would do nothing. The keywords that were ignored beside
    the `$ref` (`id` included) are dropped, so that the lifted root validates what the original
    did; the others (`definitions`, annotations) stay where `#/...` references find them.
    """
    ref = custom.get("$ref")
    if not isinstance(ref, str):  # not a reference: creation refuses it (ref_problems)
        return custom
    kept = {key: value for key, value in custom.items() if key not in _IGNORED_BESIDE_REF}
    return {**kept, "allOf": [{"$ref": ref}]}


def _in_subresource(resolver: Resolver[Any], node: Mapping[str, Any]) -> Resolver[Any]:
    try:
        return resolver.in_subresource(DRAFT4.create_resource(node))
    except ValueError:  # an id that is not a URI: creation refuses it (ref_problems)
        return resolver


def _declared(node: Mapping[str, Any], resolver: Resolver[Any]) -> frozenset[str]:
    """The property names `node` declares for the object it validates: its own `properties`
    and those of its `allOf`/`anyOf`/`oneOf` branches, recursively, following `$ref`s (and
    ignoring the keywords beside one, as draft 4 does). Not `not`: what it declares is refused.
    Iterative and cycle-safe."""
    names: set[str] = set()
    seen: set[int] = set()
    stack = [(node, resolver)]
    while stack:
        current, current_resolver = stack.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        current_resolver = _in_subresource(current_resolver, current)
        ref = current.get("$ref")
        if isinstance(ref, str):
            try:
                target = current_resolver.lookup(ref)
            except (Unresolvable, ValueError):  # creation refuses it (ref_problems)
                continue
            if isinstance(target.contents, dict):
                stack.append((target.contents, target.resolver))
            continue
        properties = current.get("properties")
        if isinstance(properties, dict):
            names.update(properties)
        for keyword in _COMPOSITION_KEYWORDS:
            branches = current.get(keyword)
            if isinstance(branches, list):
                stack.extend((branch, current_resolver) for branch in branches
                             if isinstance(branch, dict))
    return frozenset(names)


def _with_children(
    node: Mapping[str, Any],
    transform: Callable[[tuple[str | int, ...], dict[str, Any]], dict[str, Any]],
) -> dict[str, Any]:
    """A copy of `node` whose direct subschemas are replaced by `transform(path, child)`."""
    out = dict(node)
    copied: set[str] = set()
    for path, child in subschemas(node):
        keyword = str(path[0])
        if len(path) == 1:
            out[keyword] = transform(path, child)
            continue
        if keyword not in copied:
            container = out[keyword]
            out[keyword] = list(container) if isinstance(container, list) else dict(container)
            copied.add(keyword)
        out[keyword][path[1]] = transform(path, child)
    return out


class _Strict:
    """Compatible and none modes: no property is accepted that the schema does not declare.

    Every object schema (and the root) that does not state `additionalProperties` gets
    `additionalProperties: false`, every tuple that does not state `additionalItems` gets
    `additionalItems: false`. Draft 4's `additionalProperties` sees only the `properties` of
    its own schema object, yet a property may be declared by a branch of `allOf`/`anyOf`/
    `oneOf` (the usual `allOf: [{$ref: Base}, {properties: {extra}}]`): the root would refuse
    what the branches declare, and each branch what the others declare. So where
    `additionalProperties: false` is added, every name declared across the object's
    composition (`_declared`), and across the composition enclosing it when it is a branch,
    is added as `properties[name] = {}` (accepted here, validated where it is declared). A
    name declared nowhere is still refused.

    Where the object itself refuses every name its composition does not declare (it is an
    object schema, or the root), its branches are *covered*: they refuse nothing of their
    own, since they would refuse nothing more. Giving each of n branches the names of all
    made the schema grow as n squared: an `allOf` of 5,000 one-property branches kept a
    worker busy for minutes. Branches of an object that is not recognisably one (a bare
    `allOf` under `properties`) still get the names, at most `MAX_BRANCH_NAMES` in all.

    A branch that is a `$ref` cannot be given those names in place, and its target may serve
    other uses; when the target does not declare them all, the branch's `$ref` is pointed at a
    copy of the target, processed with the names, that is added to the root's `definitions`
    (once per target and names: a definition, not an inlined copy, so that branches of
    branches do not multiply copies, and cycles end). This needs `#/definitions/...` to mean
    the same from everywhere, so it is not done when the document has an `id` anywhere; there
    the branch keeps its `$ref` and the target refuses names it does not declare.

    Where an object states `additionalProperties` (only none mode may), that holds for the
    whole object: its branches are not given `additionalProperties: false` either.
    `not` is left alone: forbidding inside it would accept more, not less.
    """

    def __init__(self, document: Mapping[str, Any]) -> None:
        self._resolver = resolver_for(document)
        self._may_define = not any(isinstance(node.get("id"), str) for _, node in walk(document))
        self._taken = set(document.get("definitions") or ())
        self._names: dict[tuple[int, frozenset[str], bool], str] = {}
        self._pending: list[tuple[str, dict[str, Any], Resolver[Any], frozenset[str], bool]] = []
        self._branch_names = 0

    def root(self, document: dict[str, Any], names: frozenset[str]) -> dict[str, Any]:
        """`document` processed as the root, which also accepts `names` (e.g. `metadata`)."""
        out = self._node(document, self._resolver, names, forbid_allowed=True, is_root=True)
        composed: dict[str, Any] = {}
        while self._pending:
            name, target, resolver, extra, allowed = self._pending.pop(0)
            composed[name] = self._node(target, resolver, extra, allowed)
        if composed:
            out["definitions"] = {**(out.get("definitions") or {}), **composed}
        return out

    def _node(
        self,
        node: dict[str, Any],
        resolver: Resolver[Any],
        extra: frozenset[str],
        forbid_allowed: bool,
        is_root: bool = False,
        covered: bool = False,
    ) -> dict[str, Any]:
        """`covered`: a branch whose object refuses what its composition does not declare."""
        resolver = _in_subresource(resolver, node)
        ref = node.get("$ref")
        if isinstance(ref, str):  # the keywords beside it are ignored, but may be pointed into
            out = _with_children(node, lambda path, child: self._child(
                path, child, resolver, frozenset(), True, False))
            out["$ref"] = self._reference(ref, resolver, extra, forbid_allowed, covered)
            return out
        names = _declared(node, resolver) | extra
        states = "additionalProperties" in node
        forbid = forbid_allowed and not states and (is_root or _is_object_schema(node))
        branches_allowed = forbid_allowed and node.get("additionalProperties", False) is False
        out = _with_children(node, lambda path, child: self._child(
            path, child, resolver, names, branches_allowed, forbid or covered))
        if forbid:
            out["additionalProperties"] = False
            properties = dict(out.get("properties") or {})
            added = names - properties.keys()
            if extra and not is_root:  # a branch given the names of its composition
                self._branch_names += len(added)
                if self._branch_names > MAX_BRANCH_NAMES:
                    raise SchemaNotComposable(
                        "declares too many properties across the allOf/anyOf/oneOf branches "
                        "of objects without `type: object` or `properties` for undeclared "
                        "properties to be refused (compatible and none modes): more than "
                        f"{MAX_BRANCH_NAMES} in all; give such objects `type: object`")
            for name in sorted(added):
                properties[name] = {}
            if properties or "properties" in node:
                out["properties"] = properties
        if isinstance(node.get("items"), list) and "additionalItems" not in node:
            out["additionalItems"] = False
        return out

    def _child(
        self,
        path: tuple[str | int, ...],
        child: dict[str, Any],
        resolver: Resolver[Any],
        names: frozenset[str],
        branches_allowed: bool,
        covered: bool,
    ) -> dict[str, Any]:
        if path[0] == "not":
            return child
        if path[0] in _COMPOSITION_KEYWORDS:
            if covered:
                return self._node(child, resolver, names, False, covered=True)
            return self._node(child, resolver, names, branches_allowed)
        return self._node(child, resolver, frozenset(), True)

    def _reference(
        self, ref: str, resolver: Resolver[Any], extra: frozenset[str], allowed: bool,
        covered: bool,
    ) -> str:
        """The `$ref` a reference becomes: itself when its target, processed where it is,
        accepts what is wanted here; else a composed copy of the target (see the class).
        A copy that refuses nothing of its own needs no names: one serves every use."""
        if not self._may_define or (not extra and allowed):
            return ref
        try:
            target = resolver.lookup(ref)
        except (Unresolvable, ValueError):  # creation refuses it (ref_problems)
            return ref
        if not isinstance(target.contents, dict):
            return ref
        if (allowed or covered) and extra <= _declared(target.contents, target.resolver):
            return ref
        if not allowed:
            extra = frozenset()
        key = (id(target.contents), extra, allowed)
        name = self._names.get(key)
        if name is None:
            if len(self._names) >= MAX_COMPOSED_DEFINITIONS:
                raise SchemaNotComposable(
                    "composes too many schemas through $ref for undeclared properties to be "
                    f"refused (compatible and none modes): more than {MAX_COMPOSED_DEFINITIONS} "
                    "combinations of a $ref in allOf/anyOf/oneOf and the names its object "
                    "declares elsewhere")
            name = self._fresh_name()
            self._names[key] = name
            self._pending.append((name, target.contents, target.resolver, extra, allowed))
        return f"#/definitions/{name}"

    def _fresh_name(self) -> str:
        index = len(self._names)
        while f"{_COMPOSED_PREFIX}{index}" in self._taken:
            index += 1
        name = f"{_COMPOSED_PREFIX}{index}"
        self._taken.add(name)
        return name


def effective_schema(
    event_type: EventType, custom_schema: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """The effective schema of `event_type`, built from `custom_schema` when given (e.g. an
    older version's schema), else from its current schema.

    Never modifies its arguments. Raises SchemaNotComposable for a strict-mode schema that
    composes too much (creation refuses it).
    """
    if custom_schema is None:
        custom_schema = parse_schema_text(event_type.schema.schema)
    custom = copy.deepcopy(dict(custom_schema))
    strict = event_type.compatibility_mode in STRICT_MODES
    category = event_type.category
    if category != "undefined" or strict:
        custom = _lift_root_ref(custom)
    if strict:
        accepted = frozenset({"metadata"}) if category == "business" else frozenset()
        custom = _Strict(custom).root(custom, accepted)
    if category == "undefined":
        return custom
    metadata = metadata_schema(event_type.name, event_type.cleanup_policy, strict)
    if category == "business":
        properties = dict(custom.get("properties") or {})
        properties["metadata"] = metadata
        required = [name for name in custom.get("required") or () if name != "metadata"]
        return {
            **custom,
            "type": "object",
            "properties": properties,
            "required": [*required, "metadata"],
        }
    custom.setdefault("type", "object")
    custom.setdefault("id", DATA_SCHEMA_ID)
    envelope: dict[str, Any] = {
        "type": "object",
        "properties": {
            "metadata": metadata,
            "data_type": {"type": "string"},
            "data_op": {"type": "string", "enum": list(DATA_OPERATIONS)},
            "data": custom,
        },
        "required": ["data", "metadata", "data_type", "data_op"],
    }
    if strict:
        envelope["additionalProperties"] = False
    return envelope
