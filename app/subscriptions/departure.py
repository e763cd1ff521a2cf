"""A stream leaving its subscription: its session node removed, its partitions
given to the other streams."""

from __future__ import annotations

import time
from collections.abc import Sequence

import gevent
from kazoo.exceptions import KazooException

from app.coordination.subscription_state import SubscriptionGone, SubscriptionState
from app.domain.topology import PartitionKey

RECONNECT_WAIT_S = 120.0
CHECK_INTERVAL_S = 1.0


def leave(state: SubscriptionState, session_id: str, partitions: Sequence[PartitionKey]) -> None:
    """Remove the session now, or once ZooKeeper is back: kazoo would hold the calls
    until it reconnects, and the caller (the end of a response) must not wait."""
    if state.zookeeper.connected:
        _unregister(state, session_id, partitions)
    else:
        gevent.spawn(_unregister_once_connected, state, session_id, partitions)


def _unregister(state: SubscriptionState, session_id: str,
                partitions: Sequence[PartitionKey]) -> None:
    try:
        state.unregister(session_id)
        state.rebalance(partitions)
    except (KazooException, SubscriptionGone):
        pass  # the session node goes with the ZooKeeper session, or went with the subscription


def _unregister_once_connected(state: SubscriptionState, session_id: str,
                               partitions: Sequence[PartitionKey]) -> None:
    """After an outage the worker's ZooKeeper session may survive, and with it the
    session node: remove it once connected again (an expired session took it)."""
    deadline = time.monotonic() + RECONNECT_WAIT_S
    while not state.zookeeper.connected and time.monotonic() < deadline:
        gevent.sleep(CHECK_INTERVAL_S)
    if state.zookeeper.connected:
        _unregister(state, session_id, partitions)
