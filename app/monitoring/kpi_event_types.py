"""The four KPI event types the broker publishes to itself (Nakadi's names and
fields), created on first use while the ``kpi_collection`` feature is on."""

from __future__ import annotations

import json
from typing import Any

BATCH_PUBLISHED = "nakadi.batch.published"
DATA_STREAMED = "nakadi.data.streamed"
EVENT_TYPE_LOG = "nakadi.event.type.log"
SUBSCRIPTION_LOG = "nakadi.subscription.log"

OWNING_APPLICATION = "nakadi"

_TEXT = {"type": "string"}
_COUNT = {"type": "number"}
_CALLER = {"app": {**_TEXT, "description": "the caller's uid ('unauthenticated' while "
                                            "authentication is off)"},
           "app_hashed": {**_TEXT, "description": "SHA-256 of NAKADI_KPI_SALT and app"},
           "token_realm": {**_TEXT, "description": "the realm of the caller's token"}}

_SCHEMAS: dict[str, tuple[str, dict[str, Any], list[str]]] = {
    BATCH_PUBLISHED: (
        "A batch published: producers and their throughput per event type",
        {"event_type": _TEXT, **_CALLER,
         "number_of_events": {**_COUNT, "description": "events stored"},
         "batch_size": {**_COUNT, "description": "bytes of the batch"},
         "ms_spent": {**_COUNT, "description": "milliseconds to answer the request"}},
        ["event_type", "app", "app_hashed", "number_of_events", "batch_size"]),
    DATA_STREAMED: (
        "Events a stream sent since its last report: consumers and their throughput",
        {"api": {**_TEXT, "description": "'lola' (low-level stream) or 'hila' "
                                         "(subscription stream)"},
         "subscription": {**_TEXT, "description": "set for subscription streams"},
         "event_type": _TEXT, **_CALLER,
         "number_of_events": _COUNT,
         "bytes_streamed": {**_COUNT, "description": "bytes sent since the last report"}},
        ["event_type", "api", "app", "app_hashed", "number_of_events", "bytes_streamed"]),
    EVENT_TYPE_LOG: (
        "An event type was created, updated or deleted",
        {"event_type": _TEXT, "status": {**_TEXT, "enum": ["created", "updated", "deleted"]},
         "category": _TEXT, "authz": {**_TEXT, "description": "'enabled' or 'disabled'"},
         "compatibility_mode": _TEXT},
        ["event_type", "status", "category", "authz", "compatibility_mode"]),
    SUBSCRIPTION_LOG: (
        "A subscription was created or deleted",
        {"subscription_id": _TEXT, "status": {**_TEXT, "enum": ["created", "deleted"]}},
        ["subscription_id", "status"]),
}

KPI_EVENT_TYPES = tuple(_SCHEMAS)


def kpi_event_type_body(name: str) -> dict[str, Any]:
    """The POST /event-types body of a KPI event type."""
    description, properties, required = _SCHEMAS[name]
    schema = {"description": f"Nakadi KPI: {description}", "type": "object",
              "properties": properties, "required": required}
    return {
        "name": name, "owning_application": OWNING_APPLICATION, "category": "business",
        "enrichment_strategies": ["metadata_enrichment"], "partition_strategy": "random",
        "compatibility_mode": "forward", "audience": "component-internal",
        "schema": {"type": "json_schema", "schema": json.dumps(schema)},
    }
