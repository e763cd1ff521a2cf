"""``/subscriptions/{id}/cursors`` (committed, commit, reset) and ``/stats`` over HTTP."""

from __future__ import annotations

import time
import uuid

import pytest
import requests

from app.coordination.subscription_nodes import subscription_path
from app.coordination.zookeeper import ZooKeeper
from app.subscriptions.commits import RESET_WAIT_S
from tests.api.conftest import assert_problem
from tests.helpers.subscription_streams import (
    STREAM_ID,
    StreamClient,
    events_of,
    open_stream,
    publish_numbered,
    subscribe,
)
from tests.helpers.waiting import wait_until


def cursors_url(base_url, sid) -> str:
    return f"{base_url}/subscriptions/{sid}/cursors"


def committed(base_url, sid) -> dict:
    response = requests.get(cursors_url(base_url, sid))
    assert response.status_code == 200, response.text
    return {(c["event_type"], c["partition"]): c["offset"] for c in response.json()["items"]}


def cursor(name, partition="0", offset="001-0001-000000000000000000", **extra) -> dict:
    return {"event_type": name, "partition": partition, "offset": offset,
            "cursor_token": str(uuid.uuid4()), **extra}


@pytest.fixture
def streamed(base_url, default_storage, event_types, subscriptions):
    """A subscription of a 2-partition event type with 3 events in partition 0, and
    an open stream that was sent the first one."""
    name = event_types(2)
    publish_numbered(base_url, name, 0, 0, 3)
    sid = subscribe(subscriptions, [name])
    client = StreamClient(base_url, sid, max_uncommitted_events=1, batch_flush_timeout=1)
    client.first = client.events_batch()
    client.name = name
    yield client
    client.vanish()


def test_committed_cursors_start_where_the_subscription_reads_from(base_url, event_types,
                                                                    subscriptions):
    name = event_types(2)
    publish_numbered(base_url, name, 1, 0, 2)
    sid = subscribe(subscriptions, [name], read_from="end")
    assert committed(base_url, sid) == {}  # never streamed
    StreamClient(base_url, sid).vanish()
    assert committed(base_url, sid) == {(name, "0"): "001-0001--1",
                                        (name, "1"): "001-0001-000000000000000001"}
    items = requests.get(cursors_url(base_url, sid)).json()["items"]
    assert all(uuid.UUID(item["cursor_token"]) for item in items)


def test_a_commit_moves_forward_and_repeats_are_outdated(base_url, streamed):
    assert streamed.commit(streamed.first["cursor"]).status_code == 204
    assert committed(base_url, streamed.subscription_id)[(streamed.name, "0")] == \
        streamed.first["cursor"]["offset"]
    again = streamed.commit(streamed.first["cursor"])
    assert again.status_code == 200
    assert again.json() == {"items": [{"cursor": streamed.first["cursor"],
                                       "result": "outdated"}]}
    # The commit freed the room: the next event comes.
    assert events_of([streamed.events_batch()]) == [1]


def test_commits_need_the_stream_id_of_a_stream_holding_the_partition(base_url, streamed,
                                                                      event_types):
    first = streamed.first["cursor"]
    url = cursors_url(base_url, streamed.subscription_id)
    missing = requests.post(url, json={"items": [first]})
    assert STREAM_ID in assert_problem(missing, 422)["detail"]
    assert_problem(streamed.commit(first, stream_id="not-a-stream"), 422)
    unknown = streamed.commit(first, stream_id=str(uuid.uuid4()))
    assert "not an open stream" in assert_problem(unknown, 422)["detail"]
    direct = StreamClient(base_url, streamed.subscription_id, {"partitions": [
        {"event_type": streamed.name, "partition": "1"}]})
    try:
        other = cursor(streamed.name, "1", "001-0001--1")
        wait_until(lambda: direct.commit(other).status_code == 200)  # once handed over
        refused = streamed.commit(other)
        assert "not read by stream" in assert_problem(refused, 422)["detail"]
    finally:
        direct.vanish()


@pytest.mark.parametrize("make", [
    lambda name: "not an object",
    lambda name: {key: value for key, value in cursor(name).items() if key != "cursor_token"},
    lambda name: cursor(name, offset="42"),
    lambda name: cursor(name, offset="001-0001-000000000000000003"),  # past the newest
    lambda name: cursor(name, partition="7"),
    lambda name: cursor("other-event-type"),
    lambda name: cursor(name, partition=0),
])
def test_malformed_or_impossible_cursors_are_422(base_url, streamed, make):
    assert_problem(streamed.commit(make(streamed.name)), 422)
    assert committed(base_url, streamed.subscription_id)[(streamed.name, "0")] == "001-0001--1"


