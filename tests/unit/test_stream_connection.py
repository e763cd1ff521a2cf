"""Whether a stream's client is still there, for any descriptor number."""

from __future__ import annotations

import os
import resource
import socket

import pytest

from app.streaming.connection import client_gone

HIGH_FD = 1500


@pytest.fixture
def high_numbered_pair():
    """A connected pair whose server side has a descriptor past select()'s 1024."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft <= HIGH_FD:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, 4096), hard))
    server, client = socket.socketpair()
    high = socket.socket(fileno=os.dup2(server.fileno(), HIGH_FD))
    server.close()
    yield high, client
    high.close()
    client.close()


def test_a_client_on_a_high_numbered_descriptor_is_there_until_it_closes(high_numbered_pair):
    # A worker holding a thousand streams gives them descriptors past 1024; a check
    # built on select() took every one of those streams for gone and ended it.
    server, client = high_numbered_pair
    assert server.fileno() >= 1024
    assert not client_gone(server)
    client.sendall(b"GET / HTTP/1.1\r\n")  # a pipelined request is not a goodbye
    assert not client_gone(server)
    server.recv(100)
    client.close()
    assert client_gone(server)


def test_no_connection_is_not_gone():
    assert not client_gone(None)
