"""A subscription stream while ZooKeeper is killed: it ends cleanly with a line
saying why, new streams are 503s, and consuming resumes from the last commit once
ZooKeeper is back, on the same broker processes."""

from __future__ import annotations

import uuid

import requests

from tests.api.conftest import assert_problem
from tests.faults.conftest import FaultStack
from tests.helpers.load import new_fault_event_type
from tests.helpers.subscription_streams import StreamClient, connect, events_of, open_stream
from tests.helpers.timelines import move_to
from tests.helpers.waiting import wait_until


def test_zookeeper_killed_under_a_subscription_stream(faults: FaultStack):
    name = new_fault_event_type(faults.url, 1)
    events = [{"n": n, "metadata": {"eid": str(uuid.uuid4()),
                                    "occurred_at": "2026-11-22T10:00:00Z"}} for n in range(4)]
    assert requests.post(f"{faults.url}/event-types/{name}/events", json=events).status_code \
        == 200
    created = requests.post(f"{faults.url}/subscriptions", json={
        "owning_application": "faults", "event_types": [name], "read_from": "begin"})
    sid = created.json()["id"]
    client = StreamClient(faults.url, sid, batch_limit=2, batch_flush_timeout=1)
    first = client.events_batch()
    assert client.commit(first["cursor"]).status_code == 204
    try:
        faults.kill("zookeeper")
        last = client.until_end()[-1]
        assert "ZooKeeper" in last["info"]["debug"]
        # (a 503 Response is falsy: wait for a list holding it)
        [refused] = wait_until(lambda: [r for r in [open_stream(faults.url, sid)]
                                        if r.status_code == 503], 20, what="a 503 for a stream")
        assert "Retry-After" in refused.headers
        assert_problem(refused, 503)
    finally:
        faults.restart("zookeeper")
    again = connect(faults.url, sid, batch_limit=2, batch_flush_timeout=1)
    try:
        assert events_of([again.events_batch()]) == [2, 3]  # from the last commit on
    finally:
        again.vanish()
    requests.delete(f"{faults.url}/subscriptions/{sid}")
    requests.delete(f"{faults.url}/event-types/{name}")


def test_a_subscription_stream_on_a_broker_known_down_is_a_503(faults: FaultStack):
    """As a low-level stream is: it used to answer 200 and end within a second, so a
    consumer that reconnects whenever its stream ends looped on 200s, without the
    Retry-After of a 503."""
    name = new_fault_event_type(faults.url, 1)
    move_to(faults.url, name, "kafka")
    created = requests.post(f"{faults.url}/subscriptions", json={
        "owning_application": "faults", "event_types": [name], "read_from": "begin"})
    sid = created.json()["id"]
    first = connect(faults.url, sid, batch_flush_timeout=1)  # offsets stored
    first.vanish()
    with faults.frozen("broker"):
        publish = requests.post(f"{faults.url}/event-types/{name}/events",
                                json=[{"order_number": "A", "amount": 1, "metadata": {
                                    "eid": str(uuid.uuid4()),
                                    "occurred_at": "2026-11-22T10:00:00Z"}}], timeout=30)
        assert publish.status_code == 503  # after waiting the broker's timeout out
        # A worker knows the broker is down once a call of its own waited in vain: the
        # publish's worker does, the other may answer one stream first, which ends
        # with a line naming the storage, and then knows too.
        opened: list[bytes] = []

        def refused_stream() -> list[requests.Response] | None:
            answer = open_stream(faults.url, sid)
            if answer.status_code == 200:
                opened.append(answer.content)  # until the stream ends
            # (a 503 Response is falsy: a list holding it)
            return [answer] if answer.status_code not in (200, 409) else None

        [refused] = wait_until(refused_stream, 60, what="a refused stream")
        assert "Kafka" in assert_problem(refused, 503)["detail"]
        assert "Retry-After" in refused.headers
        print(f"\nkafka frozen: {len(opened)} subscription stream(s) opened before a 503")
        assert len(opened) <= 1, opened  # never a loop of 200s
        assert all(b"the storage failed" in body for body in opened), opened
    again = connect(faults.url, sid, batch_flush_timeout=1)
    again.vanish()
    requests.delete(f"{faults.url}/subscriptions/{sid}")
