"""The ZooKeeper client of a worker process (kazoo with its gevent handler)."""

from __future__ import annotations

from kazoo.client import KazooClient
from kazoo.handlers.gevent import SequentialGeventHandler

CONNECT_TIMEOUT_S = 5.0


class ZooKeeperUnavailable(Exception):
    """No session could be established with ZooKeeper."""


def _started(hosts: str) -> KazooClient:
    client = KazooClient(hosts=hosts, handler=SequentialGeventHandler(),
                         timeout=CONNECT_TIMEOUT_S)
    # The gevent handler times out with gevent.Timeout, a BaseException: translate it.
    try:
        client.start(timeout=CONNECT_TIMEOUT_S)
    except client.handler.timeout_exception:
        raise ZooKeeperUnavailable(
            f"no session with ZooKeeper at {hosts} in {CONNECT_TIMEOUT_S:.0f}s") from None
    return client


def zookeeper_client(hosts: str, root: str) -> KazooClient:
    """A started client whose paths are relative to ``root`` (created if missing)."""
    setup = _started(hosts)
    try:
        setup.ensure_path(root)
    finally:
        setup.stop()
        setup.close()
    return _started(hosts + root)