@pytest.mark.parametrize("body", [{"items": "x"}, [], {}])
def test_bodies_without_items_are_422(base_url, streamed, body):
    response = requests.post(cursors_url(base_url, streamed.subscription_id), json=body,
                             headers={STREAM_ID: streamed.stream_id})
    assert_problem(response, 422)


def test_a_body_that_is_not_json_is_400(base_url, streamed):
    response = requests.post(cursors_url(base_url, streamed.subscription_id), data="{",
                             headers={STREAM_ID: streamed.stream_id,
                                      "Content-Type": "application/json"})
    assert_problem(response, 400)


def test_a_reset_closes_the_streams_and_the_next_reads_from_the_new_offsets(base_url,
                                                                             streamed):
    sid, name = streamed.subscription_id, streamed.name
    response = requests.patch(cursors_url(base_url, sid), json={"items": [
        {"event_type": name, "partition": "0", "offset": "001-0001-000000000000000001"}]})
    assert response.status_code == 204, response.text
    streamed.until_end()  # the open stream was closed
    assert committed(base_url, sid)[(name, "0")] == "001-0001-000000000000000001"
    again = StreamClient(base_url, sid, batch_flush_timeout=1)
    try:
        assert events_of([again.events_batch()]) == [2]
    finally:
        again.vanish()
    back = requests.patch(cursors_url(base_url, sid), json={"items": [
        {"event_type": name, "partition": "0", "offset": "BEGIN"}]})
    assert back.status_code == 204
    assert committed(base_url, sid)[(name, "0")] == "001-0001--1"


def test_a_reset_does_not_wait_for_a_stream_that_ended_and_awaits_its_commits(
        base_url, event_types, subscriptions):
    # A stream ended by its stream_limit keeps its session until its events are
    # committed (commit_timeout 60 s here); a reset discards those commits anyway.
    name = event_types(1)
    publish_numbered(base_url, name, 0, 0, 2)
    sid = subscribe(subscriptions, [name])
    client = StreamClient(base_url, sid, stream_limit=1, commit_timeout=60)
    assert events_of([client.events_batch()]) == [0]
    client.until_end()
    started = time.monotonic()
    response = requests.patch(cursors_url(base_url, sid), json={"items": [
        {"event_type": name, "partition": "0", "offset": "BEGIN"}]})
    assert response.status_code == 204, response.text
    assert time.monotonic() - started < RESET_WAIT_S / 3  # not the reset's whole wait
    again = StreamClient(base_url, sid, batch_limit=2, batch_flush_timeout=1)
    try:
        assert events_of([again.events_batch()]) == [0, 1]
    finally:
        again.vanish()


@pytest.mark.parametrize("item", [
    {"event_type": "other", "partition": "0", "offset": "begin"},
    {"partition": "0", "offset": "begin"},
    {"event_type": "{name}", "partition": "9", "offset": "begin"},
    {"event_type": "{name}", "partition": "0", "offset": "001-0001-000000000000000009"},
])
def test_resets_outside_the_subscription_or_its_events_are_422(base_url, event_types,
                                                               subscriptions, item):
    name = event_types(1)
    sid = subscribe(subscriptions, [name])
    item = {k: v.format(name=name) for k, v in item.items()}
    assert_problem(requests.patch(cursors_url(base_url, sid), json={"items": [item]}), 422)


def test_while_a_reset_runs_resets_and_streams_are_409(base_url, settings, event_types,
                                                       subscriptions):
    name = event_types(1)
    sid = subscribe(subscriptions, [name])
    begin = {"items": [{"event_type": name, "partition": "0", "offset": "begin"}]}
    connection = ZooKeeper(settings.zookeeper, settings.zookeeper_root,
                           settings.zookeeper_timeout_s)
    try:  # another instance's reset, as it marks the subscription
        connection.client().create(f"{subscription_path(sid)}/reset", ephemeral=True,
                                   makepath=True)
        assert_problem(requests.patch(cursors_url(base_url, sid), json=begin), 409)
        assert "reset" in assert_problem(open_stream(base_url, sid), 409)["detail"]
    finally:
        connection.close()
    assert requests.patch(cursors_url(base_url, sid), json=begin).status_code == 204


