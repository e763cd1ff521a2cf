"""The compiled effective schema that publishing runs every event through.

Validation is draft 4 by jsonschema-rs (native, ~40 times faster than jsonschema), with
jsonschema's regex dialect and formats, and answers in jsonschema's words (`native_errors`);
the few schemas jsonschema-rs cannot validate as jsonschema did are validated by jsonschema.
Valid events usually need one call of a quicker native validator (`_quick_validator`), where
uuids and simple patterns are matched without calling back into Python.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

import jsonschema_rs
from jsonschema import Draft4Validator, validators
from jsonschema.exceptions import ValidationError, best_match
from referencing.jsonschema import DRAFT4

from app.registry import linear_regex
from app.registry.formats import EVENT_FORMAT_CHECKER, NATIVE_FORMATS
from app.registry.json_schema import pointer, resolver_for, subschemas, walk
from app.registry.native_errors import best_native_match, jsonschema_message
from app.registry.native_patterns import UUID_PATTERN, native_pattern

if TYPE_CHECKING:  # referencing does not export the type at its top level
    from referencing._core import Resolver

MAX_ERROR_LENGTH = 300
# How many schemas deep jsonschema-rs may have to go (see `_natively_bounded`); an evaluation
# level takes up to ~1 KiB of native stack, so this stays far below a thread's stack.
MAX_NATIVE_DEPTH = 256
# The quick validator's name for a `pattern` it leaves to Python (`_PythonPattern`).
_PYTHON_PATTERN = "x-python-pattern"


class _PythonPattern:
    """`pattern` as Python's `re.search` reads it, matched in linear time (`linear_regex`).

    jsonschema-rs reads patterns as ECMA 262 regexes, where `\\d`, `\\w` and `\\s` are ASCII only
    and `$` does not match before a final newline: `^\\w+$` would refuse "José" that events were
    accepted with. A jsonschema-rs custom keyword: built per `pattern`, it raises when invalid.
    """

    def __init__(
        self, parent_schema: Mapping[str, Any], value: str, schema_path: list[Any]
    ) -> None:
        self._pattern = value
        self._regex = linear_regex.compiled(value)

    def validate(self, instance: Any) -> None:
        # RE2 reads UTF-8 either way; given bytes, nothing maps the match's byte offsets
        # back to characters (4 times faster for a yes or no).
        if isinstance(instance, str) and not linear_regex.matches_bytes(self._regex,
                                                                        instance.encode()):
            raise ValueError(f"{instance!r} does not match {self._pattern!r}")


def _pattern(validator: Any, pattern: str, instance: Any, schema: Any
             ) -> Iterator[ValidationError]:
    if validator.is_type(instance, "string") and not linear_regex.search(pattern, instance):
        yield ValidationError(f"{instance!r} does not match {pattern!r}")


def _pattern_properties(validator: Any, patterns: dict[str, Any], instance: Any, schema: Any
                        ) -> Iterator[ValidationError]:
    if not validator.is_type(instance, "object"):
        return
    for pattern, subschema in patterns.items():
        for name, value in instance.items():
            if linear_regex.search(pattern, name):
                yield from validator.descend(value, subschema, path=name, schema_path=pattern)


def _additional_properties(validator: Any, additional: Any, instance: Any, schema: Any
                           ) -> Iterator[ValidationError]:
    if not validator.is_type(instance, "object"):
        return
    patterns = schema.get("patternProperties", {})
    extras = [name for name in instance if name not in schema.get("properties", {})
              and not any(linear_regex.search(pattern, name) for pattern in patterns)]
    if validator.is_type(additional, "object"):
        for extra in extras:
            yield from validator.descend(instance[extra], additional, path=extra)
    elif not additional and extras:  # worded as jsonschema words it
        listed = ", ".join(repr(extra) for extra in sorted(extras))
        if patterns:
            verb = "does" if len(extras) == 1 else "do"
            regexes = ", ".join(repr(pattern) for pattern in sorted(patterns))
            yield ValidationError(f"{listed} {verb} not match any of the regexes: {regexes}")
        else:
            verb = "was" if len(extras) == 1 else "were"
            yield ValidationError(
                f"Additional properties are not allowed ({listed} {verb} unexpected)")


LinearDraft4Validator = validators.extend(Draft4Validator, {
    "pattern": _pattern,
    "patternProperties": _pattern_properties,
    "additionalProperties": _additional_properties,
})
"""jsonschema's draft 4 with every regex of the schema matched in linear time."""


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
            dict(schema),
            formats=NATIVE_FORMATS,
            validate_formats=True,
            keywords={"pattern": _PythonPattern},
        )
    except jsonschema_rs.ValidationError:
        return None


