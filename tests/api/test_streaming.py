"""The low-level event stream over HTTP, on each storage engine."""

from __future__ import annotations

import json
import signal
import socket
import time
import uuid

import pytest
import requests

from app.streaming.connection import LAST_WRITE_S
from deploy.localstack import free_port
from tests.api.conftest import (
    assert_problem,
    start_gunicorn,
    stop_gunicorn,
    wait_until_serving,
)
from tests.helpers.broker import backlog_event_type, new_event_type
from tests.helpers.broker import publish_to as publish
from tests.helpers.raw_http import stuck_client
from tests.helpers.storage import expire
from tests.helpers.waiting import first_200


@pytest.fixture
def event_type(base_url, default_storage):
    """An event type with 2 partitions whose events say where they go."""
    name = new_event_type(base_url, partition_strategy="user_defined", default_statistic={
        "messages_per_minute": 10, "message_size": 100,
        "read_parallelism": 2, "write_parallelism": 2})
    yield name
    requests.delete(f"{base_url}/event-types/{name}")


def open_stream(base_url, name, cursors=None, **params) -> requests.Response:
    headers = {"X-Nakadi-Cursors": json.dumps(cursors)} if cursors is not None else {}
    return requests.get(f"{base_url}/event-types/{name}/events", params=params,
                        headers=headers, stream=True, timeout=15)


def read_batches(response: requests.Response) -> list[dict]:
    """Every batch until the server ends the stream."""
    return [json.loads(line) for line in response.iter_lines() if line]


def amounts(batches: list[dict]) -> list[int]:
    return [event["amount"] for batch in batches for event in batch.get("events", [])]


def begin(*partitions: int) -> list[dict]:
    return [{"partition": str(p), "offset": "begin"} for p in partitions]


def test_stream_from_begin_delivers_every_event_with_cursors(base_url, event_type):
    publish(base_url, event_type, 0, 5)
    response = open_stream(base_url, event_type, begin(0), batch_limit=2, stream_limit=5)
    assert response.status_code == 200
    assert response.headers["Content-Type"] == "application/x-json-stream"
    batches = read_batches(response)
    assert amounts(batches) == [0, 1, 2, 3, 4]
    assert [len(b["events"]) for b in batches] == [2, 2, 1]
    assert [b["cursor"] for b in batches] == [
        {"partition": "0", "offset": f"001-0001-{n:018d}"} for n in (1, 3, 4)]
    event = batches[0]["events"][0]
    assert event["metadata"]["event_type"] == event_type
    assert event["metadata"]["partition"] == "0"


def test_resuming_from_a_batch_cursor_loses_and_repeats_nothing(base_url, event_type):
    publish(base_url, event_type, 1, 6)
    first = read_batches(open_stream(base_url, event_type, begin(1), batch_limit=4,
                                     stream_limit=4))
    assert amounts(first) == [0, 1, 2, 3]
    publish(base_url, event_type, 1, 2, start=6)
    resumed = open_stream(base_url, event_type, [first[-1]["cursor"]], batch_limit=3,
                          stream_limit=4)
    assert resumed.status_code == 200, resumed.text
    rest = read_batches(resumed)
    assert amounts(rest) == [4, 5, 6, 7]


@pytest.mark.parametrize("batch_limit", [1, 2, 4, 11, 22])
def test_batches_cut_across_and_inside_stored_batches_lose_and_repeat_nothing(
        base_url, event_type, batch_limit):
    """Events published together are read together (a chunk on postgres) and cut
    where batch_limit falls; every event arrives once, in order, whole."""
    start = 0
    for count in (3, 1, 7, 2, 5):
        publish(base_url, event_type, 0, count, start=start)
        start += count
    publish(base_url, event_type, 1, 4)
    batches = read_batches(open_stream(base_url, event_type, begin(0, 1),
                                       batch_limit=batch_limit, stream_limit=22))
    for partition, expected in (("0", list(range(18))), ("1", list(range(4)))):
        mine = [b for b in batches if b["cursor"]["partition"] == partition and "events" in b]
        assert amounts(mine) == expected
        assert all(len(b["events"]) <= batch_limit for b in mine)
        assert all(e["metadata"]["partition"] == partition for b in mine for e in b["events"])
        sent = 0
        for batch in mine:
            sent += len(batch["events"])
            assert batch["cursor"]["offset"] == f"001-0001-{sent - 1:018d}"


