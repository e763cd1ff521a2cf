"""``/event-types/{name}/timelines`` over HTTP: switching an event type between
storages, what readers and the cursor endpoints see across timelines, and every
status of the endpoints."""

from __future__ import annotations

import json
import threading

import pytest
import requests
from kazoo.client import KazooClient

from app.repository.timelines import clean_up_expired
from tests.api.conftest import assert_problem
from tests.conftest import topic_listed
from tests.helpers.broker import new_event_type, publish_to
from tests.helpers.timelines import move_to, switch_timeline
from tests.helpers.waiting import wait_until

TIMELINE = {"id", "event_type", "order", "storage_id", "topic", "created_at", "switched_at"}


def user_defined(base_url: str) -> str:
    return new_event_type(base_url, partition_strategy="user_defined")


def stream_all(base_url: str, name: str, cursors: list[dict]) -> list[dict]:
    """Every batch from the cursors until the partitions went quiet."""
    response = requests.get(
        f"{base_url}/event-types/{name}/events",
        params={"batch_flush_timeout": "1", "stream_keep_alive_limit": "2",
                "stream_timeout": "30"},
        headers={"X-Nakadi-Cursors": json.dumps(cursors)}, stream=True, timeout=40)
    assert response.status_code == 200, response.text
    return [json.loads(line) for line in response.iter_lines() if line]


def partitions(base_url: str, name: str, **params) -> list[dict]:
    response = requests.get(f"{base_url}/event-types/{name}/partitions", params=params)
    assert response.status_code == 200, response.text
    return response.json()


@pytest.mark.parametrize(("source", "target"), [("postgres", "kafka"), ("kafka", "postgres"),
                                                ("postgres", "postgres")])
def test_readers_and_cursors_go_through_every_timeline(base_url, source, target):
    name = user_defined(base_url)
    move_to(base_url, name, source)
    publish_to(base_url, name, 0, 3, start=0)
    before = partitions(base_url, name)[0]
    response = switch_timeline(base_url, name, target)
    assert response.status_code == 201, response.text
    created = response.json()
    assert created["storage_id"] == target and created["event_type"] == name
    publish_to(base_url, name, 0, 2, start=3)

    listed = requests.get(f"{base_url}/event-types/{name}/timelines").json()
    assert [t["storage_id"] for t in listed][-2:] == [source, target]
    old, new = listed[-2], listed[-1]
    assert new["order"] == old["order"] + 1 and new["id"] == created["id"]
    assert set(new) >= TIMELINE and "latest_position" not in new
    assert old["latest_position"]["0"] == before["newest_available_offset"]
    assert old["latest_position"]["1"].endswith("--1")  # never written

    after = partitions(base_url, name)[0]
    assert after["oldest_available_offset"] == before["oldest_available_offset"]
    assert after["newest_available_offset"].startswith(f"001-{new['order']:04d}-")

    batches = stream_all(base_url, name, [{"partition": "0", "offset": "begin"}])
    amounts = [e["amount"] for b in batches for e in b.get("events", [])]
    assert amounts == [0, 1, 2, 3, 4]
    assert batches[-1]["cursor"]["offset"] == after["newest_available_offset"]

    # A cursor of the old timeline stays valid everywhere.
    old_cursor = {"partition": "0", "offset": before["newest_available_offset"]}
    rest = stream_all(base_url, name, [old_cursor])
    assert [e["amount"] for b in rest for e in b.get("events", [])] == [3, 4]
    assert partitions(base_url, name, cursors=json.dumps([old_cursor]))[0][
        "unconsumed_events"] == 2
    distance = requests.post(f"{base_url}/event-types/{name}/cursor-distances", json=[
        {"initial_cursor": {"partition": "0", "offset": "begin"},
         "final_cursor": {"partition": "0", "offset": after["newest_available_offset"]}},
        {"initial_cursor": old_cursor,
         "final_cursor": {"partition": "0", "offset": after["newest_available_offset"]}}])
    assert [d["distance"] for d in distance.json()] == [5, 2]
    lag = requests.post(f"{base_url}/event-types/{name}/cursors-lag", json=[old_cursor])
    assert lag.json()[0]["unconsumed_events"] == 2
    shifted = requests.post(f"{base_url}/event-types/{name}/shifted-cursors",
                            json=[dict(old_cursor, shift=2), dict(old_cursor, shift=-3)])
    assert shifted.status_code == 200, shifted.text
    assert shifted.json()[0]["offset"] == after["newest_available_offset"]
    requests.delete(f"{base_url}/event-types/{name}")


