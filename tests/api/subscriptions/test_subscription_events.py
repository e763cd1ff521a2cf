"""``/subscriptions/{id}/events`` over HTTP against the real gunicorn, on each engine."""

from __future__ import annotations

import json
import time
import uuid

import pytest
import requests

from app.streaming.connection import LAST_WRITE_S
from tests.api.conftest import assert_problem
from tests.helpers.broker import backlog_event_type
from tests.helpers.raw_http import stuck_client
from tests.helpers.storage import expire
from tests.helpers.subscription_streams import (
    StreamClient,
    connect,
    events_of,
    open_stream,
    publish_numbered,
    subscribe,
)
from tests.helpers.waiting import first_200, wait_until


def stats(base_url, subscription_id, **params) -> list[dict]:
    response = requests.get(f"{base_url}/subscriptions/{subscription_id}/stats", params=params)
    assert response.status_code == 200, response.text
    return [dict(p, event_type=item["event_type"]) for item in response.json()["items"]
            for p in item["partitions"]]


def test_a_stream_sends_batches_with_subscription_cursors(base_url, default_storage,
                                                         event_types, subscriptions):
    name = event_types(2)
    publish_numbered(base_url, name, 0, 0, 3)
    publish_numbered(base_url, name, 1, 3, 2)
    sid = subscribe(subscriptions, [name])
    client = StreamClient(base_url, sid, batch_limit=2, stream_limit=5, batch_flush_timeout=1)
    assert client.response.headers["Content-Type"] == "application/x-json-stream"
    uuid.UUID(client.stream_id)
    batches = client.until_end()
    assert sorted(events_of(batches)) == [0, 1, 2, 3, 4]
    assert batches[0]["info"]["debug"] == "Stream started"
    for batch in batches:
        cursor = batch["cursor"]
        assert set(cursor) == {"partition", "offset", "event_type", "cursor_token"}
        assert cursor["event_type"] == name
    by_partition = {b["cursor"]["partition"]: b["cursor"]["offset"] for b in batches}
    assert by_partition == {"0": "001-0001-000000000000000002",
                            "1": "001-0001-000000000000000001"}


def test_unknown_subscriptions_are_404(base_url):
    for sid in (str(uuid.uuid4()), "not-a-uuid"):
        assert_problem(open_stream(base_url, sid), 404)
        assert_problem(open_stream(base_url, sid, {}), 404)
        assert_problem(requests.get(f"{base_url}/subscriptions/{sid}/stats"), 404)


@pytest.mark.parametrize("params", [
    {"max_uncommitted_events": 0}, {"max_uncommitted_events": "x"}, {"commit_timeout": 61},
    {"commit_timeout": -1}, {"batch_limit": 0}, {"batch_limit": 5, "stream_limit": 2},
    {"stream_timeout": 2, "batch_flush_timeout": 5}])
def test_bad_stream_parameters_are_422_naming_them(base_url, event_types, subscriptions,
                                                   params):
    sid = subscribe(subscriptions, [event_types(1)])
    detail = assert_problem(open_stream(base_url, sid, **params), 422)["detail"]
    assert any(name in detail for name in params)


@pytest.mark.parametrize("body", [
    [], {"batch_limit": "1"}, {"batch_limit": True}, {"max_uncommitted_events": 1.5},
    {"partitions": {}}, {"partitions": [{"event_type": 1, "partition": "0"}]},
    {"partitions": [{"event_type": "other", "partition": "0"}]}])
def test_bad_post_bodies_are_422(base_url, event_types, subscriptions, body):
    sid = subscribe(subscriptions, [event_types(1)])
    assert_problem(open_stream(base_url, sid, body), 422)


def test_a_partition_outside_the_subscription_is_422(base_url, event_types, subscriptions):
    name = event_types(2)
    sid = subscribe(subscriptions, [name])
    body = assert_problem(open_stream(base_url, sid, {"partitions": [
        {"event_type": name, "partition": "2"}]}), 422)
    assert "'2'" in body["detail"]


def test_more_streams_than_partitions_is_409(base_url, event_types, subscriptions):
    sid = subscribe(subscriptions, [event_types(2)])
    first, second = StreamClient(base_url, sid), StreamClient(base_url, sid)
    try:
        body = assert_problem(open_stream(base_url, sid), 409)
        assert "no free partition" in body["detail"]
    finally:
        first.vanish()
        second.vanish()


