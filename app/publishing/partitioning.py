"""Which partition an event goes to, by the event type's partition strategy."""

from __future__ import annotations

import random
from collections.abc import Sequence
from hashlib import blake2b
from typing import Any

import orjson

from app.cursors import is_partition
from app.domain.event_type import EventType

KEY_SEPARATOR = b"\x1f"


class PartitioningFailed(ValueError):
    """The event does not carry what its partition strategy needs."""


def key_value(event: Any, path: str) -> Any:
    """The value at a dotted path of an event."""
    value = event
    for part in path.split("."):
        if not isinstance(value, dict) or part not in value:
            raise PartitioningFailed(f"partition key field '{path}' is missing")
        value = value[part]
    return value


def hash_partition(values: Sequence[Any], partitions: int) -> int:
    """A partition from the key values, the same in every process and on every machine
    (Python's own ``hash`` is salted per process)."""
    parts = [v.encode() if isinstance(v, str) else orjson.dumps(v, option=orjson.OPT_SORT_KEYS)
             for v in values]
    digest = blake2b(KEY_SEPARATOR.join(parts), digest_size=8).digest()
    return int.from_bytes(digest, "big") % partitions


def partition_for(event: Any, event_type: EventType, partitions: int) -> int:
    strategy = event_type.partition_strategy
    if strategy == "hash":
        # Key paths of data change events are relative to their `data`.
        base = event.get("data") if event_type.category == "data" else event
        values = [key_value(base, path) for path in event_type.partition_key_fields]
        return hash_partition(values, partitions)
    if strategy == "user_defined":
        metadata = event.get("metadata")
        partition = metadata.get("partition") if isinstance(metadata, dict) else None
        if partition is None:
            raise PartitioningFailed("metadata.partition is required by the user_defined "
                                     "partition strategy")
        if not is_partition(partition, partitions):
            raise PartitioningFailed(f"metadata.partition {partition!r} is not a partition of "
                                     f"this event type (\"0\" to \"{partitions - 1}\")")
        return int(partition)
    return random.randrange(partitions)
