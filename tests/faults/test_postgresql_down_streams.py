"""While PostgreSQL is down, what does not need it goes on: a kafka event type is
published to and streamed from (low-level and subscription streams) from what each
worker knew of it, and a postgres event type's open stream ends with a last line
saying why, its chunked body closed. Before, losing the database's listening
connection emptied the event type cache: every kafka publish was a 503, and every
open stream's next lookup raised and cut it without a last line."""

from __future__ import annotations

import contextlib
import json
import queue
import threading

import requests

from tests.faults.conftest import FaultStack
from tests.helpers.broker import business_event
from tests.helpers.load import CLIENT_TIMEOUT_S, new_fault_event_type
from tests.helpers.subscription_streams import StreamClient
from tests.helpers.timelines import move_to
from tests.helpers.waiting import wait_until


class LowLevelReader:
    """A low-level stream from the newest event on, read by a thread: its lines in a
    queue, then None when the body ended whole, or the error that cut it."""

    def __init__(self, url: str, name: str) -> None:
        self.response = requests.get(f"{url}/event-types/{name}/events",
                                     params={"batch_flush_timeout": "1"}, stream=True,
                                     timeout=30)
        assert self.response.status_code == 200, self.response.text
        self.lines: queue.Queue = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        try:
            for line in self.response.iter_lines():
                if line:
                    self.lines.put(json.loads(line))
        except (requests.RequestException, OSError, ValueError, AttributeError) as error:
            self.lines.put(error)  # cut, or closed under the reader
            return
        self.lines.put(None)

    def close(self) -> None:
        with contextlib.suppress(ValueError, RuntimeError, OSError):
            self.response.raw.shutdown()  # wakes the reader at once
        self.response.close()

    def events(self, timeout: float = 20) -> list[dict]:
        """The events of the next line with events."""
        while True:
            line = self.lines.get(timeout=timeout)
            assert isinstance(line, dict), f"the stream ended: {line!r}"
            if line.get("events"):
                return line["events"]

    def until_end(self, timeout: float = 30) -> list[dict]:
        """Every line up to the end; fails if the body was cut."""
        lines = []
        while (line := self.lines.get(timeout=timeout)) is not None:
            assert isinstance(line, dict), f"the stream was cut: {line!r}"
            lines.append(line)
        return lines


def publish(url: str, name: str, n: int) -> int:
    response = requests.post(f"{url}/event-types/{name}/events", json=[business_event(n)],
                             timeout=CLIENT_TIMEOUT_S)
    return response.status_code


def test_kafka_event_types_go_on_and_postgres_streams_end_cleanly_while_postgresql_is_down(
        faults: FaultStack):
    on_kafka = new_fault_event_type(faults.url, 1)
    move_to(faults.url, on_kafka, "kafka")
    on_postgres = new_fault_event_type(faults.url, 1)
    created = requests.post(f"{faults.url}/subscriptions", json={
        "owning_application": "faults", "event_types": [on_kafka], "read_from": "end"})
    assert created.status_code in (200, 201), created.text
    subscription = created.json()["id"]
    # Each worker learns on its own that the broker is back after the tests before
    # froze or restarted it: publish until both surely answer (ten 200s in a row, each
    # on a new connection). Streams start after these events.
    in_a_row = [0]

    def published_on_both() -> bool:
        in_a_row[0] = in_a_row[0] + 1 if publish(faults.url, on_kafka, -1) == 200 else 0
        return in_a_row[0] >= 10

    wait_until(published_on_both, 60, what="kafka publishing on both workers")
    # Two streams of each, to have them on both workers most of the time.
    kafka_streams = [LowLevelReader(faults.url, on_kafka) for _ in range(2)]
    postgres_streams = [LowLevelReader(faults.url, on_postgres) for _ in range(2)]
    consumer = StreamClient(faults.url, subscription, batch_flush_timeout=1)
    wait_until(lambda: publish(faults.url, on_kafka, 0) == 200, 30, what="kafka publishing")
    for stream in kafka_streams:
        assert [event["amount"] for event in stream.events()] == [0]
    assert [event["amount"] for event in consumer.events_batch()["events"]] == [0]

    faults.kill("postgres")
    try:
        for stream in postgres_streams:
            last = stream.until_end()[-1]
            assert "PostgreSQL" in last["info"]["debug"] or "storage" in last["info"]["debug"]
        # Publishing goes on. A worker that never looked the event type up cannot know
        # it (a 503): a client's retry reaches the other.
        for n in range(1, 7):
            wait_until(lambda n=n: publish(faults.url, on_kafka, n) == 200, 10,
                       what=f"publishing event {n}")
        for stream in kafka_streams:
            seen = [event["amount"] for event in stream.events()]
            while seen[-1] < 6:
                seen += [event["amount"] for event in stream.events()]
            assert seen == [1, 2, 3, 4, 5, 6]
        seen = []
        while not seen or seen[-1] < 6:
            seen += [event["amount"] for event in consumer.events_batch()["events"]]
        assert seen == [1, 2, 3, 4, 5, 6]
    finally:
        faults.restart("postgres")
    for stream in kafka_streams:
        stream.close()
    consumer.vanish()
    requests.delete(f"{faults.url}/subscriptions/{subscription}", timeout=CLIENT_TIMEOUT_S)