def _quick_validator(schema: Mapping[str, Any]) -> jsonschema_rs.Validator | None:
    """A native validator that accepts only events the event's validator accepts, with fewer
    calls back into Python: `format: uuid` and the patterns `native_pattern` can take are matched
    by jsonschema-rs itself (the other patterns stay `_PythonPattern`s). None when nothing would be
    quicker, or when some string `pattern` of the document is not one of ours (under a keyword
    that `walk` does not visit yet a `$ref` could reach) and would be read as ECMA 262.

    For `schema`s `_native_validator` accepts: the same native stack bound holds.
    """
    quick = copy.deepcopy(dict(schema))
    nodes = {id(node): node for _, node in walk(quick) if isinstance(node, dict)}
    native_nodes: set[int] = set()
    for key, node in nodes.items():
        native_checks = []
        pattern = node.get("pattern")
        if isinstance(pattern, str):
            del node["pattern"]
            native = native_pattern(pattern)
            if native is None:
                node[_PYTHON_PATTERN] = pattern
            else:
                native_checks.append(native)
        if node.get("format") == "uuid":
            del node["format"]
            native_checks.append(UUID_PATTERN)
        if native_checks:
            node["pattern"] = native_checks[0]
            native_nodes.add(key)
        for extra in native_checks[1:]:
            check = {"pattern": extra}
            node["allOf"] = [*node.get("allOf", []), check]
            native_nodes.add(id(check))
    if not native_nodes or _foreign_pattern(quick, native_nodes):
        return None
    try:
        return jsonschema_rs.Draft4Validator(
            quick,
            formats=NATIVE_FORMATS,
            validate_formats=True,
            keywords={_PYTHON_PATTERN: _PythonPattern},
            pattern_options=jsonschema_rs.RegexOptions(),
        )
    except (jsonschema_rs.ValidationError, jsonschema_rs.ReferencingError, ValueError):
        return None


def _foreign_pattern(document: Any, native_nodes: set[int]) -> bool:
    """Whether any object of `document` has a string `pattern` that is not in `native_nodes`."""
    if isinstance(document, list):
        return any(_foreign_pattern(item, native_nodes) for item in document)
    if not isinstance(document, dict):
        return False
    if isinstance(document.get("pattern"), str) and id(document) not in native_nodes:
        return True
    return any(_foreign_pattern(value, native_nodes) for value in document.values())


class EventValidator:
    """A compiled effective schema. `error_for` is what publishing calls for every event.

    jsonschema-rs validates, except for the rare schemas `_native_validator` leaves to jsonschema.
    Valid events usually pass `_quick_validator` alone; what it refuses is checked again.
    """

    def __init__(self, schema: Mapping[str, Any]) -> None:
        self.schema = schema
        native = _native_validator(schema)
        self._validator: jsonschema_rs.Validator | Any = (
            native
            if native is not None
            else LinearDraft4Validator(schema, format_checker=EVENT_FORMAT_CHECKER)
        )
        self._quick = _quick_validator(schema) if native is not None else None

    @property
    def engine(self) -> str:
        """`jsonschema-rs`, or `jsonschema` for a schema `_native_validator` leaves to it."""
        return "jsonschema" if isinstance(self._validator, LinearDraft4Validator) \
            else "jsonschema-rs"

    def is_valid(self, event: Any) -> bool:
        """Whether `event` is valid, without building an error: one native call, usually."""
        try:  # the quick check's errors are the full check's to find again, or not
            if self._quick is not None and self._quick.is_valid(event):
                return True
        except (RecursionError, ValueError):
            pass
        try:
            return self._validator.is_valid(event)
        except (RecursionError, ValueError):  # ValueError: jsonschema-rs's recursion limit
            return False

    def all_valid(self, events: Iterable[Any]) -> bool:
        """Whether every event is valid: a batch's usual answer, one native call per event.
        False says only that `error_for` must look at each."""
        check = self._quick.is_valid if self._quick is not None else self._validator.is_valid
        try:
            return all(check(event) for event in events)
        except (RecursionError, ValueError):
            return False

    def error_for(self, event: Any) -> str | None:
        """None when `event` is valid, else the most relevant error as `#/path: reason`."""
        if self.is_valid(event):
            return None
        try:
            if isinstance(self._validator, LinearDraft4Validator):
                error = best_match(self._validator.iter_errors(event))
                path, message = list(error.absolute_path), error.message
            else:
                native_error = best_native_match(self._validator.iter_errors(event))
                path, message = native_error.instance_path, jsonschema_message(native_error, event)
        except (RecursionError, ValueError):
            return "#: the event is nested too deeply to be validated"
        if len(message) > MAX_ERROR_LENGTH:
            message = message[: MAX_ERROR_LENGTH - 3] + "..."
        return f"{pointer(path)}: {message}"
