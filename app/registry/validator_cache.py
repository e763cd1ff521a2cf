"""Compiled validators per event type and schema version: publishing compiles each once."""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any

from referencing.exceptions import Unresolvable

from app.domain.event_type import EventType
from app.registry.effective_schema import effective_schema
from app.registry.event_validator import EventValidator

_MAX_DETAIL = 200


class SchemaUnusable(Exception):
    """The effective schema of an event type cannot be compiled into a validator; says why."""


def compile_validator(event_type: EventType) -> EventValidator:
    """The validator of `event_type`'s current schema; raises SchemaUnusable when it cannot be
    built. Creation calls it too, so that a schema it accepts can always validate events:
    the effective schema is more than the custom one (a `$ref` that resolved in the custom
    schema might not in it), and building it follows every `$ref`."""
    try:
        return EventValidator(effective_schema(event_type))
    except Unresolvable as error:
        ref = str(error.ref)  # a PointerToNowhere holds the fragment's pointer alone
        ref = "#" + ref if ref.startswith("/") else ref
        raise SchemaUnusable(
            f"$ref {ref[:_MAX_DETAIL]!r} does not resolve in the effective schema "
            "(does it point beside a root $ref? Draft 4 ignores the keywords there, and so "
            "does the effective schema)"
        ) from None
    except RecursionError:
        raise SchemaUnusable("it is nested too deeply to be compiled") from None
    except ValueError as error:  # an id or $ref that is not a URI; SchemaNotComposable
        raise SchemaUnusable(str(error)[:_MAX_DETAIL]) from None


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

    def validator_for(self, event_type: EventType) -> EventValidator:
        """The validator for the current schema version of `event_type` (a stored event type).
        Raises SchemaUnusable when it cannot be built (see `compile_validator`)."""
        key = (event_type.name, event_type.schema.version)
        fingerprint = (
            event_type.category,
            event_type.compatibility_mode,
            event_type.cleanup_policy,
            event_type.schema.schema,
        )
        with self._lock:
            entry = self._entries.get(key)
            if entry is not None and entry[0] == fingerprint:
                self._entries.move_to_end(key)
                return entry[1]
        validator = compile_validator(event_type)
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
