"""Starting the local stack's services: the test suite's free ports cannot be taken
by a client meanwhile, and a service that cannot start says why."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from deploy.localstack import LocalStack, ServiceFailed, free_port, port_is_free


@pytest.fixture
def connected_end() -> Iterator[int]:
    """The local port of an open outgoing connection, the way a client holds one."""
    with socket.socket() as server, socket.socket() as client:
        server.bind(("127.0.0.1", 0))
        server.listen()
        client.connect(server.getsockname())
        accepted, _ = server.accept()
        with accepted:
            yield client.getsockname()[1]


def test_free_ports_lie_below_the_ports_the_kernel_gives_connections():
    low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    ports = [free_port() for _ in range(50)]
    assert all(1024 <= port < low for port in ports)
    assert len(set(ports)) == len(ports)
    assert all(port_is_free(port) for port in ports)


def test_a_port_held_by_a_connection_is_not_free(connected_end):
    assert not port_is_free(connected_end)


def test_a_listening_port_is_not_free():
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        assert not port_is_free(server.getsockname()[1])


def test_zookeeper_on_a_taken_port_fails_naming_the_port_and_the_option(tmp_path,
                                                                        connected_end):
    stack = LocalStack(tmp_path, free_port(), connected_end, free_port())
    with pytest.raises(ServiceFailed) as failed:
        stack.start_zookeeper()
    assert str(failed.value) == (f"ZooKeeper cannot listen on 127.0.0.1:{connected_end}:"
                                 " something else uses that port (choose another with"
                                 " --zookeeper-port)")
    assert stack.services == []


def test_the_kafka_broker_on_a_taken_port_fails_naming_the_option(tmp_path, connected_end):
    stack = LocalStack(tmp_path, free_port(), free_port(), connected_end)
    with pytest.raises(ServiceFailed, match="--kafka-port"):
        stack.start_broker()
    assert stack.services == []


def test_a_service_that_exits_at_start_is_reported_with_the_end_of_its_log(tmp_path):
    (tmp_path / "postgres").mkdir()
    (tmp_path / "postgres" / "PG_VERSION").write_text("9\n")  # a cluster it cannot run
    (tmp_path / "logs").mkdir()
    stack = LocalStack(tmp_path, free_port(), free_port(), free_port())
    with pytest.raises(ServiceFailed) as failed:
        stack.start_postgres()
    log = tmp_path / "logs" / "postgres.log"
    first, *tail = str(failed.value).splitlines()
    assert first.startswith("PostgreSQL exited with code ")
    assert first.endswith(f"; see {log}")
    assert tail
    assert tail == [f"    {line}" for line in log.read_text().splitlines()[-5:]]
    stack.stop()
