"""The ZooKeeper client of a worker process (kazoo with its gevent handler)."""

from __future__ import annotations

from kazoo.client import KazooClient
from kazoo.handlers.gevent import SequentialGeventHandler

CONNECT_TIMEOUT_S = 5.0


def zookeeper_client(hosts: str, root: str) -> KazooClient:
    """A started client whose paths are relative to ``root`` (created if missing)."""
    setup = KazooClient(hosts=hosts, handler=SequentialGeventHandler(),
                        timeout=CONNECT_TIMEOUT_S)
    setup.start(timeout=CONNECT_TIMEOUT_S)
    try:
        setup.ensure_path(root)
    finally:
        setup.stop()
        setup.close()
    client = KazooClient(hosts=hosts + root, handler=SequentialGeventHandler(),
                         timeout=CONNECT_TIMEOUT_S)
    client.start(timeout=CONNECT_TIMEOUT_S)
    return client
