"""A seeded fuzzing run against the session's real gunicorn: every endpoint of the
Flask app (read from its url_map, so a new endpoint is fuzzed without a change
here) gets hostile requests: bodies of the wrong type and shape, JSON that is not
standard, NUL characters, broken gzip, bad path values, query parameters and
headers. No request may get a 5xx, every 4xx must be a Problem, and no worker
may die.

Seeded (hypothesis' derandomize) and bounded: ``EXAMPLES`` requests per endpoint
and method, about a minute and a half for all of them.
"""

from __future__ import annotations

import http.client
import json
import re
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
import requests
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from werkzeug.routing import Rule

from app import create_app
from app.config import Settings
from tests.api.conftest import PROBLEM, Server, worker_pids
from tests.helpers import hostile
from tests.helpers.broker import ORDER_SCHEMA, business_event, new_event_type
from tests.helpers.waiting import wait_until

EXAMPLES = 60
"""Requests per endpoint and method: thousands over the whole API."""
STREAM_READ_S = 0.5
"""How long a stream that opened is read before the client leaves."""
SETTINGS_TABLES = {"nakadi_admins": "permission, data_type, value",
                   "blacklist": "type, name", "feature_toggles": "feature, enabled"}
ANY_METHOD = ["GET", "POST", "PUT", "PATCH", "DELETE"]


def _endpoints() -> list[tuple[Rule, str]]:
    app = create_app(Settings.from_env({}))  # builds clients lazily: nothing connects
    return sorted(((rule, method) for rule in app.url_map.iter_rules()
                   for method in sorted(rule.methods - {"HEAD", "OPTIONS"})),
                  key=lambda pair: (pair[0].rule, pair[1]))


ENDPOINTS = _endpoints()


@dataclass
class Resources:
    """Real things for the fuzzer to aim at, and what its requests created."""

    base_url: str
    event_type: str
    subscription: str
    offset: str
    created_event_types: list[str] = field(default_factory=list)
    created_subscriptions: list[str] = field(default_factory=list)

    def path_values(self, argument: str) -> list[str]:
        return {
            "name": [self.event_type], "partition": ["0", "1"],
            "version": ["latest", "1.0.0"], "subscription_id": [self.subscription],
            "blacklist_type": ["CONSUMER_APP", "CONSUMER_ET", "PRODUCER_APP", "PRODUCER_ET"],
        }.get(argument, [])

    def cursor(self, **extra: Any) -> dict:
        return {"partition": "0", "offset": self.offset, **extra}

    def templates(self, rule: str, method: str) -> list[Any]:
        """Valid bodies of the endpoint, which the fuzzer then breaks."""
        name = self.event_type
        event_type = {
            "name": name, "owning_application": "fuzz", "category": "business",
            "enrichment_strategies": ["metadata_enrichment"], "partition_strategy": "user_defined",
            "schema": {"type": "json_schema", "schema": json.dumps(ORDER_SCHEMA)},
            "default_statistic": {"messages_per_minute": 1, "message_size": 1,
                                  "read_parallelism": 2, "write_parallelism": 2},
        }
        event = business_event(1)
        event["metadata"]["partition"] = "0"
        authorization = {"admins": [{"data_type": "user", "value": "alice"}],
                         "readers": [{"data_type": "*", "value": "*"}]}
        item = {"event_type": name, "partition": "0", "offset": self.offset}
        return {
            ("/event-types", "POST"): [{**event_type, "name": f"fuzz.{uuid.uuid4().hex[:8]}"}],
            ("/event-types/<name>", "PUT"): [event_type],
            ("/event-types/<name>/schemas", "POST"): [event_type["schema"]],
            ("/event-types/<name>/events", "POST"): [[event], [event, event]],
            ("/event-types/<name>/cursor-distances", "POST"): [[{
                "initial_cursor": self.cursor(offset="begin"), "final_cursor": self.cursor()}]],
            ("/event-types/<name>/cursors-lag", "POST"): [[self.cursor()]],
            ("/event-types/<name>/shifted-cursors", "POST"): [[self.cursor(shift=-1)]],
            ("/subscriptions", "POST"): [{"owning_application": "fuzz", "event_types": [name],
                                          "read_from": "begin"}],
            ("/subscriptions/<subscription_id>", "PUT"): [{"authorization": authorization}],
            ("/subscriptions/<subscription_id>/events", "POST"): [{
                "partitions": [{"event_type": name, "partition": "0"}], "batch_limit": 1,
                "stream_timeout": 1}],
            ("/subscriptions/<subscription_id>/cursors", "POST"): [{
                "items": [{**item, "cursor_token": str(uuid.uuid4())}]}],
            ("/subscriptions/<subscription_id>/cursors", "PATCH"): [{
                "items": [{**item, "offset": "begin"}]}],
            ("/settings/admins", "POST"): [{"admins": authorization["admins"],
                                            "readers": authorization["readers"],
                                            "writers": authorization["admins"]}],
            ("/settings/features", "POST"): [{"feature": "disable_event_type_creation",
                                              "enabled": False}],
        }.get((rule, method), [])

    def real_strings(self) -> list[str]:
        return [self.event_type, self.subscription, self.offset, "0", "1", "true",
                json.dumps([self.cursor()]), str(uuid.uuid4())]


