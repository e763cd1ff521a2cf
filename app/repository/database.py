"""PostgreSQL connections that cooperate with gevent.

``make_green()`` installs a wait callback, so a query waiting on the server
yields to other greenlets instead of freezing the hub. Each of its waits is
bounded: a server that accepted a connection and then answers nothing (stopped,
stuck on its disk) is an outage after the connect timeout while connecting, and
after its ``statement_timeout`` and a margin once connected, not a request held
for good. The pool hands out at most ``max_size`` connections and makes the rest
of the greenlets wait for one, a connect timeout at most, rather than failing at
once as psycopg2's own pools do when exhausted.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from functools import cached_property, partial
from typing import TYPE_CHECKING, Any

import gevent
import gevent.lock
import psycopg2
import psycopg2.extensions
import psycopg2.extras

from app.dependencies import is_database_outage
from app.green_wait import first_ready

if TYPE_CHECKING:
    from app.repository.notifications import Notifications

DEFAULT_TIMEOUT_S = 5.0
"""Connect timeout, and statement timeout of pooled connections (NAKADI_DATABASE_TIMEOUT_S)."""
PROBE_INTERVAL_S = 1.0
"""How long a pool whose server hung waits before asking again when refused."""
ANSWER_MARGIN_S = 2.0
"""How much longer than its ``statement_timeout`` a connection waits for an answer: a
server that is alive cancels the statement and says so before that."""

Params = Sequence[Any] | Mapping[str, Any] | None
"""Query parameters as psycopg2 takes them: positional (``%s``) or named (``%(name)s``)."""


def make_green() -> None:
    """Make every psycopg2 connection of this process yield to gevent while it waits."""
    psycopg2.extensions.set_wait_callback(_wait_green)


class BoundedConnection(psycopg2.extensions.connection):
    """A connection whose waits for the server last ``wait_limit_s`` at most (None: no
    limit) once connected, and ``connect_limit_s`` while connecting: libpq applies its
    ``connect_timeout`` only to blocking connects, not to the green ones."""

    def __init__(self, dsn: str, *args: Any, connect_limit_s: float,
                 wait_limit_s: float | None, **kwargs: Any) -> None:
        self.wait_limit_s: float | None = connect_limit_s  # read while super() connects
        super().__init__(dsn, *args, **kwargs)
        self.wait_limit_s = wait_limit_s
        self.prepared: set[str] = set()  # names PREPAREd on this session


class NoAnswer(psycopg2.OperationalError):
    """The server sent nothing for as long as a wait may last: it hangs."""


def _wait_green(conn: psycopg2.extensions.connection) -> None:
    """psycopg2's wait callback: poll the connection, waiting for its socket between polls."""
    limit = getattr(conn, "wait_limit_s", None)
    while True:
        state = conn.poll()
        if state == psycopg2.extensions.POLL_OK:
            return
        waits: tuple[list[int], list[int]]
        if state == psycopg2.extensions.POLL_READ:
            waits = [conn.fileno()], []
        elif state == psycopg2.extensions.POLL_WRITE:
            waits = [], [conn.fileno()]
        else:
            raise psycopg2.OperationalError(f"unexpected poll state {state!r}")
        if first_ready(*waits, limit) == ([], []):
            raise NoAnswer(f"PostgreSQL did not answer within {limit:g} s "
                           "(what it was sent may be done all the same)")


def connect(dsn: str, timeout_s: float = DEFAULT_TIMEOUT_S,
            statement_timeout: bool = False) -> psycopg2.extensions.connection:
    """A new connection with a bounded connect time (libpq allows 2 s at least) and
    keep-alives that notice a vanished server within a few seconds; with
    ``statement_timeout`` the server also cancels any statement running longer, and
    the connection gives up on an answer ``ANSWER_MARGIN_S`` after that."""
    connect_s = max(2, round(timeout_s))
    options = f"-c statement_timeout={int(timeout_s * 1000)}" if statement_timeout else ""
    return psycopg2.connect(dsn, connection_factory=partial(
                                BoundedConnection, connect_limit_s=connect_s,
                                wait_limit_s=timeout_s + ANSWER_MARGIN_S
                                if statement_timeout else None),
                            client_encoding="UTF8", connect_timeout=connect_s, keepalives=1,
                            keepalives_idle=2, keepalives_interval=1, keepalives_count=3,
                            options=options)


