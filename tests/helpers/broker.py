"""Event types and events made through the broker's HTTP API."""

from __future__ import annotations

import json
import uuid

import requests

ORDER_SCHEMA = {
    "type": "object",
    "properties": {"order_number": {"type": "string"}, "amount": {"type": "number"}},
    "required": ["order_number"],
}


ONE_PARTITION = {"messages_per_minute": 1, "message_size": 1, "read_parallelism": 1,
                 "write_parallelism": 1}
"""A ``default_statistic`` that gives an event type one partition."""


def new_event_type(base_url: str, **overrides) -> str:
    """A business event type of order events (4 partitions unless overridden); its name."""
    body = {
        "name": f"pub.test-{uuid.uuid4().hex[:10]}",
        "owning_application": "order-service",
        "category": "business",
        "enrichment_strategies": ["metadata_enrichment"],
        "schema": {"type": "json_schema", "schema": json.dumps(ORDER_SCHEMA)},
        "default_statistic": {"messages_per_minute": 100, "message_size": 100,
                              "read_parallelism": 4, "write_parallelism": 4},
    }
    body.update(overrides)
    response = requests.post(base_url + "/event-types", json=body)
    assert response.status_code == 201, response.text
    return body["name"]


def business_event(n: int = 0, **extra) -> dict:
    return {"order_number": f"ORDER-{n}", "amount": n,
            "metadata": {"eid": str(uuid.uuid4()), "occurred_at": "2026-11-22T10:00:00+01:00"},
            **extra}


def post(base_url: str, name: str, events, **kwargs) -> requests.Response:
    return requests.post(f"{base_url}/event-types/{name}/events", json=events, **kwargs)


def publish_to(base_url: str, name: str, partition: int, count: int, start: int = 0) -> None:
    """Publish ``count`` order events (amounts ``start``...) to one partition of an event
    type with the user_defined strategy."""
    events = [business_event(n) for n in range(start, start + count)]
    for event in events:
        event["metadata"]["partition"] = str(partition)
    response = post(base_url, name, events)
    assert response.status_code == 200, response.text


def backlog_event_type(base_url: str, megabytes: int = 8) -> str:
    """A one-partition event type holding ``megabytes`` of 10 KB events: more than the
    socket buffers between a stream and a client that does not read can hold."""
    name = new_event_type(base_url, category="undefined", enrichment_strategies=[],
                          partition_strategy="random",
                          schema={"type": "json_schema", "schema": "{}"},
                          default_statistic=ONE_PARTITION)
    for _ in range(megabytes):
        response = post(base_url, name, [{"pad": "x" * 10_000}] * 100)
        assert response.status_code == 200, response.text
    return name
