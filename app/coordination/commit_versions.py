"""What this process last saw of each subscription's commit-relevant nodes, with
their ZooKeeper versions: the topology and the committed offsets.

A commit sends these versions as the conditions of one multi-operation
(session exists, topology unchanged, each offset unchanged, then the new
offsets), so in the usual case it costs one request and one round trip. The
conditions make a stale entry harmless: ZooKeeper refuses the whole operation,
and the commit takes the slow path, which reads everything again and refreshes
the entry. Nothing here is ever trusted without its version being checked.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field

from app.domain.topology import PartitionKey, Topology

MAX_SUBSCRIPTIONS = 4096
"""Entries kept (least recently used go first): one per subscription committed
to through this process, each a topology and one offset per partition."""


@dataclass
class CommitVersions:
    topology: Topology
    topology_version: int
    offsets: dict[PartitionKey, tuple[str, int]] = field(default_factory=dict)


_known: OrderedDict[str, CommitVersions] = OrderedDict()


def known(subscription_id: str) -> CommitVersions | None:
    entry = _known.get(subscription_id)
    if entry is not None:
        _known.move_to_end(subscription_id)
    return entry


def remember(subscription_id: str, entry: CommitVersions) -> None:
    _known[subscription_id] = entry
    _known.move_to_end(subscription_id)
    while len(_known) > MAX_SUBSCRIPTIONS:
        _known.popitem(last=False)
