"""Rows kept in memory for the hot paths, dropped when PostgreSQL says they changed.

Every change sends a NOTIFY (with the key) in the transaction that makes it;
each process drops the entry when it hears it. While it cannot listen, it reads
from the database every time. Greenlets missing the same key at once share one
read (``SharedCalls``): thousands of streams of one event type reconnecting to a
fresh worker ask PostgreSQL once or twice, not once each.

What was kept when the listening connection was lost, and what was read while it
was, stays as a fallback, used only while the database cannot be read: a kafka
event type's publishing and streams do not need PostgreSQL, and an outage of it
must not stop them (every open stream's next lookup failed, and ended it without
a last line). Nothing can change in the registry while its database is away; a
change missed just before is served until the database answers again.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Generic, TypeVar

from app.dependencies import unavailable_from
from app.repository.database import ConnectionPool
from app.shared_calls import SharedCalls

V = TypeVar("V")


class NotifiedCache(Generic[V]):
    def __init__(self, pool: ConnectionPool, channel: str,
                 load: Callable[[ConnectionPool, str], V | None]) -> None:
        self._pool = pool
        self._load = load
        self._entries: dict[str, V] = {}
        self._fallback: dict[str, V] = {}  # the last read while not listening, for outages
        self._loads: SharedCalls[str, V | None] = SharedCalls()
        # Bumped by every invalidation: a load that raced with one is not kept.
        self._generation = 0
        self._listener = pool.notifications.listener(channel, self._forget, self._lost_track)

    def get(self, key: str) -> V | None:
        """The entry, or None when the database has none; ``DependencyUnavailable`` when
        the database cannot be read and nothing was kept for the key."""
        entry = self._entries.get(key)
        if entry is not None:
            return entry
        listening = self._listener.ensure_listening()
        generation = self._generation
        try:
            entry = self._loads.call(key, lambda: self._load(self._pool, key))
        except Exception as error:
            outage = unavailable_from(error)
            if outage is None:
                raise
            kept = self._fallback.get(key)
            if kept is not None:
                return kept
            if outage is error:
                raise
            raise outage from error
        if entry is None:
            self._fallback.pop(key, None)
        elif listening and generation == self._generation:
            self._entries[key] = entry
            self._fallback.pop(key, None)
        else:  # not known to stay current: read again next time, kept for outages only
            self._fallback[key] = entry
        return entry

    def _forget(self, keys: set[str]) -> None:
        self._generation += 1
        for key in keys:
            self._entries.pop(key, None)
            self._fallback.pop(key, None)

    def _forget_all(self) -> None:
        """Every entry is outdated."""
        self._generation += 1
        self._entries.clear()
        self._fallback.clear()

    def _lost_track(self) -> None:
        """Changes may have been missed: every entry is read again, and kept as a
        fallback until then."""
        self._generation += 1
        self._fallback.update(self._entries)
        self._entries.clear()

    def close(self) -> None:
        self._listener.close()
        self._entries.clear()
        self._fallback.clear()
