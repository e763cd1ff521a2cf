"""Subscriptions kept in memory for the commit and stream hot paths.

Only a subscription's authorization can change after it is created; that
change and the deletion send a NOTIFY in their transaction (see
``NotifiedCache``).
"""

from __future__ import annotations

from app.domain.subscription import Subscription
from app.repository.database import ConnectionPool
from app.repository.notified_cache import NotifiedCache
from app.repository.subscriptions import CHANGES_CHANNEL, get_subscription


class SubscriptionCache(NotifiedCache[Subscription]):
    """``get(id)``: the subscription, or None when there is none (or the id is malformed)."""

    def __init__(self, pool: ConnectionPool) -> None:
        super().__init__(pool, CHANGES_CHANNEL, get_subscription)
