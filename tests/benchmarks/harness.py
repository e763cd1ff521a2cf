"""What the benchmarks share: a local stack and a gunicorn serving it."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path

import psycopg2
import psycopg2.errors
import psycopg2.extensions
import requests

from deploy.localstack import LocalStack, free_port

ROOT = Path(__file__).resolve().parents[2]


def percentile(values: list[float], share: float) -> float:
    """The value below which ``share`` of ``values`` lie (0 for none)."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * share))] if ordered else 0.0


def process_cpu_s(proc: Path) -> float:
    """CPU seconds a process (a ``/proc/<pid>`` folder) used so far, user and system;
    ``OSError`` when it is gone."""
    fields = (proc / "stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def machine_cpu_ticks() -> tuple[int, int]:
    """Clock ticks of all the machine's CPUs since boot, from ``/proc/stat``: those
    spent busy (all but idle and waiting for I/O; time the hypervisor took counts as
    busy) and all of them."""
    fields = [int(value) for value in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:9]]
    total = sum(fields)
    return total - fields[3] - fields[4], total


def busy_share(before: tuple[int, int], after: tuple[int, int]) -> float:
    """The share of the machine's CPU time that was busy between two ``machine_cpu_ticks``."""
    busy, total = after[0] - before[0], after[1] - before[1]
    return busy / total if total else 0.0


def zookeeper_cpu_s(hosts: str) -> float | None:
    """CPU seconds used so far by the ZooKeeper on this machine that serves the first
    of ``hosts``; None when none does (it runs elsewhere)."""
    proc = _zookeeper_process(hosts)
    try:
        return None if proc is None else process_cpu_s(proc)
    except OSError:
        return None


def zookeeper_compiler_cpu_s(hosts: str) -> float | None:
    """CPU seconds the JIT compiler threads of that ZooKeeper used so far (its JVM names
    them ``C1 CompilerThread<n>`` and ``C2 CompilerThread<n>``); None when it runs
    elsewhere."""
    proc = _zookeeper_process(hosts)
    if proc is None:
        return None
    try:
        threads = list((proc / "task").iterdir())
    except OSError:  # it stopped meanwhile
        return None
    spent = 0.0
    for thread in threads:
        try:
            if "CompilerThre" in (thread / "comm").read_text():
                spent += process_cpu_s(thread)
        except OSError:  # a thread that ended meanwhile
            continue
    return spent


def postgres_cpu_s(database_url: str) -> float | None:
    """CPU seconds used so far by the PostgreSQL on this machine that serves
    ``database_url``: its postmaster (matched by the ``-p`` port it was started with,
    as the local stack starts it) and every process it started (backends, WAL writer,
    checkpointer); None when none does. One pass over /proc."""
    port = psycopg2.extensions.parse_dsn(database_url).get("port", "5432").encode()
    postmaster = None
    spent: dict[str, tuple[str, float]] = {}  # pid -> parent pid, CPU seconds
    for proc in Path("/proc").iterdir():
        try:
            args = (proc / "cmdline").read_bytes().split(b"\0")
            spent[proc.name] = ((proc / "stat").read_text().rsplit(")", 1)[1].split()[1],
                                process_cpu_s(proc))
        except (OSError, IndexError):  # gone meanwhile, or not a process folder
            continue
        if args[0].endswith(b"postgres") and b"-p" in args[:-1] and \
                args[args.index(b"-p") + 1] == port:
            postmaster = proc.name
    if postmaster is None:
        return None
    return sum(cpu_s for pid, (parent, cpu_s) in spent.items()
               if postmaster in (pid, parent))


def _zookeeper_process(hosts: str) -> Path | None:
    """The ``/proc`` folder of the ZooKeeper on this machine that serves the first of
    ``hosts`` (matched by the ``clientPort`` of the configuration it was started with)."""
    port = hosts.split(",")[0].split("/")[0].rsplit(":", 1)[-1]
    for proc in Path("/proc").iterdir():
        try:
            args = (proc / "cmdline").read_bytes().split(b"\0")
            if not any(b"org.apache.zookeeper" in arg for arg in args):
                continue
            config = next((arg for arg in reversed(args) if arg.endswith(b".cfg")), None)
            if config is None or f"clientPort={port}\n" not in Path(config.decode()).read_text():
                continue
            return proc
        except OSError:
            continue
    return None


