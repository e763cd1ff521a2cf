"""Creating nodes in one transaction, and the nodes above them when missing, against
the real ZooKeeper."""

from __future__ import annotations

import uuid

import gevent
import pytest
from kazoo.exceptions import NodeExistsError

from app.coordination.nodes import create_all


@pytest.fixture
def root(zookeeper):
    path = f"/test-nodes-{uuid.uuid4().hex[:12]}"
    zookeeper.create(path)
    yield path
    zookeeper.delete(path, recursive=True)


@pytest.fixture
def transactions(zookeeper, monkeypatch) -> list[int]:
    """The number of operations of each transaction committed from now on."""
    committed: list[int] = []
    begin = zookeeper.transaction

    def counted():
        transaction = begin()
        commit = transaction.commit

        def counted_commit():
            committed.append(len(transaction.operations))
            return commit()
        transaction.commit = counted_commit
        return transaction
    monkeypatch.setattr(zookeeper, "transaction", counted)
    return committed


def test_missing_parents_are_made_with_the_nodes_in_one_transaction(
        zookeeper, root, transactions):
    """A subscription's first stream: its session and commits nodes' parents are new."""
    create_all(zookeeper, [(f"{root}/a/x", b"1"), (f"{root}/b/y", b"2")], ephemeral=True)
    assert transactions == [2, 4]  # the nodes alone, then with their parents
    assert zookeeper.get(f"{root}/a/x")[0] == b"1"
    assert zookeeper.get(f"{root}/b/y")[1].ephemeralOwner != 0
    assert zookeeper.get(f"{root}/a")[1].ephemeralOwner == 0


def test_greenlets_missing_the_same_parents_at_once_wait_for_one_to_make_them(
        zookeeper, root, transactions):
    """Ten streams of a new event type's partition opening together: each sends its
    node alone, one makes the parent with its node, the nine others then send theirs
    again; none makes the parent too, nor each node above it on its own."""
    creating = [gevent.spawn(create_all, zookeeper, [(f"{root}/p/stream-", b"")],
                             ephemeral=True, sequence=True) for _ in range(10)]
    gevent.joinall(creating, raise_error=True)
    assert sorted(transactions) == [1] * 19 + [2]
    assert len(zookeeper.get_children(f"{root}/p")) == 10
    assert zookeeper.get(f"{root}/p")[1].ephemeralOwner == 0


def test_any_other_missing_node_above_is_made_too(zookeeper, root):
    zookeeper.create(f"{root}/a")
    create_all(zookeeper, [(f"{root}/a/x", b"1"), (f"{root}/c/d/y", b"2")])
    assert zookeeper.exists(f"{root}/a/x") and zookeeper.exists(f"{root}/c/d/y")


def test_a_node_that_exists_fails_them_all(zookeeper, root):
    create_all(zookeeper, [(f"{root}/a/x", b"")])
    with pytest.raises(NodeExistsError):
        create_all(zookeeper, [(f"{root}/b/y", b""), (f"{root}/a/x", b"")])
    assert not zookeeper.exists(f"{root}/b/y")
