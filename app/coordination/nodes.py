"""Creating and deleting ZooKeeper nodes in one round trip, without leaving garbage behind.

kazoo's ``create`` and ``ensure_path`` leave a reference cycle behind on every
call (and a traceback whenever a node is missing or exists already), which
lives until the cycle collector runs: an idle worker hardly runs it, and the
garbage of a thousand streams opened together cost 20-25 KB per stream. A
transaction returns its errors as values and leaves nothing behind, so nodes
are created (and deleted) in transactions here.

Streams opening together on a new event type (or subscription) all miss the same
parents: one greenlet of the process makes them, with its own nodes, while the
others wait for it, then create theirs. Each making them too, the ten streams of
a new partition sent ZooKeeper ~56 transactions instead of ~20, and a worker
opening 2,000 such streams at once took twice as long.
"""

from __future__ import annotations

from collections.abc import Iterable

import gevent.event
from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError, RolledBackError, RuntimeInconsistency

_parents_in_making: dict[tuple[KazooClient, tuple[str, ...]], gevent.event.Event] = {}
"""Per client and set of parents, set once the greenlet making them is done."""


def create_all(zookeeper: KazooClient, nodes: list[tuple[str, bytes]], *, ephemeral: bool = False,
               sequence: bool = False) -> list[str]:
    """Create every (path, data) node in one transaction (one round trip), making the
    nodes above them when one is missing; their paths (with the sequence number).
    Raises the error that failed the transaction, e.g. ``NodeExistsError``."""
    if not nodes:
        return []
    results = _create_in_one(zookeeper, nodes, ephemeral, sequence)
    if any(isinstance(result, NoNodeError) for result in results):
        results = _with_parents(zookeeper, nodes, ephemeral, sequence)
    failures = [result for result in results if isinstance(result, Exception)]
    if failures:  # one names the cause; the others say they were rolled back with it
        raise next((failure for failure in failures
                    if not isinstance(failure, RolledBackError)), failures[0])
    return results


def delete_all(zookeeper: KazooClient, paths: list[str]) -> None:
    """Delete every node in one transaction (one round trip); nodes already gone are
    left out of another try. Raises any other error, e.g. ``NotEmptyError``."""
    while paths:
        transaction = zookeeper.transaction()
        for path in paths:
            transaction.delete(path)
        results = transaction.commit()
        gone = {path for path, result in zip(paths, results, strict=True)
                if isinstance(result, NoNodeError)}
        failures = [result for result in results if isinstance(result, Exception) and not
                    isinstance(result, NoNodeError | RolledBackError | RuntimeInconsistency)]
        if failures:
            raise failures[0]
        if not gone:
            return
        paths = [path for path in paths if path not in gone]


def make_paths(zookeeper: KazooClient, paths: Iterable[str]) -> None:
    """Create the paths and the nodes above them, each node in a transaction of its
    own: another process may create one first, which is as good."""
    nodes = {"/".join(path.split("/")[:depth]) for path in paths
             for depth in range(2, path.count("/") + 2)}
    for node in sorted(nodes, key=len):
        transaction = zookeeper.transaction()
        transaction.create(node)
        transaction.commit()  # NodeExistsError: made meanwhile; other failures show next


def _with_parents(zookeeper: KazooClient, nodes: list[tuple[str, bytes]], ephemeral: bool,
                  sequence: bool) -> list:
    """The nodes created with their missing parents. Not ``SharedCalls``: the greenlet
    making the parents creates its own nodes in the same transaction, and the others
    theirs once it is done."""
    parents = sorted({path.rsplit("/", 1)[0] for path, _ in nodes},
                     key=lambda path: (path.count("/"), path))
    making = (zookeeper, tuple(parents))
    made_by_another = _parents_in_making.get(making)
    if made_by_another is not None:
        made_by_another.wait()
        results = _create_in_one(zookeeper, nodes, ephemeral, sequence)
        if any(isinstance(result, NoNodeError) for result in results):  # it failed
            results = _after_paths(zookeeper, nodes, ephemeral, sequence, parents)
        return results
    made = _parents_in_making[making] = gevent.event.Event()
    try:
        # Usually only the nodes' parents are missing (a subscription's first stream):
        # made with them in one transaction.
        results = _create_in_one(zookeeper, nodes, ephemeral, sequence, parents)[len(parents):]
        if any(isinstance(result, Exception) for result in results):
            results = _after_paths(zookeeper, nodes, ephemeral, sequence, parents)
        return results
    finally:
        del _parents_in_making[making]
        made.set()


def _after_paths(zookeeper: KazooClient, nodes: list[tuple[str, bytes]], ephemeral: bool,
                 sequence: bool, parents: list[str]) -> list:
    """The nodes created once every node above them is (a parent exists, one above is
    missing; or another process made the parents first)."""
    make_paths(zookeeper, parents)
    return _create_in_one(zookeeper, nodes, ephemeral, sequence)


def _create_in_one(zookeeper: KazooClient, nodes: list[tuple[str, bytes]], ephemeral: bool,
                   sequence: bool, parents: Iterable[str] = ()) -> list:
    """The nodes, after the (persistent, empty) ``parents``, in one transaction."""
    transaction = zookeeper.transaction()
    for parent in parents:
        transaction.create(parent)
    for path, data in nodes:
        transaction.create(path, data, ephemeral=ephemeral, sequence=sequence)
    return transaction.commit()
