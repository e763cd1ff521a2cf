"""The rebalancing decision: which session should stream which partition.

Pure functions, no ZooKeeper: the coordination room reads the topology and
the sessions, calls ``rebalance``, and writes the result with a versioned
write. Every instance that computes it from the same input gets the same
answer, so concurrent rebalances agree.

The rules:
- a partition a session asked for directly goes to that session;
- the others are spread over the sessions that asked for none, the counts
  differing by at most one, each partition staying where it is (or where it
  is already heading) whenever that keeps the spread even;
- closing sessions keep what they hold but get nothing new;
- a partition taken from a live session is ``reassigning``: that session
  stops reading it and hands it over (``hand_over``) once its batches are
  committed; a partition of a session that is gone moves at once.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from app.domain.topology import (
    PartitionAssignment,
    PartitionKey,
    Session,
    Topology,
    key_order,
)


def rebalance(current: Topology, partitions: Iterable[PartitionKey],
              sessions: Iterable[Session]) -> Topology:
    """The new topology over ``partitions`` for the live ``sessions``."""
    keys = sorted(set(partitions), key=key_order)
    before = {p.key: p for p in current.partitions}
    alive = {session.id for session in sessions}
    candidates = sorted((s for s in sessions if not s.closing), key=lambda s: s.id)
    targets = _direct_targets(keys, before, candidates)
    auto = [s.id for s in candidates if not s.requested]
    free = [key for key in keys if key not in targets]
    targets.update(_spread(free, auto, before))
    return Topology(tuple(
        _moved(before.get(key) or PartitionAssignment(*key), targets[key], alive)
        for key in keys))


def hand_over(current: Topology, session: str, keys: Iterable[PartitionKey]) -> Topology:
    """The topology once ``session`` gave up ``keys``: each partition it was
    handing over goes to its next session; one it simply held becomes unassigned."""
    released = set(keys)
    moved = []
    for p in current.partitions:
        if p.key in released and p.held_by(session):
            following = p.next_session if p.state == "reassigning" else None
            p = PartitionAssignment(p.event_type, p.partition,
                                    "assigned" if following else "unassigned", following)
        moved.append(p)
    return Topology(tuple(moved))


def _direct_targets(keys: Sequence[PartitionKey], before: dict[PartitionKey, PartitionAssignment],
                    candidates: Sequence[Session]) -> dict[PartitionKey, str | None]:
    """Partitions asked for directly, each to its asker (if two ask, the one it
    is already heading to, else the smallest id: admission refuses that case)."""
    targets: dict[PartitionKey, str | None] = {}
    for key in keys:
        askers = [s.id for s in candidates if key in s.requested]
        if askers:
            heading = before[key].heading_to() if key in before else None
            targets[key] = heading if heading in askers else askers[0]
    return targets


def _owner(assignment: PartitionAssignment | None, sessions: set[str]) -> str | None:
    """The session among ``sessions`` a partition would stay with: where it is
    heading, else who holds it now."""
    if assignment is None:
        return None
    for owner in (assignment.heading_to(), assignment.session):
        if owner in sessions and assignment.state != "unassigned":
            return owner
    return None


def _spread(free: Sequence[PartitionKey], sessions: Sequence[str],
            before: dict[PartitionKey, PartitionAssignment]) -> dict[PartitionKey, str | None]:
    """``free`` partitions over ``sessions`` evenly, moving as few as possible."""
    if not sessions:
        return dict.fromkeys(free)
    base, extra = divmod(len(free), len(sessions))
    members = set(sessions)
    kept: dict[str, list[PartitionKey]] = {s: [] for s in sessions}
    for key in free:
        owner = _owner(before.get(key), members)
        if owner is not None:
            kept[owner].append(key)
    # The one-more places go to those holding most already: fewer partitions move.
    ranked = sorted(sessions, key=lambda s: (-len(kept[s]), s))
    quota = {s: base + (1 if rank < extra else 0) for rank, s in enumerate(ranked)}
    targets: dict[PartitionKey, str | None] = {}
    for session in sessions:
        for key in kept[session][:quota[session]]:
            targets[key] = session
    waiting = iter([key for key in free if key not in targets])
    for session in ranked:
        for _ in range(quota[session] - min(len(kept[session]), quota[session])):
            targets[next(waiting)] = session
    return targets


def _moved(before: PartitionAssignment, target: str | None, alive: set[str]
           ) -> PartitionAssignment:
    """The partition's new assignment, given where it should go."""
    holder = before.session if before.state != "unassigned" and before.session in alive else None
    event_type, partition = before.key
    if holder is None:
        if target is None:
            return PartitionAssignment(event_type, partition)
        return PartitionAssignment(event_type, partition, "assigned", target)
    if target is None or target == holder:
        # Nobody else should take it (or it stays): the live holder keeps it.
        return PartitionAssignment(event_type, partition, "assigned", holder)
    return PartitionAssignment(event_type, partition, "reassigning", holder, target)
