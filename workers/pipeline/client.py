"""The broker's HTTP API, as the pipeline uses it: event types, partitions, cursor
arithmetic and low-level streams. Nothing else of the broker is imported, so the
pipeline works against any Nakadi-compatible broker.

Every failure becomes a ``BrokerError`` whose message says what to fix (the URL,
the event type, the token), so that Spark shows one clear line rather than a
stack trace from a worker.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlparse

import orjson
import pyarrow as pa
import requests

CONNECT_TIMEOUT_S = 10
READ_TIMEOUT_S = 60
STREAM_CHUNK_BYTES = 1 << 20
# A stream refused with 429 (the partition's stream slots are taken, for example by
# streams just closed that the broker has not noticed yet) is asked again for so long.
BUSY_RETRY_S = 30
BUSY_PAUSE_S = 1.0
# Every digit as "0": a run of 19 zeros then means a number orjson may not read exactly.
DIGITS_AS_ZERO = bytes.maketrans(b"0123456789", b"0" * 10)
NINETEEN_DIGITS = b"0" * 19
# The longest ``cursors`` query parameter sent, as JSON before URL encoding (which
# about doubles it): request lines have limits (gunicorn's 4094 bytes, 8 KB at many
# proxies), and a cursor per partition of a 100-partition event type takes ~5 KB.
MAX_CURSORS_PARAM = 1500


class BrokerError(RuntimeError):
    """The broker could not be used; the message says why and what to fix."""


@dataclass(frozen=True)
class Partition:
    partition: str
    oldest_available_offset: str
    newest_available_offset: str
    unconsumed_events: int | None = None


@dataclass(frozen=True)
class StreamBatch:
    """One line of a low-level stream: the cursor of its last event and its events
    (none in a keep-alive), as parsed JSON objects or as Arrow columns
    (``arrow_lines``)."""
    partition: str
    offset: str
    events: Sequence[dict[str, Any]] | pa.RecordBatch


def check_url(url: str) -> str:
    """The broker's base URL without a trailing slash; a clear error if it is not one."""
    parsed = urlparse(url or "")
    if parsed.scheme not in ("http", "https") or not parsed.netloc:
        raise BrokerError(f"the broker url {url!r} is not an http:// or https:// URL "
                          "(for example http://localhost:8080)")
    return url.rstrip("/")


def read_token(token: str | None, token_file: str | None) -> str | None:
    """The bearer token: given directly, or the stripped content of a file (read at
    every call, so a token that is rotated on disk is picked up)."""
    if token:
        return token
    if token_file:
        try:
            return Path(token_file).read_text().strip()
        except OSError as error:
            raise BrokerError(f"cannot read the token file {token_file}: "
                              f"{error.strerror}") from None
    return None


