"""The long-lived clients of one worker process, created lazily after gunicorn's fork."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

import psycopg2
from flask import Flask
from kazoo.client import KazooClient

from app.config import Settings
from app.coordination.timeline_switch import PublishingGate
from app.coordination.zookeeper import ZooKeeper
from app.current import current_flask
from app.dependencies import DependencyUnavailable, first_line
from app.domain.timeline import Timeline, Timelines
from app.monitoring.kpi import KpiPublisher
from app.monitoring.lag import SubscriptionLag
from app.repository.database import ConnectionPool
from app.repository.event_type_cache import EventTypeCache
from app.repository.subscription_cache import SubscriptionCache
from app.repository.timelines import recorded_end
from app.security.service import Security
from app.shared_calls import SharedCalls
from app.storage.across_timelines import SwitchWatch
from app.storage.engine import StorageUnavailable
from app.storage.engines import Engines


class Services:
    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.pool = ConnectionPool(settings.database_url, settings.database_pool_size,
                                   settings.database_timeout_s)
        self.engines = Engines(self.pool, settings.kafka_timeout_s,
                               settings.kafka_client_config,
                               settings.kafka_stream_fetch_wait_ms,
                               settings.kafka_exact_list_offsets)
        self.event_types = EventTypeCache(self.pool)
        self.subscriptions = SubscriptionCache(self.pool)
        self.security = Security(settings, self.pool)
        self.kpis = KpiPublisher(self)
        self.subscription_lag = SubscriptionLag(self)
        self._zookeeper: ZooKeeper | None = None
        self._recorded_ends: SharedCalls[str, tuple[int, ...] | None] = SharedCalls()
        self.publishing_gate = PublishingGate(lambda: self.zookeeper,
                                              settings.timeline_publish_wait_s,
                                              self.event_types.forget,
                                              self.event_types.forget_all)

    @property
    def zookeeper(self) -> KazooClient:
        """The connected ZooKeeper client; ``ZooKeeperUnavailable`` (a 503) at once
        while there is no connection."""
        if self._zookeeper is None:
            self._zookeeper = ZooKeeper(self.settings.zookeeper, self.settings.zookeeper_root,
                                        self.settings.zookeeper_timeout_s)
        return self._zookeeper.client()

    def timelines_of(self, name: str) -> Callable[[], Timelines | None]:
        """The newest known timelines of an event type, for readers that follow switches;
        None while it cannot be told (deleted, database unreachable)."""
        def current() -> Timelines | None:
            try:
                found = self.event_types.get(name)
            except DependencyUnavailable:
                return None
            return None if found is None else found[1]
        return current

    def recorded_end(self, timeline: Timeline) -> tuple[int, ...] | None:
        """``recorded_end`` of the timeline, in a query shared by the callers that asked
        before it started: the check of every publish and every stream's read while
        this process is out of step with the switches (ZooKeeper away)."""
        return self._recorded_ends.call(timeline.id, partial(recorded_end, self.pool, timeline))

    def switch_watch(self, name: str) -> SwitchWatch:
        """What readers of an event type need to leave out events published past the
        end of a timeline (``SwitchWatch``)."""
        def end(timeline: Timeline) -> tuple[int, ...] | None:
            try:
                return self.recorded_end(timeline)
            except psycopg2.Error as error:  # a stream ends on it, as on any storage error
                raise StorageUnavailable("PostgreSQL", "reading the recorded end of a "
                                         f"timeline: {first_line(error)}") from error
        return SwitchWatch(partial(self.publishing_gate.reading, name), end,
                           self.timelines_of(name))

    def close(self) -> None:
        self.event_types.close()
        self.subscriptions.close()
        self.security.close()
        self.engines.close()
        if self._zookeeper is not None:
            self._zookeeper.close()
            self._zookeeper = None
        self.pool.close()


def services() -> Services:
    """The services of the application serving the current request."""
    return current_flask().extensions["nakadi"]


def services_of(app: object) -> Services | None:
    """The services of an application built by ``create_app``; None for anything else.
    gunicorn's hooks know the WSGI callable only, and not at all if it failed to load."""
    if isinstance(app, Flask):
        found = app.extensions.get("nakadi")
        if isinstance(found, Services):
            return found
    return None
