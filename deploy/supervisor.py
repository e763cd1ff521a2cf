"""Keeps the local stack whole: a service that ``make run`` started and that dies
is announced loudly and started again; one that keeps dying, or cannot be started
again, stops the whole stack.

A half-working stack that looks up is worse than none: the broker would answer
503s for a dependency nobody knows is gone, and a dead gunicorn leaves only the
services behind it running.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TextIO

from deploy.localstack import LocalStack, Service, ServiceFailed, log_tail

RESTARTS_PER_WINDOW = 3
"""More deaths of one service than this within ``WINDOW_S`` stop the stack."""
WINDOW_S = 60.0
LOG_TAIL_LINES = 5

_CONSEQUENCES = {
    "postgres": "meanwhile the broker answers 503 naming PostgreSQL",
    "zookeeper": "meanwhile streams and /health answer 503 naming ZooKeeper",
    "broker": "meanwhile event types on the kafka storage answer 503; the broker keeps"
              " events in memory, so their topics and events are gone after the restart",
    "gunicorn": "the API on NAKADI_BIND is down until it is back",
}


class StackFailed(RuntimeError):
    """A service cannot be kept running; the message says which and why."""


def _how_it_ended(code: int) -> str:
    if code < 0:
        return f"killed by {signal.Signals(-code).name}"
    return f"exited with code {code}"


@dataclass
class Supervisor:
    """Watches the stack's services; ``starters`` start each one again by name."""

    stack: LocalStack
    starters: dict[str, Callable[[], object]]
    out: TextIO
    deaths: dict[str, list[float]] = field(default_factory=dict)

    def check(self) -> None:
        """Restart every service that died since the last check; ``StackFailed`` when
        one died too often or does not start again."""
        for service in list(self.stack.services):
            code = service.process.poll()
            if code is not None:
                self._revive(service, code)

    def _revive(self, service: Service, code: int) -> None:
        name = service.name
        now = time.monotonic()
        recent = [t for t in self.deaths.get(name, []) if now - t < WINDOW_S] + [now]
        self.deaths[name] = recent
        self._shout(f"{name.upper()} DIED (pid {service.process.pid}, {_how_it_ended(code)});"
                    f" {_CONSEQUENCES.get(name, '')}", self._log_tail(name))
        # Whatever the dead process left in its session (PostgreSQL backends, gunicorn
        # workers) holds ports and shared memory the new one needs.
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(service.process.pid, signal.SIGKILL)
        if len(recent) > RESTARTS_PER_WINDOW:
            raise StackFailed(f"{name} died {len(recent)} times within {WINDOW_S:.0f} s")
        self._say(f"restarting {name} ({len(recent)} of {RESTARTS_PER_WINDOW} restarts"
                  f" allowed within {WINDOW_S:.0f} s)")
        try:
            self.starters[name]()
        except ServiceFailed as error:
            raise StackFailed(f"{name} does not start again: {error}") from error
        pid = next(s.process.pid for s in self.stack.services if s.name == name)
        self._say(f"{name} is running again (pid {pid})")

    def _log_tail(self, name: str) -> list[str]:
        path = self.stack.data_dir / "logs" / f"{name}.log"
        lines = log_tail(path, LOG_TAIL_LINES)
        return [f"last lines of {path}:"] + [f"    {line}" for line in lines] if lines else []

    def _shout(self, headline: str, details: list[str]) -> None:
        bar = "!" * 78
        print("\n".join([bar, f"!!! nakadi local stack: {headline}",
                         *(f"!!! {line}" for line in details), bar]),
              file=self.out, flush=True)

    def _say(self, line: str) -> None:
        print(f"!!! nakadi local stack: {line}", file=self.out, flush=True)

    def give_up(self, error: StackFailed) -> None:
        """Announce that the stack stops because of ``error``."""
        self._shout(f"STOPPING EVERYTHING: {error}",
                    ["fix the cause (see the logs above), then start it again: make run"])
