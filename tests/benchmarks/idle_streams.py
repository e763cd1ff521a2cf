"""Many idle streams on ONE gunicorn worker: how long they take to open, what each
costs in worker memory, and how late their keep-alives come.

Shared by ``bench_stream`` (low-level streams) and ``bench_subscription``
(subscription streams): the caller says which requests to open.
"""

from __future__ import annotations

import selectors
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from tests.benchmarks.harness import start_server

KEEP_ALIVE_S = 2
"""batch_flush_timeout of the idle streams: each sends an empty batch this often."""

MEASURE_S = 12
"""How long keep-alives are timed once every stream has started and sent one more."""


@dataclass(frozen=True)
class IdleStreams:
    opening_s: float  # until every stream has sent its first line
    kb_each: float  # worker memory per open stream
    late_p99_s: float  # keep-alives later than due
    late_max_s: float

    def describe(self, count: int, kind: str) -> str:
        return (f"{count} idle {kind} on one worker: all started after {self.opening_s:.1f} s,"
                f" {self.kb_each:.0f} KB each; keep-alives every {KEEP_ALIVE_S} s late by p99"
                f" {self.late_p99_s * 1000:.0f} ms, max {self.late_max_s * 1000:.0f} ms")


def worker_rss_kb(master_pid: int) -> int:
    """The resident memory of the (single) gunicorn worker of a master."""
    children = Path(f"/proc/{master_pid}/task/{master_pid}/children").read_text().split()
    status = Path(f"/proc/{children[0]}/status").read_text()
    return int(next(line for line in status.splitlines()
                    if line.startswith("VmRSS:")).split()[1])


def idle_streams(env: dict[str, str], count: int, stream_paths: Callable[[str], list[str]],
                 clean_up: Callable[[str], None] = lambda base_url: None) -> IdleStreams:
    """Opens at once the ``count`` streams whose paths (with query, without
    batch_flush_timeout) ``stream_paths(base_url)`` prepares, on a one-worker
    server, and measures them; ``clean_up(base_url)`` runs once they are closed."""
    server, port = start_server(dict(env, NAKADI_WORKER_CONNECTIONS=str(count + 100)), 1)
    try:
        paths = stream_paths(f"http://127.0.0.1:{port}")
        time.sleep(1)
        before = worker_rss_kb(server.pid)
        selector = selectors.DefaultSelector()
        last_seen: dict[socket.socket, float] = {}
        last_data: dict[socket.socket, bytes] = {}
        started: set[socket.socket] = set()
        lateness: list[float] = []
        opened = time.perf_counter()
        for path in paths:
            sock = socket.create_connection(("127.0.0.1", port))
            separator = "&" if "?" in path else "?"
            sock.sendall(f"GET {path}{separator}batch_flush_timeout={KEEP_ALIVE_S}"
                         " HTTP/1.1\r\nHost: bench\r\n\r\n".encode())
            sock.setblocking(False)
            selector.register(sock, selectors.EVENT_READ)
            last_seen[sock] = opened
        all_started = measure_until = opened + 120  # until every stream sent a line
        while (now := time.perf_counter()) < measure_until:
            for key, _ in selector.select(timeout=0.5):
                sock = key.fileobj  # type: ignore[assignment]
                data = sock.recv(65536)
                now = time.perf_counter()
                if not data:
                    raise RuntimeError(f"a stream ended: {last_data.get(sock, b'')!r}")
                last_data[sock] = (last_data.get(sock, b"") + data)[-600:]
                if b"cursor" in data:
                    if sock in started and now > all_started:
                        lateness.append(max(0.0, now - last_seen[sock] - KEEP_ALIVE_S))
                    started.add(sock)
                last_seen[sock] = now
            if len(started) == len(paths) and all_started > now:
                # One more round, then measure.
                all_started, measure_until = now, now + KEEP_ALIVE_S + MEASURE_S
        after = worker_rss_kb(server.pid)
        for sock in last_seen:
            sock.close()
        clean_up(f"http://127.0.0.1:{port}")
        if len(started) < len(paths):
            raise RuntimeError(f"only {len(started)} of {len(paths)} streams started in 120 s")
        lateness.sort()
        return IdleStreams(all_started - opened, (after - before) / len(paths),
                           lateness[int(len(lateness) * 0.99)], lateness[-1])
    finally:
        server.terminate()
        server.wait(60)