def test_without_cursors_the_stream_starts_at_the_newest_events(base_url, event_type):
    publish(base_url, event_type, 0, 3)
    # The stream's start positions are fixed before its headers come back.
    response = open_stream(base_url, event_type, batch_flush_timeout=1, stream_limit=1)
    publish(base_url, event_type, 1, 1, start=100)
    assert amounts(read_batches(response)) == [100]


def test_headers_come_before_the_first_batch(base_url, event_type):
    started = time.monotonic()
    response = open_stream(base_url, event_type, begin(0), batch_flush_timeout=10,
                           stream_timeout=10)
    assert response.status_code == 200
    assert time.monotonic() - started < 3
    assert response.headers["X-Flow-Id"]
    response.close()


def test_batches_flush_at_batch_limit_or_after_the_flush_timeout(base_url, event_type):
    publish(base_url, event_type, 0, 7)
    response = open_stream(base_url, event_type, begin(0), batch_limit=3,
                           batch_flush_timeout=2, stream_timeout=4)
    started = time.monotonic()
    lines = response.iter_lines()
    arrivals = []
    for line in lines:
        if line:
            batch = json.loads(line)
            arrivals.append((time.monotonic() - started, len(batch.get("events", []))))
            if len(arrivals) == 3:
                break
    response.close()
    assert [count for _, count in arrivals] == [3, 3, 1]
    assert arrivals[1][0] < 1.0, "full batches go out at once"
    assert 1.5 < arrivals[2][0] < 3.5, "the partial batch waits for the flush timeout"


def test_keep_alives_carry_the_cursor_and_the_limit_ends_the_stream(base_url, event_type):
    publish(base_url, event_type, 0, 2)
    started = time.monotonic()
    batches = read_batches(open_stream(
        base_url, event_type, [{"partition": "0", "offset": "001-0001-000000000000000001"},
                               {"partition": "1", "offset": "begin"}],
        batch_flush_timeout=1, stream_keep_alive_limit=2))
    elapsed = time.monotonic() - started
    assert all("events" not in batch for batch in batches)
    assert sorted(json.dumps(b["cursor"], sort_keys=True) for b in batches) == sorted(
        [json.dumps({"offset": "001-0001-000000000000000001", "partition": "0"},
                    sort_keys=True)] * 2
        + [json.dumps({"offset": "001-0001--1", "partition": "1"}, sort_keys=True)] * 2)
    assert 1.5 < elapsed < 5


def test_stream_timeout_flushes_pending_events_and_ends(base_url, event_type):
    publish(base_url, event_type, 0, 3)
    started = time.monotonic()
    batches = read_batches(open_stream(base_url, event_type, begin(0), batch_limit=100,
                                       batch_flush_timeout=2, stream_timeout=2))
    assert 1.5 < time.monotonic() - started < 5
    assert amounts(batches) == [0, 1, 2]


def test_stream_limit_counts_events_over_all_partitions(base_url, event_type):
    publish(base_url, event_type, 0, 4)
    publish(base_url, event_type, 1, 4, start=10)
    batches = read_batches(open_stream(base_url, event_type, begin(0, 1), batch_limit=3,
                                       stream_limit=6, batch_flush_timeout=1))
    assert len(amounts(batches)) == 6
    assert all(len(b["events"]) <= 3 for b in batches if "events" in b)


def test_gzip_stream(base_url, event_type):
    publish(base_url, event_type, 1, 3)
    response = requests.get(f"{base_url}/event-types/{event_type}/events",
                            params={"stream_limit": 3, "batch_limit": 3},
                            headers={"X-Nakadi-Cursors": json.dumps(begin(1)),
                                     "Accept-Encoding": "gzip"}, stream=True, timeout=15)
    assert response.headers["Content-Encoding"] == "gzip"
    assert amounts(read_batches(response)) == [0, 1, 2]


