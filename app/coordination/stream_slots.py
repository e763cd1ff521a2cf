"""Limits concurrent low-level streams per partition, across every instance.

A stream takes a slot on each partition it reads: an ephemeral sequential node
under ``/low-level-streams/<event type>/<partition>``, all of a stream's nodes
created in one transaction. The oldest ``limit`` nodes of a partition hold its
slots; a stream whose node is not among them gives all its nodes back and is
refused. Nodes vanish with the stream, or with the session of a worker that
died. Without a connection, slots are given back in the background once it
returns (or vanish with the session), so a stream ending during a ZooKeeper
outage does not wait for it.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterable

import gevent
from kazoo.client import KazooClient
from kazoo.exceptions import KazooException, NoNodeError, RolledBackError

ROOT = "/low-level-streams"

log = logging.getLogger(__name__)


class TooManyStreams(Exception):
    """A partition has no free slot; the message names it."""


class StreamSlots:
    """The slots one stream holds; ``release`` gives them back."""

    def __init__(self, zookeeper: KazooClient) -> None:
        self._zookeeper = zookeeper
        self._nodes: list[str] = []

    def release(self) -> None:
        nodes, self._nodes = self._nodes, []
        if self._zookeeper.connected:
            self._delete(nodes)
        else:
            gevent.spawn(self._delete, nodes)

    def _delete(self, nodes: list[str]) -> None:
        try:
            for node in nodes:
                with contextlib.suppress(NoNodeError):
                    self._zookeeper.delete(node)
        except KazooException as error:
            log.warning("stream slots %s are left to their session: %r", nodes, error)


def claim_slots(zookeeper: KazooClient, event_type: str, partitions: Iterable[int],
                limit: int) -> StreamSlots:
    """Take a slot on every partition, or raise ``TooManyStreams`` holding none."""
    partitions = list(partitions)
    parents = [f"{ROOT}/{event_type}/{partition}" for partition in partitions]
    slots = StreamSlots(zookeeper)
    try:
        slots._nodes = _create_nodes(zookeeper, parents)
        for partition, parent, node in zip(partitions, parents, slots._nodes, strict=True):
            holders = sorted(zookeeper.get_children(parent))
            if holders.index(node.rsplit("/", 1)[1]) >= limit:
                raise TooManyStreams(
                    f"partition {partition} of {event_type} already has {limit} streams; "
                    "close one or try again later")
    except BaseException:
        slots.release()
        raise
    return slots


def _create_nodes(zookeeper: KazooClient, parents: list[str]) -> list[str]:
    """A node under every parent, all created in one transaction (one round trip);
    the parents are made when one is missing. Not kazoo's ``create`` nor
    ``ensure_path``: each call of them leaves a reference cycle (and, when a node
    is missing or exists, a traceback) that lives until the cycle collector runs,
    which an idle worker hardly does: the garbage of a thousand streams opened
    together cost the worker 20-25 KB per stream."""
    if not parents:
        return []
    results = _commit_creates(zookeeper, parents)
    if any(isinstance(result, NoNodeError) for result in results):
        _make_paths(zookeeper, parents)
        results = _commit_creates(zookeeper, parents)
    failures = [result for result in results if isinstance(result, Exception)]
    if failures:  # one names the cause; the others say they were rolled back with it
        raise next((failure for failure in failures
                    if not isinstance(failure, RolledBackError)), failures[0])
    return results


def _commit_creates(zookeeper: KazooClient, parents: list[str]) -> list:
    """What a transaction creating an ephemeral sequential node under every parent
    returned: each node's path, or the error that failed it all."""
    transaction = zookeeper.transaction()
    for parent in parents:
        transaction.create(f"{parent}/stream-", ephemeral=True, sequence=True)
    return transaction.commit()


def _make_paths(zookeeper: KazooClient, paths: list[str]) -> None:
    """Create the paths and the nodes above them, each node in a transaction of its
    own: another stream may create one first, which is as good."""
    nodes = {"/".join(path.split("/")[:depth]) for path in paths
             for depth in range(2, path.count("/") + 2)}
    for node in sorted(nodes, key=len):
        transaction = zookeeper.transaction()
        transaction.create(node)
        transaction.commit()  # NodeExistsError: made meanwhile; other failures show next
