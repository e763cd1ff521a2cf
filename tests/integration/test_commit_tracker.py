"""A stream learns its commits from one ZooKeeper node, however many partitions a
commit moves and on whatever instance it was made, against the real ZooKeeper."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable

import gevent.event
import pytest

from app.coordination.subscription_nodes import remove_subscription_state
from app.coordination.subscription_state import SubscriptionState
from app.domain.timeline import Timeline, Timelines
from app.domain.topology import Session
from app.subscriptions.commit_tracker import QUIET_S, CommitTracker, HeldPartition
from app.subscriptions.partitions import SubscriptionPartitions
from app.subscriptions.stream_options import SubscriptionStreamParams
from tests.helpers.clock import Clock

KEYS = [("orders", "0"), ("orders", "1")]
PARTITIONS = SubscriptionPartitions(
    {"orders": Timelines((Timeline("t1", "orders", 1, "default", "topic", 2),))})


def offset(n: int) -> str:
    return PARTITIONS.client_offset(KEYS[0], n)


@pytest.fixture
def states(zookeeper, other_client):
    """The stream's instance and another one, of a subscription whose stream ``s``
    holds both partitions, having sent 10 events of each."""
    subscription_id = str(uuid.uuid4())
    mine = SubscriptionState(zookeeper, subscription_id)
    mine.initialize_offsets({key: offset(-1) for key in KEYS})
    mine.register(Session("s"))
    yield mine, SubscriptionState(other_client, subscription_id)
    remove_subscription_state(zookeeper, subscription_id)


def tracker(state: SubscriptionState, clock: Callable[[], float] = time.monotonic
            ) -> tuple[CommitTracker, gevent.event.Event]:
    held = {key: HeldPartition(committed=-1, sent=9, read=9) for key in KEYS}
    wake = gevent.event.Event()
    return CommitTracker("s", held, state, PARTITIONS, SubscriptionStreamParams(), wake,
                         clock), wake


def learned(commits: CommitTracker, wake: gevent.event.Event, uncommitted: int) -> bool:
    """Whether the tracker comes to count ``uncommitted`` events within 10 s."""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        commits.apply_commits()
        if commits.uncommitted() == uncommitted:
            return True
        wake.wait(0.1)
        wake.clear()
    return False


def test_each_commit_made_elsewhere_wakes_the_stream_with_what_it_moved(states):
    mine, theirs = states
    commits, wake = tracker(mine)
    commits.watch_commits()
    assert commits.uncommitted() == 20
    theirs.commit(KEYS[0], offset(4))
    theirs.announce("s", {KEYS[0]: offset(4)})
    assert learned(commits, wake, 15)
    theirs.commit(KEYS[1], offset(9))
    theirs.announce("s", {KEYS[1]: offset(9)})
    assert learned(commits, wake, 5)


def test_commits_announced_faster_than_read_are_all_learned(states):
    """Two announcements before one read: the last names only its own partition, so
    the stream reads every partition's committed offset."""
    mine, theirs = states
    for key, n in ((KEYS[0], 4), (KEYS[1], 7)):
        theirs.commit(key, offset(n))
        theirs.announce("s", {key: offset(n)})
    commits, wake = tracker(mine)
    commits.watch_commits()
    assert learned(commits, wake, 5 + 2)


def test_an_older_offset_read_late_does_not_undo_a_newer_one(states):
    mine, _ = states
    commits, _ = tracker(mine)
    commits.committed_here({KEYS[0]: offset(8)})
    commits.committed_here({KEYS[0]: offset(3), KEYS[1]: offset(1)})
    commits.apply_commits()
    assert commits.uncommitted() == 1 + 8


def test_a_commit_nobody_announced_is_read_once_the_stream_heard_of_none_for_a_while(states):
    """An instance from before the commits node (in a rolling upgrade) commits without
    announcing: a stream awaiting commits reads the offsets itself after ``QUIET_S``."""
    mine, theirs = states
    clock = Clock()
    commits, _ = tracker(mine, clock)
    commits.watch_commits()
    theirs.commit(KEYS[0], offset(4))
    clock.now += QUIET_S - 0.1
    commits.read_if_quiet()
    commits.apply_commits()
    assert commits.uncommitted() == 20
    clock.now += 0.1
    commits.read_if_quiet()
    commits.apply_commits()
    assert commits.uncommitted() == 15
