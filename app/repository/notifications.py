"""A PostgreSQL LISTEN connection that hands each NOTIFY payload to a callback.

One greenlet owns the connection. When the connection is lost and made
again, notifications may have been missed in between: ``on_gap`` is called
so the owner can assume everything changed.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import gevent
import gevent.event
import gevent.socket
import psycopg2

from app.repository.database import connect

RECONNECT_DELAY_S = 1.0
READY_TIMEOUT_S = 5.0

log = logging.getLogger(__name__)


class Listener:
    def __init__(self, dsn: str, channel: str, on_payloads: Callable[[set[str]], None],
                 on_gap: Callable[[], None]) -> None:
        self._dsn = dsn
        self._channel = channel
        self._on_payloads = on_payloads
        self._on_gap = on_gap
        self._greenlet: gevent.Greenlet | None = None
        self._listening = gevent.event.Event()

    def ensure_listening(self) -> bool:
        """Start listening if not yet; True once LISTEN is in place (waits a little for it)."""
        self._start()
        return self._listening.wait(READY_TIMEOUT_S)

    def is_listening(self) -> bool:
        """Whether LISTEN is in place now; starts listening if not yet, without waiting."""
        self._start()
        return self._listening.is_set()

    def _start(self) -> None:
        if self._greenlet is None or self._greenlet.dead:
            self._listening.clear()
            self._greenlet = gevent.spawn(self._run)

    def _run(self) -> None:
        while True:
            try:
                conn = connect(self._dsn)
                try:
                    conn.autocommit = True
                    with conn.cursor() as cursor:
                        cursor.execute(f"LISTEN {self._channel}")
                    self._listening.set()
                    self._on_gap()
                    while True:
                        gevent.socket.wait_read(conn.fileno())
                        conn.poll()
                        payloads = {notify.payload for notify in conn.notifies}
                        conn.notifies.clear()
                        if payloads:
                            self._on_payloads(payloads)
                finally:
                    conn.close()
            except psycopg2.Error as error:
                self._listening.clear()
                log.warning("listener on %s lost its connection: %s", self._channel, error)
                self._on_gap()
                gevent.sleep(RECONNECT_DELAY_S)

    def close(self) -> None:
        if self._greenlet is not None:
            self._greenlet.kill()
            self._greenlet = None
