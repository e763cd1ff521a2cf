"""Effective schemas: what events of an event type are validated against, per category.

- business: the custom schema's top-level properties plus the category's `metadata`.
- data: `metadata`, `data_type`, `data_op` (C/U/D/S) and `data`, which the custom schema describes.
- undefined: the custom schema as given.
In compatible mode no undeclared property is accepted anywhere (`additionalProperties: false`).

Publishing validates every event, so the compiled validator is cached per (event type, schema
version) in a `ValidatorCache`. Validation is draft 4 by jsonschema-rs (native, ~40 times faster
than jsonschema), with jsonschema's regex dialect and formats, and answers in jsonschema's words;
the few schemas jsonschema-rs cannot validate as jsonschema did are validated by jsonschema.
"""

from __future__ import annotations

import copy
import heapq
import operator
import re
import threading
from collections import OrderedDict
from collections.abc import Iterable, Mapping
from functools import reduce
from typing import TYPE_CHECKING, Any

import jsonschema_rs
from jsonschema import Draft4Validator
from jsonschema.exceptions import best_match
from jsonschema_rs import ValidationErrorKind as Kind
from referencing.jsonschema import DRAFT4

from app.registry.choices import DATA_OPERATIONS
from app.registry.formats import EVENT_FORMAT_CHECKER, NATIVE_FORMATS
from app.registry.json_schema import parse_schema_text, pointer, resolver_for, subschemas, walk

if TYPE_CHECKING:  # referencing does not export the type at its top level
    from referencing._core import Resolver

# Base URI given to the custom part of a data event type's schema when it has none, so that
# its `#/definitions/...` references keep meaning its own root once it is nested under `data`.
DATA_SCHEMA_ID = "urn:nakadi:event-type:data"
MAX_ERROR_LENGTH = 300
# How many schemas deep jsonschema-rs may have to go (see `_natively_bounded`); an evaluation
# level takes up to ~1 KiB of native stack, so this stays far below a thread's stack.
MAX_NATIVE_DEPTH = 256
_OBJECT_KEYWORDS = ("properties", "required", "minProperties", "maxProperties")


def metadata_schema(event_type_name: str, cleanup_policy: str) -> dict[str, Any]:
    """The `metadata` object of business and data events (the spec's EventMetadata)."""
    required = ["eid", "occurred_at"]
    if cleanup_policy == "compact":
        required.append("partition_compaction_key")
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
            "partition_compaction_key": {"type": "string"},
            "span_ctx": {"type": "object", "additionalProperties": {"type": "string"}},
        },
        "required": required,
    }


def _is_object_schema(node: Mapping[str, Any]) -> bool:
    declared = node.get("type")
    if declared == "object" or (isinstance(declared, list) and "object" in declared):
        return True
    return declared is None and any(keyword in node for keyword in _OBJECT_KEYWORDS)


def _forbid_undeclared(node: dict[str, Any], is_root: bool = False) -> None:
    """Compatible mode: objects accept only declared properties, tuples only declared items.

    Compatible mode refuses `additionalProperties`, `additionalItems`, `not` and
    `patternProperties` in the schema, so the subschemas to visit are those of the
    other keywords, and the values set here are not visited."""
    if is_root or _is_object_schema(node):
        node["additionalProperties"] = False
    if isinstance(node.get("items"), list):
        node["additionalItems"] = False
    for _, child in subschemas(node):
        _forbid_undeclared(child)


