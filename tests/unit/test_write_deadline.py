"""A stream's write to a client that stops reading: cut once the stream is past its
deadline, asked again when it comes, and not before."""

from __future__ import annotations

import gc
import time

import gevent
import pytest
from gevent import socket

from app.streaming import connection
from app.streaming.connection import write_deadline

MUCH = b"x" * 50_000_000  # far more than the socket buffers hold


@pytest.fixture
def tcp_pair():
    """A server-side and a client-side socket of one loopback TCP connection."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    client = socket.create_connection(listener.getsockname())
    server, _ = listener.accept()
    listener.close()
    yield server, client
    server.close()
    client.close()


@pytest.fixture(autouse=True)
def short_last_write(monkeypatch):
    monkeypatch.setattr(connection, "LAST_WRITE_S", 0.05)


def test_a_write_the_client_does_not_take_fails_at_the_deadline(tcp_pair):
    server, _ = tcp_pair
    deadline = time.monotonic() + 0.3

    def write() -> None:
        with write_deadline(server, lambda: deadline - time.monotonic()):
            server.sendall(MUCH)

    writer = gevent.spawn(write)
    writer.join(timeout=5)
    assert isinstance(writer.exception, OSError)
    assert deadline <= time.monotonic() < deadline + 1


def test_a_deadline_that_moved_while_writing_is_kept(tcp_pair):
    server, client = tcp_pair
    deadline = time.monotonic() + 0.1

    def commit_then_read() -> int:
        nonlocal deadline
        gevent.sleep(0.05)
        deadline = time.monotonic() + 5  # a commit came
        gevent.sleep(0.3)  # past the first deadline
        read = 0
        while read < len(MUCH):
            read += len(client.recv(1 << 20))
        return read

    reader = gevent.spawn(commit_then_read)
    with write_deadline(server, lambda: deadline - time.monotonic()):
        server.sendall(MUCH)
    assert reader.get(timeout=10) == len(MUCH)


def test_no_deadline_or_connection_sets_no_timer_and_a_write_leaves_none(tcp_pair):
    server, client = tcp_pair
    loop = gevent.get_hub().loop
    before = loop.activecnt
    with write_deadline(server, None), write_deadline(None, lambda: 1.0):
        assert loop.activecnt == before
    with write_deadline(server, lambda: 10.0):
        assert loop.activecnt == before + 1
        server.sendall(b"line\n")
    assert loop.activecnt == before
    assert client.recv(10) == b"line\n"


def test_writes_leave_no_garbage_for_the_cycle_collector(tcp_pair):
    """Every chunk of every stream is written under a deadline: garbage only the cycle
    collector frees would pile up at that rate, and collecting it held a worker with
    2,000 idle streams for up to ~100 ms."""
    server, client = tcp_pair
    gc.collect()
    gc.disable()
    try:
        for _ in range(100):
            with write_deadline(server, lambda: 10.0):
                server.sendall(b"line\n")
        assert gc.collect() == 0
    finally:
        gc.enable()
    assert client.recv(1000).count(b"line\n") > 0