def test_too_many_streams_on_a_partition_is_a_429_and_closed_streams_free_slots(
        base_url, event_type):
    # The test server allows 3 streams per partition.
    streams = [open_stream(base_url, event_type, begin(0), batch_flush_timeout=30)
               for _ in range(3)]
    assert all(s.status_code == 200 for s in streams)
    refused = open_stream(base_url, event_type, begin(0, 1))
    detail = assert_problem(refused, 429)["detail"]
    assert "partition 0" in detail
    other_partition = open_stream(base_url, event_type, begin(1), batch_flush_timeout=30)
    assert other_partition.status_code == 200
    other_partition.close()
    streams[0].close()  # the client goes away; the server notices within a couple of seconds

    first_200(lambda: open_stream(base_url, event_type, begin(0), batch_flush_timeout=30),
              timeout=5, what="the closed stream's slot being freed").close()
    for stream in streams[1:]:
        stream.close()


def test_a_head_answers_the_stream_headers_and_claims_no_slot(base_url, event_type):
    url = f"{base_url}/event-types/{event_type}/events"
    for _ in range(4):  # more than the 3 streams a partition allows here
        head = requests.head(url, headers={"Accept-Encoding": "gzip"}, timeout=10)
        assert head.status_code == 200
        assert head.headers["Content-Type"] == "application/x-json-stream"
        assert head.headers["Content-Encoding"] == "gzip"
        assert "Content-Length" not in head.headers and head.content == b""
    streams = [open_stream(base_url, event_type, begin(0), batch_flush_timeout=30)
               for _ in range(3)]
    assert [s.status_code for s in streams] == [200, 200, 200]
    for stream in streams:
        stream.close()
    assert requests.head(url, params={"batch_limit": "0"}, timeout=10).status_code == 422


def test_a_client_that_stops_reading_is_cut_off_at_stream_timeout(base_url):
    name = backlog_event_type(base_url)
    port = int(base_url.rsplit(":", 1)[1])
    path = f"/event-types/{name}/events?batch_limit=100&stream_timeout=1&batch_flush_timeout=1"
    cursors = {"X-Nakadi-Cursors": json.dumps(begin(0))}
    stuck = [stuck_client(port, path, cursors) for _ in range(3)]  # all the slots here
    started = time.monotonic()
    try:
        # Their writes wait on clients that read nothing: before, they held the
        # partition's slots for as long as the clients kept their connections.
        first_200(lambda: open_stream(base_url, name, begin(0), stream_limit=1),
                  timeout=20, what="a slot freed").close()
        assert time.monotonic() - started < 1 + LAST_WRITE_S + 5
    finally:
        for client in stuck:
            client.close()
        requests.delete(f"{base_url}/event-types/{name}")


@pytest.mark.parametrize(("params", "cursors", "detail"), [
    ({"batch_limit": "0"}, None, "batch_limit"),
    ({"batch_limit": "x"}, None, "batch_limit"),
    ({"stream_limit": "-1"}, None, "stream_limit"),
    ({"batch_limit": "5", "stream_limit": "3"}, None, "stream_limit"),
    ({"batch_flush_timeout": "10", "stream_timeout": "5"}, None, "stream_timeout"),
    ({"stream_keep_alive_limit": "1.5"}, None, "stream_keep_alive_limit"),
    ({}, "[{not json", "X-Nakadi-Cursors"),
    ({}, "[]", "X-Nakadi-Cursors"),
    ({}, '{"partition": "0", "offset": "begin"}', "X-Nakadi-Cursors"),
    ({}, '[{"partition": "7", "offset": "begin"}]', "partition '7' does not exist"),
    ({}, '[{"partition": 0, "offset": "begin"}]', "partition and offset"),
    ({}, '[{"partition": "0", "offset": "12"}]', "not of the form"),
    ({}, '[{"partition": "0", "offset": "001-0001-000000000000000050"}]', "does not exist"),
    ({}, '[{"partition": "0", "offset": "001-0002-000000000000000000"}]', "timeline 2"),
    ({}, '[{"partition": "0", "offset": "begin"}, {"partition": "0", "offset": "begin"}]',
     "more than one cursor"),
])
def test_bad_stream_requests_are_422s_naming_the_problem(base_url, event_type, params,
                                                         cursors, detail):
    headers = {"X-Nakadi-Cursors": cursors} if cursors is not None else {}
    response = requests.get(f"{base_url}/event-types/{event_type}/events", params=params,
                            headers=headers, timeout=10)
    assert detail in assert_problem(response, 422)["detail"]


