"""SIGTERM to gunicorn's master, as Kubernetes and Docker stop a container: open
streams end cleanly within ``graceful_timeout`` and publishes in flight finish."""

from __future__ import annotations

import json
import signal
import time
import uuid

import requests

from app.problems import RETRY_AFTER_S
from deploy.localstack import free_port
from tests.api.conftest import start_gunicorn, stop_gunicorn, wait_until_serving
from tests.helpers.broker import business_event, new_event_type, post
from tests.helpers.raw_http import RawConnection

# Long enough that ending "well before it" (half of it) tells a clean shutdown from a
# worker kept until the timeout, even on a loaded machine.
GRACEFUL_TIMEOUT_S = 20
ONE_PARTITION = {"messages_per_minute": 100, "message_size": 100,
                 "read_parallelism": 1, "write_parallelism": 1}


def amounts(lines: list[dict]) -> list[int]:
    return [event["amount"] for line in lines for event in line.get("events", [])]


def open_stream(port: int, path: str, headers: dict[str, str] | None = None) -> RawConnection:
    connection = RawConnection(port)
    connection.request_head("GET", path, headers or {})
    status, response_headers = connection.head()
    assert status == 200
    assert response_headers["content-type"] == "application/x-json-stream"
    return connection


def stored_amounts(base_url: str, name: str, count: int) -> list[int]:
    response = requests.get(
        f"{base_url}/event-types/{name}/events",
        params={"batch_limit": count, "stream_limit": count},
        headers={"X-Nakadi-Cursors": '[{"partition": "0", "offset": "begin"}]'}, timeout=15)
    assert response.status_code == 200, response.text
    return amounts([json.loads(line) for line in response.iter_lines() if line])


def test_sigterm_ends_streams_with_a_complete_last_batch_and_finishes_publishes(
        base_url, server_env, default_storage, tmp_path):
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    log = tmp_path / "gunicorn.log"
    server = start_gunicorn(server_env, port, log, GRACEFUL_TIMEOUT_S)
    subscription = None
    try:
        wait_until_serving(server, url, log)
        # Set up through the session's server (same stack): a connection the test left
        # open to the server under test would hold its worker until the timeout.
        name = new_event_type(base_url, default_statistic=ONE_PARTITION)
        assert post(base_url, name, [business_event(n) for n in range(3)]).status_code == 200
        created = requests.post(f"{base_url}/subscriptions", json={
            "owning_application": f"app-{uuid.uuid4().hex[:8]}", "event_types": [name],
            "read_from": "begin"}, timeout=15)
        assert created.status_code == 201, created.text
        subscription = created.json()["id"]

        # Two streams with batches of 2: each sends events 0 and 1 at once and holds
        # event 2 (read with them) until its flush timeout, 30 s away.
        low_level = open_stream(port, f"/event-types/{name}/events?batch_limit=2"
                                "&batch_flush_timeout=30",
                                {"X-Nakadi-Cursors": '[{"partition": "0", "offset": "begin"}]'})
        low_lines = low_level.lines()
        assert amounts([json.loads(next(low_lines))]) == [0, 1]
        consumer = open_stream(port, f"/subscriptions/{subscription}/events?batch_limit=2"
                               "&batch_flush_timeout=30")
        consumer_lines = consumer.lines()
        seen: list[dict] = []
        while amounts(seen) != [0, 1]:
            seen.append(json.loads(next(consumer_lines)))

        # A publish in flight: the worker serves it (the connection served a request
        # before) and waits for the rest of its body.
        publisher = RawConnection(port)
        publisher.request_head("GET", "/health", {})
        assert publisher.response()[0] == 200
        body = json.dumps([business_event(n) for n in range(3, 6)]).encode()
        publisher.request_head("POST", f"/event-types/{name}/events",
                               {"Content-Type": "application/json",
                                "Content-Length": str(len(body))})
        publisher.send(body[:len(body) // 2])
        # An idle keep-alive connection, as load balancers keep them.
        idle = RawConnection(port)
        idle.request_head("GET", "/health", {})
        assert idle.response()[0] == 200

        server.send_signal(signal.SIGTERM)
        signalled = time.monotonic()

        # The low-level stream sends what it holds as a last whole batch, ends its
        # chunked body and closes the connection.
        last = [json.loads(line) for line in low_lines]
        assert amounts(last) == [2]
        assert last[-1]["cursor"]["offset"].endswith("000000000000000002")
        assert low_level.closed_by_server(within=2)
        # The subscription stream says why it ends, in a whole line, and closes; its
        # uncommitted event goes to the next consumer.
        last = [json.loads(line) for line in consumer_lines]
        assert "shutting down" in last[-1]["info"]["debug"]
        assert consumer.closed_by_server(within=2)
        assert time.monotonic() - signalled < GRACEFUL_TIMEOUT_S / 2

        publisher.send(body[len(body) // 2:])
        status, headers, _ = publisher.response()
        assert status == 200
        assert headers["connection"] == "close"
        assert publisher.closed_by_server(within=2)
        # A request on the idle connection is still served, and the connection closed.
        late = json.dumps([business_event(n) for n in range(6, 8)]).encode()
        idle.request_head("POST", f"/event-types/{name}/events",
                          {"Content-Type": "application/json", "Content-Length": str(len(late))})
        idle.send(late)
        status, headers, _ = idle.response()
        assert (status, headers["connection"]) == (200, "close")
        assert idle.closed_by_server(within=2)

        # With no connection left, every worker exits at once: well before the graceful
        # timeout, when gunicorn would cut what is left.
        assert server.wait(GRACEFUL_TIMEOUT_S + 5) == 0
        assert time.monotonic() - signalled < GRACEFUL_TIMEOUT_S / 2
        assert "graceful timeout" not in log.read_text().lower()
        # Every acknowledged event is stored: the session's server reads them all.
        assert stored_amounts(base_url, name, 8) == list(range(8))
    finally:
        stop_gunicorn(server)
        if subscription is not None:
            requests.delete(f"{base_url}/subscriptions/{subscription}", timeout=15)


def test_a_stream_asked_for_after_sigterm_is_a_503_not_an_empty_stream(
        base_url, server_env, tmp_path):
    # gunicorn's gevent workers close their listeners up to a second after SIGTERM.
    # Before, a stream opened meanwhile was a 200 that ended at once without a line,
    # and a client reconnecting at once went round on them (the operations audit).
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    log = tmp_path / "gunicorn.log"
    server = start_gunicorn(server_env, port, log, GRACEFUL_TIMEOUT_S)
    name = new_event_type(base_url, default_statistic=ONE_PARTITION)
    try:
        wait_until_serving(server, url, log)
        # An open stream keeps its worker running after SIGTERM.
        held = open_stream(port, f"/event-types/{name}/events?batch_flush_timeout=1")
        server.send_signal(signal.SIGTERM)
        # The master passes the signal on within milliseconds; a stream asked for
        # before a worker had it is served as usual.
        time.sleep(0.05)
        answers = []
        until = time.monotonic() + 0.5
        while time.monotonic() < until:
            try:
                answer = requests.get(f"{url}/event-types/{name}/events", timeout=5)
            except requests.RequestException:
                continue  # the listeners closed: the client goes elsewhere
            answers.append((answer.status_code, answer.headers.get("Content-Type"),
                            answer.headers.get("Retry-After")))
        assert answers, "no request reached a worker before its listener closed"
        assert set(answers) == {(503, "application/problem+json", str(RETRY_AFTER_S))}, answers
        held.close()
    finally:
        stop_gunicorn(server)
        requests.delete(f"{base_url}/event-types/{name}", timeout=15)
