"""A PostgreSQL LISTEN connection that hands each NOTIFY payload to a callback.

One greenlet owns the connection. When the connection is lost and made
again, notifications may have been missed in between: ``on_gap`` is called
so the owner can assume everything changed. While the database is down the
greenlet tries again every second, and ``ensure_listening`` answers at once
that it is not listening, so callers fall back to reading without waiting.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import gevent
import gevent.event
import gevent.socket
import psycopg2

from app.repository.database import DEFAULT_TIMEOUT_S, connect

RECONNECT_DELAY_S = 1.0

log = logging.getLogger(__name__)


class Listener:
    def __init__(self, dsn: str, channel: str, on_payloads: Callable[[set[str]], None],
                 on_gap: Callable[[], None], timeout_s: float = DEFAULT_TIMEOUT_S) -> None:
        self._dsn = dsn
        self._timeout_s = timeout_s
        self._channel = channel
        self._on_payloads = on_payloads
        self._on_gap = on_gap
        self._greenlet: gevent.Greenlet | None = None
        self._listening = False
        # Set once the first attempt to listen succeeded or failed.
        self._settled = gevent.event.Event()

    def ensure_listening(self) -> bool:
        """Start listening if not yet; whether LISTEN is in place. Only the first
        call waits, for the first attempt (at most the connect timeout)."""
        if self._greenlet is None or self._greenlet.dead:
            self._listening = False
            self._settled.clear()
            self._greenlet = gevent.spawn(self._run)
        self._settled.wait(self._timeout_s)
        return self._listening

    def is_listening(self) -> bool:
        """Whether LISTEN is in place now; unlike ``ensure_listening`` it starts nothing."""
        return self._listening and self._greenlet is not None and not self._greenlet.dead

    def _run(self) -> None:
        while True:
            try:
                conn = connect(self._dsn, self._timeout_s)
                try:
                    conn.autocommit = True
                    with conn.cursor() as cursor:
                        cursor.execute(f"LISTEN {self._channel}")
                    self._listening = True
                    self._settled.set()
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
                self._listening = False
                self._settled.set()
                log.warning("listener on %s lost its connection: %s", self._channel, error)
                self._on_gap()
                gevent.sleep(RECONNECT_DELAY_S)

    def close(self) -> None:
        if self._greenlet is not None:
            self._greenlet.kill()
            self._greenlet = None
