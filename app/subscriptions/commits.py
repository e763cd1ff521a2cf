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
    """Commit each cursor for the stream, in order."""
    if not state.session_exists(stream_id):
        raise CommitRefused(f"stream {stream_id} is not an open stream of this subscription: "
                            "it ended (commit within commit_timeout of receiving a batch), or "
                            "the id is wrong; use the X-Nakadi-StreamId of the stream")
    topology = state.topology()
    for cursor in cursors:
        assignment = topology.get(cursor.key)
        if assignment is None or not assignment.held_by(stream_id):
            raise CommitRefused(
                f"partition {cursor.key[1]} of {cursor.key[0]} is not read by stream "
                f"{stream_id}: it went to another stream in a rebalance; its events will "
                "be sent again from the last commit")
    return [CommitResult(c.sent, "committed" if state.commit(c.key, c.offset) else "outdated")
            for c in cursors]


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