def test_unknown_event_type_stream_is_a_404(base_url):
    response = requests.get(f"{base_url}/event-types/no.such-{uuid.uuid4().hex[:6]}/events",
                            timeout=10)
    assert_problem(response, 404)


def test_worker_shutdown_ends_streams_cleanly_with_pending_events(server_env, event_type,
                                                                  tmp_path):
    """SIGTERM: open streams flush what they hold and end, well before the graceful timeout."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    server = start_gunicorn(server_env, port, tmp_path / "gunicorn.log")
    try:
        wait_until_serving(server, url, tmp_path / "gunicorn.log")
        publish(url, event_type, 0, 3)
        # Batches of 2: events 0 and 1 come at once; event 2, read with them, is held
        # until its flush, 30 s away.
        response = open_stream(url, event_type, begin(0), batch_limit=2,
                               batch_flush_timeout=30)
        assert response.status_code == 200
        lines = (json.loads(line) for line in response.iter_lines() if line)
        first = next(lines)
        assert amounts([first]) == [0, 1]
        server.send_signal(signal.SIGTERM)
        started = time.monotonic()
        rest = list(lines)  # raises if the stream is cut instead of ended
        assert time.monotonic() - started < 4
        assert amounts(rest) == [2]
    finally:
        stop_gunicorn(server)


def test_deleting_the_event_type_ends_its_streams(base_url, event_type):
    response = open_stream(base_url, event_type, begin(0, 1), batch_flush_timeout=30)
    assert response.status_code == 200
    assert requests.delete(f"{base_url}/event-types/{event_type}").status_code == 200
    started = time.monotonic()
    assert read_batches(response) == []
    assert time.monotonic() - started < 3


# Retention is imitated by deleting rows, which only the postgres engine allows.
@pytest.mark.parametrize("default_storage", ["postgres"], indirect=True)
def test_expired_offsets_are_422s_and_begin_starts_at_the_oldest_event(base_url, pool,
                                                                       event_type):
    publish(base_url, event_type, 0, 5)
    expire(pool, event_type, 0, 3)
    expired = open_stream(base_url, event_type,
                          [{"partition": "0", "offset": "001-0001-000000000000000001"}])
    assert "has expired" in assert_problem(expired, 422)["detail"]
    from_begin = read_batches(open_stream(base_url, event_type, begin(0), batch_limit=2,
                                          stream_limit=2))
    assert amounts(from_begin) == [3, 4]
    just_before_oldest = read_batches(open_stream(
        base_url, event_type, [{"partition": "0", "offset": "001-0001-000000000000000002"}],
        batch_limit=2, stream_limit=2))
    assert amounts(just_before_oldest) == [3, 4]


def read_until_closed(base_url: str, path: str, headers: dict[str, str]) -> bytes:
    """What a client that reads the raw socket until the server closes it receives
    for one request; a server that keeps the connection open fails the test by the
    socket timeout."""
    host, port = base_url.removeprefix("http://").split(":")
    request_headers = "".join(f"{name}: {value}\r\n" for name, value in headers.items())
    with socket.create_connection((host, int(port)), timeout=10) as connection:
        connection.sendall(f"GET {path} HTTP/1.1\r\nHost: {host}\r\n{request_headers}\r\n"
                           .encode())
        received = b""
        while chunk := connection.recv(65536):
            received += chunk
    return received


def test_the_server_closes_the_connection_when_a_stream_ends(base_url, event_type):
    publish(base_url, event_type, 0, 3)
    received = read_until_closed(
        base_url, f"/event-types/{event_type}/events?batch_limit=3&stream_limit=3",
        {"X-Nakadi-Cursors": json.dumps(begin(0))})
    head, _, body = received.partition(b"\r\n\r\n")
    # Not announced: a client that reads the stream from the connection's socket
    # (pyNakadi) finds none once Python's http.client was told the connection closes.
    assert b"Connection: close" not in head.split(b"\r\n")
    assert b"Transfer-Encoding: chunked" in head.split(b"\r\n")
    assert body.endswith(b"0\r\n\r\n")  # the stream ended properly before the close
    assert b'"amount":2' in body
