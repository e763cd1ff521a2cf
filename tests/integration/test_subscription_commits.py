"""Commits decide on what ZooKeeper holds, not on what this process saw before.

A commit usually writes on the versions this process remembers from its
previous commit; each test changes one of those things from another client (as
another instance of the broker would) and checks that the next commit decides
on the change."""

from __future__ import annotations

import uuid

import gevent.event
import pytest

from app.coordination.subscription_nodes import remove_subscription_state
from app.coordination.subscription_state import SubscriptionState
from app.domain.topology import Session
from app.subscriptions import local_streams
from app.subscriptions.commits import CommitRefused, commit
from app.subscriptions.cursors import CheckedCursor
from app.subscriptions.rebalance import hand_over

KEYS = [("orders", "0"), ("orders", "1")]


@pytest.fixture
def states(zookeeper, other_client):
    """This process's state of a fresh subscription whose one stream ``s`` holds both
    partitions and has committed once (so the next commit can take the fast path),
    and another instance's."""
    subscription_id = str(uuid.uuid4())
    mine = SubscriptionState(zookeeper, subscription_id)
    theirs = SubscriptionState(other_client, subscription_id)
    mine.initialize_offsets({key: offset(0) for key in KEYS})
    mine.register(Session("s"))
    mine.rebalance(KEYS)
    assert results(mine, offset(1), offset(1)) == ["committed", "committed"]
    yield mine, theirs
    remove_subscription_state(zookeeper, subscription_id)


def offset(n: int) -> str:
    return f"001-0001-{n:018d}"


def results(state: SubscriptionState, *offsets: str) -> list[str]:
    cursors = [CheckedCursor(key, value, {"partition": key[1], "offset": value})
               for key, value in zip(KEYS, offsets, strict=False)]
    return [result.result for result in commit(state, "s", cursors)]


def test_commits_in_a_row_each_move_the_offsets(states):
    mine, theirs = states
    for n in range(2, 6):
        assert results(mine, offset(n), offset(n)) == ["committed", "committed"]
    assert list(theirs.committed_many(KEYS).values()) == [offset(5), offset(5)]
    assert results(mine, offset(4)) == ["outdated"]
    assert theirs.committed_many(KEYS[:1]) == {KEYS[0]: offset(5)}


def test_a_commit_behind_one_another_instance_wrote_is_outdated(states):
    mine, theirs = states
    assert theirs.commit(KEYS[0], offset(7))
    assert results(mine, offset(5), offset(5)) == ["outdated", "committed"]
    assert list(theirs.committed_many(KEYS).values()) == [offset(7), offset(5)]


def test_after_a_reset_backwards_commits_move_from_the_reset_offsets(states):
    mine, theirs = states
    assert results(mine, offset(9)) == ["committed"]
    theirs.overwrite_offsets({KEYS[0]: offset(0)})
    assert results(mine, offset(3)) == ["committed"]
    assert theirs.committed_many([KEYS[0]])[KEYS[0]] == offset(3)


def test_a_partition_rebalanced_away_refuses_the_commit(states):
    mine, theirs = states
    theirs.register(Session("t"))
    moving = [p.key for p in theirs.rebalance(KEYS).partitions if p.state == "reassigning"]
    assert len(moving) == 1
    theirs.update_topology(lambda topology: hand_over(topology, "s", moving))
    index = KEYS.index(moving[0])
    with pytest.raises(CommitRefused, match="not read by stream s"):
        results(mine, *[offset(4)] * (index + 1))
    assert theirs.committed_many([moving[0]])[moving[0]] == offset(1)


def test_an_ended_stream_cannot_commit(states):
    mine, theirs = states
    theirs.unregister("s")
    with pytest.raises(CommitRefused, match="not an open stream"):
        results(mine, offset(4), offset(4))
    assert list(theirs.committed_many(KEYS).values()) == [offset(1), offset(1)]


def test_every_commit_is_announced_to_its_stream_with_what_it_moved(states):
    mine, theirs = states
    # The fixture's commit took the slow path (nothing was known yet): announced too.
    assert theirs.announced("s", None) == ({KEYS[0]: offset(1), KEYS[1]: offset(1)}, 1)
    assert results(mine, offset(2)) == ["committed"]
    assert theirs.announced("s", None) == ({KEYS[0]: offset(2)}, 2)
    assert theirs.commit(KEYS[0], offset(7))  # another instance: the slow path follows
    assert results(mine, offset(5), offset(5)) == ["outdated", "committed"]
    assert theirs.announced("s", None) == ({KEYS[1]: offset(5)}, 3)
    assert results(mine, offset(6), offset(5)) == ["outdated", "outdated"]
    assert theirs.announced("s", None)[1] == 3  # nothing moved: nothing announced


def test_a_commit_in_the_stream_s_process_tells_it_directly_and_fires_no_watch(states):
    # Announcing it too fired the stream's watch, whose callback read the node again
    # to arm it: a notification and a read per commit for what the stream knew.
    mine, theirs = states
    told: list[dict] = []
    local_streams.opened("s", lambda offsets: told.append(dict(offsets)))
    try:
        fired = gevent.event.Event()
        assert theirs.announced("s", lambda _event: fired.set())[1] == 1
        assert results(mine, offset(2), offset(3)) == ["committed", "committed"]
        assert told == [{KEYS[0]: offset(2), KEYS[1]: offset(3)}]
        assert not fired.wait(0.5)
        assert theirs.announced("s", None) == ({KEYS[0]: offset(1), KEYS[1]: offset(1)}, 1)
        assert list(theirs.committed_many(KEYS).values()) == [offset(2), offset(3)]
        theirs.unregister("s")  # the stream ended meanwhile: still refused
        with pytest.raises(CommitRefused, match="not an open stream"):
            results(mine, offset(4), offset(4))
        assert told == [{KEYS[0]: offset(2), KEYS[1]: offset(3)}]
    finally:
        local_streams.closed("s")
