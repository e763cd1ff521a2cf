"""Committing cursors (POST) and resetting them (PATCH).

A commit must come from a stream that is open (or closing) and holds the
partitions committed; each offset only moves forward. A commit frees the
stream's ``max_uncommitted_events`` room at once, on whatever instance it runs:
the process that runs the stream tells it directly (``local_streams``); a commit
elsewhere is announced on the stream's commits node, which the stream watches.

A reset marks the subscription (new streams get 409), waits for its streams
to end (they watch the mark), overwrites the offsets, and removes the mark.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import gevent.event

from app.coordination import commit_versions
from app.coordination.subscription_state import CommitCheck, SubscriptionState
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
    cursor of the same commit), else ``outdated``. Usually one ZooKeeper request
    on the versions this process knows (``commit_versions``); else the checks and the
    writes are each one round trip, however many partitions the commit names."""
    results = _commit_on_known_versions(state, stream_id, cursors)
    if results is None:
        results = _commit_on_read_versions(state, stream_id, cursors)
    return results


def _forward(cursors: Sequence[CheckedCursor], committed: Mapping[PartitionKey, str]
             ) -> tuple[dict[PartitionKey, str], list[tuple[CheckedCursor, bool]]]:
    """The new offset of each partition the cursors move forward from ``committed``,
    and for each cursor whether it moves its partition forward."""
    newest = dict(committed)
    moved: dict[PartitionKey, str] = {}
    results: list[tuple[CheckedCursor, bool]] = []
    for cursor in cursors:
        forward = cursor.key not in newest or newest[cursor.key] < cursor.offset
        if forward:
            newest[cursor.key] = moved[cursor.key] = cursor.offset
        results.append((cursor, forward))
    return moved, results


def _commit_on_known_versions(state: SubscriptionState, stream_id: str,
                              cursors: Sequence[CheckedCursor]) -> list[CommitResult] | None:
    """The usual commit: every cursor moves forward from the offsets this process
    knows, in partitions the topology it knows gives the stream; written in one
    request that ZooKeeper refuses if any of that changed. None when the commit
    needs the slow path (something unknown, changed, outdated or refused), which
    decides and explains."""
    known = commit_versions.known(state.subscription_id)
    if known is None or any(cursor.key not in known.offsets for cursor in cursors):
        return None
    for cursor in cursors:
        assignment = known.topology.get(cursor.key)
        if assignment is None or not assignment.held_by(stream_id):
            return None
    moved, results = _forward(cursors, {key: offset for key, (offset, _) in known.offsets.items()})
    if not all(forward for _, forward in results):
        return None
    versions = state.commit_if_unchanged(stream_id, moved, known.topology_version,
                                         {key: known.offsets[key][1] for key in moved},
                                         announce=not local_streams.runs_here(stream_id))
    if versions is None:
        return None
    known.offsets.update({key: (offset, versions[key]) for key, offset in moved.items()})
    local_streams.committed(stream_id, moved)
    return [CommitResult(cursor.sent, "committed") for cursor in cursors]


def _commit_on_read_versions(state: SubscriptionState, stream_id: str,
                             cursors: Sequence[CheckedCursor]) -> list[CommitResult]:
    check = state.commit_check(stream_id, [c.key for c in cursors])
    if not check.open_session:
        raise CommitRefused(f"stream {stream_id} is not an open stream of this subscription: "
                            "it ended (commit within commit_timeout of receiving a batch), or "
                            "the id is wrong; use the X-Nakadi-StreamId of the stream")
    for cursor in cursors:
        assignment = check.topology.get(cursor.key)
        if assignment is None or not assignment.held_by(stream_id):
            raise CommitRefused(
                f"partition {cursor.key[1]} of {cursor.key[0]} is not read by stream "
                f"{stream_id}: it went to another stream in a rebalance; its events will "
                "be sent again from the last commit")
    moved, results = _forward(cursors, {key: known[0] for key, known in check.offsets.items()
                                        if known is not None})
    # ``lost``: to a concurrent commit that went further
    lost, versions = state.commit_all(moved, check.offsets)
    written = {key: offset for key, offset in moved.items() if key not in lost}
    if written:
        # Not one transaction with the writes: after a crash in between, the stream
        # reads the offsets itself once it heard of no commit for a while.
        state.announce(stream_id, written)
    local_streams.committed(stream_id, written)
    _remember(state.subscription_id, check, moved, versions)
    return [CommitResult(cursor.sent, "committed" if forward and cursor.key not in lost
                         else "outdated") for cursor, forward in results]


def _remember(subscription_id: str, check: CommitCheck, moved: Mapping[PartitionKey, str],
              versions: Mapping[PartitionKey, int]) -> None:
    """Keep what the slow path read and wrote for the next commit's fast path."""
    if check.topology_version is None:
        return
    previous = commit_versions.known(subscription_id)
    offsets = dict(previous.offsets) if previous is not None else {}
    offsets.update({key: known for key, known in check.offsets.items() if known is not None})
    for key in moved:
        if key in versions:
            offsets[key] = (moved[key], versions[key])
        else:  # written by the retrying path: its version is not known here
            offsets.pop(key, None)
    commit_versions.remember(subscription_id, commit_versions.CommitVersions(
        check.topology, check.topology_version, offsets))


def reset(state: SubscriptionState, cursors: Sequence[CheckedCursor],
          starting_offsets: Callable[[], dict[PartitionKey, str]]) -> None:
    """Close every stream and store the cursors' offsets (``ResetInProgress`` if
    another reset runs). No cursors only store the starting offsets when there are
    none yet, closing nothing: 001 offers the empty list "to initialize subscription
    cursors without side effects"."""
    if not cursors:
        if not state.offsets_initialized():
            state.initialize_offsets(starting_offsets())
        return
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
