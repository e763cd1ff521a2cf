"""A subscription: a consumer group's server-managed reading of one or more event types."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

ReadFrom = Literal["begin", "end", "cursors"]


@dataclass(frozen=True)
class InitialCursor:
    """Where reading starts in one partition when ``read_from`` is ``cursors``:
    after ``offset`` (a client offset string, or ``begin``)."""

    event_type: str
    partition: str
    offset: str


@dataclass(frozen=True)
class Subscription:
    id: str
    owning_application: str
    event_types: tuple[str, ...]  # sorted: the order a client sent them in does not matter
    consumer_group: str
    read_from: ReadFrom
    created_at: datetime
    updated_at: datetime
    initial_cursors: tuple[InitialCursor, ...] = ()
    # Stored and echoed as sent (checked for shape); enforced by the security room.
    authorization: dict[str, Any] | None = field(default=None, compare=False)
