"""What a ZooKeeper request costs a worker: this process's CPU and the wall time per
request of its kazoo client, against a real ZooKeeper.

    python -m tests.benchmarks.bench_zookeeper [--requests 3000] [--rounds 3]

Each round sends ``--requests`` of each kind one after another (a get, a get that
sets a watch, a set, and a commit's multi-operation: a check and two sets), once
through the client the workers use (``app.coordination.zookeeper``) and once
through a plain kazoo client with kazoo's own gevent handler, in turns. Every
subscription stream's start, commit and rebalance is a handful of these, so the
client's CPU per request is part of what each of them costs a worker (ZooKeeper's
own CPU per request is more again). Starts its own ZooKeeper (with the rest of
the local stack) unless NAKADI_* addresses are set.
"""

from __future__ import annotations

from gevent import monkey

monkey.patch_all()

import argparse  # noqa: E402
import resource  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable  # noqa: E402

from kazoo.client import KazooClient  # noqa: E402
from kazoo.handlers.gevent import SequentialGeventHandler  # noqa: E402

from app.config import Settings  # noqa: E402
from app.coordination.zookeeper import ZooKeeper  # noqa: E402
from tests.benchmarks.harness import running_broker  # noqa: E402

ROOT = "/bench-zookeeper"


def process_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _ignore(_event: object) -> None:
    """The watch a stream sets again on every read: one function, as a stream's is (kazoo
    keeps a set of them per path)."""


def requests_of(client: KazooClient, path: str) -> dict[str, Callable[[int], object]]:
    """One request of each kind, the n-th."""
    for node in (path, path + "/topology", path + "/offset"):
        client.ensure_path(node)

    def multi(n: int) -> object:
        transaction = client.transaction()
        transaction.check(path + "/topology", 0)  # a node never written: version 0
        transaction.set_data(path + "/offset", b"%040d" % n)
        transaction.set_data(path, b"%040d" % n)
        return transaction.commit()

    return {
        "get": lambda n: client.get(path),
        "get with a watch": lambda n: client.get(path, watch=_ignore),
        "set": lambda n: client.set(path, b"%040d" % n),
        "multi (check, 2 sets)": multi,
    }


def measure(request: Callable[[int], object], count: int) -> tuple[float, float]:
    """This process's CPU and the wall time per request, in microseconds."""
    cpu, started = process_cpu_s(), time.perf_counter()
    for n in range(count):
        request(n)
    return ((process_cpu_s() - cpu) / count * 1e6, (time.perf_counter() - started) / count * 1e6)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=3000, help="per kind and round")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()

    with running_broker() as (env, _, _):
        settings = Settings.from_env(env)
        ours = ZooKeeper(settings.zookeeper, ROOT, settings.zookeeper_timeout_s).client()
        plain = KazooClient(hosts=settings.zookeeper + ROOT, handler=SequentialGeventHandler())
        plain.start()
        try:
            clients = {"workers' client": requests_of(ours, "/ours"),
                       "kazoo's gevent handler": requests_of(plain, "/plain")}
            for round_number in range(1, args.rounds + 1):
                for kind in clients["workers' client"]:
                    figures = []
                    for label, requests in clients.items():
                        cpu_us, wall_us = measure(requests[kind], args.requests)
                        figures.append(f"{label} {cpu_us:.0f} us CPU, {wall_us:.0f} us wall")
                    print(f"round {round_number} {kind:22} " + "; ".join(figures), flush=True)
        finally:
            plain.stop()
            plain.close()


if __name__ == "__main__":
    main()
