"""A subscription's coordination state against the real ZooKeeper of the test session."""

from __future__ import annotations

import gc
import uuid

import gevent
import gevent.event
import pytest
from kazoo.exceptions import NodeExistsError

from app.coordination.subscription_nodes import remove_subscription_state
from app.coordination.subscription_state import (
    ResetInProgress,
    SubscriptionGone,
    SubscriptionState,
)
from app.domain.topology import PartitionAssignment, Session, Topology

KEYS = [("orders", "0"), ("orders", "1"), ("payments", "0")]


@pytest.fixture
def subscription_id(zookeeper):
    sid = str(uuid.uuid4())
    yield sid
    remove_subscription_state(zookeeper, sid)


def offset(n: int) -> str:
    return f"001-0001-{n:018d}"


def test_concurrent_topology_changes_from_two_clients_all_survive(zookeeper, other_client,
                                                                  subscription_id):
    states = [SubscriptionState(zookeeper, subscription_id),
              SubscriptionState(other_client, subscription_id)]
    states[0].register(Session("s"))

    def add(n: int):
        def change(current: Topology) -> Topology:
            gevent.sleep(0)  # let the other writers read the same version
            return Topology((*current.partitions, PartitionAssignment("e", str(n))))
        states[n % 2].update_topology(change)

    gevent.joinall([gevent.spawn(add, n) for n in range(20)], raise_error=True)
    written = states[0].topology()
    assert sorted(int(p.partition) for p in written.partitions) == list(range(20))


def test_rebalance_assigns_the_open_sessions_and_a_closed_client_loses_its_session(
        zookeeper, other_client, subscription_id):
    mine = SubscriptionState(zookeeper, subscription_id)
    theirs = SubscriptionState(other_client, subscription_id)
    mine.register(Session("a"))
    theirs.register(Session("b", frozenset({("payments", "0")})))
    topology = mine.rebalance(KEYS)
    assert {p.key: p.heading_to() for p in topology.partitions} == {
        ("orders", "0"): "a", ("orders", "1"): "a", ("payments", "0"): "b"}
    assert theirs.topology() == topology
    assert {s.id: s.requested for s in mine.sessions()} == {
        "a": frozenset(), "b": frozenset({("payments", "0")})}

    other_client.stop()  # its ephemeral session node goes with the client
    assert [s.id for s in mine.sessions()] == ["a"]
    after = mine.rebalance(KEYS)
    assert all(p.session == "a" and p.state == "assigned" for p in after.partitions)


def test_the_first_session_makes_the_tree_and_sessions_leave_no_garbage(zookeeper,
                                                                        subscription_id):
    # What a stream leaves behind stays until the cycle collector runs, which a
    # worker of idle streams hardly does: a thousand streams opened together would
    # hold megabytes of it.
    state = SubscriptionState(zookeeper, subscription_id)
    state.register(Session("first"))  # on a subscription without any node yet
    assert [s.id for s in state.sessions()] == ["first"]
    gc.collect()
    gc.disable()
    try:
        for n in range(20):
            state.register(Session(f"s{n}"))
        assert gc.collect() == 0
    finally:
        gc.enable()
    assert len(state.sessions()) == 21
    with pytest.raises(NodeExistsError):
        state.register(Session("first"))


def counted(monkeypatch, zookeeper, method: str) -> list[str]:
    """The paths ``zookeeper.<method>`` is called on from now on."""
    paths: list[str] = []
    call = getattr(zookeeper, method)

    def counting(path, *args, **kwargs):
        paths.append(path)
        return call(path, *args, **kwargs)
    monkeypatch.setattr(zookeeper, method, counting)
    return paths


def called_at_once(zookeeper, subscription_id: str, what: str,
                   changed: list[gevent.event.Event], *args) -> list:
    """What streams of one worker calling ``what`` (with ``args``) at once got, each
    watching for a change with its event."""
    calling = [gevent.spawn(getattr(SubscriptionState(zookeeper, subscription_id), what),
                            *args, lambda _watched, event=event: event.set())
               for event in changed]
    gevent.joinall(calling, raise_error=True)
    return [greenlet.value for greenlet in calling]


