"""Removes the storage topics of deleted event types.

A deleted event type's streams end within about a second (every worker hears
of it through NOTIFY); its topics go ``DELAY_S`` later, so no reader fetches
from a topic as it disappears: librdkafka 2.16 crashes the process when one
does. The worker that deleted the event type removes them; a sweep in every
worker, each ``NAKADI_TOPIC_SWEEP_INTERVAL_S``, removes those it did not (it
died, or the storage failed), and topics no event type uses that a storage
may hold (``remove_unused_later``).
"""

from __future__ import annotations

import logging
import uuid

import gevent

from app.domain.timeline import Timeline
from app.repository import topic_deletions
from app.services import Services
from app.storage.engine import StorageError, StorageUnavailable
from workers.periodic import run_every

DELAY_S = 2.0

log = logging.getLogger(__name__)


def delete_topic(services: Services, storage_id: str, topic: str) -> bool:
    """Remove a topic whose removal is pending; False when none is (any more), or
    another process is doing it. A storage failure leaves it pending."""
    with topic_deletions.claimed(services.pool, storage_id, topic) as held:
        if held:
            services.engines.get(storage_id).delete_topic(topic)
    return held


def delete_due_topics(services: Services) -> int:
    """Remove every topic whose removal is due; returns how many were removed."""
    removed = 0
    for storage_id, topic in topic_deletions.due(services.pool):
        removed += _delete_or_log(services, storage_id, topic)
    return removed


def delete_later(services: Services, timelines: list[Timeline]) -> gevent.Greenlet:
    """Remove the topics of a just-deleted event type's timelines after ``DELAY_S``."""
    def delete_all() -> None:
        try:
            for timeline in timelines:
                _delete_or_log(services, timeline.storage_id, timeline.topic)
        except Exception:
            log.exception("removing topics failed; the sweep will retry")
    return gevent.spawn_later(DELAY_S, delete_all)


def new_topic(services: Services, storage_id: str, partitions: int, retention_ms: int,
              compacted: bool) -> str:
    """A topic made in the storage under a fresh name. Raises the storage's error; one
    whose creation went unanswered is recorded for the sweep first, since the storage
    may make it all the same once it answers again."""
    topic = str(uuid.uuid4())
    try:
        services.engines.get(storage_id).create_topic(topic, partitions, retention_ms,
                                                      compacted)
    except StorageUnavailable:
        remove_unused_later(services, storage_id, topic)
        raise
    return topic


def remove_unused(services: Services, storage_id: str, topic: str) -> None:
    """Remove a topic no event type uses (no reader ever had it); when the storage
    fails, the sweep will."""
    try:
        services.engines.get(storage_id).delete_topic(topic)
    except StorageError as error:
        log.error("removing the unused topic %s failed, the sweep will retry: %s", topic, error)
        remove_unused_later(services, storage_id, topic)


def remove_unused_later(services: Services, storage_id: str, topic: str) -> None:
    """Have the sweep remove a topic no event type uses that the storage may hold: its
    creation went unanswered (a broker that hangs creates it once it answers again),
    or removing it failed. Logged when even that cannot be recorded."""
    try:
        topic_deletions.schedule_topic(services.pool, storage_id, topic, DELAY_S)
    except Exception as error:
        log.error("could not record the unused topic %s of storage %s for removal: %s",
                  topic, storage_id, error)


def start_sweeps(services: Services) -> gevent.Greenlet:
    """Remove due topics every ``topic_sweep_interval_s`` seconds, forever."""
    return run_every(services.settings.topic_sweep_interval_s,
                     lambda: delete_due_topics(services),
                     "topics of deleted event types removed")


def _delete_or_log(services: Services, storage_id: str, topic: str) -> bool:
    try:
        return delete_topic(services, storage_id, topic)
    except StorageError as error:
        log.error("could not delete topic %s from storage %s, retrying later: %s",
                  topic, storage_id, error)
        return False
