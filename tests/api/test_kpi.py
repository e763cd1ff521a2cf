"""KPI events over HTTP: with the ``kpi_collection`` feature on, the broker publishes
what it does to its own event types (``nakadi.batch.published``,
``nakadi.data.streamed``, ``nakadi.event.type.log``, ``nakadi.subscription.log``),
read back with the same streaming API as any other event type."""

from __future__ import annotations

import hashlib
import json
import uuid

import pytest
import requests

from tests.helpers.broker import business_event, new_event_type
from tests.helpers.waiting import wait_until

KPI_EVENT_TYPES = ("nakadi.batch.published", "nakadi.data.streamed", "nakadi.event.type.log",
                   "nakadi.subscription.log")
FEATURES = "/settings/features"


def toggle(base_url: str, enabled: bool) -> None:
    response = requests.post(base_url + FEATURES,
                             json={"feature": "kpi_collection", "enabled": enabled})
    assert response.status_code == 204, response.text

    def everywhere() -> bool:  # a few answers in a row: both workers see it
        return all({"feature": "kpi_collection", "enabled": enabled}
                   in requests.get(base_url + FEATURES).json()["items"] for _ in range(6))
    wait_until(everywhere, what=f"kpi_collection {'on' if enabled else 'off'} everywhere")


@pytest.fixture
def unobserved(base_url):
    """An event type published to while the toggle is off."""
    name = new_event_type(base_url)
    for _ in range(4):  # new connections: both workers take some
        assert requests.post(f"{base_url}/event-types/{name}/events",
                             json=[business_event()]).status_code == 200
    yield name
    requests.delete(f"{base_url}/event-types/{name}")


@pytest.fixture
def kpi_collection(base_url, unobserved):
    toggle(base_url, True)
    yield
    toggle(base_url, False)
    for name in KPI_EVENT_TYPES:
        requests.delete(f"{base_url}/event-types/{name}")


def kpi_events(base_url: str, name: str) -> list[dict]:
    """Every event of a KPI event type so far (none while it does not exist)."""
    partitions = requests.get(f"{base_url}/event-types/{name}/partitions")
    if partitions.status_code == 404:
        return []
    cursors = [{"partition": p["partition"], "offset": "begin"} for p in partitions.json()]
    response = requests.get(
        f"{base_url}/event-types/{name}/events",
        params={"stream_timeout": 1, "batch_flush_timeout": 1, "batch_limit": 1000},
        headers={"X-Nakadi-Cursors": json.dumps(cursors)}, timeout=15)
    assert response.status_code == 200, response.text
    return [event for line in response.text.splitlines() if line
            for event in json.loads(line).get("events", [])]


def find(base_url: str, name: str, **fields) -> dict:
    """The KPI event with these fields, once it arrived."""
    def found() -> dict | None:
        return next((event for event in kpi_events(base_url, name)
                     if fields.items() <= event.items()), None)
    return wait_until(found, timeout=20, interval=0.5, what=f"a {name} event with {fields}")


def test_kpi_events_tell_who_published_and_streamed_what(base_url, unobserved,
                                                         kpi_collection):
    name = new_event_type(base_url)
    created = find(base_url, "nakadi.event.type.log", event_type=name)
    assert created["status"] == "created" and created["category"] == "business"
    assert created["authz"] == "disabled" and created["compatibility_mode"]
    assert created["metadata"]["event_type"] == "nakadi.event.type.log"

    body = json.dumps([business_event(n) for n in range(7)]).encode()
    response = requests.post(f"{base_url}/event-types/{name}/events", data=body,
                             headers={"Content-Type": "application/json"})
    assert response.status_code == 200
    published = find(base_url, "nakadi.batch.published", event_type=name)
    assert published["number_of_events"] == 7 and published["batch_size"] == len(body)
    assert published["app"] == "unauthenticated"
    assert published["app_hashed"] == hashlib.sha256(b"unauthenticated").hexdigest()
    assert published["ms_spent"] >= 0

    cursors = [{"partition": str(p), "offset": "begin"} for p in range(4)]
    streamed = requests.get(f"{base_url}/event-types/{name}/events",
                            params={"stream_limit": 7, "batch_flush_timeout": 1},
                            headers={"X-Nakadi-Cursors": json.dumps(cursors),
                                     "Accept-Encoding": "identity"}, timeout=15)
    kpi = find(base_url, "nakadi.data.streamed", event_type=name)
    assert kpi["api"] == "lola" and kpi["number_of_events"] == 7
    assert kpi["bytes_streamed"] == len(streamed.content)
    assert "subscription" not in kpi

    subscription = requests.post(base_url + "/subscriptions", json={
        "owning_application": f"app-{uuid.uuid4().hex[:8]}", "event_types": [name]})
    assert subscription.status_code == 201
    subscription_id = subscription.json()["id"]
    assert requests.delete(f"{base_url}/subscriptions/{subscription_id}").status_code == 204
    logged = [event["status"] for event in kpi_events(base_url, "nakadi.subscription.log")
              if event["subscription_id"] == subscription_id]
    if logged != ["created", "deleted"]:
        find(base_url, "nakadi.subscription.log", subscription_id=subscription_id,
             status="deleted")
        logged = [event["status"] for event in kpi_events(base_url, "nakadi.subscription.log")
                  if event["subscription_id"] == subscription_id]
    assert sorted(logged) == ["created", "deleted"]

    assert requests.delete(f"{base_url}/event-types/{name}").status_code == 200
    find(base_url, "nakadi.event.type.log", event_type=name, status="deleted")

    # Published before the toggle was on, long before everything above arrived: never told.
    assert not any(event["event_type"] == unobserved
                   for event in kpi_events(base_url, "nakadi.batch.published"))
