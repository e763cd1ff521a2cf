"""A timeline switch under continuous publishing and consuming, from and to each
engine: every acknowledged event reaches a subscription consumer that commits,
a low-level stream open across the switch, and a stream opened afterwards,
exactly once and in publishing order; no publish fails while the switch runs."""

from __future__ import annotations

import contextlib
import json
import threading
import time

import pytest
import requests

from tests.helpers.load import Publisher, check_exactly_once_in_order, new_fault_event_type
from tests.helpers.subscription_streams import connect
from tests.helpers.timelines import move_to, switch_timeline
from tests.helpers.waiting import wait_until

PARTITIONS = 3


class SubscriptionConsumer(threading.Thread):
    """Streams a subscription and commits every batch it gets; keeps the events of
    the batches whose commit was accepted."""

    def __init__(self, base_url: str, subscription_id: str) -> None:
        super().__init__(daemon=True)
        self.client = connect(base_url, subscription_id, batch_limit="50",
                              max_uncommitted_events="500", batch_flush_timeout="1")
        self.committed: dict[int, list[dict]] = {p: [] for p in range(PARTITIONS)}
        self.refused: list[str] = []
        self.stopped = threading.Event()

    def run(self) -> None:
        while not self.stopped.is_set():
            try:
                batch = self.client.batch(timeout=1)
            except Exception:  # queue.Empty: nothing within a second
                continue
            if batch is None:
                return
            if not batch.get("events"):
                continue
            response = self.client.commit(batch["cursor"])
            if response.status_code == 204:
                self.committed[int(batch["cursor"]["partition"])] += batch["events"]
            else:
                self.refused.append(response.text)

    def count(self) -> int:
        return sum(len(events) for events in self.committed.values())


class LowLevelConsumer(threading.Thread):
    """One low-level stream from ``begin``, kept open across the switch."""

    def __init__(self, base_url: str, name: str) -> None:
        super().__init__(daemon=True)
        cursors = [{"partition": str(p), "offset": "begin"} for p in range(PARTITIONS)]
        self.response = requests.get(
            f"{base_url}/event-types/{name}/events",
            params={"batch_limit": "50", "batch_flush_timeout": "1", "stream_timeout": "60"},
            headers={"X-Nakadi-Cursors": json.dumps(cursors)}, stream=True, timeout=70)
        assert self.response.status_code == 200, self.response.text
        self.found: dict[int, list[dict]] = {p: [] for p in range(PARTITIONS)}
        self.cursors: dict[int, str] = {}

    def run(self) -> None:
        try:
            for line in self.response.iter_lines():
                if line:
                    batch = json.loads(line)
                    partition = int(batch["cursor"]["partition"])
                    self.found[partition] += batch.get("events", [])
                    self.cursors[partition] = batch["cursor"]["offset"]
        except (requests.RequestException, OSError, AttributeError):
            pass  # closed by the test

    def count(self) -> int:
        return sum(len(events) for events in self.found.values())

    def close(self) -> None:
        self.response.close()


def read_everything(base_url: str, name: str) -> dict[int, list[dict]]:
    cursors = [{"partition": str(p), "offset": "begin"} for p in range(PARTITIONS)]
    response = requests.get(
        f"{base_url}/event-types/{name}/events",
        params={"batch_limit": "1000", "batch_flush_timeout": "1",
                "stream_keep_alive_limit": "2", "stream_timeout": "60"},
        headers={"X-Nakadi-Cursors": json.dumps(cursors)}, stream=True, timeout=70)
    assert response.status_code == 200, response.text
    found: dict[int, list[dict]] = {p: [] for p in range(PARTITIONS)}
    for line in response.iter_lines():
        if line:
            batch = json.loads(line)
            found[int(batch["cursor"]["partition"])] += batch.get("events", [])
    return found


@pytest.mark.parametrize(("source", "target"), [("postgres", "kafka"), ("kafka", "postgres"),
                                                ("postgres", "postgres"), ("kafka", "kafka")])
def test_switch_under_load_loses_and_duplicates_nothing(base_url, source, target):
    name = new_fault_event_type(base_url, PARTITIONS)
    move_to(base_url, name, source)
    subscription = requests.post(base_url + "/subscriptions", json={
        "owning_application": "timelines-test", "event_types": [name],
        "read_from": "begin"}, timeout=10).json()
    consumer = SubscriptionConsumer(base_url, subscription["id"])
    low_level = LowLevelConsumer(base_url, name)
    publisher = Publisher(base_url, name, batch=10)
    for thread in (consumer, low_level, publisher):
        thread.start()
    try:
        wait_until(lambda: len(publisher.acknowledged) >= 200 and consumer.count() >= 50,
                   timeout=30, what="publishing and consuming under way")
        started = time.monotonic()
        response = switch_timeline(base_url, name, target)
        switch_s = time.monotonic() - started
        assert response.status_code == 201, response.text
        assert response.json()["storage_id"] == target
        before = len(publisher.acknowledged)
        wait_until(lambda: len(publisher.acknowledged) >= before + 200, timeout=30,
                   what="publishing into the new timeline")
        publisher.stop()
        acknowledged = list(publisher.acknowledged)
        with contextlib.suppress(AssertionError):  # the checks below say what is missing
            wait_until(lambda: consumer.count() >= len(acknowledged)
                       and low_level.count() >= len(acknowledged), timeout=30,
                       what="every acknowledged event consumed")
    finally:
        publisher.stop()
        consumer.stopped.set()
        consumer.client.vanish()
        low_level.close()
        consumer.join(10)
        low_level.join(10)
    refused = [a for a in publisher.answers if a.status != 200]
    assert not refused, f"publishes failed during the switch: {refused[:3]}"
    slowest = max(a.took for a in publisher.answers)
    print(f"\n{source}->{target}: switch {switch_s:.2f} s, slowest publish {slowest:.2f} s, "
          f"{len(acknowledged)} events")
    assert not consumer.refused, consumer.refused[:3]
    check_exactly_once_in_order(acknowledged, consumer.committed)
    check_exactly_once_in_order(acknowledged, low_level.found)
    check_exactly_once_in_order(acknowledged, read_everything(base_url, name))
    # The committed cursors (of the new timeline) leave nothing unconsumed.
    stats = requests.get(f"{base_url}/subscriptions/{subscription['id']}/stats",
                         timeout=10).json()
    assert [p["unconsumed_events"] for p in stats["items"][0]["partitions"]] == \
        [0] * PARTITIONS
    requests.delete(f"{base_url}/subscriptions/{subscription['id']}", timeout=10)
    requests.delete(f"{base_url}/event-types/{name}", timeout=10)
