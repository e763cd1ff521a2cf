"""``first_ready``: the lean cooperative wait of the ZooKeeper and PostgreSQL clients;
``until_idle``: the group commit's wait for the requests a worker already holds."""

from __future__ import annotations

import socket
import time

import gevent
import gevent.socket

from app.green_wait import first_ready, until_idle


def test_a_timeout_counts_from_the_wait_not_from_the_loop_s_last_turn():
    quiet, other = socket.socketpair()
    try:
        first_ready([quiet], [], 0.01)  # the hub's loop turns, and takes the time
        time.sleep(1.0)  # blocking work: the loop's time is now a second old
        started = time.monotonic()
        assert first_ready([quiet], [], 0.5) == ([], [])
        # Counted from the loop's old time, the timer had run out before the wait.
        assert time.monotonic() - started >= 0.45
    finally:
        quiet.close()
        other.close()


def test_the_socket_that_became_ready_is_the_answer():
    quiet, other = socket.socketpair()
    try:
        gevent.spawn_later(0.05, other.send, b"x")
        assert first_ready([quiet], [], 5) == ([quiet], [])
        assert first_ready([], [quiet], 5) == ([], [quiet])
    finally:
        quiet.close()
        other.close()


def test_the_worker_runs_what_it_can_before_an_idle_wait_ends():
    ran: list[str] = []

    def a_few_turns() -> None:
        for _ in range(5):
            gevent.sleep(0)
        ran.append("turns")

    quiet, other = gevent.socket.socketpair()
    try:
        reader = gevent.spawn(lambda: ran.append(quiet.recv(10).decode()))
        gevent.sleep(0)  # the reader waits on its socket
        other.send(b"received")
        gevent.spawn(a_few_turns)
        later = gevent.spawn_later(1.0, ran.append, "later")
        started = time.monotonic()
        until_idle(5.0)
        assert time.monotonic() - started < 0.5, "waited for a timer not yet due"
        assert sorted(ran) == ["received", "turns"]
        later.kill()
        reader.join()
    finally:
        quiet.close()
        other.close()


def test_a_worker_that_stays_busy_ends_an_idle_wait_at_its_timeout():
    spinning = True

    def spin() -> None:
        while spinning:
            gevent.sleep(0)

    spinner = gevent.spawn(spin)
    try:
        started = time.monotonic()
        until_idle(0.2)
        assert 0.15 <= time.monotonic() - started < 2.0
        assert not spinner.dead
    finally:
        spinning = False
        spinner.join()
