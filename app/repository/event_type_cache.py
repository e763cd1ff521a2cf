"""Event types and their timelines, kept in memory for the publishing
and streaming hot paths.

Every change to an event type sends a NOTIFY in the transaction that makes
it; each process drops the entry when it hears it, and drops everything
when its listening connection was lost. While it cannot listen, it reads
from the database every time.
"""

from __future__ import annotations

from app.domain.event_type import EventType
from app.domain.timeline import Timelines
from app.repository.database import ConnectionPool
from app.repository.event_types import CHANGES_CHANNEL, event_type_with_timelines
from app.repository.notifications import Listener


class EventTypeCache:
    def __init__(self, pool: ConnectionPool) -> None:
        self._pool = pool
        self._entries: dict[str, tuple[EventType, Timelines]] = {}
        # Bumped by every invalidation: a load that raced with one is not kept.
        self._generation = 0
        self._listener = Listener(pool.dsn, CHANGES_CHANNEL, self._forget, self._forget_all,
                                  pool.timeout_s)

    def get(self, name: str) -> tuple[EventType, Timelines] | None:
        """The event type and its timelines, or None when there is no such event type."""
        entry = self._entries.get(name)
        if entry is not None:
            return entry
        listening = self._listener.ensure_listening()
        generation = self._generation
        entry = event_type_with_timelines(self._pool, name)
        if entry is not None and listening and generation == self._generation:
            self._entries[name] = entry
        return entry

    def forget(self, name: str) -> None:
        """Drop one event type now, without waiting for its NOTIFY."""
        self._forget({name})

    def _forget(self, names: set[str]) -> None:
        self._generation += 1
        for name in names:
            self._entries.pop(name, None)

    def _forget_all(self) -> None:
        self._generation += 1
        self._entries.clear()

    def close(self) -> None:
        self._listener.close()
        self._entries.clear()
