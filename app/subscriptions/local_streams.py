"""The subscription streams open in this process, by stream id.

A commit handled by the process that runs the stream tells the stream at once
what it committed, instead of the stream learning it from its ZooKeeper watch
one notification and one read later; the usual such commit is not announced on
the stream's commits node at all, so the watch does not fire for it (nor cost
the read that arms it again). The watch stays: commits that reach another
instance still wake the stream through it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from app.domain.topology import PartitionKey

CommitListener = Callable[[Mapping[PartitionKey, str]], None]

_open: dict[str, CommitListener] = {}


def opened(stream_id: str, on_commit: CommitListener) -> None:
    _open[stream_id] = on_commit


def closed(stream_id: str) -> None:
    _open.pop(stream_id, None)


def runs_here(stream_id: str) -> bool:
    return stream_id in _open


def committed(stream_id: str, offsets: Mapping[PartitionKey, str]) -> None:
    """Tell the stream, if it runs here, the offsets just committed for it."""
    listener = _open.get(stream_id)
    if listener is not None and offsets:
        listener(offsets)