class ConnectionPool:
    """A bounded pool of connections to one database, safe to share between greenlets.

    Once a wait for the server ran out (``NoAnswer``: it hangs), the pool refuses at
    once until a probe, or the LISTEN connection, gets an answer again: otherwise every
    request of a hang that lasts waited out the timeout again (5-12 s each, for as long
    as it lasted) while ``/health`` had said within a second that PostgreSQL was down.
    """

    def __init__(self, dsn: str, max_size: int, timeout_s: float = DEFAULT_TIMEOUT_S) -> None:
        self.dsn = dsn
        self.max_size = max_size
        self.timeout_s = timeout_s
        self._idle: list[psycopg2.extensions.connection] = []
        self._slots = gevent.lock.BoundedSemaphore(max_size)
        self._prober: gevent.Greenlet | None = None  # alive while the server hangs

    @cached_property
    def notifications(self) -> Notifications:
        """The one LISTEN connection of this process to the database, for every channel
        (outside the pool and its ``max_size``)."""
        from app.repository.notifications import Notifications  # it connects through here

        return Notifications(self.dsn, self.timeout_s, on_answer=self.answered)

    @contextmanager
    def connection(self) -> Iterator[psycopg2.extensions.connection]:
        """Borrow a connection. It goes back to the pool outside any transaction;
        a connection that failed is closed and replaced later."""
        if self._hanging():
            raise psycopg2.OperationalError(
                "PostgreSQL hangs: a request to it went unanswered, and it has not answered "
                "since")
        if not self._slots.acquire(timeout=self.timeout_s):
            raise psycopg2.OperationalError(
                f"none of the {self.max_size} connections to PostgreSQL came free within "
                f"{self.timeout_s:g} s")
        try:
            try:
                conn = self._idle.pop() if self._idle else connect(
                    self.dsn, self.timeout_s, statement_timeout=True)
            except NoAnswer:
                self._hangs()
                raise
            try:
                yield conn
            except BaseException as error:
                if is_database_outage(error):
                    conn.close()
                    self._close_idle()  # most likely lost as well
                    if isinstance(error, NoAnswer):
                        self._hangs()
                else:
                    self._discard_or_reset(conn)
                raise
            if conn.closed or conn.status != psycopg2.extensions.STATUS_READY:
                self._discard_or_reset(conn)
            else:
                self._idle.append(conn)
        finally:
            self._slots.release()

    @contextmanager
    def transaction(self) -> Iterator[psycopg2.extensions.cursor]:
        """A cursor inside one transaction: committed when the block ends, rolled
        back when it raises."""
        with self.connection() as conn:
            try:
                with conn.cursor() as cursor:
                    yield cursor
            except BaseException:
                if not conn.closed:  # a wait that gave up closed it: nothing to roll back
                    conn.rollback()
                raise
            conn.commit()

    @contextmanager
    def statement(self) -> Iterator[psycopg2.extensions.cursor]:
        """A cursor whose statements each run in a transaction of their own
        (autocommit): for one statement, the same as ``transaction`` without the
        BEGIN and COMMIT round trips, which tripled what a short read cost (a
        ``SELECT 1`` took 87 us of the client's CPU and 173 us in all, against 30
        and 62)."""
        with self.connection() as conn:
            conn.autocommit = True
            try:
                with conn.cursor() as cursor:
                    yield cursor
            finally:
                if not conn.closed:
                    conn.autocommit = False

    def fetch_all(self, query: str, params: Params = None, *, text_as_bytes: bool = False
                  ) -> list[tuple]:
        """Run one query and return its rows; with ``text_as_bytes`` text values come
        as their UTF-8 bytes, not decoded into ``str``."""
        with self.statement() as cursor:
            if text_as_bytes:
                psycopg2.extensions.register_type(psycopg2.extensions.BYTES, cursor)
            cursor.execute(query, params)
            return cursor.fetchall()

    def execute(self, query: str, params: Params = None) -> int:
        """Run one statement in its own transaction; returns the affected row count."""
        with self.statement() as cursor:
            cursor.execute(query, params)
            return cursor.rowcount

    def answered(self) -> None:
        """The server answered on a connection of its own (the LISTEN one): it no longer
        hangs. Without this, a notification that arrives as a hung server resumes (a
        statement sent during the hang, done now) woke the streams into reads that the
        pool refused for the few milliseconds its probe still took, ending them all."""
        if self._prober is not None:
            self._prober.kill(block=False)
            self._prober = None

    def _hanging(self) -> bool:
        """Whether the server hangs (a probe that died of something unforeseen does not
        keep the pool refusing)."""
        return self._prober is not None and not self._prober.dead

    def _hangs(self) -> None:
        if not self._hanging():
            self._prober = gevent.spawn(self._probe_until_answered)

    def _probe_until_answered(self) -> None:
        """Asks the server until it answers. While it hangs an attempt is always waiting
        (each waits the connect timeout out), so its answer ends the refusals as soon
        as the server resumes; a refused attempt is made again after a pause."""
        while True:
            try:
                conn = connect(self.dsn, self.timeout_s, statement_timeout=True)
                try:
                    with conn.cursor() as cursor:
                        cursor.execute("SELECT 1")
                finally:
                    conn.close()
            except NoAnswer:
                continue
            except psycopg2.Error:
                gevent.sleep(PROBE_INTERVAL_S)
            else:
                return  # the greenlet ends: the pool serves again

    def _discard_or_reset(self, conn: psycopg2.extensions.connection) -> None:
        if not conn.closed:
            try:
                conn.rollback()
            except psycopg2.Error:
                conn.close()
            else:
                self._idle.append(conn)

    def _close_idle(self) -> None:
        while self._idle:
            self._idle.pop().close()

    def close(self) -> None:
        """Close every idle connection, and stop probing a server that hangs."""
        self._close_idle()
        if self._prober is not None:
            self._prober.kill()
            self._prober = None
