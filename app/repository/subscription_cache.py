"""Subscriptions kept in memory for the commit and stream hot paths.

Only a subscription's authorization can change after it is created; that
change and the deletion send a NOTIFY in their transaction, and each process
drops the entry when it hears it (everything, when its listening connection
was lost). While it cannot listen, it reads from the database every time.
"""

from __future__ import annotations

from app.domain.subscription import Subscription
from app.repository.database import ConnectionPool
from app.repository.notifications import Listener
from app.repository.subscriptions import CHANGES_CHANNEL, get_subscription


class SubscriptionCache:
    def __init__(self, pool: ConnectionPool) -> None:
        self._pool = pool
        self._entries: dict[str, Subscription] = {}
        # Bumped by every invalidation: a load that raced with one is not kept.
        self._generation = 0
        self._listener = Listener(pool.dsn, CHANGES_CHANNEL, self._forget, self._forget_all,
                                  pool.timeout_s)

    def get(self, subscription_id: str) -> Subscription | None:
        """The subscription, or None when there is none (or the id is malformed)."""
        entry = self._entries.get(subscription_id)
        if entry is not None:
            return entry
        listening = self._listener.ensure_listening()
        generation = self._generation
        entry = get_subscription(self._pool, subscription_id)
        if entry is not None and listening and generation == self._generation:
            self._entries[subscription_id] = entry
        return entry

    def _forget(self, ids: set[str]) -> None:
        self._generation += 1
        for subscription_id in ids:
            self._entries.pop(subscription_id, None)

    def _forget_all(self) -> None:
        self._generation += 1
        self._entries.clear()

    def close(self) -> None:
        self._listener.close()
        self._entries.clear()
