"""A worker's ZooKeeper client under a burst: 1,000 streams opening at once each
take a slot (a create and a listing). Without a bound on the requests in flight,
kazoo's wake-up socket pair filled and the process hung, gevent timeouts and all
(so a regression shows as a hanging test)."""

from __future__ import annotations

import collections
import uuid

import gevent

from app.coordination.zookeeper import ZooKeeper
from tests.helpers.waiting import wait_until


def _connected(zookeeper: ZooKeeper):
    try:
        return zookeeper.client()
    except Exception:  # not connected yet
        return None


def test_a_thousand_calls_at_once_are_all_answered_and_the_client_stays_usable(stack_env):
    zookeeper = ZooKeeper(stack_env["NAKADI_ZOOKEEPER"], "/nakadi-test", 5.0)
    try:
        client = wait_until(lambda: _connected(zookeeper), 10, what="a ZooKeeper connection")
        parent = f"/burst-{uuid.uuid4().hex[:8]}"
        failures: collections.Counter[str] = collections.Counter()

        def take_a_slot() -> None:
            try:
                client.create(f"{parent}/stream-", ephemeral=True, sequence=True, makepath=True)
                client.get_children(parent)
            except Exception as error:  # counted and reported below
                failures[type(error).__name__] += 1

        with gevent.Timeout(90, AssertionError("the burst hung")):
            gevent.joinall([gevent.spawn(take_a_slot) for _ in range(1000)])
        assert not failures
        with gevent.Timeout(5, AssertionError("a call after the burst hung")):
            assert len(client.get_children(parent)) == 1000
    finally:
        zookeeper.close()
