"""``metadata_enrichment``: what the broker writes into an event's metadata."""

from __future__ import annotations

from typing import Any


class EnrichmentFailed(ValueError):
    """The event already carries a value the broker must set."""


def enrich(event: dict[str, Any], event_type_name: str, version: str, flow_id: str,
           received_at: str) -> None:
    """Set ``received_at``, ``event_type``, ``version`` and ``flow_id``; the
    partitioning step adds ``partition``.

    A producer may not set ``received_at``, nor an ``event_type`` other than the
    one published to. ``flow_id`` comes from the request's X-Flow-Id, as in Nakadi."""
    metadata = event["metadata"]
    if "received_at" in metadata:
        raise EnrichmentFailed("metadata.received_at is set by the broker; remove it")
    given = metadata.get("event_type")
    if given is not None and given != event_type_name:
        raise EnrichmentFailed(f"metadata.event_type is '{given}' but the event is published "
                               f"to '{event_type_name}'")
    metadata["received_at"] = received_at
    metadata["event_type"] = event_type_name
    metadata["version"] = version
    metadata["flow_id"] = flow_id
