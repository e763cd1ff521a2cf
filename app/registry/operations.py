"""What changes an event type: creating, updating, adding a schema version, deleting.

Each operation checks the request, then writes; a refused request leaves nothing behind.
The HTTP layer turns the exceptions raised here into Problems.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

from kazoo.exceptions import KazooException

from app.coordination.subscription_nodes import remove_subscription_state
from app.coordination.zookeeper import ZooKeeperUnavailable
from app.domain.event_type import EventType
from app.registry.errors import EventTypeInvalid, FieldError
from app.registry.evolution import evolve_event_type, initial_event_type
from app.registry.partitions import partition_count
from app.registry.schemas import load_schema
from app.registry.validation import check_event_type, validate_event_type
from app.registry.validator_cache import VALIDATORS
from app.repository import event_types as repository
from app.services import Services
from app.storage.engine import StorageError
from workers import topic_deletions

log = logging.getLogger(__name__)

MAX_ATTEMPTS = 10
"""Changes made at once are applied one after the other, each evolving the one before
(Nakadi locks the event type); a change that finds another came first is evolved again
from it, this many times at most."""


class EventTypeNameTaken(Exception):
    """An event type of that name exists already (answer 409)."""

    def __init__(self, name: str) -> None:
        super().__init__(f"EventType with name '{name}' already exists.")


class EventTypeDeleted(Exception):
    """The event type was deleted while a change or another deletion of it was applied
    (answer 404)."""

    def __init__(self, name: str) -> None:
        super().__init__(f"EventType '{name}' does not exist.")


class EventTypeBusy(Exception):
    """Other changes kept coming first (answer 409)."""

    def __init__(self, name: str) -> None:
        super().__init__(f"EventType '{name}' was changed by {MAX_ATTEMPTS} other requests "
                         "while this one was applied; try again.")


class TopicNotCreated(Exception):
    """The storage could not create the new event type's topic (answer 503)."""


class RetentionNotChanged(Exception):
    """A storage could not apply a new retention time to a topic (answer 503)."""


def create(services: Services, body: Any) -> EventType:
    """Create the event type a POST body describes, with its topic on the default storage."""
    registry = services.settings.registry
    event_type = initial_event_type(check_event_type(body, registry), datetime.now(UTC))
    name = event_type.name
    if repository.get_event_type(services.pool, name) is not None:
        raise EventTypeNameTaken(name)
    partitions = partition_count(event_type.default_statistic, registry)
    storage_id = repository.default_storage_id(services.pool)
    try:
        topic = topic_deletions.new_topic(services, storage_id, partitions,
                                          event_type.storage_retention_ms, event_type.compacted)
    except StorageError as error:
        log.error("creating topic for %s failed: %s", name, error)
        raise TopicNotCreated(
            f"The storage '{storage_id}' could not create the topic for '{name}'; "
            "try again later."
        ) from None
    try:
        repository.insert_event_type(services.pool, event_type, storage_id, topic, partitions)
    except repository.EventTypeExists:
        topic_deletions.remove_unused(services, storage_id, topic)
        raise EventTypeNameTaken(name) from None
    except BaseException:
        topic_deletions.remove_unused(services, storage_id, topic)
        raise
    return event_type


def _store(services: Services, stored: EventType,
           requested: Callable[[EventType], EventType]) -> EventType:
    """Evolve `stored` into what `requested` makes of it and write it when anything
    changed; when another change came first, evolve that one instead."""
    for _ in range(MAX_ATTEMPTS):
        evolution = evolve_event_type(stored, requested(stored), datetime.now(UTC))
        if evolution.event_type is None:
            raise EventTypeInvalid(evolution.refusals)
        if not evolution.changed:
            return evolution.event_type
        retention = evolution.event_type.storage_retention_ms
        if retention != stored.storage_retention_ms:
            _apply_retention(services, stored.name, retention)
        try:
            repository.update_event_type(
                services.pool, evolution.event_type, evolution.new_schema_version, stored
            )
        except repository.EventTypeChanged as changed:
            if changed.current is None:
                raise EventTypeDeleted(stored.name) from None
            stored = changed.current
            continue
        return evolution.event_type
    raise EventTypeBusy(stored.name)


def _apply_retention(services: Services, name: str, retention_ms: int) -> None:
    """Give every topic of the event type's timelines the new retention time, before the
    event type says so: a failure changes no document, and a retry sets the same again.
    A timeline switched to meanwhile takes its retention from the document."""
    found = repository.event_type_with_timelines(services.pool, name)
    if found is None:
        raise EventTypeDeleted(name)
    for timeline in found[1].items:
        if timeline.cleaned_up:
            continue
        try:
            services.engines.get(timeline.storage_id).set_retention(timeline.topic, retention_ms)
        except StorageError as error:
            log.error("setting the retention of %s's topic %s failed: %s",
                      name, timeline.topic, error)
            raise RetentionNotChanged(
                f"The storage '{timeline.storage_id}' could not change the retention time of "
                f"'{name}'; the event type was not changed, try again later.") from None


def update(services: Services, stored: EventType, body: Any) -> EventType:
    """Update `stored` to what a PUT body describes, within the evolution rules."""
    if isinstance(body, dict) and body.get("name", stored.name) != stored.name:
        raise EventTypeInvalid([
            FieldError("name", f"the body names '{body.get('name')}' but the path "
                               f"'{stored.name}'; an event type cannot be renamed")
        ])
    return _store(services, stored,
                  lambda current: check_event_type(body, services.settings.registry, current))


def add_schema(services: Services, stored: EventType, body: Any) -> EventType:
    """Give `stored` the schema of a POST body (an EventTypeSchema), within the same rules as an
    update that changes only the schema. A schema that changes nothing keeps the version."""
    schema = load_schema(body)

    def requested(current: EventType) -> EventType:
        with_schema = replace(current, schema=schema)
        errors = validate_event_type(with_schema, services.settings.registry)
        if errors:
            raise EventTypeInvalid(errors)
        return with_schema

    return _store(services, stored, requested)


def delete(services: Services, name: str, with_sole_subscriptions: bool = False) -> None:
    """Delete an event type with its schemas; its topics go a little later. With
    ``with_sole_subscriptions`` the subscriptions reading only it are deleted too."""
    try:
        timelines, subscription_ids = repository.delete_event_type(
            services.pool, name, topic_deletions.DELAY_S, with_sole_subscriptions)
    except repository.EventTypeChanged:
        raise EventTypeDeleted(name) from None
    VALIDATORS.forget(name)
    topic_deletions.delete_later(services, [t for t in timelines if not t.cleaned_up])
    for subscription_id in subscription_ids:
        try:
            remove_subscription_state(services.zookeeper, subscription_id.lower())
        except (KazooException, ZooKeeperUnavailable) as error:
            # The rows are gone, so no stream can start again; leftover nodes only take room.
            log.error("removing the ZooKeeper state of deleted subscription %s failed: %r",
                      subscription_id, error)
