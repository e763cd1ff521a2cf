"""jsonschema-rs's validation errors, picked and worded as jsonschema would.

Events were answered with jsonschema's words before jsonschema-rs validated them; producers
and their tests may rely on them, so the native errors are translated back.
"""

from __future__ import annotations

import heapq
import operator
from collections.abc import Iterable
from functools import reduce
from typing import Any

import jsonschema_rs
from jsonschema_rs import ValidationErrorKind as Kind

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


def best_native_match(
    errors: Iterable[jsonschema_rs.ValidationError],
) -> jsonschema_rs.ValidationError:
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


def jsonschema_message(error: jsonschema_rs.ValidationError, event: Any) -> str:
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
            extras = error.instance if isinstance(error.instance, list) else []
            return _unexpected("additional items", extras[limit:])
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
