"""Publish and stream load for the fault suite: threads that keep the broker busy
and record every answer, so a test can say what clients saw during an outage
and check afterwards that every acknowledged event is there exactly once."""

from __future__ import annotations

import contextlib
import json
import threading
import time
import uuid
from dataclasses import dataclass, field

import requests

from tests.helpers.broker import business_event
from tests.helpers.waiting import wait_until

CLIENT_TIMEOUT_S = 6.0
"""A request not answered by then counts as a hang."""


@dataclass
class Answer:
    """One request as the client saw it."""

    started: float
    took: float
    status: int | None  # None: no HTTP answer (connection refused or reset, timeout)
    content_type: str = ""
    retry_after: str | None = None
    detail: str = ""
    error: str = ""


def answer_to(started: float, response: requests.Response) -> Answer:
    """The Answer of a request started at ``started`` (``time.monotonic()``)."""
    detail = ""
    if response.headers.get("Content-Type") == "application/problem+json":
        detail = response.json().get("detail", "")
    return Answer(started, time.monotonic() - started, response.status_code,
                  response.headers.get("Content-Type", ""),
                  response.headers.get("Retry-After"), detail)


def _failure(started: float, error: Exception) -> Answer:
    return Answer(started, time.monotonic() - started, None, error=type(error).__name__)


@dataclass(eq=False)
class Publisher(threading.Thread):
    """Publishes batches of ``batch`` events, one request at a time, until stopped.
    Each event's ``amount`` is its place in the publishing order."""

    url: str
    event_type: str
    batch: int = 20
    timeout_s: float = CLIENT_TIMEOUT_S
    answers: list[Answer] = field(default_factory=list)
    acknowledged: list[str] = field(default_factory=list)
    stop_event: threading.Event = field(default_factory=threading.Event)

    def __post_init__(self) -> None:
        threading.Thread.__init__(self, daemon=True)
        self._next = 0

    def run(self) -> None:
        endpoint = f"{self.url}/event-types/{self.event_type}/events"
        with requests.Session() as session:
            while not self.stop_event.is_set():
                events = [business_event(self._next + i) for i in range(self.batch)]
                self._next += self.batch
                started = time.monotonic()
                try:
                    response = session.post(endpoint, json=events, timeout=self.timeout_s)
                except requests.RequestException as error:
                    self.answers.append(_failure(started, error))
                    session.close()
                    time.sleep(0.05)
                    continue
                self.answers.append(answer_to(started, response))
                if response.status_code == 200:
                    self.acknowledged += [event["metadata"]["eid"] for event in events]
                else:
                    time.sleep(0.05)

    def stop(self) -> None:
        self.stop_event.set()
        self.join(self.timeout_s * 2)

    def ok_since(self, moment: float) -> bool:
        """Whether a publish started after ``moment`` was acknowledged."""
        return any(a.status == 200 and a.started >= moment for a in list(self.answers))


@dataclass(eq=False)
class Streamer(threading.Thread):
    """Keeps a low-level stream of the event type open, opening it again whenever
    it ends; records the answer to each opening and each stream's last line."""

    url: str
    event_type: str
    timeout_s: float = CLIENT_TIMEOUT_S
    answers: list[Answer] = field(default_factory=list)
    last_lines: list[dict] = field(default_factory=list)
    events_seen: int = 0
    stop_event: threading.Event = field(default_factory=threading.Event)

    def __post_init__(self) -> None:
        threading.Thread.__init__(self, daemon=True)
        self._open: requests.Response | None = None

    def run(self) -> None:
        endpoint = f"{self.url}/event-types/{self.event_type}/events"
        while not self.stop_event.is_set():
            started = time.monotonic()
            try:
                with requests.get(endpoint, params={"batch_flush_timeout": "1",
                                                    "stream_timeout": "2"},
                                  stream=True, timeout=self.timeout_s) as response:
                    self.answers.append(answer_to(started, response))
                    if response.status_code != 200:
                        time.sleep(0.1)
                        continue
                    self._open = response
                    last: dict = {}
                    for line in response.iter_lines():
                        if line:
                            last = json.loads(line)
                            self.events_seen += len(last.get("events", []))
                    self._open = None
                    if not self.stop_event.is_set():  # not cut short by stop()
                        self.last_lines.append(last)
            except requests.RequestException as error:
                if self.stop_event.is_set():
                    return  # the stream stop() cut short
                self.answers.append(_failure(started, error))
                time.sleep(0.1)

    def stop(self) -> None:
        """Stop streaming, cutting the open stream short rather than waiting for its end."""
        self.stop_event.set()
        response = self._open
        if response is not None:
            with contextlib.suppress(ValueError, RuntimeError, OSError):
                response.raw.shutdown()
        self.join(self.timeout_s * 2)

    def opened_since(self, moment: float) -> bool:
        return any(a.status == 200 and a.started >= moment for a in list(self.answers))