@st.composite
def hostile_requests(draw: st.DrawFn, rule: Rule, method: str,
                     resources: Resources) -> hostile.HostileRequest:
    def value(match: re.Match) -> str:
        real = resources.path_values(match.group(1))
        chosen = hostile.weighted(draw, (4 if real else 0, st.sampled_from(real or [""])),
                                  (1, hostile.text()))
        return hostile.quote_path(chosen)

    path = re.sub(r"<(?:[^:>]+:)?([^>]+)>", value, rule.rule)
    if draw(st.integers(0, 9)) == 0:
        method = draw(st.sampled_from(ANY_METHOD))
    reals = resources.real_strings()
    body = draw(hostile.bodies(resources.templates(rule.rule, method)))
    request = hostile.HostileRequest(method, path, draw(hostile.query(reals)),
                                     draw(hostile.headers(reals, body is not None)), body)
    if rule.rule.endswith("/events") and method == "GET" \
            and not any(name == "stream_timeout" for name, _ in request.query):
        request.query.append(("stream_timeout", "1"))
    return hostile.maybe_gzipped(request)


def send(base_url: str, request: hostile.HostileRequest) -> tuple[int, str, bytes]:
    """Status, Content-Type and body of the answer; an open stream is read briefly."""
    host, port = base_url.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=20)
    try:
        conn.putrequest(request.method, request.target(), skip_accept_encoding=True)
        for name, header in request.headers.items():
            conn.putheader(name, header)
        if request.body is not None:
            conn.putheader("Content-Length", str(len(request.body)))
        conn.endheaders(request.body)
        sock = conn.sock  # the response takes it over when the server closes after it
        response = conn.getresponse()
        content_type = response.getheader("Content-Type", "")
        if response.status == 200 and content_type.startswith("application/x-json-stream"):
            sock.settimeout(STREAM_READ_S)
            try:
                body = response.read1(65536)
            except TimeoutError:
                body = b""
        else:
            body = response.read()
        return response.status, content_type, body
    finally:
        conn.close()


def check(request: hostile.HostileRequest, status: int, content_type: str, body: bytes) -> None:
    said = f"{request.method} {request.target()[:300]} -> {status} {body[:300]!r}"
    assert status < 500, said
    if status == 422 and content_type == "application/json" and request.method == "POST" \
            and re.fullmatch(r"/event-types/[^/]+/events", request.path):
        # A batch that failed validating: Nakadi's API answers one BatchItemResponse
        # per event, not a Problem.
        items = json.loads(body)
        assert items and all(item["publishing_status"] and item["detail"] for item in items)
    elif status >= 400:
        assert content_type == PROBLEM, said
        problem = json.loads(body)
        assert problem["status"] == status and problem["detail"], said


def _created(request: hostile.HostileRequest, status: int, body: bytes,
             resources: Resources) -> None:
    """Remembers what a request created, for the cleanup."""
    if request.method != "POST" or status not in (200, 201):
        return
    if request.path == "/event-types" and status == 201:
        resources.created_event_types.append(json.loads(hostile.plain(request))["name"])
    elif request.path == "/subscriptions":
        resources.created_subscriptions.append(json.loads(body)["id"])


@pytest.fixture
def resources(server: Server, pool) -> Iterator[Resources]:
    with pool.transaction() as cursor:
        saved = {}
        for table, columns in SETTINGS_TABLES.items():
            cursor.execute(f"SELECT {columns} FROM {table}")
            saved[table] = cursor.fetchall()
    base_url = server.url
    # A toggle the previous test switched on may still be in force on a worker.
    name = wait_until(lambda: _try_event_type(base_url), 10, what="an event type")
    events = [business_event(n) for n in range(3)]
    for event in events:
        event["metadata"]["partition"] = "0"
    published = requests.post(f"{base_url}/event-types/{name}/events", json=events, timeout=10)
    assert published.status_code == 200, published.text
    offset = requests.get(f"{base_url}/event-types/{name}/partitions/0",
                          timeout=10).json()["newest_available_offset"]
    subscription = requests.post(f"{base_url}/subscriptions", timeout=10, json={
        "owning_application": "fuzz", "event_types": [name], "read_from": "begin"})
    assert subscription.status_code == 201, subscription.text
    found = Resources(base_url, name, subscription.json()["id"], offset)
    yield found
    with pool.transaction() as cursor:
        for table, columns in SETTINGS_TABLES.items():
            cursor.execute(f"DELETE FROM {table}")
            for row in saved[table]:
                marks = ", ".join(["%s"] * len(row))
                cursor.execute(f"INSERT INTO {table} ({columns}) VALUES ({marks})", row)
        cursor.execute("SELECT pg_notify('nakadi_security_settings', '')")
    for subscription_id in [found.subscription, *found.created_subscriptions]:
        requests.delete(f"{base_url}/subscriptions/{subscription_id}", timeout=30)
    for event_type in [name, *found.created_event_types]:
        requests.delete(f"{base_url}/event-types/{event_type}", timeout=30)


def _try_event_type(base_url: str) -> str | None:
    try:
        return new_event_type(base_url, partition_strategy="user_defined",
                              default_statistic={"messages_per_minute": 1, "message_size": 1,
                                                 "read_parallelism": 2,
                                                 "write_parallelism": 2})
    except AssertionError:
        return None


@pytest.mark.parametrize(("rule", "method"), ENDPOINTS,
                         ids=[f"{method} {rule.rule}" for rule, method in ENDPOINTS])
def test_hostile_requests_get_4xx_problems_never_5xx(server, resources, rule, method):
    workers = sorted(worker_pids(server.process.pid))

    @settings(max_examples=EXAMPLES, derandomize=True, database=None, deadline=None,
              suppress_health_check=list(HealthCheck))
    @given(request=hostile_requests(rule, method, resources))
    def fuzz(request: hostile.HostileRequest) -> None:
        status, content_type, body = send(server.url, request)
        _created(request, status, body, resources)
        check(request, status, content_type, body)

    fuzz()
    assert sorted(worker_pids(server.process.pid)) == workers, "a worker died"
