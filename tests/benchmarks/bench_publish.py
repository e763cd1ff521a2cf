"""Publishing throughput and latency over HTTP against a real gunicorn (gevent workers).

    python -m tests.benchmarks.bench_publish [--seconds 10] [--engines postgres,kafka]
        [--batches 1,10,100,1000] [--workers 2] [--auth] [--no-metrics]

For each engine and batch size it prints:
- saturation: events/s, MB/s and request latency p50/p99 from ``wrk`` with a
  few keep-alive connections (closed loop: each connection posts again as
  soon as it has an answer), and the CPU time the gunicorn workers spent per
  request (``cpu ms``, from /proc: what a change of the broker's code costs,
  hardly moved by other load on a shared machine);
- paced: p50/p99 request latency at half the saturated request rate (or at
  the rates ``--paced`` gives), from a client that sends at fixed times (open
  loop), so queueing shows up.

With ``--auth`` the broker runs with authentication on, against a local
token-info stub (``tests/helpers/tokeninfo.py``); every request sends a bearer
token and the event type has an authorization section, so each publish is
authenticated (from the token cache) and authorized. Compare a run with and
one without it to see what security costs.

With ``--no-metrics`` the broker counts nothing on the request paths
(``NAKADI_METRICS_ENABLED=false``); compare with a default run to see what
collecting the figures of ``/metrics`` costs publishing.

Events are ~200-byte business events with a realistic order schema. It starts
its own PostgreSQL, ZooKeeper and Kafka-protocol broker on free ports unless
NAKADI_* addresses are set. Needs ``wrk`` (Debian package ``wrk``).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path

import orjson
import requests

from app.registry.timestamps import rfc3339
from tests.benchmarks.harness import process_cpu_s, running_broker, set_default_storage
from tests.helpers.raw_http import RawConnection, request_head
from tests.helpers.tokeninfo import SERVICES, TokenInfoStub

BENCH_TOKEN = "bench-token"
# Filled by --auth: the header every request sends.
AUTH_HEADERS: dict[str, str] = {}

ORDER_SCHEMA = {
    "type": "object",
    "properties": {
        "order_number": {"type": "string", "pattern": "^ORD-[0-9]+$"},
        "customer_id": {"type": "string", "format": "uuid"},
        "amount": {"type": "number", "minimum": 0},
        "currency": {"type": "string", "enum": ["EUR", "USD", "GBP"]},
        "items": {"type": "integer", "minimum": 1},
        "express": {"type": "boolean"},
    },
    "required": ["order_number", "customer_id", "amount", "currency"],
}
WRK_SCRIPT = """
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
{auth}
local f = io.open("{body}", "rb")
wrk.body = f:read("*all")
f:close()
"""


def order_event(n: int) -> dict:
    return {
        "metadata": {"eid": str(uuid.uuid4()), "occurred_at": "2026-11-22T12:00:00.000+01:00"},
        "order_number": f"ORD-{n:08d}", "customer_id": str(uuid.uuid4()),
        "amount": 129.95, "currency": "EUR", "items": 3, "express": False,
    }


def stored_event(n: int, event_type: str = "bench.order-00000000",
                 partition: int | None = None) -> bytes:
    """An order event as the broker stores it once published: enriched (received_at,
    event_type, version, flow_id) and with its partition (``n % 8`` unless given).
    Benchmarks that fill a topic directly store these, so that streams send the
    events a published topic holds (~400 bytes, not the ~250 sent)."""
    event = order_event(n)
    event["metadata"].update({
        "received_at": rfc3339(datetime.now(UTC)), "event_type": event_type,
        "version": "1.0.0", "flow_id": "0123456789abcdef0123",
        "partition": str(n % 8 if partition is None else partition)})
    return orjson.dumps(event)


def create_event_type(base_url: str, partitions: int = 8) -> str:
    name = f"bench.order-{uuid.uuid4().hex[:8]}"
    authorization = {"authorization": {
        "admins": [{"data_type": "service", "value": "bench"}],
        "readers": [{"data_type": "service", "value": "bench"}],
        "writers": [{"data_type": "service", "value": "bench"}]}} if AUTH_HEADERS else {}
    response = requests.post(base_url + "/event-types", headers=AUTH_HEADERS, json={
        **authorization,
        "name": name, "owning_application": "bench", "category": "business",
        "enrichment_strategies": ["metadata_enrichment"],
        "partition_strategy": "hash", "partition_key_fields": ["order_number"],
        "schema": {"type": "json_schema", "schema": json.dumps(ORDER_SCHEMA)},
        "default_statistic": {"messages_per_minute": 60000, "message_size": 200,
                              "read_parallelism": partitions,
                              "write_parallelism": partitions},
    })
    response.raise_for_status()
    return name


def parse_wrk(output: str) -> tuple[float, float, float]:
    """Requests/s and the p50 and p99 latency in ms from ``wrk --latency`` output."""
    def millis(label: str) -> float:
        value, unit = re.search(rf"^\s+{label}\s+([\d.]+)(us|ms|s)\s*$", output, re.M).groups()
        return float(value) * {"us": 0.001, "ms": 1.0, "s": 1000.0}[unit]

    rate = float(re.search(r"Requests/sec:\s+([\d.]+)", output).group(1))
    errors = re.search(r"Non-2xx or 3xx responses: (\d+)", output)
    if errors:
        raise RuntimeError(f"{errors.group(1)} requests failed:\n{output}")
    return rate, millis("50%"), millis("99%")


def saturate(url: str, body_path: Path, connections: int, seconds: float
             ) -> tuple[float, float, float]:
    script = body_path.with_suffix(".lua")
    auth = "".join(f'wrk.headers["{k}"] = "{v}"' for k, v in AUTH_HEADERS.items())
    script.write_text(WRK_SCRIPT.replace("{body}", str(body_path)).replace("{auth}", auth))
    output = subprocess.run(
        ["wrk", "-t1", f"-c{connections}", f"-d{seconds:.0f}s", "--latency", "-s", str(script),
         url], check=True, capture_output=True, text=True).stdout
    return parse_wrk(output)


def paced(port: int, path: str, body: bytes, rate: float, seconds: float
          ) -> tuple[float, float, int]:
    """Send ``rate`` requests/s at fixed times from a few connections; p50/p99 in ms,
    measured from each request's scheduled time (so a late send counts as latency).

    The request's bytes are made once and the answer read off the socket
    (``RawConnection``): with ``http.client``, which parses every answer's headers
    with the email package, the client took ~125 µs of CPU a request, a third of a
    core at 2,600 requests/s on a 2-core machine that the broker shares
    (2026-11-29, in the benchmarks' history)."""
    senders = max(2, min(16, int(rate // 100) + 2))
    interval = senders / rate
    latencies: list[float] = []
    failures = [0]
    request = request_head("POST", path, {"Content-Type": "application/json",
                                          "Content-Length": str(len(body)),
                                          **AUTH_HEADERS}) + body
    start = time.perf_counter() + 0.2

    def sender(index: int) -> None:
        connection = RawConnection(port)
        due = start + index * interval / senders
        end = start + seconds
        while due < end:
            pause = due - time.perf_counter()
            if pause > 0:
                time.sleep(pause)
            connection.send(request)
            status, _, _ = connection.response()
            if status != 200:
                failures[0] += 1
            latencies.append((time.perf_counter() - due) * 1000)
            due += interval
        connection.close()

    threads = [threading.Thread(target=sender, args=(i,)) for i in range(senders)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    latencies.sort()
    return (latencies[len(latencies) // 2], latencies[int(len(latencies) * 0.99)],
            failures[0])


def workers_cpu_s(port: int) -> float:
    """CPU seconds used so far by the gunicorn serving ``port``, its workers and master
    (from /proc): unlike throughput, hardly moved by other load on the machine."""
    total = 0.0
    for proc in Path("/proc").iterdir():
        try:
            if b"gunicorn" not in (proc / "cmdline").read_bytes() or \
                    f"NAKADI_BIND=127.0.0.1:{port}".encode() not in (proc / "environ").read_bytes():
                continue
            total += process_cpu_s(proc)
        except OSError:
            continue
    return total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=10.0, help="per measurement")
    parser.add_argument("--engines", default="postgres,kafka")
    parser.add_argument("--batches", default="1,10,100,1000")
    parser.add_argument("--workers", type=int, default=2, help="gunicorn workers")
    parser.add_argument("--connections", type=int, default=16, help="wrk connections")
    parser.add_argument("--paced", default="", metavar="BATCH=REQ/S,...",
                        help="paced request rates per batch size (default: half the saturated"
                             " rate), e.g. 1=750,100=150: half the issue's targets")
    parser.add_argument("--auth", action="store_true",
                        help="authentication on, against a local token-info stub")
    parser.add_argument("--no-metrics", action="store_true",
                        help="the broker counts nothing for /metrics (NAKADI_METRICS_ENABLED)")
    args = parser.parse_args()
    paced_rates = {int(b): float(r) for b, r in
                   (pair.split("=") for pair in args.paced.split(",") if pair)}
    if shutil.which("wrk") is None:
        sys.exit("wrk is not installed: apt-get install wrk")

    if args.no_metrics:
        os.environ["NAKADI_METRICS_ENABLED"] = "false"
    token_info = None
    if args.auth:
        token_info = TokenInfoStub({BENCH_TOKEN: {"uid": "bench", "realm": SERVICES,
                                                  "scope": ["uid"]}}).start()
        os.environ["NAKADI_OAUTH2_TOKENINFO_URL"] = token_info.url
        AUTH_HEADERS["Authorization"] = f"Bearer {BENCH_TOKEN}"
    try:
        run(args, paced_rates)
    finally:
        if token_info is not None:
            print(f"token-info calls: {sum(token_info.calls.values())}")
            token_info.stop()


def run(args: argparse.Namespace, paced_rates: dict[int, float]) -> None:
    with running_broker(args.workers) as (env, port, work_dir):
        base_url = f"http://127.0.0.1:{port}"
        print(f"authentication: {'on' if AUTH_HEADERS else 'off'};"
              f" metrics: {'off' if args.no_metrics else 'on'}")
        print(f"gunicorn: {args.workers} gevent workers; wrk: {args.connections} connections,"
              f" {args.seconds:.0f}s per run; paced: {args.paced or 'half the saturated rate'}")
        print(f"{'engine':9} {'batch':>5} {'events/s':>10} {'MB/s':>6} {'req/s':>8}"
              f" {'p50 ms':>7} {'p99 ms':>7} {'cpu ms':>6} | {'paced req/s':>11} {'p50 ms':>7}"
              f" {'p99 ms':>7}")
        for engine in args.engines.split(","):
            set_default_storage(env["NAKADI_DATABASE_URL"], engine)
            name = create_event_type(base_url)
            path = f"/event-types/{name}/events"
            # Not measured: a first second of load. Measured from a cold start, the kafka
            # engine's batch-1 p99 was 0.5-0.9 s in two runs of three (16-44 ms warm).
            warm_up = work_dir / "warm-up.json"
            warm_up.write_bytes(json.dumps([order_event(0)]).encode())
            saturate(base_url + path, warm_up, args.connections, 1)
            for batch in (int(b) for b in args.batches.split(",")):
                body = json.dumps([order_event(n) for n in range(batch)]).encode()
                body_path = work_dir / f"body-{batch}.json"
                body_path.write_bytes(body)
                cpu_before = workers_cpu_s(port)
                rate, p50, p99 = saturate(base_url + path, body_path, args.connections,
                                          args.seconds)
                cpu_per_request = (workers_cpu_s(port) - cpu_before) / (rate * args.seconds)
                paced_rate = paced_rates.get(batch, rate / 2)
                paced_p50, paced_p99, failed = paced(port, path, body,
                                                     paced_rate, args.seconds)
                note = f"  ({failed} failed)" if failed else ""
                print(f"{engine:9} {batch:>5} {rate * batch:>10,.0f}"
                      f" {rate * len(body) / 1e6:>6.1f} {rate:>8,.0f} {p50:>7.1f} {p99:>7.1f}"
                      f" {cpu_per_request * 1000:>6.2f} |"
                      f" {paced_rate:>11,.0f} {paced_p50:>7.1f} {paced_p99:>7.1f}{note}",
                      flush=True)


if __name__ == "__main__":
    main()
