"""Consumers as real clients behave: commit, reconnect, crash, share a subscription,
and reach it through different workers and processes."""

from __future__ import annotations

import signal
from collections import Counter

import requests

from deploy.localstack import free_port
from tests.api.conftest import start_gunicorn, stop_gunicorn, wait_until_serving
from tests.helpers.subscription_streams import (
    StreamClient,
    connect,
    events_of,
    publish_numbered,
    subscribe,
)
from tests.helpers.waiting import wait_until


def consume_until(base_url, sid, wanted: int, **params) -> Counter:
    """A pyNakadi-style loop: stream, commit each batch once the next line came (or the
    stream ended: the server accepts commits of a stream that just closed), reconnect
    when the stream ends, until ``wanted`` events came; how often each event came."""
    seen: Counter = Counter()
    while sum(seen.values()) < wanted:
        client = connect(base_url, sid, **params)
        pending = None
        while True:
            batch = client.batch()
            if pending is not None:
                response = client.commit(pending["cursor"])
                assert response.status_code == 204, response.text
                pending = None
            if batch is None:
                break
            if batch.get("events"):
                seen.update(events_of([batch]))
                pending = batch
            if sum(seen.values()) >= wanted and pending is None:
                client.vanish()
                break
    return seen


def test_a_committing_consumer_gets_every_event_exactly_once(base_url, default_storage,
                                                              event_types, subscriptions):
    name = event_types(3)
    for partition in range(3):
        publish_numbered(base_url, name, partition, partition * 100, 10)
    sid = subscribe(subscriptions, [name])
    seen = consume_until(base_url, sid, 30, batch_limit=3, stream_limit=7,
                         batch_flush_timeout=1)
    assert seen == Counter({p * 100 + n: 1 for p in range(3) for n in range(10)})
    # Committed to the end: a new stream has nothing to send.
    publish_numbered(base_url, name, 0, 1000, 1)
    assert events_of([StreamClient(base_url, sid, stream_limit=1).events_batch()]) == [1000]


def test_a_consumer_killed_before_committing_loses_nothing(base_url, default_storage,
                                                          event_types, subscriptions):
    name = event_types(1)
    publish_numbered(base_url, name, 0, 0, 10)
    sid = subscribe(subscriptions, [name])
    first = StreamClient(base_url, sid, batch_limit=2, max_uncommitted_events=6,
                         batch_flush_timeout=1, commit_timeout=2)
    committed = first.events_batch()
    assert first.commit(committed["cursor"]).status_code == 204
    assert events_of([first.events_batch(), first.events_batch()]) == [2, 3, 4, 5]
    first.vanish()  # crashed with 2..5 uncommitted: they go on once its commit_timeout ran out
    seen = consume_until(base_url, sid, 8, batch_limit=2, stream_limit=8, batch_flush_timeout=1)
    assert sorted(seen) == list(range(2, 10))


def test_two_streams_share_a_subscription_and_rebalance(base_url, default_storage,
                                                        event_types, subscriptions):
    name = event_types(4)
    sid = subscribe(subscriptions, [name], read_from="end")
    first = StreamClient(base_url, sid, batch_flush_timeout=1)
    second = None
    try:
        assert len(partitions_of(base_url, sid, first.stream_id)) == 4
        for partition in range(4):
            publish_numbered(base_url, name, partition, partition, 1)
        sent = [first.events_batch() for _ in range(4)]
        second = StreamClient(base_url, sid, batch_flush_timeout=1)
        # Two partitions are handed over, but only once what was sent is committed.
        wait_until(lambda: [p["state"] for p in stats(base_url, sid)].count("reassigning") == 2)
        assert first.commit(*[batch["cursor"] for batch in sent]).status_code == 204
        wait_until(lambda: len(partitions_of(base_url, sid, second.stream_id)) == 2
                   and len(partitions_of(base_url, sid, first.stream_id)) == 2)
        for partition in range(4):
            publish_numbered(base_url, name, partition, 10 + partition, 1)
        for client in (first, second):
            got = [client.events_batch() for _ in range(2)]
            assert sorted(batch["cursor"]["partition"] for batch in got) == \
                sorted(partitions_of(base_url, sid, client.stream_id))
            assert client.commit(*[batch["cursor"] for batch in got]).status_code == 204
        second.vanish()  # it leaves, all committed: the first takes every partition again
        wait_until(lambda: len(partitions_of(base_url, sid, first.stream_id)) == 4)
    finally:
        first.vanish()
        if second is not None:
            second.vanish()


def stats(base_url, sid) -> list[dict]:
    response = requests.get(f"{base_url}/subscriptions/{sid}/stats")
    return [p for item in response.json()["items"] for p in item["partitions"]]


def partitions_of(base_url, sid, stream_id) -> list[str]:
    return [p["partition"] for p in stats(base_url, sid)
            if p.get("stream_id") == stream_id and p["state"] == "assigned"]


def test_two_gunicorn_processes_serve_one_subscription(base_url, server_env, tmp_path,
                                                       event_types, subscriptions):
    name = event_types(2)
    sid = subscribe(subscriptions, [name])
    port = free_port()
    other = start_gunicorn(server_env, port, tmp_path / "other.log")
    other_url = f"http://127.0.0.1:{port}"
    try:
        wait_until_serving(other, other_url, tmp_path / "other.log")
        here = StreamClient(base_url, sid, batch_flush_timeout=1)
        there = StreamClient(other_url, sid, batch_flush_timeout=1)
        wait_until(lambda: len(partitions_of(base_url, sid, here.stream_id)) == 1
                   and len(partitions_of(other_url, sid, there.stream_id)) == 1)
        publish_numbered(base_url, name, 0, 0, 1)
        publish_numbered(base_url, name, 1, 1, 1)
        batches = [here.events_batch(), there.events_batch()]
        assert sorted(events_of(batches)) == [0, 1]
        # Commits reach ZooKeeper through either process.
        assert requests.post(f"{other_url}/subscriptions/{sid}/cursors",
                             json={"items": [batches[0]["cursor"]]},
                             headers={"X-Nakadi-StreamId": here.stream_id}).status_code == 204
        here.vanish()
        wait_until(lambda: len(partitions_of(base_url, sid, there.stream_id)) == 2)
        there.vanish()
    finally:
        stop_gunicorn(other)


def test_a_worker_shutting_down_ends_its_streams_and_frees_their_partitions(
        base_url, server_env, tmp_path, event_types, subscriptions):
    sid = subscribe(subscriptions, [event_types(1)])
    port = free_port()
    other = start_gunicorn(server_env, port, tmp_path / "other.log")
    try:
        wait_until_serving(other, f"http://127.0.0.1:{port}", tmp_path / "other.log")
        client = StreamClient(f"http://127.0.0.1:{port}", sid, batch_flush_timeout=1)
        assert client.batch()["info"]["debug"] == "Stream started"
        other.send_signal(signal.SIGTERM)
        batches = client.until_end()
        assert "shutting down" in batches[-1]["info"]["debug"]
        wait_until(lambda: stats(base_url, sid)[0]["state"] == "unassigned")
    finally:
        stop_gunicorn(other)
