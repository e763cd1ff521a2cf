"""How many partitions a new event type gets."""

from __future__ import annotations

from app.domain.event_type import EventTypeStatistics
from app.registry.settings import RegistrySettings


def partition_count(
    default_statistic: EventTypeStatistics | None, settings: RegistrySettings
) -> int:
    """The partition count for an event type created with `default_statistic`.

    Without statistics the installation's default applies. With them, there is one partition
    per parallel reader or writer, whichever is more (a partition is the unit of parallelism on
    both sides), bounded by `settings.max_partitions`. The rate and message size are kept on the
    event type but do not change the count, so the outcome stays predictable for the owner.
    """
    if default_statistic is None:
        return settings.default_partitions
    wanted = max(default_statistic.read_parallelism, default_statistic.write_parallelism, 1)
    return max(1, min(wanted, settings.max_partitions))
