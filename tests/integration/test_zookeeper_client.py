"""The worker's ZooKeeper client under many concurrent requests."""

from __future__ import annotations

import gevent

from app.coordination.zookeeper import RECV_SIZE


def test_a_thousand_concurrent_requests_all_get_their_answer(zookeeper):
    # A thousand subscription streams starting at once on one worker send about this
    # many requests together; each must be answered, none refused as a closed connection.
    zookeeper.ensure_path("/concurrency")
    calls = [gevent.spawn(zookeeper.get, "/concurrency") for _ in range(1000)]
    gevent.joinall(calls, timeout=60)
    failures = [repr(call.exception) for call in calls if not call.successful()]
    assert failures == []
    assert all(call.value[1].version == 0 for call in calls)


def test_many_concurrent_ensure_paths_all_succeed(zookeeper):
    # ensure_path chains its creates from kazoo's callbacks, which run in gevent's hub.
    # More at once than the client lets be under way (MAX_IN_FLIGHT).
    calls = [gevent.spawn(zookeeper.ensure_path, f"/concurrency-{n % 600}/a/b")
             for n in range(600)]
    gevent.joinall(calls, timeout=120)
    assert [repr(call.exception) for call in calls if not call.successful()] == []
    assert zookeeper.exists("/concurrency-599/a/b") is not None
    assert zookeeper.get("/concurrency")[1].version == 0  # the connection still answers


def test_a_node_larger_than_one_read_comes_back_whole(zookeeper):
    # The client takes at most RECV_SIZE bytes from the kernel at a time; the topology
    # of a subscription over thousands of partitions is larger.
    value = bytes(range(256)) * 1024
    assert len(value) > RECV_SIZE
    zookeeper.create("/large-node", value)
    assert zookeeper.get("/large-node")[0] == value
    zookeeper.create("/after-large-node", b"small")
    assert zookeeper.get("/after-large-node")[0] == b"small"  # the next answer is whole too
