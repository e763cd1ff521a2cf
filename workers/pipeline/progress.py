"""The archiver's progress: events archived, events/s and lag per event type;
one rewritten line on a terminal, plain timestamped lines in a log."""

from __future__ import annotations

import json
import time
from typing import Any, TextIO

from workers.pipeline.client import BrokerClient, BrokerError

TERMINAL_INTERVAL_S = 1.0
LOG_INTERVAL_S = 10.0


class Progress:
    def __init__(self, client: BrokerClient, out: TextIO) -> None:
        self.client = client
        self.out = out
        self.terminal = out.isatty()
        self.interval = TERMINAL_INTERVAL_S if self.terminal else LOG_INTERVAL_S
        self.counted: dict[str, set[tuple[Any, Any]]] = {}
        self.totals: dict[str, int] = {}
        self.last = (time.monotonic(), 0)

    def report(self, queries: dict[str, Any], final: bool = False) -> None:
        """Counts what the queries archived since the last report and prints it."""
        lags = {}
        for name, query in queries.items():
            seen = self.counted.setdefault(name, set())
            for step in query.recentProgress:
                key = (step.get("batchId"), step.get("timestamp"))
                if key not in seen:
                    seen.add(key)
                    self.totals[name] = self.totals.get(name, 0) + step.get("numInputRows", 0)
            lags[name] = self.lag(name, query.lastProgress)
        now, total = time.monotonic(), sum(self.totals.values())
        rate = (total - self.last[1]) / max(now - self.last[0], 1e-6)
        self.last = (now, total)
        if self.terminal:
            parts = " | ".join(f"{name} lag {_count(lag)}" for name, lag in lags.items())
            end = "\n" if final else ""
            self.out.write(f"\r\x1b[K{total:,} events archived, {rate:,.0f} events/s | {parts}"
                           f"{end}")
        else:
            stamp = time.strftime("%Y-%m-%dT%H:%M:%S")
            for name, lag in lags.items():
                self.out.write(f"{stamp} nakadi-archive {name}: "
                               f"{self.totals.get(name, 0)} events archived, lag {_count(lag)}, "
                               f"{rate:.0f} events/s in all\n")
        self.out.flush()

    def lag(self, name: str, last: dict | None) -> int | None:
        """Events after the archived offsets, per the broker; None when unknown."""
        if not last or not last.get("sources"):
            return None
        end = last["sources"][0].get("endOffset")
        if isinstance(end, str):
            end = json.loads(end)
        if not end:
            return None
        try:
            return sum(p.unconsumed_events or 0 for p in self.client.partitions(name, end))
        except BrokerError:
            return None


def _count(value: int | None) -> str:
    return "?" if value is None else f"{value:,}"
