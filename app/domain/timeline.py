"""A timeline: the period in which an event type's events live in one storage topic."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Timeline:
    id: str
    event_type: str
    order: int
    storage_id: str
    topic: str
    partitions: int