def test_streams_reading_the_sessions_at_once_share_one_read_whose_watch_fires_them_all(
        zookeeper, other_client, subscription_id, monkeypatch):
    # Every stream of a subscription reads all its sessions whenever one comes or goes:
    # 96 streams starting together sent ~500 reads each.
    SubscriptionState(zookeeper, subscription_id).register(Session("a"))
    listed = counted(monkeypatch, zookeeper, "get_children")
    changed = [gevent.event.Event() for _ in range(20)]
    gc.collect()
    gc.disable()
    try:
        found = called_at_once(zookeeper, subscription_id, "sessions", changed)
        assert all([session.id for session in sessions] == ["a"] for sessions in found)
        del found
        assert gc.collect() == 0
    finally:
        gc.enable()
    assert len(listed) == 1
    assert not any(event.is_set() for event in changed)
    SubscriptionState(other_client, subscription_id).register(Session("b"))
    assert all(event.wait(5) for event in changed)


def test_streams_reading_the_topology_at_once_share_one_read_whose_watch_fires_them_all(
        zookeeper, other_client, subscription_id, monkeypatch):
    # Every stream of a subscription reads the topology whenever it changes.
    SubscriptionState(zookeeper, subscription_id).register(Session("a"))
    written = SubscriptionState(zookeeper, subscription_id).update_topology(
        lambda _current: Topology((PartitionAssignment("orders", "0", session="a"),)))
    read = counted(monkeypatch, zookeeper, "get")
    changed = [gevent.event.Event() for _ in range(20)]
    assert called_at_once(zookeeper, subscription_id, "topology", changed) == [written] * 20
    assert len(read) == 1
    assert not any(event.is_set() for event in changed)
    SubscriptionState(other_client, subscription_id).update_topology(
        lambda _current: Topology((PartitionAssignment("orders", "0", session="b"),)))
    assert all(event.wait(5) for event in changed)


def test_streams_rebalancing_at_once_share_one_rebalance_whose_sessions_watch_fires_them_all(
        zookeeper, other_client, subscription_id, monkeypatch):
    # Every stream rebalances whenever a session comes or goes: 96 streams starting
    # together read the topology ~900 times and wrote it ~500 times.
    state = SubscriptionState(zookeeper, subscription_id)
    for n in range(20):
        state.register(Session(f"s{n:02}"))
    state.update_topology(lambda _current: Topology(
        tuple(PartitionAssignment(*key, session="gone") for key in KEYS)))
    read, listed, written = (counted(monkeypatch, zookeeper, method)
                             for method in ("get", "get_children", "set"))
    changed = [gevent.event.Event() for _ in range(20)]
    found = called_at_once(zookeeper, subscription_id, "rebalance", changed, KEYS)
    assert (len(read), len(listed), len(written)) == (1, 1, 1)
    assert found == [state.topology()] * 20
    assert {p.session for p in found[0].partitions} == {"s00", "s01", "s02"}
    assert not any(event.is_set() for event in changed)
    SubscriptionState(other_client, subscription_id).register(Session("b"))
    assert all(event.wait(5) for event in changed)


def test_closing_sessions_are_marked(zookeeper, subscription_id):
    state = SubscriptionState(zookeeper, subscription_id)
    session = Session("a")
    state.register(session)
    state.mark_closing(session)
    assert state.sessions() == [Session("a", closing=True)]
    state.unregister("a")
    assert state.sessions() == []
    assert state.control("a") == (False, False)


def test_starting_offsets_are_stored_exactly_once_under_a_race(zookeeper, other_client,
                                                                subscription_id):
    states = [SubscriptionState(zookeeper, subscription_id),
              SubscriptionState(other_client, subscription_id)]
    tries = [gevent.spawn(states[n % 2].initialize_offsets,
                          {key: offset(n) for key in KEYS}) for n in range(6)]
    gevent.joinall(tries, raise_error=True)
    winners = [n for n, attempt in enumerate(tries) if attempt.value]
    assert len(winners) == 1
    assert set(states[0].committed_many(KEYS).values()) == {offset(winners[0])}
    assert states[1].offsets_initialized()


