"""The lag of subscriptions (events not yet committed, over all their partitions) for
``/metrics``: each worker refreshes, every ``NAKADI_SUBSCRIPTION_LAG_INTERVAL_S``, the
subscriptions it has served a stream of since it started, so a consumer that
stopped still shows its growing lag. A deleted subscription shows 0 and is no
longer refreshed.

A round asks the storage once per event type, however many of its subscriptions
the worker watches (an answer can cost a kafka consumer and a fetch of every
partition, see ``NAKADI_KAFKA_EXACT_LIST_OFFSETS``). A subscription's first
figure comes in a round of its own ``FIRST_FIGURE_DELAY_S`` after its first
stream here, shared with the others that started meanwhile (a deploy, clients
reconnecting)."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable
from typing import TYPE_CHECKING

import gevent
import gevent.event

from app.coordination.subscription_state import SubscriptionState
from app.monitoring import figures
from app.repository.subscriptions import get_subscription
from app.subscriptions.partitions import (
    BoundsByEventType,
    EventTypeGone,
    partition_bounds,
    subscription_partitions,
)

if TYPE_CHECKING:
    from app.services import Services

FIRST_FIGURE_DELAY_S = 1.0  # a new subscription's wait for its first figure

log = logging.getLogger(__name__)


class SubscriptionLag:
    def __init__(self, services: Services) -> None:
        self._services = services
        self._watched: set[str] = set()
        self._new: set[str] = set()
        self._arrived = gevent.event.Event()
        self._greenlet: gevent.Greenlet | None = None

    def watch(self, subscription_id: str) -> None:
        """Keep the lag of this subscription current (its first figure comes within
        ``FIRST_FIGURE_DELAY_S``)."""
        if subscription_id in self._watched:
            return
        self._watched.add(subscription_id)
        self._new.add(subscription_id)
        self._arrived.set()
        if self._greenlet is None:
            self._greenlet = gevent.spawn(self._loop)

    def refresh(self, subscription_ids: Iterable[str]) -> None:
        """One round: the lag of these subscriptions, each event type's bounds asked once."""
        known: BoundsByEventType = {}
        for subscription_id in list(subscription_ids):
            self._refresh_one(subscription_id, known)

    def _loop(self) -> None:
        interval = self._services.settings.subscription_lag_interval_s
        next_round = time.monotonic() + interval
        while True:
            if self._arrived.wait(max(0.0, next_round - time.monotonic())):
                gevent.sleep(FIRST_FIGURE_DELAY_S)
                self._arrived.clear()
                new, self._new = self._new, set()
                self.refresh(new)
            if time.monotonic() >= next_round:
                self.refresh(self._watched)
                next_round = time.monotonic() + interval

    def _refresh_one(self, subscription_id: str, known: BoundsByEventType) -> None:
        try:
            lag = subscription_lag(self._services, subscription_id, known)
        except Exception as error:  # an outage: the last figure stays until the next round
            log.info("the lag of subscription %s is unknown for now: %r", subscription_id, error)
            return
        if lag is None:
            self._watched.discard(subscription_id)
            lag = 0
        figures.SUBSCRIPTION_LAG.labels(subscription_id).set(lag)


def subscription_lag(services: Services, subscription_id: str,
                     known: BoundsByEventType | None = None) -> int | None:
    """Events after the committed offsets, summed over the subscription's partitions;
    None when the subscription or one of its event types is gone. ``known``: bounds
    already asked in this round, by event type (see ``partition_bounds``)."""
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
    bounds = partition_bounds(partitions, services.engines.get, services.switch_watch, known)
    lag = 0
    for key, committed in state.committed_many(partitions.partition_keys()).items():
        position = partitions.position(key, committed) if committed else -1
        lag += max(0, bounds[key[0]][int(key[1])].newest - position)
    return lag
