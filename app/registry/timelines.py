"""Moving an event type to a new timeline, usually in another storage, while
producers and consumers keep going.

The new topic is created first (the pause should not wait for it). Then every
broker process stops publishing to the event type and finishes what it has in
flight (``app.coordination.timeline_switch``); the newest offset of each
partition of the old topic is read and recorded and the new timeline opened, in
one transaction; publishing resumes, into the new timeline. Processes the switch
could not wait for check their appends against the recorded end afterwards
(``app.publishing.late_appends``). Readers finish the old timeline and go on in
the new one (``app.storage.across_timelines``).
"""

from __future__ import annotations

import logging

from app.coordination.timeline_switch import publishing_stopped
from app.domain.timeline import Timeline
from app.repository import event_types, timelines
from app.repository.storages import get_storage
from app.services import Services
from app.storage.engine import StorageError
from app.storage.offsets import MAX_TIMELINE
from workers import topic_deletions

log = logging.getLogger(__name__)


class EventTypeNotFound(Exception):
    """No such event type (answer 404)."""


class TimelineRefused(Exception):
    """The switch cannot be made as asked; the message says why (answer 422)."""


class TopicNotCreated(Exception):
    """The target storage could not create the topic (answer 503)."""


def create_timeline(services: Services, name: str, storage_id: str) -> Timeline:
    """Switch the event type to a new timeline in the storage; returns the new timeline.
    Raises ``SwitchRefused`` (409) or ``SwitchTimedOut`` (503) from the coordination."""
    found = event_types.event_type_with_timelines(services.pool, name)
    if found is None:
        raise EventTypeNotFound(f"EventType '{name}' does not exist.")
    if get_storage(services.pool, storage_id) is None:
        raise TimelineRefused(f"storage_id: there is no storage '{storage_id}'")
    event_type, history = found
    if history.active.order >= MAX_TIMELINE:
        raise TimelineRefused(f"EventType '{name}' has had {MAX_TIMELINE} timelines, the most "
                              "an offset can name")
    try:
        topic = topic_deletions.new_topic(services, storage_id, history.partitions,
                                          event_type.storage_retention_ms, event_type.compacted)
    except StorageError as error:
        log.error("creating the topic of a new timeline of %s failed: %s", name, error)
        raise TopicNotCreated(f"The storage '{storage_id}' could not create a topic for "
                              f"'{name}'; try again later.") from None
    switched = None
    try:
        with publishing_stopped(services.zookeeper, name,
                                services.settings.timeline_switch_timeout_s):
            # Read again under the lock: the active timeline is now final.
            again = event_types.event_type_with_timelines(services.pool, name)
            if again is None:
                raise EventTypeNotFound(f"EventType '{name}' does not exist.")
            closing = again[1].active

            def last_offsets() -> tuple[int, ...]:
                bounds = services.engines.get(closing.storage_id).bounds(closing.topic)
                return tuple(b.newest for b in sorted(bounds, key=lambda b: b.partition))

            switched, last = timelines.switch_timeline(services.pool, closing, last_offsets,
                                                       storage_id, topic)
            services.event_types.forget(name)
    finally:
        if switched is None:
            topic_deletions.remove_unused(services, storage_id, topic)
    log.info("event type %s switched from timeline %d to %d in storage %s (last offsets %s)",
             name, closing.order, switched.order, storage_id, last)
    return switched