def answer_at_once(appender: object, topic_id: int, batches: Mapping[int, Sequence[bytes]]
                   ) -> dict[int, int]:
    """Stands in for the postgres group commit's ``GroupAppender.append`` where a
    benchmark leaves the storage out: every append answered at once, nothing stored."""
    return dict.fromkeys(batches, 0)


def set_default_storage(database_url: str, storage_id: str) -> None:
    """New event types go to the default storage."""
    conn = psycopg2.connect(database_url)
    with conn, conn.cursor() as cursor:
        cursor.execute("UPDATE storages SET is_default = (id = %s)", (storage_id,))
    conn.close()


def delete_event_types(base_url: str, names: list[str], database_url: str,
                       headers: dict[str, str] | None = None) -> None:
    """Delete the event types and wait (at most 2 minutes) until their topics are gone:
    Tansu serves every topic more slowly the more topics it has (single-event produce
    fell from 5,700 to 220 a second with 800 more), so a later measurement must not
    inherit an earlier one's topics."""
    for name in names:
        requests.delete(f"{base_url}/event-types/{name}", headers=headers).raise_for_status()
    conn = psycopg2.connect(database_url)
    conn.autocommit = True
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            with conn.cursor() as cursor:
                cursor.execute("SELECT count(*) FROM topic_deletions")
                if cursor.fetchone() == (0,):
                    return
            time.sleep(0.5)
        raise RuntimeError("the deleted event types' topics were not removed within 120 s")
    finally:
        conn.close()


def settle_writes(database_url: str) -> None:
    """Write out what a bulk load left dirty, PostgreSQL's buffers and then the page
    cache, so that its writeback does not land in a later measurement. About 30 s
    after a 1M-event load (the kernel's ``dirty_expire_centisecs``) the disk is busy
    with it, and commits' WAL fsyncs waited 100-250 ms: single-event publishing at
    half load, which ran then in round 1 of ``make bench``, had a p99 of 50-100 ms."""
    conn = psycopg2.connect(database_url)
    conn.autocommit = True
    try:
        with conn.cursor() as cursor:
            cursor.execute("CHECKPOINT")
    except psycopg2.errors.InsufficientPrivilege:
        pass  # a database of one's own (NAKADI_DATABASE_URL) may not allow it
    finally:
        conn.close()
    os.sync()


def start_server(env: dict[str, str], workers: int, config: str = str(ROOT / "gunicorn.conf.py"),
                 app: str = "app.wsgi:app") -> tuple[subprocess.Popen, int]:
    """A gunicorn serving ``app`` with ``config``, once it answers ``/health``."""
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "gunicorn", "-c", config, app],
        env=dict(env, NAKADI_BIND=f"127.0.0.1:{port}", NAKADI_WORKERS=str(workers),
                 NAKADI_LOG_LEVEL="WARNING"),
        cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 30
    while True:
        try:
            requests.get(f"http://127.0.0.1:{port}/health", timeout=5)
            return server, port
        except (requests.ConnectionError, requests.Timeout):  # not up yet, or a busy machine
            if time.monotonic() > deadline or server.poll() is not None:
                stop_server(server)
                raise RuntimeError("gunicorn did not start") from None
            time.sleep(0.2)


def stop_server(server: subprocess.Popen) -> None:
    """SIGTERM, and SIGKILL when open streams keep it past its graceful timeout."""
    server.terminate()
    try:
        server.wait(60)
    except subprocess.TimeoutExpired:
        server.kill()
        server.wait()


@contextmanager
def running_broker(workers: int = 2, overrides: dict[str, str] | None = None
                   ) -> Iterator[tuple[dict[str, str], int, Path]]:
    """The services (started here unless NAKADI_* addresses are set) and a gunicorn
    with ``workers`` gevent workers and the ``overrides`` settings: yields its
    environment, port and a scratch directory, and stops everything afterwards."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("NAKADI_")}
    given = {k: v for k, v in os.environ.items() if k.startswith("NAKADI_")}
    work_dir = Path(tempfile.mkdtemp(prefix="nakadi-bench-"))
    work_dir.chmod(0o755)
    stack = LocalStack(work_dir / "stack", free_port(), free_port(), free_port())
    server = None
    try:
        env.update(given, **stack.start(given))
        env.update(overrides or {})
        server, port = start_server(env, workers)
        yield env, port, work_dir
    finally:
        if server is not None:
            stop_server(server)
        stack.stop()
        shutil.rmtree(work_dir, ignore_errors=True)
