"""The pipeline's throughput next to its ceilings, in one run.

    python -m tests.benchmarks.bench_pipeline [--events 1000000] [--engine postgres]
                                              [--rounds 2] [--master local[*]]

Pre-publishes ``--events`` order events as publishing stores them (~400 bytes)
into a 4-partition event type, then prints events/s of:
- the broker's low-level stream (one stream over the 4 partitions, from begin);
- Spark reading the same events from a local JSON Lines file into Parquet (the
  same columns), the ceiling the pipeline is compared with;
- Spark reading them through the ``nakadi`` data source into Parquet (batch);
- the archiver's path: a streaming query with ``availableNow`` writing the lake
  through ``lake.write_batch``, as ``nakadi-archive --once`` does.

Each Spark job runs once on a small warm-up first, so JVM and Python worker
start-up are not counted. Under each figure: the CPU seconds the job cost each
kind of process (from /proc: Spark's JVM, its Python processes, gunicorn, the
storage), and for the archiver's path where its time went (from the query's
progress: start-up before the first micro-batch, planning, writing, Spark's
checkpoint). The three Spark jobs run in turns, ``--rounds`` times,
each round's ratios from jobs seconds apart, so that a machine shared with other
work moves both sides of a ratio alike; the load average is printed per round.
Starts its own services (see harness.py).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import requests

from app.config import Settings
from app.repository.database import ConnectionPool, make_green
from app.repository.event_types import event_type_with_timelines
from app.repository.storages import get_storage
from app.storage.engines import build_engine
from tests.benchmarks.bench_publish import ORDER_SCHEMA, stored_event
from tests.benchmarks.bench_stream import stream_throughput
from tests.benchmarks.harness import running_broker, set_default_storage, settle_writes

PARTITIONS = 4


def create_event_type(base_url: str, name: str) -> None:
    response = requests.post(base_url + "/event-types", json={
        "name": name, "owning_application": "bench", "category": "business",
        "enrichment_strategies": ["metadata_enrichment"],
        "schema": {"type": "json_schema", "schema": json.dumps(ORDER_SCHEMA)},
        "default_statistic": {"messages_per_minute": 60000, "message_size": 200,
                              "read_parallelism": PARTITIONS,
                              "write_parallelism": PARTITIONS}})
    response.raise_for_status()


def prepublish(settings: Settings, name: str, storage_id: str, count: int,
               jsonl: Path) -> None:
    """``count`` distinct events straight into the topic as publishing them would have
    stored them (``stored_event``), spread evenly over the partitions, and the same
    events as a JSON Lines file, both written out to disk (``settle_writes``)."""
    make_green()
    pool = ConnectionPool(settings.database_url, 4)
    timeline = event_type_with_timelines(pool, name)[1].active
    engine = build_engine(get_storage(pool, storage_id), pool)
    try:
        with jsonl.open("wb") as file:
            for start in range(0, count, 1000 * PARTITIONS):
                batch = {}
                for p in range(PARTITIONS):
                    first = start + p * 1000
                    batch[p] = [stored_event(n, name, p)
                                for n in range(first, min(first + 1000, count))]
                batch = {p: payloads for p, payloads in batch.items() if payloads}
                engine.append_many(timeline.topic, batch)
                for payloads in batch.values():
                    file.write(b"\n".join(payloads) + b"\n")
    finally:
        engine.close()
        pool.close()
    settle_writes(settings.database_url)


def process_cpu() -> dict[str, float]:
    """CPU seconds so far of this process's descendants by kind, each with the
    children it has reaped (Spark's Python workers, PostgreSQL's backends)."""
    tick = os.sysconf("SC_CLK_TCK")
    parents, kinds, seconds = {}, {}, {}
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            stat = (proc / "stat").read_text()
            command = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except (OSError, ValueError):
            continue
        name, fields = stat[stat.index("(") + 1:stat.rindex(")")], stat.rsplit(")", 1)[1].split()
        pid = int(proc.name)
        parents[pid] = int(fields[1])
        seconds[pid] = sum(int(f) for f in fields[11:15]) / tick  # utime stime cutime cstime
        kinds[pid] = next((kind for kind, marks in PROCESS_KINDS
                           if any(mark in command or mark in name for mark in marks)), "other")
    totals: dict[str, float] = {}
    for pid in seconds:
        ancestor = parents[pid]
        while ancestor not in (0, 1, os.getpid()):
            ancestor = parents.get(ancestor, 0)
        if ancestor == os.getpid():
            totals[kinds[pid]] = totals.get(kinds[pid], 0.0) + seconds[pid]
    return totals


# Matched in this order against a process's command line or name.
PROCESS_KINDS = (("gunicorn", ("gunicorn",)), ("PostgreSQL", ("postgres",)),
                 ("Tansu", ("tansu",)), ("ZooKeeper", ("zookeeper",)),
                 ("Spark JVM", ("java",)), ("Spark's Python", ("pyspark", "python")))


def timed(job) -> tuple[float, str]:
    """Wall seconds of ``job``, and a line of the CPU seconds it cost each kind of
    process."""
    before = process_cpu()
    started = time.perf_counter()
    job()
    wall = time.perf_counter() - started
    used = {kind: seconds - before.get(kind, 0.0) for kind, seconds in process_cpu().items()}
    return wall, "      CPU s: " + ", ".join(
        f"{kind} {used[kind]:.1f}" for kind, _ in PROCESS_KINDS if used.get(kind, 0) >= 0.05)


def wall_split(progress: list[dict], wall: float) -> str:
    """Where a streaming query's wall time went, from its progress reports."""
    parts = {"planning": ("latestOffset", "getBatch", "queryPlanning"),
             "writing": ("addBatch",), "checkpoint": ("walCommit", "commitOffsets")}
    spent = {part: sum(p["durationMs"].get(key, 0) for p in progress for key in keys) / 1000
             for part, keys in parts.items()}
    triggers = sum(p["durationMs"].get("triggerExecution", 0) for p in progress) / 1000
    return (f"      wall s: {wall:.1f} = start-up and end {wall - triggers:.1f}, " +
            ", ".join(f"{part} {seconds:.1f}" for part, seconds in spent.items()) +
            f" ({len(progress)} micro-batches)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--engine", default="postgres", choices=["postgres", "kafka"])
    parser.add_argument("--master", default="local[*]", help="the Spark master")
    parser.add_argument("--rounds", type=int, default=2, help="turns of the Spark jobs")
    args = parser.parse_args()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)

    from workers.pipeline.archiver import start_spark
    from workers.pipeline.lake import write_batch
    from workers.pipeline.source import SourceOptions

    with running_broker() as (env, port, work):
        settings = Settings.from_env(env)
        base_url = f"http://127.0.0.1:{port}"
        set_default_storage(settings.database_url, args.engine)
        name, warm = "bench.pipeline", "bench.pipeline-warm-up"
        create_event_type(base_url, name)
        create_event_type(base_url, warm)
        prepublish(settings, name, args.engine, args.events, work / "events.jsonl")
        prepublish(settings, warm, args.engine, 10_000, work / "warm.jsonl")
        size = (work / "events.jsonl").stat().st_size // args.events
        print(f"{args.events:,} events of ~{size} bytes in {PARTITIONS} partitions "
              f"({args.engine} engine), Spark {args.master} on {os.cpu_count()} cores",
              flush=True)

        wall, cpu = timed(lambda: stream_throughput(port, name, args.events,
                                                    partitions=PARTITIONS))
        print(f"broker low-level stream, 1 stream:           {args.events / wall:>10,.0f} "
              f"events/s\n{cpu}", flush=True)

        spark = start_spark(args.master, work / "spark.log")
        layout = SourceOptions.parse({"url": base_url, "event_type": name}).layout()
        from workers.pipeline.schema_mapping import row_schema
        payload = row_schema(layout)
        payload = payload.__class__([f for f in payload.fields if f.name in
                                     {column for column, _, _ in layout.columns}])

        def json_file(source: str, out: str):
            return lambda: spark.read.schema(payload).json(str(work / source)) \
                .write.mode("overwrite").parquet(str(work / out))

        def nakadi(event_type: str, out: str):
            return lambda: spark.read.format("nakadi").option("url", base_url) \
                .option("event_type", event_type).load() \
                .write.mode("overwrite").parquet(str(work / out))

        progress: list[dict] = []

        def archive(event_type: str, lake: str):
            def run() -> None:
                query = (spark.readStream.format("nakadi").option("url", base_url)
                         .option("event_type", event_type)
                         .option("startingOffsets", "earliest").load().writeStream
                         .foreachBatch(lambda frame, batch: write_batch(
                             frame, batch, work / lake, event_type, "bench"))
                         .option("checkpointLocation", str(work / f"{lake}-checkpoint"))
                         .trigger(availableNow=True).start())
                query.awaitTermination()
                progress[:] = [p for p in query.recentProgress if p["numInputRows"]]
            return run

        for job in (json_file("warm.jsonl", "warm-json"), nakadi(warm, "warm-nakadi"),
                    archive(warm, "warm-lake")):
            job()
        for round_ in range(1, args.rounds + 1):
            print(f"round {round_}, load average {os.getloadavg()[0]:.1f}", flush=True)
            wall, cpu = timed(json_file("events.jsonl", f"json-{round_}"))
            json_rate = args.events / wall
            print(f"  Spark, JSON Lines file -> Parquet:         {json_rate:>10,.0f} events/s"
                  f"\n{cpu}", flush=True)
            wall, cpu = timed(nakadi(name, f"nakadi-{round_}"))
            print(f"  Spark, nakadi source (batch) -> Parquet:   {args.events / wall:>10,.0f} "
                  f"events/s  ({args.events / wall / json_rate:.2f} of the JSON file rate)"
                  f"\n{cpu}", flush=True)
            wall, cpu = timed(archive(name, f"lake-{round_}"))
            print(f"  archiver path (availableNow, lake):        {args.events / wall:>10,.0f} "
                  f"events/s  ({args.events / wall / json_rate:.2f} of the JSON file rate)"
                  f"\n{cpu}\n{wall_split(progress, wall)}", flush=True)
        spark.stop()


if __name__ == "__main__":
    main()
