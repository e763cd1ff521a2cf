"""A subscription client as real consumers (pyNakadi and the like) are: it opens a
stream, reads batches in a thread, commits their cursors, and can vanish."""

from __future__ import annotations

import contextlib
import json
import queue
import threading
import uuid

import requests

from tests.helpers.waiting import wait_until

STREAM_ID = "X-Nakadi-StreamId"


def publish_numbered(base_url: str, name: str, partition: int, start: int, count: int) -> None:
    """Events ``{"n": start}``... to one partition of a user_defined event type."""
    events = [{"n": n, "metadata": {"eid": str(uuid.uuid4()), "partition": str(partition),
                                    "occurred_at": "2026-11-22T10:00:00Z"}}
              for n in range(start, start + count)]
    response = requests.post(f"{base_url}/event-types/{name}/events", json=events)
    assert response.status_code == 200, response.text


def subscribe(subscriptions, event_types: list[str], read_from: str = "begin", **extra) -> str:
    """A new subscription (``subscriptions`` is the fixture that deletes it); its id."""
    response = subscriptions({"owning_application": f"app-{uuid.uuid4().hex[:8]}",
                              "event_types": event_types, "read_from": read_from, **extra})
    assert response.status_code == 201, response.text
    return response.json()["id"]


def open_stream(base_url: str, subscription_id: str, body: dict | None = None,
                **params) -> requests.Response:
    """GET the stream (POST when ``body`` is given) without reading it."""
    url = f"{base_url}/subscriptions/{subscription_id}/events"
    if body is None:
        return requests.get(url, params=params, stream=True, timeout=30)
    return requests.post(url, params=params, json=body, stream=True, timeout=30)


class StreamClient:
    """An open stream read by a thread; its batches in a queue (None once it ended)."""

    def __init__(self, base_url: str, subscription_id: str, body: dict | None = None,
                 response: requests.Response | None = None, **params) -> None:
        self.base_url = base_url
        self.subscription_id = subscription_id
        self.response = response or open_stream(base_url, subscription_id, body, **params)
        assert self.response.status_code == 200, self.response.text
        self.stream_id = self.response.headers[STREAM_ID]
        self.batches: queue.Queue = queue.Queue()
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        try:
            for line in self.response.iter_lines():
                if line:
                    self.batches.put(json.loads(line))
        except (requests.RequestException, OSError, ValueError, AttributeError):
            pass  # closed under the reader
        finally:
            self.batches.put(None)

    def batch(self, timeout: float = 15) -> dict | None:
        return self.batches.get(timeout=timeout)

    def events_batch(self, timeout: float = 15) -> dict:
        """The next batch with events; fails if the stream ends first, saying with
        what line."""
        last = None
        while True:
            batch = self.batch(timeout)
            assert batch is not None, f"the stream ended, its last line {last}"
            if batch.get("events"):
                return batch
            last = batch

    def until_end(self, timeout: float = 30) -> list[dict]:
        """Every batch up to the end of the stream."""
        batches = []
        while (batch := self.batch(timeout)) is not None:
            batches.append(batch)
        return batches

    def commit(self, *cursors: dict, stream_id: str | None = None) -> requests.Response:
        return requests.post(
            f"{self.base_url}/subscriptions/{self.subscription_id}/cursors",
            json={"items": list(cursors)}, headers={STREAM_ID: stream_id or self.stream_id},
            timeout=30)

    def vanish(self) -> None:
        """The client goes away: its socket is shut, as when a consumer crashes.
        Shutting it wakes the reading thread at once (closing alone would wait for
        the thread's read, that is for the server's next line), then it is closed."""
        with contextlib.suppress(ValueError, RuntimeError, OSError):
            self.response.raw.shutdown()
        self._thread.join(10)
        assert not self._thread.is_alive(), "the reading thread did not stop"
        self.response.close()


def connect(base_url: str, subscription_id: str, **params) -> StreamClient:
    """A stream, retrying while the subscription has no free partition (409), as
    consumers do: a stream that just went away may not have been noticed yet."""
    def attempt() -> requests.Response | None:
        response = open_stream(base_url, subscription_id, **params)
        if response.status_code == 409:
            response.close()
            return None
        return response

    return StreamClient(base_url, subscription_id,
                        response=wait_until(attempt, what="a free partition"))


def events_of(batches: list[dict]) -> list[int]:
    return [event["n"] for batch in batches for event in batch.get("events", [])]
