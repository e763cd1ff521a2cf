"""KPI events: the broker publishes its own use (``nakadi.batch.published``,
``nakadi.data.streamed``, ``nakadi.event.type.log``, ``nakadi.subscription.log``) to
event types of its own, so teams read usage data with the same API.

Only while the ``kpi_collection`` feature toggle is on. Never in the way of the
request that caused it: the request only appends to a bounded in-process queue
(past ``QUEUE_CAPACITY`` the event is dropped and counted); a greenlet of the
worker publishes the queue in batches, creating a KPI event type on first use,
and a failure is logged and counted, never raised. Events queued when a worker
stops are lost.
"""

from __future__ import annotations

import hashlib
import logging
import time
import uuid
from collections import deque
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import gevent
import gevent.event

from app.domain.security import Feature
from app.monitoring import figures
from app.monitoring.kpi_event_types import (
    BATCH_PUBLISHED,
    DATA_STREAMED,
    EVENT_TYPE_LOG,
    SUBSCRIPTION_LOG,
    kpi_event_type_body,
)
from app.security.subjects import Subject, parse_realms

if TYPE_CHECKING:
    from app.domain.event_type import EventType
    from app.domain.timeline import Timelines
    from app.services import Services

QUEUE_CAPACITY = 10_000
CLIENTS_KEPT = 10_000  # callers whose hashed names are kept
BATCH_LIMIT = 1000
GATHER_S = 0.2  # a short wait after the first event, so the next ones share its batch
UNAUTHENTICATED = "unauthenticated"

log = logging.getLogger(__name__)

__all__ = ["BATCH_PUBLISHED", "DATA_STREAMED", "EVENT_TYPE_LOG", "SUBSCRIPTION_LOG",
           "Client", "KpiPublisher"]


@dataclass(frozen=True)
class Client:
    """Who a KPI event is about: the caller's uid, its hash and its token's realm."""

    app: str
    app_hashed: str
    token_realm: str

    def fields(self) -> dict[str, str]:
        return {"app": self.app, "app_hashed": self.app_hashed, "token_realm": self.token_realm}


class KpiPublisher:
    """The KPI queue of one worker process and the greenlet that publishes it."""

    def __init__(self, services: Services) -> None:
        self._services = services
        self._queue: deque[tuple[str, dict[str, Any]]] = deque()
        self._wake = gevent.event.Event()
        self._greenlet: gevent.Greenlet | None = None
        settings = services.settings
        self._salt = settings.kpi_salt.encode()
        self._realms = {data_type: realm for realm, data_type in
                        parse_realms(settings.oauth2_realms).items()}
        self._clients: dict[Subject | None, Client] = {}

    def enabled(self) -> bool:
        try:
            return self._services.security.settings.current().is_enabled(Feature.KPI_COLLECTION)
        except Exception:  # the settings cannot be read: collect nothing rather than fail
            return False

    def client(self, subject: Subject | None) -> Client:
        """The KPI view of a request's subject (cached: one hash per caller)."""
        found = self._clients.get(subject)
        if found is None:
            app = subject.value if subject is not None else UNAUTHENTICATED
            realm = self._realms.get(subject.data_type, "") if subject is not None else ""
            found = Client(app, hashlib.sha256(self._salt + app.encode()).hexdigest(), realm)
            if len(self._clients) < CLIENTS_KEPT:
                self._clients[subject] = found
        return found

    # what the request paths report

    def batch_published(self, event_type: str, client: Client, events: int, batch_bytes: int,
                        seconds: float) -> None:
        if self.enabled():
            self._submit(BATCH_PUBLISHED, {
                "event_type": event_type, **client.fields(), "number_of_events": events,
                "batch_size": batch_bytes, "ms_spent": round(seconds * 1000)})

    def data_streamed(self, event_type: str, client: Client, events: int, sent_bytes: int,
                      subscription: str | None) -> None:
        if self.enabled():
            event = {"api": "lola" if subscription is None else "hila",
                     "event_type": event_type, **client.fields(),
                     "number_of_events": events, "bytes_streamed": sent_bytes}
            if subscription is not None:
                event["subscription"] = subscription
            self._submit(DATA_STREAMED, event)

    def event_type_logged(self, event_type: EventType, status: str) -> None:
        if self.enabled():
            self._submit(EVENT_TYPE_LOG, {
                "event_type": event_type.name, "status": status,
                "category": event_type.category,
                "authz": "enabled" if event_type.authorization else "disabled",
                "compatibility_mode": event_type.compatibility_mode})

    def subscription_logged(self, subscription_id: str, status: str) -> None:
        if self.enabled():
            self._submit(SUBSCRIPTION_LOG, {"subscription_id": subscription_id,
                                            "status": status})

    # the queue

    def _submit(self, name: str, event: dict[str, Any]) -> None:
        if len(self._queue) >= QUEUE_CAPACITY:
            figures.KPI_EVENTS.labels("dropped").inc()
            return
        self._queue.append((name, event))
        if self._greenlet is None or self._greenlet.dead:
            self._greenlet = gevent.spawn(self._run)
        self._wake.set()

    def pending(self) -> int:
        return len(self._queue)

    def _run(self) -> None:
        while True:
            self._wake.wait()
            gevent.sleep(GATHER_S)
            self._wake.clear()
            while self._queue:
                batches: dict[str, list[dict[str, Any]]] = {}
                for _ in range(min(BATCH_LIMIT, len(self._queue))):
                    name, event = self._queue.popleft()
                    batches.setdefault(name, []).append(event)
                for name, events in batches.items():
                    self._publish(name, events)

    def _publish(self, name: str, events: list[dict[str, Any]]) -> None:
        from app.publishing.late_appends import checked_append
        from app.publishing.publisher import BatchRejected, publish

        try:
            if self._event_type(name) is not None:
                received = datetime.now(UTC).isoformat()
                for event in events:
                    event["metadata"] = {"eid": str(uuid.uuid4()), "occurred_at": received}
                # In flight for timeline switches, like every publish.
                with self._services.publishing_gate.publishing(name) as missed_switch:
                    found = self._event_type(name)
                    if found is None:
                        raise LookupError(f"the KPI event type {name} is gone")
                    event_type, timelines = found
                    active = timelines.active
                    items = publish(event_type, active,
                                    checked_append(self._services, active, missed_switch),
                                    events, None, f"kpi-{uuid.uuid4().hex[:16]}")
                stored = sum(item.status == "submitted" for item in items)
                figures.KPI_EVENTS.labels("published").inc(stored)
                figures.KPI_EVENTS.labels("failed").inc(len(events) - stored)
                return
        except BatchRejected as rejected:
            log.error("KPI events for %s rejected: %s", name,
                      [item.response() for item in rejected.items if item.status == "failed"])
        except Exception as error:
            log.warning("publishing %d KPI events to %s failed: %r", len(events), name, error)
        figures.KPI_EVENTS.labels("failed").inc(len(events))

    def _event_type(self, name: str) -> tuple[EventType, Timelines] | None:
        """The KPI event type and its timelines, created when missing."""
        from app.registry.operations import EventTypeNameTaken, create

        services = self._services
        found = services.event_types.get(name)
        if found is None:
            try:
                create(services, kpi_event_type_body(name))
                log.info("created the KPI event type %s", name)
            except EventTypeNameTaken:
                pass  # another worker or instance was first
            deadline = time.monotonic() + 5
            while found is None and time.monotonic() < deadline:
                found = services.event_types.get(name)
                if found is None:
                    gevent.sleep(0.1)
        return found
