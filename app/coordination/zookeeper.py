"""The ZooKeeper client of a worker process (kazoo with its gevent handler).

The client connects in the background and keeps reconnecting, at least once a
second, for as long as the process lives: a ZooKeeper that comes back is used
again within about a second, without a restart. Asking for the client while
it has no connection raises ``ZooKeeperUnavailable`` at once (a 503) instead
of queueing the request until the connection returns, which kazoo would do.
"""

from __future__ import annotations

import logging
import select
from typing import Any

import gevent.event
import gevent.hub
import gevent.lock
import gevent.monkey
from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import ConnectionDropped
from kazoo.handlers.gevent import SequentialGeventHandler
from kazoo.retry import KazooRetry

from app.dependencies import DependencyUnavailable
from app.green_wait import fd_of, first_ready

log = logging.getLogger(__name__)

FIRST_CONNECT_WAIT_S = 0.5
"""How long the first request of a process waits for the first connection (~50 ms usually)."""

RECONNECT_MAX_DELAY_S = 1.0
"""Longest pause between two connection attempts (kazoo's default grows to an hour)."""

SETUP_TIMEOUT_S = 2.0

MAX_IN_FLIGHT = 100
"""Requests a process has sent to ZooKeeper and not yet had answered, at most."""

RECV_SIZE = 65536
"""The most the connection's socket takes from the kernel at once (``ReadAheadSocket``)."""


_os_poll = gevent.monkey.get_original("select", "poll")


class ZooKeeperUnavailable(DependencyUnavailable):
    """There is no connection to ZooKeeper right now."""

    def __init__(self, reason: str) -> None:
        super().__init__("ZooKeeper", reason)


class BoundedKazooClient(KazooClient):
    """A kazoo client that lets at most ``MAX_IN_FLIGHT`` requests be under way; more
    wait their turn.

    kazoo wakes its connection greenlet by writing one byte per request into a
    socket pair, and reads one byte back per request it sends. A few hundred
    requests queued at once (a thousand streams starting) fill that socket; the
    next write then fails (gevent refuses a second greenlet waiting on the
    socket, and the hub may not wait at all), kazoo answers that request with
    ``ConnectionClosedError`` although the connection is fine, and its queue
    holds one request more than the socket holds bytes, which stops the
    connection greenlet for good. Keeping the requests under way below what
    the socket holds avoids all of it."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._in_flight = gevent.lock.Semaphore(MAX_IN_FLIGHT)

    def _call(self, request: Any, async_object: Any) -> Any:
        if self._in_flight.acquire(blocking=False):
            return self._counted_call(request, async_object)
        if gevent.getcurrent() is gevent.get_hub():
            # kazoo chains some requests from callbacks in the hub (ensure_path's
            # creates), which must not wait: they wait their turn in a greenlet.
            gevent.spawn(self._call_in_turn, request, async_object)
            return None
        return self._call_in_turn(request, async_object)

    def _call_in_turn(self, request: Any, async_object: Any) -> Any:
        self._in_flight.acquire()
        return self._counted_call(request, async_object)

    def _counted_call(self, request: Any, async_object: Any) -> Any:
        async_object.rawlink(self._answered)
        return super()._call(request, async_object)

    def _answered(self, _result: object) -> None:
        self._in_flight.release()


class AskFirstGeventHandler(SequentialGeventHandler):
    """kazoo's gevent handler, whose ``select`` first asks the OS without waiting.

    kazoo selects before every read and write (about a dozen times per commit
    and the watch it fires), and gevent's select builds a selector, watchers and
    a timeout each time: that was ~45% of the CPU of kazoo's connection greenlet.
    Most of those sockets are ready already (the rest of a message that
    arrived); one non-blocking ``poll`` answers those. The rest wait in
    ``first_ready``, which needs a fraction of what gevent's selector costs
    (twice per request: for the request, then for its answer). A wait lets the
    other greenlets run; so that a busy connection cannot keep them waiting,
    every ``YIELD_EVERY``-th answer in a row given at once still lets them. The
    connection's socket is a ``ReadAheadSocket``, which spares most of the rest."""

    YIELD_EVERY = 16

    def __init__(self) -> None:
        super().__init__()
        self._answered_at_once = 0

    def create_connection(self, *args: Any, **kwargs: Any) -> Any:
        connection = super().create_connection(*args, **kwargs)
        # An SSL socket holds what it decrypted on its own, and kazoo asks its ``pending``.
        if kwargs.get("use_ssl"):
            return connection
        return ReadAheadSocket(connection, kwargs.get("timeout") or SETUP_TIMEOUT_S)

    def select(self, rlist: list[Any], wlist: list[Any], xlist: list[Any],
               timeout: float | None = None) -> tuple[list[Any], list[Any], list[Any]]:
        if not xlist:
            readable, writable = _ready_or_held(rlist, wlist)
            if readable or writable or timeout == 0:
                self._answered_at_once += 1
                if self._answered_at_once % self.YIELD_EVERY == 0:
                    gevent.sleep(0)
                return readable, writable, []
            self._answered_at_once = 0
            readable, writable = first_ready(rlist, wlist, timeout)
            return readable, writable, []
        self._answered_at_once = 0
        return super().select(rlist, wlist, xlist, timeout)


