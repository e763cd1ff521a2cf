"""The ZooKeeper client's select: answered at once for sockets that are ready,
waiting cooperatively (as kazoo's own gevent select does) for those that are not;
and its connection's socket, which reads ahead what the kernel holds."""

from __future__ import annotations

import gevent
import pytest
from gevent import socket
from kazoo.exceptions import ConnectionDropped

from app.coordination.zookeeper import AskFirstGeventHandler, ReadAheadSocket, ready_now


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


def test_select_on_two_sockets_answers_the_one_that_became_readable(pair):
    # kazoo's connection loop waits on its ZooKeeper socket and its request pipe.
    left, _ = pair
    other_left, other_right = socket.socketpair()
    try:
        gevent.spawn_later(0.02, other_right.sendall, b"x")
        assert AskFirstGeventHandler().select([left, other_left], [], [], 5) == (
            [other_left], [], [])
    finally:
        other_left.close()
        other_right.close()


def test_select_waits_until_a_full_socket_can_be_written_again(pair):
    left, right = pair
    left.setblocking(False)
    with pytest.raises(BlockingIOError):
        while True:
            left.send(b"x" * 65536)
    drained = gevent.spawn_later(0.02, lambda: [right.recv(1 << 20) for _ in range(64)])
    assert AskFirstGeventHandler().select([], [left], [], 5) == ([], [left], [])
    drained.kill()


def test_select_waits_for_a_peer_that_closes(pair):
    left, right = pair
    gevent.spawn_later(0.02, right.close)
    assert AskFirstGeventHandler().select([left], [], [], 5) == ([left], [], [])


def test_a_select_leaves_no_watcher_running_whether_it_timed_out_or_not(pair):
    left, right = pair
    loop = gevent.get_hub().loop
    before = loop.activecnt
    assert AskFirstGeventHandler().select([left], [], [], 0.01) == ([], [], [])
    gevent.spawn_later(0.01, right.sendall, b"x")
    assert AskFirstGeventHandler().select([left], [], [], 5) == ([left], [], [])
    assert loop.activecnt == before


@pytest.fixture
def read_ahead(pair):
    """The connection's socket as kazoo uses it (non-blocking), and its peer."""
    left, right = pair
    left.setblocking(False)
    return ReadAheadSocket(left, timeout=0.1), right


def fill(sock):
    sock.setblocking(False)
    with pytest.raises(BlockingIOError):
        while True:
            sock.send(b"x" * 65536)


def test_messages_that_arrived_together_are_taken_at_once_and_handed_out_as_asked(read_ahead):
    # kazoo reads each message as its 4-byte length, then the rest.
    connection, peer = read_ahead
    assert connection.pending() == 0
    peer.sendall(b"\0\0\0\3abc" + b"\0\0\0\1z")
    assert connection.pending() == 12
    assert [connection.recv(4), connection.recv(3), connection.recv(4), connection.recv(1)] \
        == [b"\0\0\0\3", b"abc", b"\0\0\0\1", b"z"]
    assert connection.pending() == 0


def test_a_socket_holding_bytes_is_readable_though_the_kernel_has_none_left(read_ahead):
    connection, peer = read_ahead
    peer.sendall(b"abcd")
    assert connection.pending() == 4
    assert ready_now([connection], []) == ([], [])
    assert AskFirstGeventHandler().select([connection], [], [], 0.01) == ([connection], [], [])
    assert connection.recv(4) == b"abcd"
    assert AskFirstGeventHandler().select([connection], [], [], 0.01) == ([], [], [])


def test_a_socket_holding_nothing_is_waited_for_until_bytes_arrive(read_ahead):
    connection, peer = read_ahead
    gevent.spawn_later(0.02, peer.sendall, b"x")
    assert AskFirstGeventHandler().select([connection], [], [], 5) == ([connection], [], [])
    assert connection.recv(4) == b"x"


def test_a_request_waiting_beside_held_bytes_is_seen_too(read_ahead):
    # kazoo's loop selects on its socket and its request pipe, and serves both.
    connection, peer = read_ahead
    pipe_left, pipe_right = socket.socketpair()
    try:
        peer.sendall(b"ab")
        connection.pending()
        pipe_right.sendall(b"\0")
        assert AskFirstGeventHandler().select([connection, pipe_left], [], [], 5) == (
            [connection, pipe_left], [], [])
    finally:
        pipe_left.close()
        pipe_right.close()


def test_an_ended_connection_reads_as_empty(read_ahead):
    # kazoo takes an empty read for a dropped connection, and connects again.
    connection, peer = read_ahead
    peer.sendall(b"ab")
    peer.close()
    assert connection.recv(4) == b"ab"
    assert connection.pending() == 0
    assert connection.recv(4) == b""


def test_a_send_that_finds_the_buffer_full_waits_for_room(read_ahead, pair):
    # kazoo selects before each send; the socket is reported writable at once, and
    # the send itself waits in the rare case that it must.
    connection, peer = read_ahead
    fill(pair[0])
    assert AskFirstGeventHandler().select([], [connection], [], 0.01) == ([], [connection], [])
    drained = gevent.spawn_later(0.02, lambda: [peer.recv(1 << 20) for _ in range(64)])
    assert connection.send(b"request") == 7
    drained.kill()


def test_a_send_that_finds_no_room_for_its_timeout_drops_the_connection(read_ahead, pair):
    connection, _ = read_ahead
    fill(pair[0])
    with pytest.raises(ConnectionDropped):
        connection.send(b"request")
