"""How many events per second the cached effective-schema validator checks.

Not a test: it prints figures. Run from the repository root:

    python -m tests.benchmarks.bench_validation [events]

The event type is a realistic business event type (order placed: strings, enums, numbers,
a nested object, an array of objects, formats); events are 200 to 250 bytes of JSON.
Validation is jsonschema-rs's; the last line is jsonschema's, which validates the few schemas
jsonschema-rs does not (here: the same schema, with a `patternProperties` to send it there).
"""

from __future__ import annotations

import json
import sys
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from app.domain.event_type import EventType
from app.registry.effective_schema import effective_schema
from app.registry.event_validator import EventValidator
from app.registry.evolution import initial_event_type
from app.registry.settings import RegistrySettings
from app.registry.validation import check_event_type
from app.registry.validator_cache import ValidatorCache

ORDER_PLACED = {
    "type": "object",
    "properties": {
        "order_number": {"type": "string", "pattern": "^[0-9]{8,12}$"},
        "customer_id": {"type": "string", "maxLength": 64},
        "status": {"type": "string", "enum": ["placed", "paid", "shipped", "cancelled"]},
        "total": {
            "type": "object",
            "properties": {
                "amount": {"type": "number", "minimum": 0},
                "currency": {"type": "string", "enum": ["EUR", "USD", "GBP", "CHF"]},
            },
            "required": ["amount", "currency"],
        },
        "items": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {"sku": {"type": "string"}, "quantity": {"type": "integer"}},
                "required": ["sku", "quantity"],
            },
        },
        "gift": {"type": "boolean"},
    },
    "required": ["order_number", "customer_id", "status", "total"],
}


def event_type(category: str, mode: str) -> EventType:
    body = {
        "name": f"shop.order-placed-{category}-{mode}",
        "owning_application": "shop",
        "category": category,
        "enrichment_strategies": [] if category == "undefined" else ["metadata_enrichment"],
        "compatibility_mode": mode,
        "schema": {"type": "json_schema", "schema": json.dumps(ORDER_PLACED)},
    }
    return initial_event_type(check_event_type(body, RegistrySettings()), datetime.now(UTC))


def order(index: int) -> dict[str, Any]:
    placed = {
        "order_number": f"{24873243241 + index}",
        "customer_id": "c-1029",
        "status": "placed",
        "total": {"amount": 99.95, "currency": "EUR"},
    }
    if index % 4 == 0:
        placed["items"] = [{"sku": "SH-42", "quantity": 1}]
    return placed


def event(category: str, index: int) -> dict[str, Any]:
    metadata = {"eid": str(uuid.uuid4()), "occurred_at": "2016-03-15T23:47:15+01:00"}
    if category == "data":
        return {"metadata": metadata, "data_type": "order", "data_op": "C", "data": order(index)}
    if category == "undefined":
        return order(index)
    return {**order(index), "metadata": metadata}


def rate(count: int, run: Callable[[], None]) -> float:
    """Events per second, best of three runs."""
    best = float("inf")
    for _ in range(3):
        started = time.perf_counter()
        run()
        best = min(best, time.perf_counter() - started)
    return count / best


def main(count: int) -> None:
    cache = ValidatorCache()
    print(f"EventValidator (jsonschema-rs, formats checked), {count} events per run, best of 3")
    business = event_type("business", "forward")
    events = [event("business", index) for index in range(count)]
    size = sum(len(json.dumps(item)) for item in events) / count
    print(f"business event size: {size:.0f} bytes of JSON")

    started = time.perf_counter()
    effective_schema(business)
    cache.validator_for(business)
    print(f"first validator (build + compile): {(time.perf_counter() - started) * 1000:.2f} ms")

    for category, mode in [
        ("business", "forward"),
        ("business", "compatible"),
        ("data", "forward"),
        ("undefined", "forward"),
    ]:
        et = event_type(category, mode)
        batch = [event(category, index) for index in range(count)]
        validator = cache.validator_for(et)
        assert validator.engine == "jsonschema-rs"
        assert all(validator.error_for(item) is None for item in batch[:100])

        def per_batch(validator=validator, batch=batch) -> None:
            for item in batch:
                validator.error_for(item)

        print(f"{category:9} {mode:10} valid events:  {rate(count, per_batch):>10,.0f} events/s")

    validator = cache.validator_for(business)

    def is_valid_only() -> None:
        for item in events:
            validator.is_valid(item)

    figure = rate(count, is_valid_only)
    print(f"business  forward    is_valid only: {figure:>10,.0f} events/s")

    def lookup_per_event() -> None:
        for item in events:
            cache.validator_for(business).error_for(item)

    figure = rate(count, lookup_per_event)
    print(f"business  forward    cache lookup per event: {figure:>10,.0f} events/s")

    broken = [{**item, "metadata": {**item["metadata"], "eid": "nope"}} for item in events]
    assert validator.error_for(broken[0]) == "#/metadata/eid: 'nope' is not a 'uuid'"

    def invalid() -> None:
        for item in broken:
            validator.error_for(item)

    figure = rate(count, invalid)
    print(f"business  forward    invalid events (bad eid): {figure:>10,.0f} events/s")

    fallback = EventValidator({**effective_schema(business), "patternProperties": {"^_": {}}})
    assert fallback.engine == "jsonschema"
    assert all(fallback.error_for(item) is None for item in events[:100])

    def with_jsonschema() -> None:
        for item in events:
            fallback.error_for(item)

    figure = rate(count, with_jsonschema)
    print(f"business  forward    valid events, jsonschema: {figure:>10,.0f} events/s")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 20_000)
