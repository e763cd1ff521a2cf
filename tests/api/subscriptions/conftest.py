"""Helpers and fixtures of the ``/subscriptions`` tests: event types to subscribe to,
and subscriptions deleted after each test (before their event types)."""

from __future__ import annotations

import json
import re
import uuid

import pytest
import requests

TIMESTAMP = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")
SCHEMA = {"type": "object", "properties": {"n": {"type": "integer"}}}
AUTHORIZATION = {"admins": [{"data_type": "user", "value": "alice"}],
                 "readers": [{"data_type": "service", "value": "reader-service"}]}


def new_event_type(base_url: str, partitions: int = 1) -> str:
    name = f"subs.test-{uuid.uuid4().hex[:10]}"
    response = requests.post(base_url + "/event-types", json={
        "name": name, "owning_application": "producer", "category": "business",
        "enrichment_strategies": ["metadata_enrichment"], "partition_strategy": "user_defined",
        "schema": {"type": "json_schema", "schema": json.dumps(SCHEMA)},
        "default_statistic": {"messages_per_minute": 1, "message_size": 1,
                              "read_parallelism": partitions,
                              "write_parallelism": partitions}})
    assert response.status_code == 201, response.text
    return name


@pytest.fixture
def event_types(base_url):
    """Creates event types (with n partitions); deletes them afterwards."""
    created: list[str] = []

    def create(partitions: int = 1) -> str:
        created.append(new_event_type(base_url, partitions))
        return created[-1]

    yield create
    for name in created:
        requests.delete(f"{base_url}/event-types/{name}")


@pytest.fixture
def subscriptions(base_url, event_types):
    """POSTs subscription bodies; deletes every subscription created, before the
    event types they read."""
    ids: set[str] = set()

    def post(body, **kwargs) -> requests.Response:
        response = requests.post(base_url + "/subscriptions", json=body, **kwargs)
        if response.status_code in (200, 201):
            ids.add(response.json()["id"])
        return response

    yield post
    for subscription_id in ids:
        requests.delete(f"{base_url}/subscriptions/{subscription_id}")


def owner() -> str:
    return f"app-{uuid.uuid4().hex[:8]}"


def publish(base_url: str, name: str, partition: int, count: int) -> None:
    events = [{"n": n, "metadata": {"eid": str(uuid.uuid4()), "partition": str(partition),
                                    "occurred_at": "2026-11-22T10:00:00Z"}}
              for n in range(count)]
    response = requests.post(f"{base_url}/event-types/{name}/events", json=events)
    assert response.status_code == 200, response.text