def test_commits_only_move_forward_even_when_racing(zookeeper, other_client, subscription_id):
    states = [SubscriptionState(zookeeper, subscription_id),
              SubscriptionState(other_client, subscription_id)]
    states[0].initialize_offsets({key: "001-0001--1" for key in KEYS})
    assert states[0].commit(KEYS[0], offset(5))
    assert not states[0].commit(KEYS[0], offset(5))
    assert not states[1].commit(KEYS[0], offset(3))
    assert states[0].committed_many([KEYS[0]])[KEYS[0]] == offset(5)

    racing = [gevent.spawn(states[n % 2].commit, KEYS[1], offset(n)) for n in range(30)]
    gevent.joinall(racing, raise_error=True)
    assert states[0].committed_many(KEYS[1:]) == {KEYS[1]: offset(29), KEYS[2]: "001-0001--1"}


def test_a_commit_announced_by_another_client_wakes_the_streams_watch(
        zookeeper, other_client, subscription_id):
    state = SubscriptionState(zookeeper, subscription_id)
    state.register(Session("s"))
    fired = gevent.event.Event()
    assert state.announced("s", lambda event: fired.set()) == ({}, 0)
    SubscriptionState(other_client, subscription_id).announce("s", {KEYS[0]: offset(1)})
    assert fired.wait(10)
    assert state.announced("s", None) == ({KEYS[0]: offset(1)}, 1)


def test_a_session_and_its_commits_node_come_and_go_together(zookeeper, other_client,
                                                             subscription_id):
    mine = SubscriptionState(zookeeper, subscription_id)
    mine.register(Session("a"))
    theirs = SubscriptionState(other_client, subscription_id)
    theirs.register(Session("b"))
    mine.unregister("a")
    assert mine.announced("a", None) is None
    theirs.announce("a", {KEYS[0]: offset(1)})  # the stream ended: nobody to tell
    assert mine.announced("a", None) is None
    other_client.stop()  # its ZooKeeper session dies, and both nodes with it
    assert mine.announced("b", None) is None
    assert mine.sessions() == []


def test_a_reset_can_run_only_once_at_a_time_and_dies_with_its_client(
        zookeeper, other_client, subscription_id):
    mine = SubscriptionState(zookeeper, subscription_id)
    theirs = SubscriptionState(other_client, subscription_id)
    theirs.begin_reset()
    with pytest.raises(ResetInProgress):
        mine.begin_reset()
    assert mine.starting_checks() == (True, False)
    other_client.stop()
    assert mine.starting_checks() == (False, False)
    mine.begin_reset()
    mine.end_reset()
    assert mine.starting_checks() == (False, False)


def test_offsets_can_be_reset_backwards(zookeeper, subscription_id):
    state = SubscriptionState(zookeeper, subscription_id)
    state.initialize_offsets({key: offset(9) for key in KEYS})
    state.overwrite_offsets({KEYS[0]: offset(2)})
    assert state.committed_many(KEYS) == {KEYS[0]: offset(2), KEYS[1]: offset(9),
                                          KEYS[2]: offset(9)}


def test_deleting_the_subscription_fires_watches_and_ends_reads(zookeeper, subscription_id):
    state = SubscriptionState(zookeeper, subscription_id)
    state.register(Session("a"))
    state.rebalance(KEYS)
    fired = gevent.event.Event()
    state.topology(watch=lambda event: fired.set())
    remove_subscription_state(zookeeper, subscription_id)
    assert fired.wait(10)
    with pytest.raises(SubscriptionGone):
        state.topology()
    with pytest.raises(SubscriptionGone):
        state.sessions()
    with pytest.raises(SubscriptionGone):
        state.rebalance(KEYS)
