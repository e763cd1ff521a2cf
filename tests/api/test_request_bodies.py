"""Request bodies as real clients send them: gzip on every POST with a JSON body
(fahrschein compresses all its POSTs once told to), ``x-gzip``, several gzip
members, and bodies over the size limit."""

from __future__ import annotations

import gzip
import json
import socket
import time
import uuid

import pytest
import requests

from app.config import Settings
from deploy.localstack import free_port
from tests.api.conftest import (
    assert_problem,
    start_gunicorn,
    stop_gunicorn,
    wait_until_serving,
)
from tests.helpers.raw_http import RawConnection

GZIP = {"Content-Type": "application/json", "Content-Encoding": "gzip"}


@pytest.fixture
def event_type(base_url):
    """A business event type with one partition that holds three events."""
    name = f"bodies.test-{uuid.uuid4().hex[:10]}"
    response = requests.post(f"{base_url}/event-types", json={
        "name": name, "owning_application": "audit", "category": "business",
        "enrichment_strategies": ["metadata_enrichment"], "partition_strategy": "random",
        "schema": {"type": "json_schema", "schema": "{}"}})
    assert response.status_code == 201, response.text
    assert publish(base_url, name, json.dumps(events(3)).encode(),
                   {"Content-Type": "application/json"}).status_code == 200
    yield name
    requests.delete(f"{base_url}/event-types/{name}")


def events(count: int) -> list[dict]:
    return [{"metadata": {"eid": str(uuid.uuid4()), "occurred_at": "2026-11-22T10:00:00Z"}}
            for _ in range(count)]


def publish(base_url: str, name: str, body: bytes, headers: dict[str, str]):
    return requests.post(f"{base_url}/event-types/{name}/events", data=body, headers=headers)


def newest_offset(base_url: str, name: str) -> str:
    return requests.get(f"{base_url}/event-types/{name}/partitions/0").json()[
        "newest_available_offset"]


@pytest.mark.parametrize(("operation", "body", "expected"), [
    ("cursors-lag", [{"partition": "0", "offset": "begin"}],
     lambda answer: answer[0]["unconsumed_events"] == 3),
    ("cursor-distances", [{"initial_cursor": {"partition": "0", "offset": "begin"},
                           "final_cursor": {"partition": "0", "offset": "BEGIN"}}],
     lambda answer: answer[0]["distance"] == 0),
    ("shifted-cursors", [{"partition": "0", "offset": "begin", "shift": 1}],
     lambda answer: answer[0]["partition"] == "0"),
])
def test_cursor_operations_accept_gzip_bodies(base_url, event_type, operation, body, expected):
    response = requests.post(f"{base_url}/event-types/{event_type}/{operation}",
                             data=gzip.compress(json.dumps(body).encode()), headers=GZIP)
    assert response.status_code == 200, response.text
    assert expected(response.json())


def test_x_gzip_is_gzip(base_url, event_type):
    before = newest_offset(base_url, event_type)
    response = publish(base_url, event_type, gzip.compress(json.dumps(events(2)).encode()),
                       {"Content-Type": "application/json", "Content-Encoding": "x-gzip"})
    assert response.status_code == 200, response.text
    assert newest_offset(base_url, event_type) > before


def test_every_gzip_member_is_read(base_url, event_type):
    """A gzip body may hold several members (concatenated streams); the body is all of them."""
    text = json.dumps(events(2)).encode()
    half = len(text) // 2
    body = gzip.compress(text[:half]) + gzip.compress(text[half:])
    assert publish(base_url, event_type, body, GZIP).status_code == 200
    lag = requests.post(f"{base_url}/event-types/{event_type}/cursors-lag",
                        json=[{"partition": "0", "offset": "begin"}]).json()
    assert lag[0]["unconsumed_events"] == 5


def test_a_body_of_too_many_gzip_members_is_a_400(base_url, event_type):
    body = gzip.compress(json.dumps(events(1)).encode()) + gzip.compress(b"") * 20_000
    detail = assert_problem(publish(base_url, event_type, body, GZIP), 400)["detail"]
    assert "members" in detail


def test_bytes_after_the_gzip_body_are_a_400(base_url, event_type):
    body = gzip.compress(json.dumps(events(1)).encode()) + b"trailing"
    assert "gzip" in assert_problem(publish(base_url, event_type, body, GZIP), 400)["detail"]


def test_a_body_over_the_limit_is_a_413_naming_the_limit(base_url, event_type):
    limit = Settings.from_env().max_batch_bytes
    zeros = b"[" + b" " * limit + b"]"
    for body, headers in ((gzip.compress(zeros), GZIP),
                          (zeros, {"Content-Type": "application/json"})):
        problem = assert_problem(publish(base_url, event_type, body, headers), 413)
        assert str(limit) in problem["detail"]