def test_a_stream_open_across_the_switch_goes_on_in_the_new_timeline(base_url):
    name = user_defined(base_url)
    publish_to(base_url, name, 0, 2, start=0)
    response = requests.get(
        f"{base_url}/event-types/{name}/events",
        params={"batch_limit": "1", "batch_flush_timeout": "1", "stream_timeout": "20"},
        headers={"X-Nakadi-Cursors": json.dumps([{"partition": "0", "offset": "begin"}])},
        stream=True, timeout=30)
    lines = response.iter_lines()
    seen = []
    while len(seen) < 2:
        line = next(lines)
        if line:
            seen += [e["amount"] for e in json.loads(line).get("events", [])]
    assert switch_timeline(base_url, name, "kafka").status_code == 201
    publish_to(base_url, name, 0, 2, start=2)
    while len(seen) < 4:
        line = next(lines)
        if line:
            batch = json.loads(line)
            seen += [e["amount"] for e in batch.get("events", [])]
    assert seen == [0, 1, 2, 3]
    assert batch["cursor"]["offset"].startswith("001-0002-")
    response.close()
    requests.delete(f"{base_url}/event-types/{name}")


def test_deleting_the_event_type_removes_every_timeline_topic(base_url, pool):
    name = user_defined(base_url)
    publish_to(base_url, name, 0, 1)
    move_to(base_url, name, "kafka")
    publish_to(base_url, name, 0, 1)
    move_to(base_url, name, "postgres")
    listed = requests.get(f"{base_url}/event-types/{name}/timelines").json()
    assert [t["storage_id"] for t in listed] == ["postgres", "kafka", "postgres"]
    assert requests.delete(f"{base_url}/event-types/{name}").status_code == 200
    for timeline in listed:
        wait_until(lambda t=timeline: not topic_listed(pool, t["storage_id"], t["topic"]),
                   timeout=15, what=f"topic of timeline {timeline['order']} removed")


def test_closed_timelines_are_cleaned_up_when_their_retention_ends(base_url, pool):
    name = user_defined(base_url)
    publish_to(base_url, name, 0, 2, start=0)
    move_to(base_url, name, "kafka")
    publish_to(base_url, name, 0, 1, start=2)
    assert clean_up_expired(pool, 30) == 0  # retention not over yet
    pool.execute("UPDATE timelines SET switched_at = now() - interval '5 days'"
                 " WHERE event_type = %s AND timeline_order = 2", (name,))
    assert clean_up_expired(pool, 30) == 1
    listed = requests.get(f"{base_url}/event-types/{name}/timelines").json()
    assert "cleaned_up_at" in listed[0] and "cleaned_up_at" not in listed[1]
    assert pool.fetch_all("SELECT due_at > now() FROM topic_deletions WHERE topic = %s",
                          (listed[0]["topic"],)) == [(True,)]

    # Its events are gone for readers, who go on in the next timeline.
    def only_new() -> bool:
        view = partitions(base_url, name)[0]
        return view["oldest_available_offset"] == "001-0002-000000000000000000"
    wait_until(only_new, what="every worker forgets the cleaned-up timeline")
    batches = stream_all(base_url, name, [{"partition": "0", "offset": "begin"}])
    assert [e["amount"] for b in batches for e in b.get("events", [])] == [2]
    requests.delete(f"{base_url}/event-types/{name}")


