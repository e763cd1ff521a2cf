"""The commit bookkeeping of one subscription stream: how far each partition it
holds was sent and committed, the committed offsets its ZooKeeper watch (or
commits in this process) report, the ``commit_timeout`` clock, and which
partitions being handed over are done.

The stream state machine (``app.subscriptions.stream``) decides what to read and
send; this keeps count of what its client committed of that.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

import gevent
import gevent.event

from app.coordination.subscription_state import SubscriptionState
from app.domain.topology import PartitionKey
from app.subscriptions.partitions import SubscriptionPartitions
from app.subscriptions.rebalance import hand_over
from app.subscriptions.stream_options import SubscriptionStreamParams

QUIET_S = 2.0
"""How long a stream with events awaiting a commit hears of none before it reads
its partitions' committed offsets itself. Commits that were not announced: those
of instances from before the commits node (a rolling upgrade), and one whose
instance died between a slow-path commit's writes and its announcement."""


@dataclass
class HeldPartition:
    """A partition a stream streams, in positions (through all timelines)."""

    committed: int
    sent: int
    read: int
    releasing_since: float | None = None  # set while handing it over


class CommitTracker:
    """Commits against the partitions a stream holds. ``held`` is the stream's own
    map: the stream adds, reads and drops partitions; the tracker moves their
    committed positions and gives back the handed-over ones once committed."""

    def __init__(self, session_id: str, held: dict[PartitionKey, HeldPartition],
                 state: SubscriptionState, partitions: SubscriptionPartitions,
                 params: SubscriptionStreamParams, wake: gevent.event.Event,
                 clock: Callable[[], float]) -> None:
        self._session_id = session_id
        self._held = held
        self._state = state
        self._partitions = partitions
        self._params = params
        self._wake = wake  # set when a committed offset was read
        self._clock = clock
        self._commits_read: dict[PartitionKey, str] = {}
        self._read_error: Exception | None = None
        self._announcements = 0  # the commits node's version: commits seen so far
        self._heard_at = clock()  # when a commit was last read or told
        self.commit_deadline: float | None = None

    def watch_commits(self) -> None:
        """Follow the commits announced for the stream, from the first."""
        self._read_announcement()

    def _announced(self, _event: object) -> None:
        # kazoo runs watches one after another: read in a greenlet of its own.
        gevent.spawn(self._read_announcement)

    def _read_announcement(self) -> None:
        """Read the last commit's offsets, arming the watch for the next; when more
        than one commit came since the last read, read every partition's offset."""
        try:
            announced = self._state.announced(self._session_id, self._announced)
            if announced is None:
                return  # the session is gone; the stream sees that itself
            offsets, count = announced
            seen, self._announcements = self._announcements, count
            if count == seen:
                return
            if count != seen + 1:
                offsets = self._read_held()
        except Exception as error:  # handed to the stream, which ends
            self._read_error = error
            self._wake.set()
        else:
            self.committed_here(offsets)

    def committed_here(self, offsets: Mapping[PartitionKey, str]) -> None:
        """Committed offsets read, or told by a commit in this process. Reads may
        finish out of order; within a stream's life an offset only moves forward."""
        for key, offset in offsets.items():
            known = self._commits_read.get(key)
            if known is None or offset > known:
                self._commits_read[key] = offset
        self._heard_at = self._clock()
        self._wake.set()

    def read_if_quiet(self) -> None:
        """Read the committed offsets of the partitions held when events await a
        commit and none was heard of for ``QUIET_S``."""
        if self._clock() - self._heard_at >= QUIET_S and self.uncommitted() > 0:
            self.committed_here(self._read_held())

    def _read_held(self) -> dict[PartitionKey, str]:
        """The committed offsets of the partitions held, read in one round trip."""
        return {key: offset for key, offset in self._state.committed_many(list(self._held)).items()
                if offset is not None}

    def position(self, key: PartitionKey, committed: str | None) -> int:
        return self._partitions.position(key, committed) if committed else -1

    def apply_commits(self) -> None:
        """Take in the committed offsets read since the last turn."""
        if self._read_error is not None:
            raise self._read_error
        read, self._commits_read = self._commits_read, {}
        for key, committed in read.items():
            self._update_committed(key, self.position(key, committed))

    def _update_committed(self, key: PartitionKey, position: int) -> None:
        held = self._held.get(key)
        if held is not None and position > held.committed:
            held.committed = position
            self.commit_deadline = None
            if self.uncommitted() > 0:
                self.commit_deadline = self._clock() + self._params.commit_timeout

    def sent(self) -> None:
        """Events were sent: their commit is due within ``commit_timeout`` unless
        earlier ones are already awaited."""
        if self.commit_deadline is None:
            self.commit_deadline = self._clock() + self._params.commit_timeout

    def timed_out(self, now: float) -> bool:
        """Whether events sent went uncommitted for ``commit_timeout``."""
        if self.uncommitted() == 0:
            self.commit_deadline = None
        elif self.commit_deadline is not None and now >= self.commit_deadline:
            return True
        return False

    def hand_over_committed(self) -> None:
        now = self._clock()
        done = [key for key, held in self._held.items() if held.releasing_since is not None
                and (held.committed >= held.sent
                     or now >= held.releasing_since + self._params.commit_timeout)]
        if done:
            self._state.update_topology(lambda t: hand_over(t, self._session_id, done))
            for key in done:
                self._held.pop(key)

    def uncommitted(self) -> int:
        return sum([h.sent - h.committed for h in self._held.values() if h.sent > h.committed])
