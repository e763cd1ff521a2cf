"""Rows kept in memory for the hot paths, dropped when PostgreSQL says they changed.

Every change sends a NOTIFY (with the key) in the transaction that makes it;
each process drops the entry when it hears it, and drops everything when its
listening connection was lost. While it cannot listen, it reads from the
database every time. Greenlets missing the same key at once share one read
(``SharedCalls``): thousands of streams of one event type reconnecting to a
fresh worker ask PostgreSQL once or twice, not once each.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Generic, TypeVar

from app.repository.database import ConnectionPool
from app.shared_calls import SharedCalls

V = TypeVar("V")


class NotifiedCache(Generic[V]):
    def __init__(self, pool: ConnectionPool, channel: str,
                 load: Callable[[ConnectionPool, str], V | None]) -> None:
        self._pool = pool
        self._load = load
        self._entries: dict[str, V] = {}
        self._loads: SharedCalls[str, V | None] = SharedCalls()
        # Bumped by every invalidation: a load that raced with one is not kept.
        self._generation = 0
        self._listener = pool.notifications.listener(channel, self._forget, self._forget_all)

    def get(self, key: str) -> V | None:
        """The entry, or None when the database has none."""
        entry = self._entries.get(key)
        if entry is not None:
            return entry
        listening = self._listener.ensure_listening()
        generation = self._generation
        entry = self._loads.call(key, lambda: self._load(self._pool, key))
        if entry is not None and listening and generation == self._generation:
            self._entries[key] = entry
        return entry

    def _forget(self, keys: set[str]) -> None:
        self._generation += 1
        for key in keys:
            self._entries.pop(key, None)

    def _forget_all(self) -> None:
        self._generation += 1
        self._entries.clear()

    def close(self) -> None:
        self._listener.close()
        self._entries.clear()
