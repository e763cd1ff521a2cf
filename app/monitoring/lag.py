"""The lag of subscriptions (events not yet committed, over all their partitions) for
``/metrics``: each worker refreshes, every ``NAKADI_SUBSCRIPTION_LAG_INTERVAL_S``, the
subscriptions it has served a stream of since it started, so a consumer that
stopped still shows its growing lag. A deleted subscription shows 0 and is no
longer refreshed."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

import gevent

from app.coordination.subscription_state import SubscriptionState
from app.monitoring import figures
from app.repository.subscriptions import get_subscription
from app.subscriptions.partitions import EventTypeGone, partition_bounds, subscription_partitions

if TYPE_CHECKING:
    from app.services import Services

log = logging.getLogger(__name__)


class SubscriptionLag:
    def __init__(self, services: Services) -> None:
        self._services = services
        self._watched: set[str] = set()
        self._greenlet: gevent.Greenlet | None = None

    def watch(self, subscription_id: str) -> None:
        """Keep the lag of this subscription current (its first figure comes at once)."""
        if subscription_id not in self._watched:
            self._watched.add(subscription_id)
            gevent.spawn(self._refresh_one, subscription_id)
        if self._greenlet is None:
            self._greenlet = gevent.spawn(self._loop)

    def _loop(self) -> None:
        while True:
            gevent.sleep(self._services.settings.subscription_lag_interval_s)
            for subscription_id in list(self._watched):
                self._refresh_one(subscription_id)

    def _refresh_one(self, subscription_id: str) -> None:
        try:
            lag = subscription_lag(self._services, subscription_id)
        except Exception as error:  # an outage: the last figure stays until the next round
            log.info("the lag of subscription %s is unknown for now: %r", subscription_id, error)
            return
        if lag is None:
            self._watched.discard(subscription_id)
            lag = 0
        figures.SUBSCRIPTION_LAG.labels(subscription_id).set(lag)


def subscription_lag(services: Services, subscription_id: str) -> int | None:
    """Events after the committed offsets, summed over the subscription's partitions;
    None when the subscription or one of its event types is gone."""
    subscription = get_subscription(services.pool, subscription_id)
    if subscription is None:
        return None
    try:
        partitions = subscription_partitions(subscription, services.event_types.get)
    except EventTypeGone:
        return None
    state = SubscriptionState(services.zookeeper, subscription.id)
    if not state.offsets_initialized():
        return 0
    bounds = partition_bounds(partitions, services.engines.get)
    lag = 0
    for key in partitions.partition_keys():
        committed = state.committed(key)
        position = partitions.position(key, committed) if committed else -1
        lag += max(0, bounds[key[0]][int(key[1])].newest - position)
    return lag
