"""Compiled validators per event type and schema version: publishing compiles each once."""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any

from app.domain.event_type import EventType
from app.registry.effective_schema import effective_schema
from app.registry.event_validator import EventValidator


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
        """The validator for the current schema version of `event_type` (a stored event type)."""
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
