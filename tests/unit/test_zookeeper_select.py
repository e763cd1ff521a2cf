"""The ZooKeeper client's select: answered at once for sockets that are ready,
waiting cooperatively (as kazoo's own gevent select does) for those that are not."""

from __future__ import annotations

import gevent
import pytest
from gevent import socket

from app.coordination.zookeeper import AskFirstGeventHandler, ready_now


@pytest.fixture
def pair():
    left, right = socket.socketpair()
    yield left, right
    left.close()
    right.close()


def test_a_socket_with_data_waiting_is_readable_and_one_without_is_not(pair):
    left, right = pair
    assert ready_now([left, right], []) == ([], [])
    right.sendall(b"x")
    assert ready_now([left, right], []) == ([left], [])


def test_a_socket_with_room_to_send_is_writable(pair):
    left, _ = pair
    assert ready_now([], [left]) == ([], [left])


def test_a_socket_whose_peer_closed_reads_as_ready(pair):
    left, right = pair
    right.close()
    assert ready_now([left], [])[0] == [left]


def test_file_descriptor_numbers_are_accepted_as_well_as_sockets(pair):
    left, right = pair
    right.sendall(b"x")
    assert ready_now([left.fileno()], []) == ([left.fileno()], [])


def test_select_waits_without_blocking_other_greenlets_until_data_arrives(pair):
    left, right = pair
    handler = AskFirstGeventHandler()
    sent = gevent.spawn_later(0.05, right.sendall, b"x")
    assert handler.select([left], [], [], 5) == ([left], [], [])
    assert sent.ready()  # the sender ran while select waited


def test_select_times_out_with_nothing_ready(pair):
    left, _ = pair
    assert AskFirstGeventHandler().select([left], [], [], 0.01) == ([], [], [])


def test_answers_given_at_once_still_let_other_greenlets_run(pair):
    # kazoo's connection greenlet selects before every read: on a busy connection
    # every answer is immediate, and the other greenlets must not wait for it to idle.
    left, right = pair
    right.sendall(b"x")
    handler = AskFirstGeventHandler()
    others_ran = []
    gevent.spawn(others_ran.append, True)
    for _ in range(AskFirstGeventHandler.YIELD_EVERY):
        handler.select([left], [], [], 5)
    assert others_ran == [True]