class BrokerClient:
    """A small, picklable client; the HTTP session is created on first use, in
    whichever process (Spark driver or worker) uses it."""

    def __init__(self, url: str, token: str | None = None,
                 token_file: str | None = None) -> None:
        self.url = check_url(url)
        self.token = token
        self.token_file = token_file
        self._session: requests.Session | None = None

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_session": None}

    def _headers(self, extra: dict[str, str] | None = None) -> dict[str, str]:
        headers = {"Accept": "application/json"}
        token = read_token(self.token, self.token_file)
        if token:
            headers["Authorization"] = f"Bearer {token}"
        return {**headers, **(extra or {})}

    def _request(self, method: str, path: str, what: str, *, stream: bool = False,
                 busy_retry_s: float = 0, **kwargs: Any) -> requests.Response:
        """The response; with ``busy_retry_s``, a 429 is asked again (every second)
        for that long before it is an error."""
        deadline = time.monotonic() + busy_retry_s
        while True:
            response = self._send(method, path, what, stream, **kwargs)
            if response.status_code != 429 or time.monotonic() >= deadline:
                break
            response.close()
            time.sleep(BUSY_PAUSE_S)
        if response.status_code >= 400:
            raise BrokerError(_failure(response, what, self.url))
        return response

    def _send(self, method: str, path: str, what: str, stream: bool,
              **kwargs: Any) -> requests.Response:
        if self._session is None:
            self._session = requests.Session()
        url = self.url + path
        headers = self._headers(kwargs.get("headers"))
        kwargs = {k: v for k, v in kwargs.items() if k != "headers"}
        try:
            return self._session.request(
                method, url, timeout=(CONNECT_TIMEOUT_S, READ_TIMEOUT_S), stream=stream,
                headers=headers, **kwargs)
        except requests.ConnectionError as error:
            raise BrokerError(f"cannot reach the broker at {self.url} ({what}): "
                              f"{_reason(error)}; is the URL right and the broker up?") from None
        except requests.Timeout:
            raise BrokerError(f"the broker at {self.url} did not answer within "
                              f"{READ_TIMEOUT_S} s ({what})") from None
        except requests.RequestException as error:
            raise BrokerError(f"cannot talk to the broker at {self.url} ({what}): "
                              f"{error}") from None

    def _json(self, method: str, path: str, what: str, **kwargs: Any) -> Any:
        response = self._request(method, path, what, **kwargs)
        try:
            return response.json()
        except ValueError:
            raise BrokerError(f"{self.url} answered {what} with something that is not "
                              "JSON; is it a Nakadi broker?") from None

    def event_type(self, name: str) -> dict[str, Any]:
        return self._json("GET", f"/event-types/{quote(name, safe='')}",
                          f"event type {name!r}")

    def event_type_names(self) -> list[str]:
        return [item["name"] for item in self._json("GET", "/event-types", "the event types")]

    def partitions(self, name: str, cursors: dict[str, str] | None = None) -> list[Partition]:
        """The event type's partitions; with ``cursors``, each partition they name has
        how many events lie after its cursor (``unconsumed_events``). Many cursors are
        asked in several requests, each partition's figures taken from the answer to
        the request that named it."""
        found: dict[str, Partition] = {}
        for param in _cursors_params(cursors or {}):
            items = self._json("GET", f"/event-types/{quote(name, safe='')}/partitions",
                               f"the partitions of {name!r}",
                               params={"cursors": param} if param else {})
            for item in items:
                partition = Partition(item["partition"], item["oldest_available_offset"],
                                      item["newest_available_offset"],
                                      item.get("unconsumed_events"))
                if partition.partition not in found or partition.unconsumed_events is not None:
                    found[partition.partition] = partition
        return list(found.values())

    def shifted(self, name: str, shifts: list[tuple[str, str, int]]) -> list[str]:
        """The offsets ``shift`` events after (or, negative, before) each
        (partition, offset, shift), in the order given."""
        if not shifts:
            return []
        body = [{"partition": p, "offset": o, "shift": s} for p, o, s in shifts]
        answer = self._json("POST", f"/event-types/{quote(name, safe='')}/shifted-cursors",
                            f"shifting cursors of {name!r}", json=body)
        return [item["offset"] for item in answer]

    def cursor_distances(self, name: str, queries: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Per ``{"initial_cursor", "final_cursor"}`` query, the events between them
        (``distance``)."""
        if not queries:
            return []
        return self._json("POST", f"/event-types/{quote(name, safe='')}/cursor-distances",
                          f"cursor distances of {name!r}", json=queries)

    def subscription_start(self, subscription_id: str, name: str) -> dict[str, str] | str:
        """Where the subscription starts reading an event type: its committed offsets,
        else its ``read_from`` (``earliest``, ``latest`` or its initial cursors)."""
        committed = self.committed_cursors(subscription_id, name)
        if committed:
            return committed
        subscription = self._json("GET", f"/subscriptions/{quote(subscription_id, safe='')}",
                                  f"subscription {subscription_id!r}")
        if name not in subscription.get("event_types", []):
            raise BrokerError(f"subscription {subscription_id!r} does not read {name!r}")
        read_from = subscription.get("read_from", "end")
        if read_from == "cursors":
            return {c["partition"]: c["offset"] for c in subscription.get("initial_cursors", [])
                    if c.get("event_type") == name}
        return "earliest" if read_from == "begin" else "latest"

    def committed_cursors(self, subscription_id: str, name: str) -> dict[str, str]:
        """The subscription's committed offsets of one event type, per partition."""
        answer = self._json("GET", f"/subscriptions/{quote(subscription_id, safe='')}/cursors",
                            f"the cursors of subscription {subscription_id!r}")
        return {item["partition"]: item["offset"] for item in answer.get("items", [])
                if item.get("event_type") == name}

    def reset_cursors(self, subscription_id: str, name: str, offsets: dict[str, str]) -> None:
        """Sets the subscription's committed offsets of one event type (PATCH, which
        needs no stream session)."""
        items = [{"event_type": name, "partition": p, "offset": o} for p, o in offsets.items()]
        self._request("PATCH", f"/subscriptions/{quote(subscription_id, safe='')}/cursors",
                      f"setting the cursors of subscription {subscription_id!r}",
                      json={"items": items})

    def stream(self, name: str, partition: str, after: str, count: int,
               batch_limit: int = 1000, exact: bool = False,
               decode: Callable[[bytes], StreamBatch | None] | None = None,
               ) -> Iterator[StreamBatch]:
        """The ``count`` events of one partition after the offset ``after``, in
        batches as the broker sends them (keep-alives skipped). ``exact``: numbers
        must keep every digit (they are written back as JSON text). ``decode``
        reads a line where it can (None: it cannot), else it is parsed into dicts."""
        cursors = json.dumps([{"partition": partition, "offset": after}])
        response = self._request(
            "GET", f"/event-types/{quote(name, safe='')}/events",
            f"streaming partition {partition} of {name!r}", stream=True,
            busy_retry_s=BUSY_RETRY_S,
            # Uncompressed: gzip costs the broker and the reader more CPU than the
            # bytes it saves on a local network.
            headers={"X-Nakadi-Cursors": cursors, "Accept-Encoding": "identity"},
            # A partition that falls silent ends the stream after 30 keep-alives of 1 s,
            # so a range the broker cannot fill never hangs a Spark task.
            params={"batch_limit": min(batch_limit, count), "stream_limit": count,
                    "batch_flush_timeout": 1, "stream_keep_alive_limit": 30})
        try:
            for line in _lines(response):
                decoded = decode(line) if decode else None
                if decoded is None:
                    parsed = parse_line(line, exact)
                    cursor = parsed["cursor"]
                    decoded = StreamBatch(cursor["partition"], cursor["offset"],
                                          parsed.get("events") or [])
                if len(decoded.events):
                    yield decoded
        except requests.RequestException as error:
            raise BrokerError(f"the stream of partition {partition} of {name!r} from "
                              f"{self.url} broke off: {_reason(error)}") from None
        finally:
            response.close()


def parse_line(line: bytes, exact: bool = False) -> Any:
    """A stream line as JSON. orjson reads integers beyond 64 bits as floats, losing
    digits; when ``exact``, a line with a run of 19 digits is read by the standard
    library instead, which keeps them. (Columns of a Spark number type cannot hold
    such integers anyway, so only JSON-text columns need this.)"""
    if exact and NINETEEN_DIGITS in line.translate(DIGITS_AS_ZERO):
        return json.loads(line)
    return orjson.loads(line)


def _cursors_params(cursors: dict[str, str]) -> list[str]:
    """``cursors`` query parameters naming every cursor, each a JSON array of at most
    ``MAX_CURSORS_PARAM`` characters (or of one cursor); without cursors, one empty
    one (no parameter)."""
    if not cursors:
        return [""]
    params: list[str] = []
    group: list[str] = []
    length = 1  # "[" and the "," or "]" after each cursor
    for partition, offset in cursors.items():
        cursor = json.dumps({"partition": partition, "offset": offset})
        if group and length + len(cursor) + 1 > MAX_CURSORS_PARAM:
            params.append(f"[{','.join(group)}]")
            group, length = [], 1
        group.append(cursor)
        length += len(cursor) + 1
    params.append(f"[{','.join(group)}]")
    return params


def _lines(response: requests.Response) -> Iterator[bytes]:
    """Lines of an ``application/x-json-stream`` body, read in large chunks."""
    rest = b""
    for chunk in response.iter_content(STREAM_CHUNK_BYTES):
        lines = (rest + chunk).split(b"\n")
        rest = lines.pop()
        yield from (line for line in lines if line)
    if rest.strip():
        yield rest


def _reason(error: Exception) -> str:
    """The innermost cause of a requests error, without urllib3's object reprs."""
    text = str(error)
    for known in ("Connection refused", "Name or service not known",
                  "Temporary failure in name resolution", "No route to host",
                  "Connection reset by peer"):
        if known in text:
            return known.lower()
    return text


def _failure(response: requests.Response, what: str, url: str) -> str:
    """One sentence for a 4xx/5xx, with the Problem's detail when there is one."""
    detail = ""
    try:
        body = response.json()
        if isinstance(body, dict):
            detail = body.get("detail") or body.get("title") or ""
    except ValueError:
        pass
    status = response.status_code
    if status in (401, 403):
        advice = ("give a valid token (token / token_file option)" if status == 401 else
                  "use the token of a reader of the event type (token / token_file option)")
        return f"{url} refused {what} with {status}: {detail or advice}; {advice}"
    if status == 404 and what.startswith("event type"):
        return f"{what} does not exist at {url}"
    return f"{url} answered {what} with {status}" + (f": {detail}" if detail else "")
