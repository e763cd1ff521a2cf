"""Event types and their timelines, kept in memory for the publishing and
streaming hot paths; every change to an event type sends a NOTIFY in the
transaction that makes it (see ``NotifiedCache``)."""

from __future__ import annotations

from app.domain.event_type import EventType
from app.domain.timeline import Timelines
from app.repository.database import ConnectionPool
from app.repository.event_types import CHANGES_CHANNEL, event_type_with_timelines
from app.repository.notified_cache import NotifiedCache


class EventTypeCache(NotifiedCache[tuple[EventType, Timelines]]):
    """``get(name)``: the event type and its timelines, or None."""

    def __init__(self, pool: ConnectionPool) -> None:
        super().__init__(pool, CHANGES_CHANNEL, event_type_with_timelines)

    def forget(self, name: str) -> None:
        """Drop one event type now, without waiting for its NOTIFY (a timeline switch)."""
        self._forget({name})

    def forget_all(self) -> None:
        """Drop every event type now (timeline switches this process did not follow)."""
        self._forget_all()
