"""Chunks of a chunked response go out whole and framed, a large one uncopied."""

from __future__ import annotations

import socket as stdlib_socket

import gevent
from gevent import socket

from app.gunicorn_chunks import JOIN_BELOW, send_all, write_chunk


def read_all(sock: socket.socket, size: int) -> bytes:
    """What arrives, read in small pieces so that the writer's sends come out partial."""
    received = bytearray()
    sock.settimeout(10)
    while len(received) < size:
        piece = sock.recv(4096)
        if not piece:
            break
        received += piece
        gevent.sleep(0)
    return bytes(received)


def test_a_large_chunk_arrives_whole_and_framed_through_partial_sends():
    left, right = socket.socketpair()
    left.setsockopt(stdlib_socket.SOL_SOCKET, stdlib_socket.SO_SNDBUF, 8192)
    data = bytes(range(256)) * 8192  # 2 MiB, far more than the socket buffers hold
    try:
        writer = gevent.spawn(write_chunk, left, data)
        framed = read_all(right, len(b"200000\r\n") + len(data) + len(b"\r\n"))
        writer.get(timeout=10)
    finally:
        left.close()
        right.close()
    assert framed == b"200000\r\n" + data + b"\r\n"


def test_small_and_empty_chunks_are_framed_as_gunicorn_frames_them():
    left, right = socket.socketpair()
    try:
        write_chunk(left, "abc")
        write_chunk(left, b"x" * (JOIN_BELOW - 1))
        write_chunk(left, b"")  # the last chunk, which ends the body
        left.shutdown(stdlib_socket.SHUT_WR)
        framed = read_all(right, 1 << 20)
    finally:
        left.close()
        right.close()
    assert framed == (b"3\r\nabc\r\n" + b"%X\r\n" % (JOIN_BELOW - 1)
                      + b"x" * (JOIN_BELOW - 1) + b"\r\n0\r\n\r\n")


class RecordingSocket:
    """Takes a few bytes per ``sendmsg``, and keeps what each call was handed."""

    def __init__(self) -> None:
        self.handed: list[list[memoryview]] = []
        self.received = bytearray()

    def sendmsg(self, buffers: list[memoryview]) -> int:
        self.handed.append(list(buffers))
        taken = b"".join(buffers)[:1000]
        self.received += taken
        return len(taken)


def test_a_large_chunk_is_handed_to_the_socket_as_it_is_not_as_a_copy():
    sock = RecordingSocket()
    data = b"e" * (JOIN_BELOW * 2)
    write_chunk(sock, data)  # type: ignore[arg-type]
    assert bytes(sock.received) == b"%X\r\n" % len(data) + data + b"\r\n"
    assert sock.handed[0][1].obj is data
    assert all(view.obj is data for buffers in sock.handed for view in buffers
               if len(view) > 2 and view[0:1] == b"e")


def test_send_all_sends_every_buffer_in_order_even_empty_ones():
    sock = RecordingSocket()
    send_all(sock, [b"", b"ab", b"", b"c" * 2500, b"d"])  # type: ignore[arg-type]
    assert bytes(sock.received) == b"ab" + b"c" * 2500 + b"d"
