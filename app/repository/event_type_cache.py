"""Event types and their active timelines, kept in memory for the publishing
and streaming hot paths; every change to an event type sends a NOTIFY in the
transaction that makes it (see ``NotifiedCache``)."""

from __future__ import annotations

from app.domain.event_type import EventType
from app.domain.timeline import Timeline
from app.repository.database import ConnectionPool
from app.repository.event_types import CHANGES_CHANNEL, event_type_with_timeline
from app.repository.notified_cache import NotifiedCache


class EventTypeCache(NotifiedCache[tuple[EventType, Timeline]]):
    """``get(name)``: the event type and its active timeline, or None."""

    def __init__(self, pool: ConnectionPool) -> None:
        super().__init__(pool, CHANGES_CHANNEL, event_type_with_timeline)
