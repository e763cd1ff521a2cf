"""Which stream reads which partition of a subscription: the partition topology
and the sessions (open streams) it is computed from."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

PartitionState = Literal["unassigned", "assigned", "reassigning"]
PartitionKey = tuple[str, str]
"""(event type, partition name): one partition of a subscription."""


def key_order(key: PartitionKey) -> tuple[str, int]:
    """Event types by name, partitions by number ("2" before "10")."""
    return key[0], int(key[1])


@dataclass(frozen=True)
class PartitionAssignment:
    """One partition's place in the topology.

    ``session`` streams it while ``assigned``; while ``reassigning`` it still
    streams it but hands it to ``next_session`` once its batches are committed.
    """

    event_type: str
    partition: str
    state: PartitionState = "unassigned"
    session: str | None = None
    next_session: str | None = None

    @property
    def key(self) -> PartitionKey:
        return self.event_type, self.partition

    def held_by(self, session: str) -> bool:
        """Whether ``session`` streams this partition now (assigned, or handing it over)."""
        return self.state != "unassigned" and self.session == session

    def heading_to(self) -> str | None:
        """The session that will stream the partition once any hand-over is done."""
        if self.state == "reassigning":
            return self.next_session
        return self.session if self.state == "assigned" else None


@dataclass(frozen=True)
class Session:
    """An open stream of a subscription.

    ``requested`` are the partitions it asked for directly (empty: it takes
    what the rebalance gives it). A ``closing`` session still holds its
    partitions until its last batches are committed, but gets no new ones.
    """

    id: str
    requested: frozenset[PartitionKey] = field(default_factory=frozenset)
    closing: bool = False


@dataclass(frozen=True)
class Topology:
    """Every partition of a subscription, ordered by ``key_order``."""

    partitions: tuple[PartitionAssignment, ...]

    def get(self, key: PartitionKey) -> PartitionAssignment | None:
        for assignment in self.partitions:
            if assignment.key == key:
                return assignment
        return None

    def held_by(self, session: str) -> list[PartitionAssignment]:
        return [p for p in self.partitions if p.held_by(session)]

    def heading_to(self, session: str) -> list[PartitionAssignment]:
        return [p for p in self.partitions if p.heading_to() == session]
