"""The ZooKeeper client of a worker process (kazoo with its gevent handler).

The client connects in the background and keeps reconnecting, at least once a
second, for as long as the process lives: a ZooKeeper that comes back is used
again within about a second, without a restart. Asking for the client while
it has no connection raises ``ZooKeeperUnavailable`` at once (a 503) instead
of queueing the request until the connection returns, which kazoo would do.
"""

from __future__ import annotations

from typing import Any

import gevent.event
import gevent.lock
from kazoo.client import KazooClient, KazooState
from kazoo.handlers.gevent import SequentialGeventHandler
from kazoo.retry import KazooRetry

from app.dependencies import DependencyUnavailable

FIRST_CONNECT_WAIT_S = 0.5
"""How long the first request of a process waits for the first connection (~50 ms usually)."""

RECONNECT_MAX_DELAY_S = 1.0
"""Longest pause between two connection attempts (kazoo's default grows to an hour)."""

SETUP_TIMEOUT_S = 2.0

MAX_IN_FLIGHT = 128
"""Requests a process has sent to ZooKeeper and not yet had answered, at most."""


class ZooKeeperUnavailable(DependencyUnavailable):
    """There is no connection to ZooKeeper right now."""

    def __init__(self, reason: str) -> None:
        super().__init__("ZooKeeper", reason)


class BoundedKazooClient(KazooClient):
    """A kazoo client that lets at most ``MAX_IN_FLIGHT`` requests be under way; more
    wait their turn.

    kazoo wakes its connection greenlet by writing one byte per request into a
    socket pair. A few hundred requests queued at once (a thousand streams
    starting) fill that socket; the next writer then blocks on a socket another
    greenlet already waits on, which gevent refuses, and kazoo reports that as
    ``ConnectionClosedError`` although the connection is fine."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._in_flight = gevent.lock.BoundedSemaphore(MAX_IN_FLIGHT)

    def _call(self, request: Any, async_object: Any) -> Any:
        # kazoo chains some requests from callbacks in gevent's hub (ensure_path's
        # creates), which must not wait: those go uncounted.
        if self._in_flight.acquire(blocking=gevent.getcurrent() is not gevent.get_hub()):
            async_object.rawlink(self._answered)
        return super()._call(request, async_object)

    def _answered(self, _result: object) -> None:
        self._in_flight.release()


class ZooKeeper:
    """The process's connection to ZooKeeper, paths relative to ``root``.

    ``timeout_s`` is the session timeout: a connection that stops answering is
    given up after about two thirds of it, which fails the calls waiting on it."""

    def __init__(self, hosts: str, root: str, timeout_s: float) -> None:
        self._hosts = hosts
        self._root = root
        self._connected = gevent.event.Event()
        self._rooted = False
        handler = SequentialGeventHandler()
        self._client = BoundedKazooClient(
            hosts=hosts + root, handler=handler, timeout=timeout_s,
            connection_retry=KazooRetry(max_tries=-1, delay=0.1, backoff=2,
                                        max_delay=RECONNECT_MAX_DELAY_S,
                                        sleep_func=handler.sleep_func))
        self._client.add_listener(self._state_changed)
        self._first_wait = FIRST_CONNECT_WAIT_S
        self._client.start_async()

    def client(self) -> KazooClient:
        """The connected client; ``ZooKeeperUnavailable`` when there is no connection."""
        if not self._connected.wait(self._first_wait):
            self._first_wait = 0.0
            raise ZooKeeperUnavailable(f"no connection to {self._hosts}")
        self._first_wait = 0.0
        if not self._rooted:
            ensure_root(self._hosts, self._root)
            self._rooted = True
        return self._client

    def _state_changed(self, state: str) -> None:
        if state == KazooState.CONNECTED:
            self._connected.set()
        else:
            self._connected.clear()

    def close(self) -> None:
        self._client.stop()
        self._client.close()


def ensure_root(hosts: str, root: str) -> None:
    """Create the root path if missing, through a short-lived client without chroot
    (a chrooted client cannot create its own root)."""
    setup = KazooClient(hosts=hosts, handler=SequentialGeventHandler(), timeout=SETUP_TIMEOUT_S)
    try:
        setup.start(timeout=SETUP_TIMEOUT_S)
    except setup.handler.timeout_exception:
        # The gevent handler times out with gevent.Timeout, a BaseException: translate it.
        raise ZooKeeperUnavailable(f"no session with {hosts} in {SETUP_TIMEOUT_S:g}s") from None
    try:
        setup.ensure_path(root)
    finally:
        setup.stop()
        setup.close()
