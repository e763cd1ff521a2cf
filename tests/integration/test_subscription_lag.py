"""The subscription lag figure of /metrics, refreshed in rounds against the real stack."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime

import gevent
import pytest
from prometheus_client import REGISTRY

from app.coordination.subscription_nodes import remove_subscription_state
from app.coordination.subscription_state import SubscriptionState
from app.domain.subscription import Subscription
from app.monitoring.lag import FIRST_FIGURE_DELAY_S, SubscriptionLag
from app.repository.subscriptions import insert_subscription
from app.services import Services
from app.subscriptions.partitions import partition_bounds, starting_offsets, subscription_partitions
from tests.helpers.storage import counting_bounds, create_event_type
from tests.helpers.waiting import wait_until


@pytest.fixture
def services(settings, pool) -> Iterator[Services]:
    """Services of the session's stack (``pool`` registered its storages)."""
    built = Services(settings)
    yield built
    built.close()


def event_type(services: Services) -> str:
    """A new event type on the default storage with events 0..2 in partition 0."""
    name = create_event_type(services, "lag")
    timeline = services.event_types.get(name)[1].active  # type: ignore[index]
    services.engines.get(timeline.storage_id).append(
        timeline.topic, 0, [json.dumps({"n": n}).encode() for n in range(3)])
    return name


def subscription_from_begin(services: Services, name: str) -> str:
    now = datetime.now(UTC)
    subscription, _ = insert_subscription(services.pool, Subscription(
        str(uuid.uuid4()), "tests", (name,), uuid.uuid4().hex, "begin", now, now))
    partitions = subscription_partitions(subscription, services.event_types.get)
    SubscriptionState(services.zookeeper, subscription.id).initialize_offsets(
        starting_offsets(subscription, partitions,
                         partition_bounds(partitions, services.engines.get,
                                          services.switch_watch)))
    return subscription.id


def lag_figure(subscription_id: str) -> float | None:
    return REGISTRY.get_sample_value("nakadi_subscription_lag_events",
                                     {"subscription": subscription_id})


def bounds_asked(services: Services, monkeypatch) -> list[str]:
    """The topics the storages are asked the bounds of from now on."""
    counting, asked = counting_bounds(services.engines.get)
    monkeypatch.setattr(services.engines, "get", counting)
    return asked


def test_a_round_asks_the_storage_once_per_event_type(services, monkeypatch):
    """A worker watching many subscriptions of one event type asks its storage once
    per round, not once per subscription; each gets its own lag."""
    first, second = event_type(services), event_type(services)
    ids = [subscription_from_begin(services, name) for name in (first, first, first, second)]
    asked = bounds_asked(services, monkeypatch)
    committed = SubscriptionState(services.zookeeper, ids[1])
    committed.commit((first, "0"), "001-0001-000000000000000001")
    try:
        SubscriptionLag(services).refresh(ids)
        assert len(asked) == 2
        assert [lag_figure(i) for i in ids] == [3, 1, 3, 3]
    finally:
        for subscription_id in ids:
            remove_subscription_state(services.zookeeper, subscription_id)


def test_streams_starting_together_share_their_first_round(services, monkeypatch):
    name = event_type(services)
    ids = [subscription_from_begin(services, name) for _ in range(3)]
    monkeypatch.setattr(services, "settings",
                        replace(services.settings, subscription_lag_interval_s=3600))
    asked = bounds_asked(services, monkeypatch)
    lag = SubscriptionLag(services)
    try:
        for subscription_id in ids:
            lag.watch(subscription_id)
            gevent.sleep(FIRST_FIGURE_DELAY_S / 10)
        wait_until(lambda: [lag_figure(i) for i in ids] == [3, 3, 3],
                   timeout=FIRST_FIGURE_DELAY_S + 5, what="the first figures")
        assert len(asked) == 1
    finally:
        for subscription_id in ids:
            remove_subscription_state(services.zookeeper, subscription_id)