def test_an_empty_reset_stores_the_starting_offsets_and_closes_no_stream(
        base_url, event_types, subscriptions):
    # 001: the empty list initializes the cursors "without side effects". Before, it
    # closed every open stream, as a reset does.
    name = event_types(1)
    publish_numbered(base_url, name, 0, 0, 2)
    sid = subscribe(subscriptions, [name])
    assert committed(base_url, sid) == {}
    assert requests.patch(cursors_url(base_url, sid), json={"items": []}).status_code == 204
    assert committed(base_url, sid) == {(name, "0"): "001-0001--1"}
    client = StreamClient(base_url, sid, batch_flush_timeout=1)
    try:
        first = client.events_batch()
        assert requests.patch(cursors_url(base_url, sid),
                              json={"items": []}).status_code == 204
        assert client.commit(first["cursor"]).status_code == 204
        assert events_of([client.events_batch()]) == [1]  # the same stream goes on
        assert committed(base_url, sid) == {(name, "0"): first["cursor"]["offset"]}
    finally:
        client.vanish()


def test_stats_show_assignment_and_what_is_left_to_read(base_url, streamed):
    sid, name = streamed.subscription_id, streamed.name
    response = requests.get(f"{base_url}/subscriptions/{sid}/stats",
                            params={"show_time_lag": "true"})
    assert response.status_code == 200
    [item] = response.json()["items"]
    assert item["event_type"] == name
    assert item["partitions"][0] == {
        "partition": "0", "state": "assigned", "stream_id": streamed.stream_id,
        "assignment_type": "auto", "unconsumed_events": 3,
        "consumer_lag_seconds": item["partitions"][0]["consumer_lag_seconds"]}
    assert item["partitions"][0]["consumer_lag_seconds"] >= 0
    assert item["partitions"][1]["unconsumed_events"] == 0
    assert item["partitions"][1]["consumer_lag_seconds"] == 0
    streamed.commit(streamed.first["cursor"])
    plain = requests.get(f"{base_url}/subscriptions/{sid}/stats").json()["items"][0]
    assert plain["partitions"][0]["unconsumed_events"] == 2
    assert "consumer_lag_seconds" not in plain["partitions"][0]
    for _ in range(2):  # the other two, each sent once the one before is committed
        streamed.commit(streamed.events_batch()["cursor"])
    streamed.vanish()  # nothing uncommitted: its session goes at once
    wait_until(lambda: requests.get(f"{base_url}/subscriptions/{sid}/stats").json()
               ["items"][0]["partitions"][0] == {"partition": "0", "state": "unassigned",
                                                 "unconsumed_events": 0})


def test_stats_of_a_subscription_never_streamed(base_url, event_types, subscriptions):
    name = event_types(1)
    sid = subscribe(subscriptions, [name])
    response = requests.get(f"{base_url}/subscriptions/{sid}/stats")
    assert response.json() == {"items": [{"event_type": name, "partitions": [
        {"partition": "0", "state": "unassigned"}]}]}
    bad = requests.get(f"{base_url}/subscriptions/{sid}/stats", params={"show_time_lag": "x"})
    assert_problem(bad, 400)


def test_stats_of_a_subscription_from_cursors_never_streamed_count_from_them(
        base_url, event_types, subscriptions):
    """The spec lets `unconsumed_events` be absent before the first stream only "In case of
    `read_from` is `BEGIN` or `END`": initial cursors say where that stream will start."""
    name = event_types(3)
    for partition in (0, 1, 2):
        publish_numbered(base_url, name, partition, 0, 4)
    sid = subscribe(subscriptions, [name], read_from="cursors", initial_cursors=[
        cursor(name, "0", "001-0001-000000000000000001"), cursor(name, "1", "begin"),
        cursor(name, "2", "001-0001-000000000000000003")])
    response = requests.get(f"{base_url}/subscriptions/{sid}/stats",
                            params={"show_time_lag": "true"})
    partitions = response.json()["items"][0]["partitions"]
    assert [(p["partition"], p["unconsumed_events"]) for p in partitions] == [
        ("0", 2), ("1", 4), ("2", 0)]
    assert partitions[2]["consumer_lag_seconds"] == 0
    assert all(p["state"] == "unassigned" for p in partitions)
    assert committed(base_url, sid) == {}  # asking changed nothing
