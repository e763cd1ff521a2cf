"""The worker's ZooKeeper client under many concurrent requests."""

from __future__ import annotations

import gevent


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
    calls = [gevent.spawn(zookeeper.ensure_path, f"/concurrency-{n % 50}/a/b")
             for n in range(600)]
    gevent.joinall(calls, timeout=60)
    assert [repr(call.exception) for call in calls if not call.successful()] == []
    assert zookeeper.exists("/concurrency-49/a/b") is not None
