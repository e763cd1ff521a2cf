"""Limits concurrent low-level streams per partition, across every instance.

A stream takes a slot on each partition it reads: an ephemeral sequential node
under ``/low-level-streams/<event type>/<partition>``, all of a stream's nodes
created in one transaction and deleted in one. The oldest ``limit`` nodes of a
partition hold its slots; a stream whose node is not among them gives all its
nodes back and is refused. Nodes vanish with the stream, or with the session of
a worker that died. Without a connection, slots are given back in the
background once it returns (or vanish with the session), so a stream ending
during a ZooKeeper outage does not wait for it.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

import gevent
from kazoo.client import KazooClient
from kazoo.exceptions import KazooException

from app.coordination.nodes import create_all, delete_all

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
            delete_all(self._zookeeper, nodes)
        except KazooException as error:
            log.warning("stream slots %s are left to their session: %r", nodes, error)


def claim_slots(zookeeper: KazooClient, event_type: str, partitions: Iterable[int],
                limit: int) -> StreamSlots:
    """Take a slot on every partition, or raise ``TooManyStreams`` holding none."""
    partitions = list(partitions)
    parents = [f"{ROOT}/{event_type}/{partition}" for partition in partitions]
    slots = StreamSlots(zookeeper)
    try:
        slots._nodes = create_all(zookeeper, [(f"{parent}/stream-", b"") for parent in parents],
                                  ephemeral=True, sequence=True)
        # Every partition's holders asked at once: one round trip, not one per partition.
        asked = [zookeeper.get_children_async(parent) for parent in parents]
        for partition, node, holders in zip(partitions, slots._nodes, asked, strict=True):
            if sorted(holders.get()).index(node.rsplit("/", 1)[1]) >= limit:
                raise TooManyStreams(
                    f"partition {partition} of {event_type} already has {limit} streams; "
                    "close one or try again later")
    except BaseException:
        slots.release()
        raise
    return slots
