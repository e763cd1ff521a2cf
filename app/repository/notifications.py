"""LISTEN for PostgreSQL notifications: one connection per database and process,
which hands each channel's NOTIFY payloads to that channel's listeners.

One connection for every channel, because at each NOTIFY PostgreSQL wakes
every backend that listens in the database, whatever its channels: twelve idle
listening connections on a channel nobody notified cost PostgreSQL 140-180 us
more CPU per single-event publish (each publish notifies its readers), and
the publish rate fell 6-17% (2026-11-28, in the benchmarks' history). A worker
that listened for event types, subscriptions, security settings and appends
on a connection each had four backends woken by every append.

One greenlet owns the connection. Its statements (LISTEN) wait for the server
as long as the pool's do at most, so that a request adding a channel while the
server hangs hears that nothing is listened to, and reads from the database
instead. When the connection is lost and made again,
notifications may have been missed in between: every listener's ``on_gap`` is
called so its owner can assume everything changed. While the database is down
the greenlet tries again every second, and ``ensure_listening`` answers at once
that it is not listening, so callers fall back to reading without waiting.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable

import gevent
import gevent.event
import gevent.lock
import psycopg2
import psycopg2.extensions

from app.green_wait import first_ready
from app.repository.database import DEFAULT_TIMEOUT_S, connect

RECONNECT_DELAY_S = 1.0

log = logging.getLogger(__name__)


class Listener:
    """One channel's payloads for one owner, from its database's ``Notifications``.
    Its callbacks run while the connection is in use, so they must not wait (they
    drop cached rows, or wake the greenlets that wait)."""

    def __init__(self, notifications: Notifications, channel: str,
                 on_payloads: Callable[[set[str]], None], on_gap: Callable[[], None]) -> None:
        self.channel = channel
        self.on_payloads = on_payloads
        self.on_gap = on_gap
        self.added = False  # whether its channel's listeners include it
        self._notifications = notifications

    def ensure_listening(self) -> bool:
        """Start listening if not yet; whether LISTEN is in place. Only the first
        call waits, for the first attempt (at most the connect timeout)."""
        return self._notifications.ensure_listening(self)

    def is_listening(self) -> bool:
        """Whether LISTEN is in place now; unlike ``ensure_listening`` it starts nothing."""
        return self._notifications.is_listening(self.channel)

    def close(self) -> None:
        self._notifications.remove(self)


class Notifications:
    """The LISTEN connection to one database, for every channel of this process."""

    def __init__(self, dsn: str, timeout_s: float = DEFAULT_TIMEOUT_S,
                 on_answer: Callable[[], None] = lambda: None) -> None:
        self._dsn = dsn
        self._timeout_s = timeout_s
        # Called whenever the server answered on this connection (it must not wait).
        self._on_answer = on_answer
        self._listeners: dict[str, list[Listener]] = {}
        self._connection: psycopg2.extensions.connection | None = None
        self._listened: set[str] = set()  # channels LISTENed on the connection now
        self._greenlet: gevent.Greenlet | None = None
        # Set once the first attempt to connect succeeded or failed.
        self._settled = gevent.event.Event()
        # Held by the greenlet using the connection: the owner while it reads, or one
        # that adds a channel while the owner waits for the socket.
        self._using = gevent.lock.Semaphore()

    def listener(self, channel: str, on_payloads: Callable[[set[str]], None],
                 on_gap: Callable[[], None]) -> Listener:
        """A listener of ``channel``; nothing is LISTENed until it ``ensure_listening``."""
        return Listener(self, channel, on_payloads, on_gap)

    def ensure_listening(self, listener: Listener) -> bool:
        if listener.added and self.is_listening(listener.channel):
            return True  # the usual call, once per request on some paths
        if not listener.added:
            self._listeners.setdefault(listener.channel, []).append(listener)
            listener.added = True
        if self._greenlet is None or self._greenlet.dead:
            self._settled.clear()
            self._greenlet = gevent.spawn(self._run)
        self._settled.wait(self._timeout_s)
        if listener.channel not in self._listened and self._connection is not None:
            with self._using:
                connection = self._connection
                if listener.channel not in self._listened and connection is not None:
                    try:
                        self._listen(connection, [listener.channel])
                    except psycopg2.Error as error:
                        log.warning("LISTEN %s failed: %s", listener.channel, error)
                        self._start_again()
        return self.is_listening(listener.channel)

    def _start_again(self) -> None:
        """Drop the connection after a failed LISTEN (psycopg2 closed it, or it hangs):
        its owner waits on its socket and would never notice. The next
        ``ensure_listening`` connects again, and every listener hears of a gap."""
        if self._greenlet is not None:
            self._greenlet.kill()  # its connection closes, and what it listened to is cleared

    def is_listening(self, channel: str) -> bool:
        return channel in self._listened and self._greenlet is not None \
            and not self._greenlet.dead

    def remove(self, listener: Listener) -> None:
        """Forget ``listener``; the connection closes with the last one."""
        if listener.added:
            channel_listeners = self._listeners[listener.channel]
            channel_listeners.remove(listener)
            if not channel_listeners:  # a new connection need not LISTEN to it
                del self._listeners[listener.channel]
            listener.added = False
        if not self._listeners and self._greenlet is not None:
            self._greenlet.kill()  # its connection closes, and what it listened to is cleared
            self._greenlet = None

    def _run(self) -> None:
        while True:
            try:
                connection = connect(self._dsn, self._timeout_s, statement_timeout=True)
                try:
                    connection.autocommit = True
                    with self._using:
                        self._listen(connection, list(self._listeners))
                        self._connection = connection
                    self._settled.set()
                    self._on_answer()
                    while True:
                        first_ready([connection], [], None)
                        with self._using:
                            connection.poll()
                            if connection.notifies:
                                self._on_answer()
                            self._deliver(connection)
                finally:
                    self._connection = None
                    self._listened = set()
                    connection.close()
            except psycopg2.Error as error:
                self._settled.set()
                log.warning("listening to PostgreSQL lost its connection: %s", error)
                self._gap(list(self._listeners))
                gevent.sleep(RECONNECT_DELAY_S)

    def _listen(self, connection: psycopg2.extensions.connection,
                channels: Iterable[str]) -> None:
        """LISTEN to ``channels`` (the caller holds ``_using``); their listeners hear of a
        gap, since whatever was sent before went unheard."""
        added = [channel for channel in channels if channel not in self._listened]
        if not added:
            return
        with connection.cursor() as cursor:
            cursor.execute("; ".join(f"LISTEN {channel}" for channel in added))
        self._listened.update(added)
        self._deliver(connection)  # what arrived with the answer
        self._gap(added)

    def _gap(self, channels: Iterable[str]) -> None:
        """Tell the listeners of ``channels`` that notifications may have gone unheard."""
        for channel in channels:
            for listener in list(self._listeners.get(channel, ())):
                listener.on_gap()

    def _deliver(self, connection: psycopg2.extensions.connection) -> None:
        """Hand the notifications received so far to their channels' listeners."""
        if not connection.notifies:
            return
        by_channel: dict[str, set[str]] = {}
        for notify in connection.notifies:
            by_channel.setdefault(notify.channel, set()).add(notify.payload)
        connection.notifies.clear()
        for channel, payloads in by_channel.items():
            for listener in list(self._listeners.get(channel, ())):
                listener.on_payloads(payloads)
