"""``first_ready``: the lean cooperative wait of the ZooKeeper and PostgreSQL clients."""

from __future__ import annotations

import socket
import time

import gevent

from app.green_wait import first_ready


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