def test_a_head_answers_the_stream_headers_and_takes_no_partition(base_url, event_types,
                                                                  subscriptions):
    sid = subscribe(subscriptions, [event_types(1)])
    url = f"{base_url}/subscriptions/{sid}/events"
    head = requests.head(url, timeout=10)
    assert head.status_code == 200
    assert head.headers["Content-Type"] == "application/x-json-stream"
    assert "X-Nakadi-StreamId" not in head.headers and head.content == b""
    assert [p["state"] for p in stats(base_url, sid)] == ["unassigned"]
    stream = StreamClient(base_url, sid)  # the only partition is free for it
    try:
        assert requests.head(url, timeout=10).status_code == 200  # not 409
        assert [(p["state"], p["stream_id"]) for p in stats(base_url, sid)] == [
            ("assigned", stream.stream_id)]
        assert requests.head(url, params={"batch_limit": 0}, timeout=10).status_code == 422
        assert requests.head(f"{base_url}/subscriptions/{uuid.uuid4()}/events",
                             timeout=10).status_code == 404
    finally:
        stream.vanish()


def test_a_client_that_stops_reading_loses_its_partitions_at_commit_timeout(
        base_url, subscriptions):
    name = backlog_event_type(base_url)
    sid = subscribe(subscriptions, [name])
    stuck = stuck_client(int(base_url.rsplit(":", 1)[1]), f"/subscriptions/{sid}/events?"
                         "batch_limit=100&max_uncommitted_events=1000&commit_timeout=1")
    started = time.monotonic()
    try:
        # Its writes wait on a client that reads (and commits) nothing: before, it
        # held the partition for as long as the client kept its connection.
        first_200(lambda: open_stream(base_url, sid), timeout=20,
                  what="the partition freed").close()
        assert time.monotonic() - started < 1 + LAST_WRITE_S + 5
    finally:
        stuck.close()
        requests.delete(f"{base_url}/subscriptions/{sid}")
        requests.delete(f"{base_url}/event-types/{name}")


def test_direct_assignment_takes_the_partitions_asked_for(base_url, default_storage,
                                                          event_types, subscriptions):
    name = event_types(2)
    sid = subscribe(subscriptions, [name])
    auto = StreamClient(base_url, sid, batch_flush_timeout=1)
    direct = StreamClient(base_url, sid, {"partitions": [{"event_type": name, "partition": "1"}],
                                          "batch_flush_timeout": 1})
    try:
        # The auto stream held both; it had sent nothing, so partition 1 moves at once.
        wait_until(lambda: {p["partition"]: (p.get("stream_id"), p.get("assignment_type"))
                            for p in stats(base_url, sid)} == {
            "0": (auto.stream_id, "auto"), "1": (direct.stream_id, "direct")})
        publish_numbered(base_url, name, 1, 0, 1)
        batch = direct.events_batch()
        assert batch["cursor"]["partition"] == "1" and events_of([batch]) == [0]
        taken = assert_problem(open_stream(base_url, sid, {"partitions": [
            {"event_type": name, "partition": "1"}]}), 409)
        assert "directly" in taken["detail"]
    finally:
        auto.vanish()
        direct.vanish()


def test_a_chunked_body_asks_for_partitions_as_one_with_a_length_does(
        base_url, default_storage, event_types, subscriptions):
    # Clients that stream their request bodies send them chunked, without a length.
    name = event_types(2)
    sid = subscribe(subscriptions, [name])
    body = json.dumps({"partitions": [{"event_type": name, "partition": "1"}],
                       "batch_flush_timeout": 1}).encode()
    response = requests.post(f"{base_url}/subscriptions/{sid}/events", data=iter([body]),
                             headers={"Content-Type": "application/json"}, stream=True,
                             timeout=30)
    assert "Content-Length" not in response.request.headers
    client = StreamClient(base_url, sid, response=response)
    try:
        held = {p["partition"]: (p.get("stream_id"), p.get("assignment_type"))
                for p in stats(base_url, sid) if p["state"] != "unassigned"}
        assert held == {"1": (client.stream_id, "direct")}
    finally:
        client.vanish()


