"""The security settings of this process, kept in memory for every request.

A change on any instance sends a NOTIFY that makes every process re-read the
settings. As a safety net a reading is also re-read when older than
``MAX_AGE_S`` (``UNHEARD_MAX_AGE_S`` while the process cannot listen), so a
change applies everywhere within seconds even when a notification is lost.
When PostgreSQL cannot be read, the last reading stays in use, and it is read
again behind the requests (once per ``UNHEARD_MAX_AGE_S``) until it answers:
retried by the requests, each waited out the database's timeout, and a publish
to a kafka event type took ~4 s now and then while PostgreSQL hung.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

import gevent
import psycopg2

from app.domain.security import SecuritySettings
from app.repository.database import ConnectionPool
from app.repository.security_settings import CHANGES_CHANNEL, load_settings

MAX_AGE_S = 10.0
UNHEARD_MAX_AGE_S = 1.0

log = logging.getLogger(__name__)


class SettingsUnavailable(Exception):
    """The settings were never read and PostgreSQL cannot be read now."""


class SecuritySettingsCache:
    def __init__(self, pool: ConnectionPool,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._pool = pool
        self._clock = clock
        self._current: SecuritySettings | None = None
        self._read_at = 0.0
        self._failing = False  # the last read failed: read again behind the requests
        self._retry_at = 0.0
        self._generation = 0
        self._listener = pool.notifications.listener(CHANGES_CHANNEL, self.invalidate,
                                                     self.invalidate)

    def current(self) -> SecuritySettings:
        now = self._clock()
        listening = self._listener.ensure_listening()  # waits the first time only
        max_age = MAX_AGE_S if listening else UNHEARD_MAX_AGE_S
        if self._current is not None and now - self._read_at < max_age:
            return self._current
        if self._current is not None and self._failing:
            if now >= self._retry_at:
                self._retry_at = now + UNHEARD_MAX_AGE_S
                gevent.spawn(self._read)
            return self._current
        return self._read()

    def _read(self) -> SecuritySettings:
        """Read the settings and keep them; the last reading when PostgreSQL cannot be
        read (``SettingsUnavailable`` when there is none)."""
        generation = self._generation
        try:
            settings = load_settings(self._pool)
        except psycopg2.Error as error:
            if self._current is None:
                raise SettingsUnavailable(str(error)) from None
            if not self._failing:
                log.warning("re-reading the security settings failed, keeping the last: %s",
                            error)
            self._failing = True
            return self._current
        self._failing = False
        if generation == self._generation:
            self._current, self._read_at = settings, self._clock()
        return settings

    def invalidate(self, _payloads: set[str] | None = None) -> None:
        """Something changed (or may have, while not listening): re-read on next use."""
        self._generation += 1
        self._read_at = float("-inf")

    def close(self) -> None:
        self._listener.close()