def effective_schema(
    event_type: Mapping[str, Any], custom_schema: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """The effective schema of `event_type` (the stored/validated dict), built from
    `custom_schema` when given (e.g. an older version's schema), else from its current schema.

    Never modifies its arguments.
    """
    if custom_schema is None:
        custom_schema = parse_schema_text(event_type["schema"]["schema"])
    custom = copy.deepcopy(dict(custom_schema))
    strict = event_type.get("compatibility_mode") == "compatible"
    if strict:
        _forbid_undeclared(custom, is_root=True)
    category = event_type["category"]
    if category == "undefined":
        return custom
    metadata = metadata_schema(event_type["name"], event_type.get("cleanup_policy") or "delete")
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


class _PythonPattern:
    """`pattern` with Python's `re.search`, as jsonschema reads it.

    jsonschema-rs reads patterns as ECMA 262 regexes, where `\\d`, `\\w` and `\\s` are ASCII only
    and `$` does not match before a final newline: `^\\w+$` would refuse "José" that events were
    accepted with. A jsonschema-rs custom keyword: built per `pattern`, it raises when invalid.
    """

    def __init__(
        self, parent_schema: Mapping[str, Any], value: str, schema_path: list[Any]
    ) -> None:
        self._pattern = value
        self._regex = re.compile(value)

    def validate(self, instance: Any) -> None:
        if isinstance(instance, str) and self._regex.search(instance) is None:
            raise ValueError(f"{instance!r} does not match {self._pattern!r}")


def _natively_bounded(schema: Mapping[str, Any]) -> bool:
    """Whether validating against `schema` nests at most MAX_NATIVE_DEPTH schemas deep.

    jsonschema-rs has no recursion guard: through a `$ref` back into an enclosing schema (a tree
    of nodes) an event nested deeply enough overflows the native stack, which kills the process,
    and so can a long enough chain of `$ref`s. Without such `$ref`s, how deep validation goes is
    bounded by the schema alone, whatever the event.
    """
    heights: dict[int, int] = {}
    open_nodes: set[int] = set()

    def height(node: Mapping[str, Any], resolver: Resolver[Any]) -> int | None:
        key = id(node)
        if key in heights:
            return heights[key]
        if key in open_nodes or len(open_nodes) >= MAX_NATIVE_DEPTH:
            return None
        open_nodes.add(key)
        resolver = resolver.in_subresource(DRAFT4.create_resource(node))
        children = [(child, resolver) for _, child in subschemas(node)]
        ref = node.get("$ref")
        if isinstance(ref, str):
            target = resolver.lookup(ref)
            if isinstance(target.contents, dict):
                children.append((target.contents, target.resolver))
        result = 0
        for child, child_resolver in children:
            below = height(child, child_resolver)
            if below is None:
                return None
            result = max(result, below + 1)
        open_nodes.discard(key)
        heights[key] = result
        return result

    return height(schema, resolver_for(schema)) is not None


def _native_validator(schema: Mapping[str, Any]) -> jsonschema_rs.Validator | None:
    """jsonschema-rs's validator for `schema`, or None when jsonschema must validate it.

    That is when jsonschema-rs cannot compile it (it refuses regexes that are not ECMA 262, like
    `\\Z` or `(?i)`), would match property names with other regexes than before
    (`patternProperties`), or might overflow its stack (see `_natively_bounded`).
    """
    if any("patternProperties" in node for _, node in walk(schema)):
        return None
    if not _natively_bounded(schema):
        return None
    try:
        return jsonschema_rs.Draft4Validator(
            schema,
            formats=NATIVE_FORMATS,
            validate_formats=True,
            keywords={"pattern": _PythonPattern},
        )
    except jsonschema_rs.ValidationError:
        return None


_WEAK_KEYWORDS = frozenset({"anyOf", "oneOf"})


def _relevance(error: jsonschema_rs.ValidationError) -> tuple[Any, ...]:
    """jsonschema's `relevance` for jsonschema-rs errors, which `best_match` ranks by.

    Its last criterion, whether the instance has the failing schema's `type`, is approximated
    by whether the error is a `type` error at all.
    """
    kind = error.kind
    return (
        -len(error.instance_path),
        error.instance_path,
        kind.name not in _WEAK_KEYWORDS,
        isinstance(kind, Kind.Type),
    )


def _context(error: jsonschema_rs.ValidationError) -> list[jsonschema_rs.ValidationError]:
    """The errors of every branch of a failed `anyOf` or `oneOf` (none valid), else []."""
    if isinstance(error.kind, Kind.AnyOf | Kind.OneOfNotValid):
        return [branch_error for branch in error.kind.context for branch_error in branch]
    return []


def _best_match(errors: Iterable[jsonschema_rs.ValidationError]) -> jsonschema_rs.ValidationError:
    """The error jsonschema's `best_match` would pick; `errors` must not be empty."""
    best = max(errors, key=_relevance)
    while context := _context(best):
        smallest = heapq.nsmallest(2, context, key=_relevance)
        if len(smallest) == 2 and _relevance(smallest[0]) == _relevance(smallest[1]):
            return best
        best = smallest[0]
    return best


def _unexpected(what: str, extras: list[Any]) -> str:
    verb = "was" if len(extras) == 1 else "were"
    listed = ", ".join(repr(extra) for extra in extras)
    return f"{what.capitalize()} are not allowed ({listed} {verb} unexpected)"


def _message(error: jsonschema_rs.ValidationError, event: Any) -> str:
    """The error in jsonschema's words, which events were answered with before jsonschema-rs.

    jsonschema-rs's own messages show values as JSON (`"x" is not a "uuid"`), jsonschema's as
    Python reprs (`'x' is not a 'uuid'`).
    """
    value = repr(error.instance)
    match error.kind:
        case Kind.FalseSchema() if error.schema_path[-1] == "additionalProperties":
            # `additionalProperties: false` with no `properties` refuses every property, yet
            # jsonschema-rs reports only the first one's value, at the object's path.
            found = reduce(operator.getitem, error.instance_path, event)
            return _unexpected("additional properties", sorted(found, key=str))
        case Kind.Type(types):
            return f"{value} is not of type {', '.join(repr(name) for name in types)}"
        case Kind.Required(name):
            return f"{name!r} is a required property"
        case Kind.Enum(options):
            return f"{value} is not one of {options!r}"
        case Kind.Format(name):
            return f"{value} is not a {name!r}"
        case Kind.Custom(_, message):
            return message
        case Kind.AdditionalProperties(names):
            return _unexpected("additional properties", sorted(names, key=str))
        case Kind.AdditionalItems(limit):
            return _unexpected("additional items", list(error.instance[limit:]))
        case Kind.Minimum(limit):
            return f"{value} is less than the minimum of {limit!r}"
        case Kind.ExclusiveMinimum(limit):
            return f"{value} is less than or equal to the minimum of {limit!r}"
        case Kind.Maximum(limit):
            return f"{value} is greater than the maximum of {limit!r}"
        case Kind.ExclusiveMaximum(limit):
            return f"{value} is greater than or equal to the maximum of {limit!r}"
        case Kind.MinLength(1) | Kind.MinItems(1) | Kind.MinProperties(1):
            return f"{value} should be non-empty"
        case Kind.MaxLength(0) | Kind.MaxItems(0) | Kind.MaxProperties(0):
            return f"{value} is expected to be empty"
        case Kind.MinLength() | Kind.MinItems():
            return f"{value} is too short"
        case Kind.MaxLength() | Kind.MaxItems():
            return f"{value} is too long"
        case Kind.MinProperties():
            return f"{value} does not have enough properties"
        case Kind.MaxProperties():
            return f"{value} has too many properties"
        case Kind.MultipleOf(factor):
            return f"{value} is not a multiple of {factor!r}"
        case Kind.UniqueItems():
            return f"{value} has non-unique elements"
        case Kind.Not(schema):
            return f"{value} should not be valid under {schema!r}"
        case Kind.AnyOf() | Kind.OneOfNotValid():
            return f"{value} is not valid under any of the given schemas"
        case Kind.OneOfMultipleValid():
            return f"{value} is valid under more than one of the given schemas"
    return error.message


class EventValidator:
    """A compiled effective schema. `error_for` is what publishing calls for every event.

    jsonschema-rs validates, except for the rare schemas `_native_validator` leaves to jsonschema.
    """

    def __init__(self, schema: Mapping[str, Any]) -> None:
        self.schema = schema
        native = _native_validator(schema)
        self._validator: jsonschema_rs.Validator | Draft4Validator = (
            native
            if native is not None
            else Draft4Validator(schema, format_checker=EVENT_FORMAT_CHECKER)
        )

    @property
    def engine(self) -> str:
        """`jsonschema-rs`, or `jsonschema` for a schema `_native_validator` leaves to it."""
        return "jsonschema" if isinstance(self._validator, Draft4Validator) else "jsonschema-rs"

    def is_valid(self, event: Any) -> bool:
        """Whether `event` is valid, without building an error: one native call, usually."""
        try:
            return self._validator.is_valid(event)
        except (RecursionError, ValueError):  # ValueError: jsonschema-rs's recursion limit
            return False

    def error_for(self, event: Any) -> str | None:
        """None when `event` is valid, else the most relevant error as `#/path: reason`."""
        if self.is_valid(event):
            return None
        try:
            if isinstance(self._validator, Draft4Validator):
                error = best_match(self._validator.iter_errors(event))
                path, message = list(error.absolute_path), error.message
            else:
                native_error = _best_match(self._validator.iter_errors(event))
                path, message = native_error.instance_path, _message(native_error, event)
        except (RecursionError, ValueError):
            return "#: the event is nested too deeply to be validated"
        if len(message) > MAX_ERROR_LENGTH:
            message = message[: MAX_ERROR_LENGTH - 3] + "..."
        return f"{pointer(path)}: {message}"


class ValidatorCache:
    """Compiled validators per (event type name, schema version), least recently used evicted.

    An entry is rebuilt when anything its effective schema depends on differs from what it was
    built from (a re-created event type of the same name, a compatibility mode upgrade), so the
    cache never needs to be told about updates; `forget` only frees memory.
    """

    def __init__(self, max_entries: int = 4096) -> None:
        if max_entries < 1:
            raise ValueError("max_entries must be at least 1")
        self._max_entries = max_entries
        self._entries: OrderedDict[tuple[str, str], tuple[tuple[Any, ...], EventValidator]] = (
            OrderedDict()
        )
        self._lock = threading.Lock()

    def validator_for(self, event_type: Mapping[str, Any]) -> EventValidator:
        """The validator for the current schema version of `event_type` (a stored event type)."""
        schema = event_type["schema"]
        key = (event_type["name"], schema.get("version") or "")
        fingerprint = (
            event_type["category"],
            event_type.get("compatibility_mode"),
            event_type.get("cleanup_policy"),
            schema["schema"],
        )
        with self._lock:
            entry = self._entries.get(key)
            if entry is not None and entry[0] == fingerprint:
                self._entries.move_to_end(key)
                return entry[1]
        validator = EventValidator(effective_schema(event_type))
        with self._lock:
            self._entries[key] = (fingerprint, validator)
            self._entries.move_to_end(key)
            while len(self._entries) > self._max_entries:
                self._entries.popitem(last=False)
        return validator

    def forget(self, event_type_name: str) -> None:
        """Drop every version of an event type (after it was deleted)."""
        with self._lock:
            for key in [key for key in self._entries if key[0] == event_type_name]:
                del self._entries[key]

    def __len__(self) -> int:
        return len(self._entries)


# One per process: publishing asks it for the validator of the event type it publishes to.
VALIDATORS = ValidatorCache()
