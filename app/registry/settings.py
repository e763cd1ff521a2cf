"""Installation-wide bounds for event types, passed in by the caller (never read from the
environment here: the app's config turns `NAKADI_*` variables into one of these)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class RegistrySettings:
    max_name_length: int = 255
    # Nakadi's own defaults: retention between 3 hours and 4 days, 4 days when not given.
    min_retention_time_ms: int = 10_800_000
    max_retention_time_ms: int = 345_600_000
    default_retention_time_ms: int = 345_600_000
    default_partitions: int = 1
    max_partitions: int = 100
    # A schema is parsed, checked and compiled in the request that brings it, and compiled
    # again by each worker's first publish: ~1.2 s of a worker's CPU per MB, during which
    # nothing else of that worker runs (50 MB outlasted gunicorn's 30 s timeout).
    max_schema_bytes: int = 1_000_000

    def __post_init__(self) -> None:
        if self.max_name_length < 1:
            raise ValueError("max_name_length must be at least 1")
        if self.max_schema_bytes < 1:
            raise ValueError("max_schema_bytes must be at least 1")
        if not (
            0
            < self.min_retention_time_ms
            <= self.default_retention_time_ms
            <= self.max_retention_time_ms
        ):
            raise ValueError(
                "retention bounds must satisfy 0 < min <= default <= max, got "
                f"{self.min_retention_time_ms} <= {self.default_retention_time_ms} "
                f"<= {self.max_retention_time_ms}"
            )
        if not 1 <= self.default_partitions <= self.max_partitions:
            raise ValueError(
                "partition counts must satisfy 1 <= default_partitions <= max_partitions, got "
                f"{self.default_partitions} and {self.max_partitions}"
            )
