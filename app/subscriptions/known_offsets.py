"""The newest offset this process knows to exist in each partition of each timeline.

Offsets only grow, so a commit of an offset at or before one known here is
not past the partition's newest event, and needs no question to the storage.
The streams of this process teach it what they read; the storage's answer
teaches it the rest.
"""

from __future__ import annotations

_newest: dict[tuple[str, int], int] = {}


def learn(timeline_id: str, partition: int, offset: int) -> None:
    key = (timeline_id, partition)
    if offset > _newest.get(key, -1):
        _newest[key] = offset


def known_newest(timeline_id: str, partition: int) -> int:
    """The newest offset known to exist (-1 when none is known)."""
    return _newest.get((timeline_id, partition), -1)