def test_max_uncommitted_events_pauses_until_a_commit(base_url, default_storage, event_types,
                                                      subscriptions):
    name = event_types(1)
    publish_numbered(base_url, name, 0, 0, 6)
    sid = subscribe(subscriptions, [name])
    client = StreamClient(base_url, sid, batch_limit=2, max_uncommitted_events=3,
                          batch_flush_timeout=1)
    try:
        first = client.events_batch()
        second = client.events_batch()
        assert events_of([first, second]) == [0, 1, 2]  # the second batch stops at the limit
        assert "events" not in client.batch()  # paused: only keep-alives
        assert client.commit(first["cursor"]).status_code == 204
        assert events_of([client.events_batch()]) == [3, 4]
    finally:
        client.vanish()


def test_a_stream_that_does_not_commit_in_time_is_closed_and_its_partitions_freed(
        base_url, event_types, subscriptions):
    name = event_types(1)
    publish_numbered(base_url, name, 0, 0, 1)
    sid = subscribe(subscriptions, [name])
    client = StreamClient(base_url, sid, commit_timeout=1, batch_flush_timeout=1)
    batches = client.until_end()
    assert events_of(batches) == [0]
    assert "commit_timeout" in batches[-1]["info"]["debug"]
    assert wait_until(lambda: stats(base_url, sid)[0]["state"] == "unassigned")
    again = StreamClient(base_url, sid, batch_flush_timeout=1)
    try:
        assert events_of([again.events_batch()]) == [0]  # not committed: sent again
    finally:
        again.vanish()


def test_a_dropped_connection_frees_its_partitions(base_url, event_types, subscriptions):
    sid = subscribe(subscriptions, [event_types(2)])
    client = StreamClient(base_url, sid, batch_flush_timeout=1)
    assert {p["stream_id"] for p in stats(base_url, sid)} == {client.stream_id}
    client.vanish()
    wait_until(lambda: all(p["state"] == "unassigned" for p in stats(base_url, sid)),
               what="the partitions of the dropped stream being freed")
    StreamClient(base_url, sid).vanish()  # a new stream gets them


def test_a_client_that_disconnects_still_commits_what_it_was_sent(base_url, event_types,
                                                                  subscriptions):
    # 004: "If the connection is closed for some reason then the client still has 60
    # seconds to commit the events it received". Before, it got a 422 and the events
    # again.
    name = event_types(1)
    publish_numbered(base_url, name, 0, 0, 2)
    sid = subscribe(subscriptions, [name])
    client = StreamClient(base_url, sid, max_uncommitted_events=1, batch_flush_timeout=1)
    batch = client.events_batch()
    client.vanish()
    # Refused (409) while the first stream is open; once the broker saw its client
    # leave, the next stream waits for the partition until it is committed.
    again = connect(base_url, sid, batch_flush_timeout=1)
    try:
        assert client.commit(batch["cursor"]).status_code == 204
        assert events_of([again.events_batch()]) == [1]
        assert stats(base_url, sid)[0]["unconsumed_events"] == 1
    finally:
        again.vanish()


def test_after_a_disconnect_each_partition_moves_on_once_committed(base_url, event_types,
                                                                    subscriptions):
    # 004: once the first client committed a partition, "the data from this partition
    # will be immediately streamed to second client". Before, a client that left gave
    # up its session at once; one whose stream ended on a limit held every partition
    # until all were committed.
    name = event_types(2)
    publish_numbered(base_url, name, 0, 0, 1)
    publish_numbered(base_url, name, 1, 10, 1)
    sid = subscribe(subscriptions, [name])
    first = StreamClient(base_url, sid, max_uncommitted_events=2, batch_flush_timeout=1)
    batches = {}
    while len(batches) < 2:
        batch = first.events_batch()
        batches[batch["cursor"]["partition"]] = batch
    publish_numbered(base_url, name, 0, 1, 1)  # the window is full: not sent
    first.vanish()
    second = connect(base_url, sid, batch_flush_timeout=1)
    try:
        wait_until(lambda: {p["state"] for p in stats(base_url, sid)} == {"reassigning"},
                   what="both partitions heading to the second stream")
        assert first.commit(batches["0"]["cursor"]).status_code == 204
        assert events_of([second.events_batch()]) == [1]
        by_partition = {p["partition"]: p for p in stats(base_url, sid)}
        assert by_partition["0"]["stream_id"] == second.stream_id
        # Partition 1's event is not committed: it waits for the first client.
        assert by_partition["1"]["state"] == "reassigning"
        assert by_partition["1"]["stream_id"] == first.stream_id
    finally:
        second.vanish()


