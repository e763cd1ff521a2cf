"""Every wait for PostgreSQL is bounded: a server that stops answering (here one
backend stopped with SIGSTOP, or a socket that accepts and says nothing) is an
outage error within the configured time, not a request held for good."""

from __future__ import annotations

import os
import signal
import socket
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

import gevent
import psycopg2
import pytest

from app.repository.database import ANSWER_MARGIN_S, ConnectionPool, connect, make_green
from tests.helpers.waiting import wait_until

SAFETY_S = 20  # the old code waited for ever: fail instead


@pytest.fixture(autouse=True)
def green() -> None:
    make_green()  # as in the workers: only green waits can be bounded


@contextmanager
def stopped(pid: int) -> Iterator[None]:
    os.kill(pid, signal.SIGSTOP)
    try:
        yield
    finally:
        os.kill(pid, signal.SIGCONT)


def test_a_query_the_server_never_answers_fails_after_its_statement_timeout(settings):
    pool = ConnectionPool(settings.database_url, 2, timeout_s=1)
    try:
        with pool.connection() as conn:
            backend = conn.info.backend_pid
        with stopped(backend), gevent.Timeout(SAFETY_S):
            started = time.monotonic()
            with pytest.raises(psycopg2.OperationalError, match="did not answer within 3 s"):
                pool.fetch_all("SELECT 1")
            took = time.monotonic() - started
        assert 1 + ANSWER_MARGIN_S <= took < 1 + ANSWER_MARGIN_S + 1.5
        # The connection was dropped; once the server answers the pool's probe, the
        # next query gets a new one.
        wait_until(lambda: answers(pool), 5, what="the pool serving again")
        with pool.connection() as conn:
            assert conn.info.backend_pid != backend
    finally:
        pool.close()


def answers(pool: ConnectionPool) -> bool:
    try:
        return pool.fetch_all("SELECT 1") == [(1,)]
    except psycopg2.OperationalError:
        return False


def test_after_a_wait_ran_out_the_pool_refuses_at_once_until_the_server_answers():
    """A hang that lasts cost every request the whole timeout again; now only the first
    waits, and a probe each second finds the server back."""
    silent = socket.create_server(("127.0.0.1", 0))  # accepts, never answers
    try:
        pool = ConnectionPool(f"postgresql://nobody@127.0.0.1:{silent.getsockname()[1]}/none",
                              2, timeout_s=1)
        with gevent.Timeout(SAFETY_S):
            with pytest.raises(psycopg2.OperationalError, match="did not answer within"):
                pool.fetch_all("SELECT 1")
            for _ in range(3):
                started = time.monotonic()
                with pytest.raises(psycopg2.OperationalError, match="PostgreSQL hangs"):
                    pool.fetch_all("SELECT 1")
                assert time.monotonic() - started < 0.1
                gevent.sleep(1)
            pool.close()  # stops probing
    finally:
        silent.close()


def test_a_server_that_accepts_and_never_answers_fails_the_connect_in_time():
    silent = socket.create_server(("127.0.0.1", 0))  # the kernel accepts; nothing answers
    try:
        port = silent.getsockname()[1]
        with gevent.Timeout(SAFETY_S):
            started = time.monotonic()
            with pytest.raises(psycopg2.OperationalError, match="did not answer within 2 s"):
                connect(f"postgresql://nobody@127.0.0.1:{port}/none", timeout_s=1)
            assert time.monotonic() - started < 3.5
    finally:
        silent.close()


def test_waiting_for_a_pooled_connection_is_bounded_too(settings):
    pool = ConnectionPool(settings.database_url, 1, timeout_s=1)
    try:
        with pool.connection(), gevent.Timeout(SAFETY_S):
            started = time.monotonic()
            with pytest.raises(psycopg2.OperationalError, match="came free within 1 s"):
                gevent.spawn(pool.fetch_all, "SELECT 1").get()
            assert 1 <= time.monotonic() - started < 2.5
        assert pool.fetch_all("SELECT 1") == [(1,)]
    finally:
        pool.close()


def test_listening_to_one_more_channel_while_the_server_hangs_gives_up_in_time(settings):
    """A channel added to the process's LISTEN connection while its backend hangs (a
    stream opening on a worker that had not looked an event type up yet): the caller
    hears, after the statement timeout and its margin, that the channel is not
    listened to, and reads from the database instead, where it waited as long as the
    server hung. Once the server answers again, the channel is listened to."""
    pool = ConnectionPool(settings.database_url, 2, timeout_s=1)
    prefix = f"test_{uuid.uuid4().hex[:10]}"
    try:
        first = pool.notifications.listener(f"{prefix}_first", lambda _: None, lambda: None)
        assert first.ensure_listening()
        [(backend,)] = pool.fetch_all("SELECT pid FROM pg_stat_activity WHERE query LIKE %s",
                                      (f"LISTEN {prefix}%",))
        later = pool.notifications.listener(f"{prefix}_later", lambda _: None, lambda: None)
        with stopped(backend), gevent.Timeout(SAFETY_S):
            started = time.monotonic()
            assert not later.ensure_listening()
            assert time.monotonic() - started < 1 + ANSWER_MARGIN_S + 1.5
        wait_until(later.ensure_listening, 10, what="listening again")
    finally:
        pool.close()
