"""Publishing a batch: validating, enriching, partitioning, then appending.

Each step runs over the whole batch before the next begins. A step that
fails for any event rejects the batch (422): the failing events are
``failed`` with that step and a detail, the others ``aborted`` (saying so), and nothing is
written; so does an event too deep to be stored (``publishing``). Storage
failures affect only the partitions they hit (207).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from app.domain.event_type import EventType
from app.domain.timeline import Timeline
from app.publishing.batch import MAX_EVENT_BYTES, EventTooDeep, dumps
from app.publishing.enrichment import EnrichmentFailed, enrich
from app.publishing.partitioning import PartitioningFailed, partitioner
from app.registry.timestamps import rfc3339_now
from app.registry.validator_cache import VALIDATORS, SchemaUnusable
from app.storage.engine import Keys, StorageError, StorageUnavailable

AppendResults = dict[int, list[int] | StorageError]
Append = Callable[[Mapping[int, Sequence[bytes]], Keys | None], AppendResults]
"""Appends the events of each partition, with their compaction keys if any, to the
timeline published to (an engine's ``append_many`` on its topic, as
``late_appends.checked_append`` makes it)."""


@dataclass
class Item:
    """One event of the batch and how far it got."""

    event: Any
    status: str = "aborted"
    step: str = "none"
    detail: str | None = None
    partition: int = 0

    def response(self) -> dict[str, Any]:
        """The item's BatchItemResponse."""
        body: dict[str, Any] = {}
        metadata = self.event.get("metadata") if isinstance(self.event, dict) else None
        eid = metadata.get("eid") if isinstance(metadata, dict) else None
        if isinstance(eid, str):
            body["eid"] = eid
        body["publishing_status"] = self.status
        body["step"] = self.step
        if self.detail is not None:
            body["detail"] = self.detail
        return body


class BatchRejected(Exception):
    """A step failed for some events; nothing was written."""

    def __init__(self, items: list[Item]) -> None:
        super().__init__("batch rejected")
        self.items = items


def _run_step(items: list[Item], step: str,
              check: Callable[[int, Item], str | None]) -> None:
    """Run ``check`` on every item (it returns why the item fails, or None);
    if any fails, reject the batch."""
    failed = False
    for index, item in enumerate(items):
        item.step = step
        detail = check(index, item)
        if detail is not None:
            item.status, item.detail, failed = "failed", detail, True
    if failed:
        # The spec: "Items that are not "submitted" should have a description."
        for item in items:
            if item.status == "aborted":
                item.detail = f"not published: another event of the batch failed at {step}"
        raise BatchRejected(items)


def _unstorable(index: int, item: Item) -> str | None:
    try:
        dumps(item.event)
    except EventTooDeep as error:
        return str(error)
    return None


def publish(event_type: EventType, timeline: Timeline, append: Append, events: list[Any],
            sizes: list[int] | None, flow_id: str) -> list[Item]:
    """Publish a batch to ``timeline`` through ``append``; returns its items. Raises
    ``BatchRejected`` when a step before publishing fails."""
    items = [Item(event) for event in events]
    try:
        validator = VALIDATORS.validator_for(event_type)
    except SchemaUnusable as error:
        # Creation refuses such schemas; one stored before it did is the producer's 422 to
        # read, naming why, not a 500.
        detail = f"the event type's schema cannot be used to validate events: {error}"
        _run_step(items, "validating", lambda index, item: detail)

    def validate(index: int, item: Item) -> str | None:
        if sizes is not None and sizes[index] > MAX_EVENT_BYTES:
            return f"event is {sizes[index]} bytes, more than the limit of {MAX_EVENT_BYTES}"
        if not isinstance(item.event, dict):
            return "an event must be a JSON object"
        return validator.error_for(item.event)

    # The usual batch, wholly valid, in one pass; else each event is told why it fails.
    if not (sizes is None and all(isinstance(event, dict) for event in events)
            and validator.all_valid(events)):
        _run_step(items, "validating", validate)

    has_metadata = event_type.has_metadata
    if has_metadata:
        received_at = rfc3339_now()
        name, version = event_type.name, event_type.schema.version

        def enrich_item(index: int, item: Item) -> str | None:
            try:
                enrich(item.event, name, version, flow_id, received_at)
            except EnrichmentFailed as error:
                return str(error)
            return None

        _run_step(items, "enriching", enrich_item)

    partition_of = partitioner(event_type, timeline.partitions)

    def partition_item(index: int, item: Item) -> str | None:
        try:
            item.partition = partition_of(item.event)
        except PartitioningFailed as error:
            return str(error)
        if has_metadata:
            item.event["metadata"]["partition"] = str(item.partition)
        return None

    _run_step(items, "partitioning", partition_item)

    by_partition: dict[int, list[Item]] = defaultdict(list)
    for item in items:
        item.step = "publishing"
        by_partition[item.partition].append(item)
    try:
        payloads = {p: [dumps(item.event) for item in group] for p, group in by_partition.items()}
    except EventTooDeep:
        _run_step(items, "publishing", _unstorable)  # rejects the batch, naming each
        raise
    # Compaction keeps the newest event of each key (the effective schema requires it).
    keys = ({p: [item.event["metadata"]["partition_compaction_key"].encode()
                 for item in group] for p, group in by_partition.items()}
            if event_type.compacted else None)
    try:
        results = append(payloads, keys)
    except StorageError as error:
        results = dict.fromkeys(by_partition, error)
    outages = [result for result in results.values() if isinstance(result, StorageUnavailable)]
    if outages and len(outages) == len(results):
        raise outages[0]  # nothing was stored: an outage (503), not a per-event failure
    for partition, group in by_partition.items():
        result = results[partition]
        for item in group:
            if isinstance(result, StorageError):
                item.status, item.detail = "failed", f"the storage did not accept it: {result}"
            else:
                item.status = "submitted"
    return items
