"""Reading and inspecting the JSON Schema (draft 4) documents that event types carry."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

from jsonschema import Draft4Validator
from jsonschema.exceptions import best_match
from referencing import Registry
from referencing.exceptions import Unresolvable
from referencing.jsonschema import DRAFT4

from app import strict_json
from app.registry.formats import schema_format_checker

if TYPE_CHECKING:  # referencing does not export the type at its top level
    from referencing._core import Resolver

# Deeper documents are refused: validation and the checks here recurse once per level.
MAX_NESTING = 100
DRAFT4_URIS = frozenset(
    {
        "http://json-schema.org/draft-04/schema#",
        "http://json-schema.org/draft-04/schema",
        "https://json-schema.org/draft-04/schema#",
        "https://json-schema.org/draft-04/schema",
    }
)

# Draft 4 keywords whose value is a schema, a list of schemas, or a map of name -> schema.
SCHEMA_KEYWORDS = ("additionalItems", "additionalProperties", "items", "not")
SCHEMA_LIST_KEYWORDS = ("allOf", "anyOf", "oneOf", "items")
_SCHEMA_MAP_KEYWORDS = ("definitions", "properties", "patternProperties", "dependencies")
_META_SCHEMA_VALIDATOR = Draft4Validator(
    Draft4Validator.META_SCHEMA, format_checker=schema_format_checker()
)


class SchemaTextInvalid(ValueError):
    """The schema text is not a JSON object; the message says why."""


def parse_schema_text(text: str) -> dict[str, Any]:
    """The JSON object held by `text`, read by the rules request bodies are read by
    (`strict_json`: no `1e999`, which would become infinity); raises SchemaTextInvalid
    saying what is wrong."""
    try:
        document = strict_json.loads(text.encode())
    except UnicodeEncodeError:
        raise SchemaTextInvalid("is not valid JSON (it holds a lone UTF-16 surrogate)") from None
    except strict_json.InvalidJson as error:
        if "deep" in str(error) or "depth" in str(error):
            raise SchemaTextInvalid(f"is nested more than {MAX_NESTING} levels deep") from None
        raise SchemaTextInvalid(f"is not valid JSON ({error})") from None
    if not isinstance(document, dict):
        raise SchemaTextInvalid("must be a JSON object holding a JSON Schema")
    if strict_json.nesting(document, MAX_NESTING) > MAX_NESTING:
        raise SchemaTextInvalid(f"is nested more than {MAX_NESTING} levels deep")
    return document


def pointer(path: tuple[str | int, ...] | list[str | int]) -> str:
    """A JSON pointer fragment (`#/properties/a~1b`) for the given path."""
    escaped = (str(part).replace("~", "~0").replace("/", "~1") for part in path)
    return "#/" + "/".join(escaped) if path else "#"


def subschemas(node: Mapping[str, Any]) -> Iterator[tuple[tuple[str | int, ...], dict[str, Any]]]:
    """The direct subschemas of `node`, each with its path relative to `node`."""
    for keyword in SCHEMA_KEYWORDS:
        child = node.get(keyword)
        if isinstance(child, dict):
            yield (keyword,), child
    for keyword in SCHEMA_LIST_KEYWORDS:
        children = node.get(keyword)
        if isinstance(children, list):
            for index, child in enumerate(children):
                if isinstance(child, dict):
                    yield (keyword, index), child
    for keyword in _SCHEMA_MAP_KEYWORDS:
        children = node.get(keyword)
        if isinstance(children, dict):
            for name, child in children.items():
                if isinstance(child, dict):
                    yield (keyword, name), child


def walk(
    schema: Mapping[str, Any], path: tuple[str | int, ...] = ()
) -> Iterator[tuple[tuple[str | int, ...], Mapping[str, Any]]]:
    """Every schema inside `schema` (itself included) with its path, depth first.

    Only schema positions are visited, so `{"enum": [{"not": 1}]}` holds no `not` keyword.
    """
    yield path, schema
    for relative, child in subschemas(schema):
        yield from walk(child, path + relative)


def meta_schema_problem(schema: Mapping[str, Any]) -> str | None:
    """Why `schema` is not a valid draft 4 schema (checked against the meta-schema), or None."""
    declared = schema.get("$schema")
    if declared is not None and declared not in DRAFT4_URIS:
        return f"$schema must be the draft 4 meta-schema ({declared!r} is not supported)"
    error = best_match(_META_SCHEMA_VALIDATOR.iter_errors(schema))
    if error is None:
        return None
    return f"is not a valid JSON Schema (draft 4): at {pointer(list(error.absolute_path))}: " + (
        error.message
    )


def resolver_for(schema: Mapping[str, Any]) -> Resolver[Any]:
    """A resolver rooted at `schema`; it knows no remote documents and never fetches any."""
    resource = DRAFT4.create_resource(schema)
    return Registry().with_resource(resource.id() or "", resource).resolver(resource.id() or "")


def ref_problems(schema: Mapping[str, Any]) -> list[str]:
    """Why each `$ref` of `schema` cannot be followed, naming it and where it is: it is not
    a string, does not resolve inside the document, or leads to something that is not a
    schema; or an `id` or `$ref` is not a URI. Validating an event that reaches such a
    `$ref` would fail, as a 500."""
    problems: list[str] = []

    def visit(
        node: Mapping[str, Any], path: tuple[str | int, ...], resolver: Resolver[Any]
    ) -> None:
        where = pointer(path)
        try:
            resolver = resolver.in_subresource(DRAFT4.create_resource(node))
        except ValueError as error:  # urljoin refuses an id such as "http://[::1"
            problems.append(f"the id at {where} is not a URI ({error})")
            return
        if "$ref" in node:
            ref = node["$ref"]
            if not isinstance(ref, str):
                problems.append(f"$ref at {where} must be a string (a URI reference), "
                                f"not {json.dumps(ref)[:40]}")
            else:
                problems.extend(_target_problem(ref, where, resolver))
        for relative, child in subschemas(node):
            visit(child, path + relative, resolver)

    visit(schema, (), resolver_for(schema))
    return problems


def _same_value_children(
    node: Mapping[str, Any], resolver: Resolver[Any]
) -> list[tuple[Mapping[str, Any], Resolver[Any]]]:
    """The schemas that `node` applies to the very value it checks: its `$ref`'s target
    (draft 4 then ignores every other keyword), or its `allOf`, `anyOf`, `oneOf`, `not` and
    schema `dependencies`."""
    resolver = resolver.in_subresource(DRAFT4.create_resource(node))
    ref = node.get("$ref")
    if isinstance(ref, str):
        target = resolver.lookup(ref)
        return [(target.contents, target.resolver)] if isinstance(target.contents, dict) else []
    children = [child for keyword in ("allOf", "anyOf", "oneOf")
                if isinstance(node.get(keyword), list)
                for child in node[keyword] if isinstance(child, dict)]
    if isinstance(node.get("not"), dict):
        children.append(node["not"])
    if isinstance(node.get("dependencies"), dict):
        children.extend(child for child in node["dependencies"].values()
                        if isinstance(child, dict))
    return [(child, resolver) for child in children]


def _resolved_walk(
    node: Mapping[str, Any], path: tuple[str | int, ...], resolver: Resolver[Any]
) -> Iterator[tuple[tuple[str | int, ...], Mapping[str, Any], Resolver[Any]]]:
    """`walk`, with the resolver each schema's `$ref` is looked up from (before its own `id`)."""
    yield path, node, resolver
    inner = resolver.in_subresource(DRAFT4.create_resource(node))
    for relative, child in subschemas(node):
        yield from _resolved_walk(child, path + relative, inner)


