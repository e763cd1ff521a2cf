"""Committing cursors (POST) and resetting them (PATCH).

A commit must come from a stream that is open (or closing) and holds the
partitions committed; each offset only moves forward. The stream that holds
a partition watches its committed offset, so a commit frees its
``max_uncommitted_events`` room at once, on whatever instance it runs.

A reset marks the subscription (new streams get 409), waits for its streams
to end (they watch the mark), overwrites the offsets, and removes the mark.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import gevent.event

from app.coordination.subscription_state import SubscriptionState
from app.domain.topology import PartitionKey
from app.subscriptions import local_streams
from app.subscriptions.cursors import CheckedCursor

RESET_WAIT_S = 15.0
"""How long a reset waits for the streams to end: they end within a second,
but a stream of a worker that died keeps its session until ZooKeeper's
session timeout (10 s)."""


class CommitRefused(Exception):
    """The stream may not commit these cursors; the message says why (a 422)."""


@dataclass(frozen=True)
class CommitResult:
    cursor: Mapping[str, Any]
    result: str  # committed | outdated

    def response(self) -> dict[str, Any]:
        return {"cursor": self.cursor, "result": self.result}


def commit(state: SubscriptionState, stream_id: str, cursors: Sequence[CheckedCursor]
           ) -> list[CommitResult]:
    """Commit each cursor for the stream, in order: a cursor is ``committed`` when it
    moves its partition's offset forward (past the one before, or past an earlier
    cursor of the same commit), else ``outdated``. The checks and the writes are
    each one ZooKeeper round trip, however many partitions the commit names."""
    open_session, topology, current = state.commit_check(stream_id, [c.key for c in cursors])
    if not open_session:
        raise CommitRefused(f"stream {stream_id} is not an open stream of this subscription: "
                            "it ended (commit within commit_timeout of receiving a batch), or "
                            "the id is wrong; use the X-Nakadi-StreamId of the stream")
    for cursor in cursors:
        assignment = topology.get(cursor.key)
        if assignment is None or not assignment.held_by(stream_id):
            raise CommitRefused(
                f"partition {cursor.key[1]} of {cursor.key[0]} is not read by stream "
                f"{stream_id}: it went to another stream in a rebalance; its events will "
                "be sent again from the last commit")
    newest = {key: known[0] for key, known in current.items() if known is not None}
    moved: dict[PartitionKey, str] = {}
    results: list[tuple[CheckedCursor, bool]] = []
    for cursor in cursors:
        forward = cursor.key not in newest or newest[cursor.key] < cursor.offset
        if forward:
            newest[cursor.key] = moved[cursor.key] = cursor.offset
        results.append((cursor, forward))
    lost = state.commit_all(moved, current)  # to a concurrent commit that went further
    local_streams.committed(stream_id, {key: offset for key, offset in moved.items()
                                        if key not in lost})
    return [CommitResult(cursor.sent, "committed" if forward and cursor.key not in lost
                         else "outdated") for cursor, forward in results]


def reset(state: SubscriptionState, cursors: Sequence[CheckedCursor],
          starting_offsets: Callable[[], dict[PartitionKey, str]]) -> None:
    """Close every stream and store the cursors' offsets (``ResetInProgress`` if
    another reset runs)."""
    state.begin_reset()
    try:
        if not state.offsets_initialized():
            state.initialize_offsets(starting_offsets())
        _wait_for_streams_to_end(state)
        state.overwrite_offsets({c.key: c.offset for c in cursors})
    finally:
        state.end_reset()


def _wait_for_streams_to_end(state: SubscriptionState) -> None:
    deadline = time.monotonic() + RESET_WAIT_S
    changed = gevent.event.Event()
    while state.sessions(watch=lambda _event: changed.set()):
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return
        changed.wait(remaining)
        changed.clear()
