"""One LISTEN connection per process and database, for every channel: PostgreSQL
wakes every listening backend of a database at each NOTIFY, so each extra
connection costs every publish."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from app.repository.database import ConnectionPool
from app.repository.notifications import Listener
from tests.helpers.waiting import wait_until


class Heard:
    """What one listener was told."""

    def __init__(self) -> None:
        self.payloads: set[str] = set()
        self.gaps = 0

    def add(self, payloads: set[str]) -> None:
        self.payloads |= payloads

    def gap(self) -> None:
        self.gaps += 1


@pytest.fixture
def process(pool: ConnectionPool) -> Iterator[ConnectionPool]:
    """A pool of its own, as a worker process has: its own notifications connection."""
    own = ConnectionPool(pool.dsn, 2, pool.timeout_s)
    yield own
    own.close()


@pytest.fixture
def prefix() -> str:
    return f"test_{uuid.uuid4().hex[:10]}"


def listen(process: ConnectionPool, channel: str) -> tuple[Listener, Heard]:
    heard = Heard()
    listener = process.notifications.listener(channel, heard.add, heard.gap)
    assert listener.ensure_listening()
    return listener, heard


def notify(pool: ConnectionPool, channel: str, payload: str) -> None:
    pool.execute("SELECT pg_notify(%s, %s)", (channel, payload))


def listening_backends(pool: ConnectionPool, prefix: str) -> list[int]:
    """The backends whose last statement LISTENed to a channel of the test."""
    return [pid for (pid,) in pool.fetch_all(
        "SELECT pid FROM pg_stat_activity WHERE query LIKE %s", (f"LISTEN {prefix}%",))]


def test_every_channel_shares_one_connection_and_hears_only_its_own(pool, process, prefix):
    first, heard_first = listen(process, f"{prefix}_a")
    second, heard_second = listen(process, f"{prefix}_b")
    also_first, heard_also_first = listen(process, f"{prefix}_a")
    try:
        assert len(listening_backends(pool, prefix)) == 1
        notify(pool, f"{prefix}_a", "1")
        notify(pool, f"{prefix}_b", "2")
        notify(pool, f"{prefix}_a", "3")
        wait_until(lambda: heard_first.payloads == {"1", "3"} and heard_second.payloads == {"2"})
        assert heard_also_first.payloads == {"1", "3"}
    finally:
        for listener in (first, second, also_first):
            listener.close()


def test_a_channel_added_later_is_heard_as_soon_as_it_says_it_listens(pool, process, prefix):
    first, _ = listen(process, f"{prefix}_a")
    try:
        for n in range(5):  # each LISTEN goes through the connection the owner waits on
            later, heard = listen(process, f"{prefix}_later{n}")
            notify(pool, f"{prefix}_later{n}", "sent right after")
            wait_until(lambda h=heard: h.payloads == {"sent right after"})
            later.close()
    finally:
        first.close()


def test_a_lost_connection_is_a_gap_for_every_listener_and_listening_resumes(
        pool, process, prefix):
    first, heard_first = listen(process, f"{prefix}_a")
    second, heard_second = listen(process, f"{prefix}_b")
    try:
        gaps_before = heard_first.gaps, heard_second.gaps
        (backend,) = listening_backends(pool, prefix)
        pool.execute("SELECT pg_terminate_backend(%s)", (backend,))
        wait_until(lambda: heard_first.gaps > gaps_before[0]
                   and heard_second.gaps > gaps_before[1])
        wait_until(lambda: first.is_listening() and second.is_listening(), timeout=15)
        (again,) = listening_backends(pool, prefix)
        assert again != backend
        notify(pool, f"{prefix}_b", "after")
        wait_until(lambda: "after" in heard_second.payloads)
    finally:
        first.close()
        second.close()


def test_the_connection_closes_with_its_last_listener(pool, process, prefix):
    first, _ = listen(process, f"{prefix}_a")
    second, _ = listen(process, f"{prefix}_b")
    first.close()
    assert second.is_listening()
    assert len(listening_backends(pool, prefix)) == 1
    second.close()
    assert not second.is_listening()
    wait_until(lambda: not listening_backends(pool, prefix))