def read_everything(url: str, event_type: str, partitions: int,
                    unavailable_for_s: float = 0.0) -> dict[int, list[dict]]:
    """Every event of the event type, by partition in stream order, read from begin
    until each partition went quiet. A 503 is asked again, as a client does after
    ``Retry-After``, for ``unavailable_for_s`` at most (a worker still reconnecting)."""
    cursors = [{"partition": str(p), "offset": "begin"} for p in range(partitions)]
    deadline = time.monotonic() + unavailable_for_s
    while True:
        response = requests.get(
            f"{url}/event-types/{event_type}/events",
            params={"batch_limit": "1000", "batch_flush_timeout": "1",
                    "stream_keep_alive_limit": "1", "stream_timeout": "60"},
            headers={"X-Nakadi-Cursors": json.dumps(cursors)}, stream=True, timeout=70)
        if response.status_code != 503 or time.monotonic() >= deadline:
            break
        response.close()
        time.sleep(0.2)
    assert response.status_code == 200, response.text
    found: dict[int, list[dict]] = {p: [] for p in range(partitions)}
    for line in response.iter_lines():
        if line:
            batch = json.loads(line)
            found[int(batch["cursor"]["partition"])] += batch.get("events", [])
    return found


def check_exactly_once_in_order(acknowledged: list[str], found: dict[int, list[dict]]) -> None:
    """Every acknowledged event is stored exactly once, and in each partition the
    events keep the order they were published in."""
    eids = [event["metadata"]["eid"] for events in found.values() for event in events]
    counts: dict[str, int] = {}
    for eid in eids:
        counts[eid] = counts.get(eid, 0) + 1
    missing = [eid for eid in acknowledged if eid not in counts]
    twice = [eid for eid in acknowledged if counts.get(eid, 0) > 1]
    assert not missing, f"{len(missing)} of {len(acknowledged)} acknowledged events are missing"
    assert not twice, f"{len(twice)} acknowledged events are stored more than once"
    for partition, events in found.items():
        amounts = [event["amount"] for event in events]
        assert amounts == sorted(amounts), f"partition {partition} is out of publishing order"


def new_fault_event_type(url: str, partitions: int = 4) -> str:
    """A business event type for load (random partitioning over ``partitions``)."""
    name = f"faults.test-{uuid.uuid4().hex[:10]}"
    body = {
        "name": name, "owning_application": "faults", "category": "business",
        "enrichment_strategies": ["metadata_enrichment"],
        "schema": {"type": "json_schema", "schema": json.dumps({"type": "object"})},
        "default_statistic": {"messages_per_minute": 100, "message_size": 100,
                              "read_parallelism": partitions, "write_parallelism": partitions},
    }
    # The test before may have just brought a service back: each worker serves again
    # once it noticed, as a client retrying after a 503 finds.
    response = wait_until(lambda: [r for r in [requests.post(url + "/event-types", json=body,
                                                             timeout=CLIENT_TIMEOUT_S)]
                                   if r.status_code != 503], 10, what="a registry that answers")[0]
    assert response.status_code == 201, response.text
    return name
