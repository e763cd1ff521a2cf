"""Partition counts and the settings that bound them."""

import pytest

from app.domain.event_type import EventTypeStatistics
from app.registry.partitions import partition_count
from app.registry.settings import RegistrySettings


def statistic(read, write):
    return EventTypeStatistics(1000, 200, read, write)


@pytest.mark.parametrize(
    ("default_statistic", "expected"),
    [
        (None, 1),
        (statistic(1, 1), 1),
        (statistic(4, 2), 4),
        (statistic(2, 6), 6),
        (statistic(1000, 1), 100),
    ],
)
def test_partition_count(default_statistic, expected):
    assert partition_count(default_statistic, RegistrySettings()) == expected


def test_partition_count_uses_the_configured_default_and_maximum():
    settings = RegistrySettings(default_partitions=3, max_partitions=8)
    assert partition_count(None, settings) == 3
    assert partition_count(statistic(20, 1), settings) == 8


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"max_name_length": 0}, "max_name_length"),
        ({"min_retention_time_ms": 0}, "retention bounds"),
        ({"default_retention_time_ms": 1}, "retention bounds"),
        ({"max_retention_time_ms": 1}, "retention bounds"),
        ({"default_partitions": 0}, "partition counts"),
        ({"default_partitions": 101}, "partition counts"),
    ],
)
def test_inconsistent_settings_are_refused(changes, message):
    with pytest.raises(ValueError, match=message):
        RegistrySettings(**changes)