def test_bodies_other_than_event_batches_have_a_smaller_limit(base_url, event_type):
    """An event type or subscription is served again by every listing: a 40 MB
    description was stored, and every GET /event-types answered over 40 MB."""
    limit = Settings.from_env().max_body_bytes
    assert limit < Settings.from_env().max_batch_bytes
    name = f"bodies.test-{uuid.uuid4().hex[:10]}"
    huge = {"name": name, "owning_application": "audit", "category": "undefined",
            "description": "d" * limit, "schema": {"type": "json_schema", "schema": "{}"}}
    for method, path in (("POST", "/event-types"), ("PUT", f"/event-types/{event_type}"),
                         ("POST", "/subscriptions")):
        problem = assert_problem(requests.request(method, base_url + path, json=huge), 413)
        assert str(limit) in problem["detail"]
    assert requests.get(f"{base_url}/event-types/{name}").status_code == 404
    # A batch above that limit is still taken.
    batch = [dict(event, padding="p" * 1000) for event in events(limit // 1000 + 100)]
    body = json.dumps(batch).encode()
    assert len(body) > limit
    assert publish(base_url, event_type, body, {"Content-Type": "application/json"}
                   ).status_code == 200


@pytest.mark.parametrize("pad", [0, 1_000_000])  # read at once, and walked event by event
def test_a_batch_of_more_events_than_allowed_is_a_413_and_stores_nothing(base_url, event_type,
                                                                         pad):
    """A 10 MB body of tiny non-events held a worker for 7 s (its ZooKeeper connection
    dropped) and answered a 465 MB 422, an item per event."""
    limit = Settings.from_env().max_batch_events
    before = newest_offset(base_url, event_type)
    body = b"[" + b" " * pad + b",".join([b"1"] * (limit + 1)) + b"]"
    problem = assert_problem(publish(base_url, event_type, body,
                                     {"Content-Type": "application/json"}), 413)
    assert f"more than {limit} events" in problem["detail"]
    assert "NAKADI_MAX_BATCH_EVENTS" in problem["detail"]
    assert newest_offset(base_url, event_type) == before


@pytest.mark.parametrize("headers", [{}, {"Content-Encoding": "gzip"}])
def test_a_body_cut_short_of_its_content_length_is_a_400_and_stores_nothing(
        base_url, event_type, headers):
    body = json.dumps(events(2)).encode()
    if headers:
        body = gzip.compress(body)
    before = newest_offset(base_url, event_type)
    connection = RawConnection(int(base_url.rsplit(":", 1)[1]))
    try:
        connection.request_head("POST", f"/event-types/{event_type}/events", {
            "Content-Type": "application/json", **headers,
            "Content-Length": str(len(body) + 50)})
        connection.send(body)
        connection.sock.shutdown(socket.SHUT_WR)  # the client goes away 50 bytes short
        status, _, problem = connection.response()
    finally:
        connection.close()
    assert status == 400
    assert json.loads(problem)["status"] == 400
    assert newest_offset(base_url, event_type) == before


@pytest.mark.parametrize("framing", ["length", "chunked"])
def test_a_body_that_stops_arriving_is_a_408_and_the_connection_closes(
        base_url, server_env, event_type, tmp_path, framing):
    port = free_port()
    log = tmp_path / "gunicorn.log"
    server = start_gunicorn(server_env | {"NAKADI_REQUEST_BODY_TIMEOUT_S": "1"}, port, log)
    body = json.dumps(events(2)).encode()
    before = newest_offset(base_url, event_type)
    connection = None
    try:
        wait_until_serving(server, f"http://127.0.0.1:{port}", log)
        connection = RawConnection(port)
        head = {"Content-Type": "application/json"}
        if framing == "length":
            head["Content-Length"] = str(len(body))
            sent = body[:10]
        else:
            head["Transfer-Encoding"] = "chunked"
            sent = b"%x\r\n%s\r\n" % (10, body[:10])
        connection.request_head("POST", f"/event-types/{event_type}/events", head)
        connection.send(sent)  # and then nothing: before, the request waited for good
        started = time.monotonic()
        status, headers, problem = connection.response()
        assert time.monotonic() - started < 5
        assert (status, headers["connection"]) == (408, "close")
        assert "no byte came for 1 s" in json.loads(problem)["detail"]
        assert connection.closed_by_server(within=2)
    finally:
        if connection is not None:
            connection.close()
        stop_gunicorn(server)
    assert newest_offset(base_url, event_type) == before


def test_a_malformed_chunked_body_is_a_400_that_closes_the_connection(base_url, event_type):
    connection = RawConnection(int(base_url.rsplit(":", 1)[1]))
    try:
        connection.request_head("POST", f"/event-types/{event_type}/events", {
            "Content-Type": "application/json", "Transfer-Encoding": "chunked"})
        connection.send(b'5\r\n[{"a":1}]\r\n0\r\n\r\n')  # 9 bytes in a chunk of 5
        status, headers, problem = connection.response()
        # Before, the connection stayed open, and a request sent next on it went
        # unanswered: gunicorn could not find where the body ended and closed it.
        assert (status, headers["connection"]) == (400, "close")
        assert "malformed" in json.loads(problem)["detail"]
        assert connection.closed_by_server(within=2)
    finally:
        connection.close()