def test_the_commit_window_of_a_client_that_left_counts_from_the_send(
        base_url, event_types, subscriptions):
    # 004: the client has its commit_timeout "from the moment when the events were
    # sent", not from when the connection closed.
    name = event_types(1)
    publish_numbered(base_url, name, 0, 0, 1)
    sid = subscribe(subscriptions, [name])
    client = StreamClient(base_url, sid, commit_timeout=4, batch_flush_timeout=1)
    batch = client.events_batch()
    sent = time.monotonic()
    time.sleep(3)
    client.vanish()
    time.sleep(max(0.0, sent + 5.5 - time.monotonic()))
    # Counted from the close, the window would run until ~7 s after the send.
    assert_problem(client.commit(batch["cursor"]), 422)
    again = connect(base_url, sid, batch_flush_timeout=1)
    try:
        assert events_of([again.events_batch()]) == [0]  # sent again
    finally:
        again.vanish()


def test_deleting_the_subscription_ends_its_streams(base_url, event_types, subscriptions):
    sid = subscribe(subscriptions, [event_types(1)])
    client = StreamClient(base_url, sid, batch_flush_timeout=1)
    assert requests.delete(f"{base_url}/subscriptions/{sid}").status_code == 204
    client.until_end()
    assert_problem(open_stream(base_url, sid), 404)


def test_the_list_shows_who_streams_each_partition_with_show_status(base_url, event_types,
                                                                    subscriptions):
    name = event_types(2)
    sid = subscribe(subscriptions, [name])
    application = requests.get(f"{base_url}/subscriptions/{sid}").json()["owning_application"]

    def listed(**params) -> dict:
        response = requests.get(f"{base_url}/subscriptions",
                                params={"owning_application": application, **params})
        assert response.status_code == 200, response.text
        [item] = response.json()["items"]
        return item

    assert "status" not in listed()
    assert listed(show_status="true")["status"] == [{"event_type": name, "partitions": [
        {"partition": "0", "state": "unassigned"}, {"partition": "1", "state": "unassigned"}]}]
    client = StreamClient(base_url, sid)
    try:
        assert listed(show_status="true")["status"][0]["partitions"] == [
            {"partition": p, "state": "assigned", "stream_id": client.stream_id,
             "assignment_type": "auto"} for p in ("0", "1")]
    finally:
        client.vanish()


def test_a_stream_goes_on_after_events_it_had_not_read_were_removed(base_url, pool, event_types,
                                                                   subscriptions):
    """Retention removed the next events before the stream read them: it goes on with the
    oldest there is, each cursor its last event's. Before, every run past the gap was
    dropped, and the stream sent keep-alives until the client reconnected."""
    name = event_types(1)
    publish_numbered(base_url, name, 0, 0, 30)
    sid = subscribe(subscriptions, [name])
    # A first stream sets the subscription's offsets (before event 0) and commits nothing.
    first = StreamClient(base_url, sid, batch_limit=1, stream_limit=1, commit_timeout=1)
    assert events_of(first.until_end()) == [0]
    expire(pool, name, 0, 15)
    # The window counts positions since the last commit, the removed ones too.
    opened = first_200(lambda: open_stream(base_url, sid, batch_limit=5, stream_limit=15,
                                           max_uncommitted_events=100,
                                           batch_flush_timeout=1, stream_timeout=10),
                       timeout=15, what="the partition free again")
    batches = StreamClient(base_url, sid, response=opened).until_end()
    assert events_of(batches) == list(range(15, 30))
    assert [batch["cursor"]["offset"] for batch in batches if batch.get("events")] == [
        f"001-0001-{position:018d}" for position in (19, 24, 29)]
