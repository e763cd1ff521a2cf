"""Which partition an event goes to, by the event type's partition strategy."""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from functools import partial
from hashlib import blake2b
from typing import Any

from app.cursors import is_partition
from app.domain.event_type import EventType
from app.publishing.batch import EventTooDeep, dumps

KEY_SEPARATOR = b"\x1f"


class PartitioningFailed(ValueError):
    """The event does not carry what its partition strategy needs."""


def hash_partition(values: Sequence[Any], partitions: int) -> int:
    """A partition from the key values, the same in every process and on every machine
    (Python's own ``hash`` is salted per process)."""
    if len(values) == 1 and isinstance(values[0], str):  # the usual key: the same bytes
        return _partition_of(values[0].encode(), partitions)
    try:
        parts = [v.encode() if isinstance(v, str) else dumps(v, sort_keys=True) for v in values]
    except EventTooDeep as error:
        raise PartitioningFailed(f"a partition key field: {error}") from None
    return _partition_of(KEY_SEPARATOR.join(parts), partitions)


def _partition_of(key: bytes, partitions: int) -> int:
    return int.from_bytes(blake2b(key, digest_size=8).digest(), "big") % partitions


def partitioner(event_type: EventType, partitions: int) -> Callable[[Any], int]:
    """The partition of each event (a JSON object) of a batch; what depends only on the
    event type is worked out once. Raises ``PartitioningFailed``."""
    strategy = event_type.partition_strategy
    if strategy == "hash":
        return _hash_partitioner(event_type, partitions)
    if strategy == "user_defined":
        return partial(_user_defined, partitions=partitions)
    return lambda _event: random.randrange(partitions)


def _hash_partitioner(event_type: EventType, partitions: int) -> Callable[[Any], int]:
    # Key paths of data change events are relative to their `data`.
    in_data = event_type.category == "data"
    fields = [(name, name.split(".")) for name in event_type.partition_key_fields]

    def by_hash(event: Any) -> int:
        base = event.get("data") if in_data else event
        values = []
        for name, path in fields:
            value = base
            for part in path:
                if not isinstance(value, dict) or part not in value:
                    raise PartitioningFailed(f"partition key field '{name}' is missing")
                value = value[part]
            values.append(value)
        return hash_partition(values, partitions)
    return by_hash


def _user_defined(event: Any, partitions: int) -> int:
    metadata = event.get("metadata")
    partition = metadata.get("partition") if isinstance(metadata, dict) else None
    if partition is None:
        raise PartitioningFailed("metadata.partition is required by the user_defined "
                                 "partition strategy")
    if not is_partition(partition, partitions):
        raise PartitioningFailed(f"metadata.partition {partition!r} is not a partition of "
                                 f"this event type (\"0\" to \"{partitions - 1}\")")
    return int(partition)