def ref_cycle(schema: Mapping[str, Any]) -> str | None:
    """Why validating against `schema` could never end, or None: a `$ref` that leads back to a
    schema it was reached from without a step into a property or an item, such as
    `{"definitions": {"a": {"$ref": "#/definitions/a"}}}`. Call it once `ref_problems` finds
    nothing. Tree-shaped schemas, whose `$ref` sits under `properties` or `items`, are fine:
    each turn goes one level into the event."""
    nodes = list(_resolved_walk(schema, (), resolver_for(schema)))
    paths = {id(node): path for path, node, _ in nodes}
    done: set[int] = set()
    for _, start, resolver in nodes:
        if id(start) in done:
            continue
        # Depth first, without recursion: a chain of `$ref`s may be long.
        on_path = {id(start)}
        stack = [(start, iter(_same_value_children(start, resolver)))]
        while stack:
            node, children = stack[-1]
            step = next(children, None)
            if step is None:
                stack.pop()
                on_path.discard(id(node))
                done.add(id(node))
                continue
            child, child_resolver = step
            if id(child) in on_path:
                where = paths.get(id(child))
                named = f"the schema at {pointer(list(where))}" if where is not None \
                    else "a schema"
                return (f"{named} refers back to itself through $ref without going into a "
                        "property or an item, so validating an event against it would never end")
            elif id(child) not in done:
                on_path.add(id(child))
                stack.append((child, iter(_same_value_children(child, child_resolver))))
    return None


def _target_problem(ref: str, where: str, resolver: Resolver[Any]) -> list[str]:
    try:
        target = resolver.lookup(ref).contents
    except Unresolvable:
        return [f"$ref {ref!r} at {where} does not resolve (only references inside the "
                "schema can)"]
    except ValueError as error:
        return [f"$ref {ref!r} at {where} is not a URI reference ({error})"]
    if not isinstance(target, dict):
        return [f"$ref {ref!r} at {where} leads to {json.dumps(target)[:40]}, not a schema"]
    return []


def has_field(schema: Mapping[str, Any], dotted_path: str) -> bool:
    """Whether the dot-separated field path (`order.id`) is declared by `schema`.

    A field is declared when every step is a key of `properties`, following `$ref`s and looking
    into `allOf`/`anyOf`/`oneOf` branches.
    """
    parts = dotted_path.split(".")
    if not dotted_path or any(not part for part in parts):
        return False
    return _declares(schema, parts, resolver_for(schema), budget=[256])


def _declares(
    node: Mapping[str, Any], parts: list[str], resolver: Resolver[Any], budget: list[int]
) -> bool:
    budget[0] -= 1
    if budget[0] < 0:  # guards against $ref cycles
        return False
    try:
        resolver = resolver.in_subresource(DRAFT4.create_resource(node))
    except ValueError:  # an id that is not a URI: ref_problems refuses the schema
        return False
    ref = node.get("$ref")
    if isinstance(ref, str):
        try:
            resolved = resolver.lookup(ref)
        except (Unresolvable, ValueError):
            return False
        return isinstance(resolved.contents, dict) and _declares(
            resolved.contents, parts, resolved.resolver, budget
        )
    if not parts:
        return True
    properties = node.get("properties")
    if isinstance(properties, dict):
        child = properties.get(parts[0])
        if isinstance(child, dict) and _declares(child, parts[1:], resolver, budget):
            return True
    for keyword in ("allOf", "anyOf", "oneOf"):
        branches = node.get(keyword)
        if isinstance(branches, list):
            for branch in branches:
                if isinstance(branch, dict) and _declares(branch, parts, resolver, budget):
                    return True
    return False
