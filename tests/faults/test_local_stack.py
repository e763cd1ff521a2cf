"""``make run``'s stack when one of its services dies: it says so loudly and
starts the service again, or, when the service keeps dying, stops everything.
Never a half-working stack that looks up."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import requests

from deploy.localstack import free_port
from tests.helpers.waiting import wait_until

ROOT = Path(__file__).resolve().parents[2]
SERVICES = ("postgres", "zookeeper", "broker", "gunicorn")


@dataclass
class RunningStack:
    """``python -m deploy.localstack run`` on free ports, its output in a file."""

    process: subprocess.Popen
    output: Path
    url: str

    def text(self) -> str:
        return self.output.read_text(errors="replace")

    def pids(self) -> dict[str, int]:
        """Each service's newest pid, from the launcher's own output."""
        line = re.search(r"^pids: (.*)$", self.text(), re.MULTILINE)
        assert line, self.text()
        pids = {name: int(pid) for name, pid in
                (item.split() for item in line.group(1).split(", "))}
        for name, pid in re.findall(r"nakadi local stack: (\w+) is running again \(pid (\d+)\)",
                                    self.text()):
            pids[name] = int(pid)
        return pids

    def healthy(self) -> bool:
        try:
            response = requests.get(self.url + "/health", timeout=2)
        except requests.RequestException:
            return False
        return response.status_code == 200


@pytest.fixture
def local_stack() -> Iterator[RunningStack]:
    data_dir = Path(tempfile.mkdtemp(prefix="nakadi-localstack-"))
    data_dir.chmod(0o755)  # PostgreSQL runs as its own user when we are root
    output = data_dir / "output.log"
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("NAKADI_")} | {
        "NAKADI_DATA_DIR": str(data_dir), "NAKADI_BIND": f"127.0.0.1:{port}",
        "NAKADI_WORKERS": "1", "NAKADI_ZOOKEEPER_TIMEOUT_S": "4"}
    with open(output, "wb") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "deploy.localstack", "run",
             "--postgres-port", str(free_port()), "--zookeeper-port", str(free_port()),
             "--kafka-port", str(free_port())],
            env=env, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT)
    stack = RunningStack(process, output, f"http://127.0.0.1:{port}")
    try:
        wait_until(lambda: stack.healthy() or process.poll() is not None, 60,
                   interval=0.2, what="the local stack serving")
        assert process.poll() is None, stack.text()
        yield stack
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGINT)
            try:
                process.wait(60)
            except subprocess.TimeoutExpired:
                process.kill()
        subprocess.run(["rm", "-rf", str(data_dir)], check=False)


@pytest.mark.parametrize("order", [SERVICES])
def test_a_service_that_dies_is_announced_and_started_again(local_stack, order):
    for name in order:
        pid = local_stack.pids()[name]
        os.kill(pid, signal.SIGKILL)
        wait_until(lambda n=name, p=pid: local_stack.pids()[n] != p, 60, interval=0.2,
                   what=f"{name} running again")
        text = local_stack.text()
        assert f"nakadi local stack: {name.upper()} DIED (pid {pid}, killed by SIGKILL)" in text
        assert "!" * 78 in text
        wait_until(local_stack.healthy, 30, interval=0.2, what=f"health after {name} died")
        assert local_stack.process.poll() is None
    assert "STOPPING EVERYTHING" not in local_stack.text()


def test_a_service_that_keeps_dying_stops_the_whole_stack(local_stack):
    pids = local_stack.pids()
    for _ in range(4):
        broker = local_stack.pids()["broker"]
        os.kill(broker, signal.SIGKILL)
        wait_until(lambda b=broker: local_stack.pids()["broker"] != b
                   or local_stack.process.poll() is not None, 60, interval=0.2,
                   what="the broker restarted or the stack stopped")
    assert local_stack.process.wait(60) == 1
    text = local_stack.text()
    assert "STOPPING EVERYTHING: broker died 4 times within 60 s" in text
    assert "stopping: gunicorn, broker, zookeeper, postgres" in text
    for name in ("postgres", "zookeeper", "gunicorn"):
        with pytest.raises(ProcessLookupError):
            os.kill(pids[name], 0)
    assert not local_stack.healthy()
