"""What changes an event type: creating, updating, adding a schema version, deleting.

Each operation checks the request, then writes; a refused request leaves nothing behind.
The HTTP layer turns the exceptions raised here into Problems.
"""

from __future__ import annotations

import logging
import uuid
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


class EventTypeNameTaken(Exception):
    """An event type of that name exists already (answer 409)."""

    def __init__(self, name: str) -> None:
        super().__init__(f"EventType with name '{name}' already exists.")


class TopicNotCreated(Exception):
    """The storage could not create the new event type's topic (answer 503)."""


def create(services: Services, body: Any) -> EventType:
    """Create the event type a POST body describes, with its topic on the default storage."""
    registry = services.settings.registry
    event_type = initial_event_type(check_event_type(body, registry), datetime.now(UTC))
    name = event_type.name
    if repository.get_event_type(services.pool, name) is not None:
        raise EventTypeNameTaken(name)
    partitions = partition_count(event_type.default_statistic, registry)
    storage_id = repository.default_storage_id(services.pool)
    engine = services.engines.get(storage_id)
    topic = str(uuid.uuid4())
    try:
        engine.create_topic(topic, partitions, event_type.options.retention_time)
    except StorageError as error:
        log.error("creating topic for %s failed: %s", name, error)
        raise TopicNotCreated(
            f"The storage '{storage_id}' could not create the topic for '{name}'; "
            "try again later."
        ) from None
    try:
        repository.insert_event_type(services.pool, event_type, storage_id, topic, partitions)
    except repository.EventTypeExists:
        engine.delete_topic(topic)
        raise EventTypeNameTaken(name) from None
    except BaseException:
        engine.delete_topic(topic)
        raise
    return event_type


def _store(services: Services, stored: EventType, requested: EventType) -> EventType:
    """Evolve `stored` into `requested` and write it when anything changed."""
    evolution = evolve_event_type(stored, requested, datetime.now(UTC))
    if evolution.event_type is None:
        raise EventTypeInvalid(evolution.refusals)
    if evolution.changed:
        repository.update_event_type(
            services.pool, evolution.event_type, evolution.new_schema_version
        )
    return evolution.event_type


def update(services: Services, stored: EventType, body: Any) -> EventType:
    """Update `stored` to what a PUT body describes, within the evolution rules."""
    if isinstance(body, dict) and body.get("name", stored.name) != stored.name:
        raise EventTypeInvalid([
            FieldError("name", f"the body names '{body.get('name')}' but the path "
                               f"'{stored.name}'; an event type cannot be renamed")
        ])
    requested = check_event_type(body, services.settings.registry, stored)
    return _store(services, stored, requested)


def add_schema(services: Services, stored: EventType, body: Any) -> EventType:
    """Give `stored` the schema of a POST body (an EventTypeSchema), within the same rules as an
    update that changes only the schema. A schema that changes nothing keeps the version."""
    requested = replace(stored, schema=load_schema(body))
    errors = validate_event_type(requested, services.settings.registry)
    if errors:
        raise EventTypeInvalid(errors)
    return _store(services, stored, requested)


def delete(services: Services, name: str, with_sole_subscriptions: bool = False) -> None:
    """Delete an event type with its schemas; its topics go a little later. With
    ``with_sole_subscriptions`` the subscriptions reading only it are deleted too."""
    timelines, subscription_ids = repository.delete_event_type(
        services.pool, name, topic_deletions.DELAY_S, with_sole_subscriptions)
    VALIDATORS.forget(name)
    topic_deletions.delete_later(services, [t for t in timelines if not t.cleaned_up])
    for subscription_id in subscription_ids:
        try:
            remove_subscription_state(services.zookeeper, subscription_id.lower())
        except (KazooException, ZooKeeperUnavailable) as error:
            # The rows are gone, so no stream can start again; leftover nodes only take room.
            log.error("removing the ZooKeeper state of deleted subscription %s failed: %r",
                      subscription_id, error)
