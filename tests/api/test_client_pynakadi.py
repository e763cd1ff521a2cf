"""A real Nakadi client, pyNakadi, against the broker, on each engine: what its users do
with it has to work unchanged. pyNakadi is strict where a client can be: it accepts
exactly the statuses Nakadi answers (201 for a new event type, 204 for a commit), reads
the stream's chunked encoding itself from the socket, and takes the socket's close for
the stream's end: a stream that ends without closing the connection hangs it.

Its stream reads the socket under Python's ``http.client``, so whatever came with the
headers in one read is lost to it: it needs the stream's first line to come after the
headers, as when it follows new events. The tests stream that way.

Two of its calls are left out because they are wrong in the client itself:
``get_event_type_events_stream`` leaves the event type's name out of its URL, and
``get_event_type_cursor_lag`` posts to ``/cursor-lag`` (001: ``/cursors-lag``)."""

from __future__ import annotations

import json
import uuid

import pytest
from pyNakadi.client import EndOfStreamException, NakadiClient, NakadiException

from tests.helpers.broker import ORDER_SCHEMA, business_event


@pytest.fixture
def client(base_url, default_storage) -> NakadiClient:
    # pyNakadi always sends a bearer token; with authentication off it is ignored.
    return NakadiClient("no-token", base_url)


@pytest.fixture
def event_type(client) -> dict:
    """An order event type of two partitions, created through the client."""
    body = {
        "name": f"client.test-{uuid.uuid4().hex[:10]}",
        "owning_application": "order-service",
        "category": "business",
        "enrichment_strategies": ["metadata_enrichment"],
        "partition_strategy": "hash",
        "partition_key_fields": ["order_number"],
        "schema": {"type": "json_schema", "schema": json.dumps(ORDER_SCHEMA)},
        "default_statistic": {"messages_per_minute": 10, "message_size": 100,
                              "read_parallelism": 2, "write_parallelism": 2},
    }
    assert client.create_event_type(body) is True
    yield body
    try:
        client.delete_event_type(body["name"])
    except NakadiException as error:
        assert error.code == 404  # deleted by the test


@pytest.fixture
def subscriptions(client):
    """Creates subscriptions through the client; deletes them afterwards."""
    created: list[str] = []

    def create(**body) -> dict:
        status, subscription = client.create_subscription_v2(body)
        assert status == 201
        created.append(subscription["id"])
        return subscription

    yield create
    for subscription_id in created:
        client.delete_subscription(subscription_id)


def batches(stream) -> list[dict]:
    """Every line of a stream until the server closes the connection, which is how
    pyNakadi sees a stream end (it never takes the terminating chunk for the end: it
    reads on, and a server that kept the connection open would hang it)."""
    lines = []
    try:
        for line in stream:
            lines.append(json.loads(line))
    except EndOfStreamException:
        return lines
    finally:
        stream.close()
    raise AssertionError("unreachable: a NakadiStream ends only by raising")


def test_event_types_are_created_read_changed_and_deleted(client, event_type):
    name = event_type["name"]
    read = client.get_event_type(name)
    assert read["schema"]["version"] == "1.0.0"
    assert name in {each["name"] for each in client.get_event_types()}
    schema = dict(ORDER_SCHEMA, properties={**ORDER_SCHEMA["properties"],
                                            "note": {"type": "string"}})
    changed = dict(event_type, schema={"type": "json_schema", "schema": json.dumps(schema)})
    assert client.update_event_type(name, changed) is True
    assert client.get_event_type(name)["schema"]["version"] == "1.1.0"
    partitions = client.get_event_type_partitions(name)
    assert sorted(p["partition"] for p in partitions) == ["0", "1"]
    assert client.get_event_type_partition(name, "1")["partition"] == "1"
    assert client.delete_event_type(name) is True
    with pytest.raises(NakadiException) as missing:
        client.get_event_type(name)
    assert missing.value.code == 404


def test_events_published_are_consumed_and_committed_through_a_subscription(
        client, event_type, subscriptions):
    name = event_type["name"]
    subscription = subscriptions(owning_application="client-test", event_types=[name],
                                 read_from="begin")
    sid = subscription["id"]
    stream = client.get_subscription_events_stream(sid, batch_limit=1, stream_limit=6,
                                                   batch_flush_timeout=1,
                                                   max_uncommitted_events=6)
    published = [business_event(n) for n in range(6)]
    assert client.post_events(name, published) is True
    lines = batches(stream)
    received = [event for line in lines for event in line.get("events", [])]
    assert sorted(e["order_number"] for e in received) == \
        sorted(e["order_number"] for e in published)
    newest = {}
    for line in lines:
        if line.get("events"):
            newest[line["cursor"]["partition"]] = line["cursor"]
    # The stream ended on its stream_limit: its commits still count (204, or pyNakadi raises).
    assert client.commit_subscription_cursors(sid, stream.get_stream_id(),
                                              list(newest.values())) is True
    committed = {c["partition"]: c["offset"]
                 for c in client.get_subscription_cursors(sid)["items"]}
    assert committed == {p: c["offset"] for p, c in newest.items()}
    stats = client.get_subscription_stats(sid, show_time_lag=True)["items"][0]
    assert stats["event_type"] == name
    assert all(p["unconsumed_events"] == 0 for p in stats["partitions"])
    assert client.reset_subscription_cursors(sid, [
        {"event_type": name, "partition": p, "offset": "BEGIN"} for p in newest]) is True
    assert {c["offset"] for c in client.get_subscription_cursors(sid)["items"]
            if c["partition"] in newest} == {"001-0001--1"}


def test_an_existing_subscription_is_returned_and_lists_page_by_their_links(
        client, event_type, subscriptions):
    owner = f"client-{uuid.uuid4().hex[:8]}"
    created = [subscriptions(owning_application=owner, event_types=[event_type["name"]],
                             consumer_group=f"group-{n}") for n in range(3)]
    status, same = client.create_subscription_v2({
        "owning_application": owner, "event_types": [event_type["name"]],
        "consumer_group": "group-0"})
    assert (status, same["id"]) == (200, created[0]["id"])
    assert client.get_subscription(created[1]["id"])["consumer_group"] == "group-1"
    first = client.get_subscriptions(owning_application=owner, limit=2)
    second = client.get_next_subscriptions(first)
    assert client.get_next_subscriptions(second) is None
    assert {s["id"] for s in first["items"] + second["items"]} == {s["id"] for s in created}
    assert client.get_prev_subscriptions(second)["items"] == first["items"]
    assert client.get_subscriptions(event_type=[event_type["name"]], limit=10)["items"]


def test_cursor_distances_and_metrics(client, event_type):
    name = event_type["name"]
    client.post_events(name, [business_event(n, order_number="same") for n in range(3)])
    partitions = client.get_event_type_partitions(name)
    distances = client.get_event_type_cursor_distances(name, [{
        "initial_cursor": {"partition": p["partition"], "offset": "BEGIN"},
        "final_cursor": {"partition": p["partition"], "offset": p["newest_available_offset"]}}
        for p in partitions])
    assert sorted(d["distance"] for d in distances) == [0, 3]  # one key: one partition
    assert isinstance(client.get_metrics(), dict)