def test_closed_timelines_of_a_compacted_event_type_are_kept(base_url, pool):
    """Their keys' latest events may live in them, whatever their age."""
    name = new_event_type(base_url, cleanup_policy="compact")
    move_to(base_url, name, "kafka")
    pool.execute("UPDATE timelines SET switched_at = now() - interval '400 days'"
                 " WHERE event_type = %s AND timeline_order = 2", (name,))
    assert clean_up_expired(pool, 30) == 0
    listed = requests.get(f"{base_url}/event-types/{name}/timelines").json()
    assert "cleaned_up_at" not in listed[0]
    requests.delete(f"{base_url}/event-types/{name}")


def test_post_timeline_statuses(base_url, stack_env):
    assert_problem(switch_timeline(base_url, "no.such-type", "kafka"), 404)
    name = user_defined(base_url)
    url = f"{base_url}/event-types/{name}/timelines"
    detail = assert_problem(switch_timeline(base_url, name, "no-such-storage"), 422)["detail"]
    assert "there is no storage 'no-such-storage'" in detail
    assert "storage_id" in assert_problem(requests.post(url, json={}), 422)["detail"]
    assert_problem(requests.post(url, json=["kafka"]), 422)
    assert_problem(requests.post(url, json={"storage_id": 7}), 422)
    assert_problem(requests.post(url, data="{", headers={"Content-Type": "application/json"}),
                   400)
    # Another switch of the same event type in progress: 409.
    zookeeper = KazooClient(stack_env["NAKADI_ZOOKEEPER"] + stack_env["NAKADI_ZOOKEEPER_ROOT"])
    zookeeper.start(timeout=10)
    try:
        zookeeper.create(f"/timelines/locked_et/{name}", ephemeral=True, makepath=True)
        detail = assert_problem(switch_timeline(base_url, name, "kafka"), 409)["detail"]
        assert "already in progress" in detail
    finally:
        zookeeper.stop()
        zookeeper.close()
    response = switch_timeline(base_url, name, "kafka")
    assert response.status_code == 201, response.text
    assert response.headers["Content-Type"] == "application/json"
    requests.delete(f"{base_url}/event-types/{name}")


def test_get_timelines_statuses(base_url):
    assert_problem(requests.get(f"{base_url}/event-types/no.such-type/timelines"), 404)
    name = user_defined(base_url)
    listed = requests.get(f"{base_url}/event-types/{name}/timelines")
    assert listed.status_code == 200
    [first] = listed.json()
    assert first["order"] == 1 and first["event_type"] == name
    requests.delete(f"{base_url}/event-types/{name}")


def test_a_publish_during_a_switch_waits_and_succeeds_once_it_is_over(base_url, stack_env):
    """The switch is held half-way (the event type locked, as a switcher does
    first): publishing waits, and goes on once the lock is gone."""
    name = user_defined(base_url)
    zookeeper = KazooClient(stack_env["NAKADI_ZOOKEEPER"] + stack_env["NAKADI_ZOOKEEPER_ROOT"])
    zookeeper.start(timeout=10)
    try:
        zookeeper.create(f"/timelines/locked_et/{name}", ephemeral=True, makepath=True)
        result: list[requests.Response] = []

        def publish() -> None:
            result.append(requests.post(
                f"{base_url}/event-types/{name}/events",
                json=[{"order_number": "A", "metadata": {
                    "eid": "5b9e2cd8-3d1d-4b6f-9a5e-6f2f3c1d4e5a", "partition": "0",
                    "occurred_at": "2026-11-22T12:00:00Z"}}], timeout=30))
        wait_until(lambda: all(_blocked(base_url, name) for _ in range(4)),
                   what="publishing held back on every worker")
        thread = threading.Thread(target=publish)
        thread.start()
        thread.join(1.0)
        assert thread.is_alive(), "the publish did not wait for the switch"
        zookeeper.delete(f"/timelines/locked_et/{name}")
        thread.join(15)
        assert result and result[0].status_code == 200, result and result[0].text
    finally:
        zookeeper.stop()
        zookeeper.close()
    requests.delete(f"{base_url}/event-types/{name}")


def _blocked(base_url: str, name: str) -> bool:
    """Whether a publish waits now (on the worker that gets it): a short client
    timeout runs out."""
    try:
        requests.post(f"{base_url}/event-types/{name}/events", json=[], timeout=0.3)
    except requests.Timeout:
        return True
    return False