class ReadAheadSocket:
    """kazoo's connection socket, read ahead and written without asking first.

    kazoo reads each message as its 4-byte length and then the rest, and selects
    before each ``recv`` unless the socket's ``pending()`` says it holds bytes (as an
    SSL socket does). Here ``pending()`` takes what the kernel has, up to
    ``RECV_SIZE``, without waiting, and ``recv`` hands it out: one system call per
    message that has arrived, instead of two polls and two reads. The handler's
    ``select`` counts it readable while it holds bytes (kazoo's loop selects on it
    between messages), and writable always: kazoo selects before each ``send``,
    and a ZooKeeper client's send buffer is all but never full; when it is, ``send``
    waits for room, up to ``timeout`` (then the connection counts as dropped)."""

    __slots__ = ("_held", "_socket", "_timeout")

    def __init__(self, connection: Any, timeout: float) -> None:
        self._socket = connection
        self._held = b""
        self._timeout = timeout

    def held(self) -> int:
        return len(self._held)

    def pending(self) -> int:
        """The bytes that can be read now without waiting. kazoo makes the socket
        non-blocking once connected; before, kazoo does not ask."""
        if not self._held:
            try:
                self._held = self._socket.recv(RECV_SIZE)
            except BlockingIOError:
                return 0
        return len(self._held)

    def recv(self, size: int) -> bytes:
        held = self._held or self._socket.recv(RECV_SIZE)
        self._held = held[size:]
        return held[:size]

    def send(self, data: bytes | bytearray | memoryview) -> int:
        while True:
            try:
                return self._socket.send(data)
            except BlockingIOError:
                if not first_ready([], [self._socket], self._timeout)[1]:
                    raise ConnectionDropped("ZooKeeper took no request for "
                                            f"{self._timeout:g}s") from None

    def fileno(self) -> int:
        return self._socket.fileno()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._socket, name)


def _ready_or_held(rlist: list[Any], wlist: list[Any]) -> tuple[list[Any], list[Any]]:
    """``ready_now``, where a ``ReadAheadSocket`` is readable while it holds bytes and
    writable always."""
    held = [obj for obj in rlist if type(obj) is ReadAheadSocket and obj.held()]
    sending = [obj for obj in wlist if type(obj) is ReadAheadSocket]
    if (held or sending) and len(rlist) + len(wlist) == len(held) + len(sending):
        return held, sending
    readable, writable = ready_now([obj for obj in rlist if obj not in held],
                                   [obj for obj in wlist if obj not in sending])
    return held + readable, sending + writable


def ready_now(rlist: list[Any], wlist: list[Any]) -> tuple[list[Any], list[Any]]:
    """Which of the sockets (or file descriptors) can be read and written without
    waiting; an error or hang-up counts as both, as for ``select``. kazoo never
    names a socket in both lists."""
    poller = _os_poll()
    for obj in rlist:
        poller.register(obj, select.POLLIN)
    for obj in wlist:
        poller.register(obj, select.POLLOUT)
    ready = poller.poll(0)
    if not ready:
        return [], []
    events = dict(ready)
    readable = [obj for obj in rlist if events.get(fd_of(obj), 0) & ~select.POLLOUT]
    writable = [obj for obj in wlist if events.get(fd_of(obj), 0) & ~select.POLLIN]
    return readable, writable


class ZooKeeper:
    """The process's connection to ZooKeeper, paths relative to ``root``.

    ``timeout_s`` is the session timeout: a connection that stops answering is
    given up after about two thirds of it, which fails the calls waiting on it."""

    def __init__(self, hosts: str, root: str, timeout_s: float) -> None:
        self._hosts = hosts
        self._root = root
        self._connected = gevent.event.Event()
        self._rooted = False
        handler = AskFirstGeventHandler()
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
        log.info("ZooKeeper connection %s (%s)", state.lower(), self._hosts)
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
