"""A position in an event type's partition, as the rooms below the API use it."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Position:
    """Reading starts after ``offset`` (a position across the event type's timelines;
    -1 before the first event ever stored) in ``partition``."""

    partition: int
    offset: int
