"""``nakadi-archive``: archive event types into a Parquet lake, exactly once.

    nakadi-archive --url URL --event-type NAME [--event-type NAME ...]
                   --output DIR --checkpoint DIR [--once]

One Spark streaming query per event type reads it through the ``nakadi`` data
source and writes each micro-batch with ``lake.write_batch``; its offsets live
in ``<checkpoint>/<event type>``, so running it again continues where it
stopped. ``--once`` archives up to the newest events as of the start and exits.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import signal
import sys
import threading
import time
import warnings
from collections.abc import Iterable
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

from workers.pipeline.client import BrokerClient, BrokerError
from workers.pipeline.progress import Progress
from workers.pipeline.ranges import EARLIEST, parse_offsets
from workers.pipeline.spark_home import use_compiled_pyspark

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql.streaming import StreamingQuery

EXIT_FAILED = 1
EXIT_USAGE = 2
# --interval: Spark's trigger takes whole milliseconds; longer than a day is a job
# for --once under a scheduler.
MIN_INTERVAL_S = 0.001
MAX_INTERVAL_S = 86400.0


class _Parser(argparse.ArgumentParser):
    """Bad arguments are one line (and exit 2), like every other error."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USAGE, f"{self.prog}: {message} (see --help)\n")


def arguments(argv: list[str] | None = None) -> argparse.Namespace:
    parser = _Parser(
        prog="nakadi-archive",
        description="Archive Nakadi event types to Parquet, partitioned by event type and "
                    "date, exactly once across restarts.")
    parser.add_argument("--url", required=True, help="the broker, e.g. http://localhost:8080")
    names = parser.add_mutually_exclusive_group(required=True)
    names.add_argument("--event-type", action="append", dest="event_types", metavar="NAME",
                       help="an event type to archive (repeat for several)")
    names.add_argument("--all-event-types", action="store_true",
                       help="archive every event type the broker has at start")
    parser.add_argument("--output", required=True, type=Path, help="the lake directory")
    parser.add_argument("--checkpoint", required=True, type=Path,
                        help="where Spark keeps each event type's progress")
    parser.add_argument("--once", action="store_true",
                        help="archive up to the newest events as of start, then exit")
    tokens = parser.add_mutually_exclusive_group()
    tokens.add_argument("--token", help="a bearer token for a secured broker")
    tokens.add_argument("--token-file", help="a file holding the bearer token (re-read at "
                                             "every request, so it may be rotated)")
    parser.add_argument("--max-events-per-trigger", type=int, metavar="N",
                        help="the most events of one event type in one micro-batch")
    parser.add_argument("--starting-offsets", default="earliest",
                        help="where a new archive starts: earliest (default), latest, or "
                             "per-partition JSON; ignored once a checkpoint exists")
    parser.add_argument("--interval", type=float, default=5.0, metavar="SECONDS",
                        help="how often a continuous archive looks for new events (5)")
    parser.add_argument("--subscription-id", metavar="ID",
                        help="a subscription of the event types whose cursors follow the "
                             "archive (its stats then show the lake's lag); a new archive "
                             "starts at its committed cursors")
    parser.add_argument("--raw", action="store_true",
                        help="keep each event as one JSON string column instead of columns")
    parser.add_argument("--master", default="local[*]", help="the Spark master (local[*])")
    args = parser.parse_args(argv)
    if args.max_events_per_trigger is not None and args.max_events_per_trigger < 1:
        parser.error("--max-events-per-trigger must be at least 1")
    if not MIN_INTERVAL_S <= args.interval <= MAX_INTERVAL_S:  # NaN included
        parser.error(f"--interval must be between {MIN_INTERVAL_S:g} and {MAX_INTERVAL_S:g} "
                     "seconds")
    try:
        parse_offsets(args.starting_offsets, EARLIEST, "--starting-offsets")
    except BrokerError as error:
        parser.error(str(error))
    # Made here, so that a path that cannot be a directory (one under a regular
    # file, say) is a bad argument rather than a traceback later.
    for option, directory in (("--output", args.output), ("--checkpoint", args.checkpoint)):
        try:
            directory.mkdir(parents=True, exist_ok=True)
        except OSError as error:
            parser.error(f"{option} {directory} cannot be made a directory: "
                         f"{error.strerror or error}")
    return args


def event_types(args: argparse.Namespace, client: BrokerClient) -> list[str]:
    """The event types to archive, each checked to exist (and, with a checkpoint,
    to be the one it archived; with a subscription, to be one it reads) before
    Spark starts."""
    names = client.event_type_names() if args.all_event_types else args.event_types
    for name in dict.fromkeys(names):
        check_identity(args.checkpoint / name, name, client.event_type(name))
        if args.subscription_id:
            client.subscription_start(args.subscription_id, name)
    return list(dict.fromkeys(names))


class EventTypeRecreated(BrokerError):
    """The event type of a checkpoint was deleted and created again under its name."""

    def __init__(self, event_type: str, message: str) -> None:
        super().__init__(message)
        self.event_type = event_type


def check_identity(checkpoint: Path, name: str, definition: dict) -> None:
    """Keeps the event type's ``created_at`` in its checkpoint directory and refuses
    a checkpoint of an event type of the same name that was deleted since: its
    offsets would name positions of the new one's events, which a restart would
    skip (or fail on, when they do not exist)."""
    created = definition.get("created_at")
    if not created:  # a broker that does not say: nothing to compare
        return
    kept = checkpoint / "event-type-created-at"
    if kept.exists():
        archived = kept.read_text().strip()
        if archived != created:
            raise EventTypeRecreated(name,
                f"event type {name!r} was deleted and created again (now created at "
                f"{created}, the checkpoint {checkpoint} is of the one created at "
                f"{archived}); archive it with a new --checkpoint")
        return
    checkpoint.mkdir(parents=True, exist_ok=True)
    temporary = checkpoint / "event-type-created-at.new"
    temporary.write_text(created)
    os.replace(temporary, kept)


def confirm_identity(client: BrokerClient, checkpoint: Path, name: str) -> None:
    """``check_identity`` against the event type as the broker has it now."""
    check_identity(checkpoint, name, client.event_type(name))


def remove_unfinished_writes(checkpoint: Path) -> None:
    """Removes the files of a query's checkpoint that a killed run left half written.
    Spark writes each file of its logs as a hidden ``.<name>.<uuid>.tmp`` (with its
    ``.crc``) and renames it once whole; a kill in between leaves it behind, and Spark
    takes an offsets log that holds only such a file for a used one: killed while it
    wrote the first offsets of a new checkpoint, the archiver could never again
    archive that event type (``STATE_STORE_CHECKPOINT_LOCATION_NOT_EMPTY``). Nothing
    reads them: their writer is gone (one archiver per checkpoint)."""
    for path in checkpoint.rglob(".*.tmp*"):
        if path.name.endswith((".tmp", ".tmp.crc")) and path.is_file():
            path.unlink(missing_ok=True)


def recreated(client: BrokerClient, args: argparse.Namespace,
              names: Iterable[str]) -> EventTypeRecreated | None:
    """The refusal of the first of ``names`` deleted and created again since its
    checkpoint began. One the broker cannot show now (deleted, or the broker out
    of reach) is not: its query fails saying so when it next asks."""
    for name in names:
        try:
            confirm_identity(client, args.checkpoint / name, name)
        except EventTypeRecreated as refusal:
            return refusal
        except BrokerError:
            continue
    return None


# Spark's log configuration for the archiver (warnings and errors into a file).
LOG4J2_CONFIGURATION = Path(__file__).with_name("log4j2.properties")
SPARK_LOG = "_spark.log"  # in --checkpoint: no event type name starts with "_"


def start_spark(master: str, log: Path) -> SparkSession:
    """A Spark session whose Python workers run this interpreter and report errors
    as one line rather than a traceback, and whose log goes to the file ``log``
    instead of stderr. The driver JVM starts with the session, so the log's
    configuration is a JVM option given before, not ``setLogLevel`` after: the
    lines Spark logs while starting would come before that."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ["SPARK_HIDE_TRACEBACK"] = "1"
    use_compiled_pyspark()
    warnings.filterwarnings("ignore", message="PySpark does not yet fully support pandas")
    from pyspark.sql import SparkSession

    from workers.pipeline.source import NakadiDataSource

    spark = (SparkSession.builder.appName("nakadi-archive").master(master)
             .config("spark.ui.showConsoleProgress", "false")
             .config("spark.sql.session.timeZone", "UTC")
             # Writes a batch's few date directories side by side instead of sorting
             # every row by date first.
             .config("spark.sql.maxConcurrentOutputFileWriters", "8")
             .config("spark.sql.execution.pyspark.udf.hideTraceback.enabled", "true")
             # The same for the Python process of streaming sources, which reads only this.
             .config("spark.executorEnv.SPARK_HIDE_TRACEBACK", "1")
             # Split by Spark's launcher as a shell would: the paths may hold spaces.
             .config("spark.driver.extraJavaOptions", " ".join(
                 shlex.quote(f"-D{name}={value}") for name, value in (
                     ("log4j2.configurationFile", LOG4J2_CONFIGURATION),
                     ("nakadi.archive.spark-log", log))))
             .getOrCreate())
    spark.dataSource.register(NakadiDataSource)
    return spark


def start_query(spark: SparkSession, args: argparse.Namespace, name: str) -> StreamingQuery:
    from workers.pipeline.lake import archive_id, write_batch

    reader = (spark.readStream.format("nakadi").option("url", args.url)
              .option("event_type", name).option("startingOffsets", args.starting_offsets)
              .option("raw", str(args.raw).lower()))
    for option, value in (("token", args.token), ("token_file", args.token_file),
                          ("maxEventsPerTrigger", args.max_events_per_trigger),
                          ("subscription_id", args.subscription_id)):
        if value is not None:
            reader = reader.option(option, str(value))
    client = BrokerClient(args.url, args.token, args.token_file)
    category = client.event_type(name).get("category", "undefined")
    # A batch read after its event type was recreated holds the new one's events
    # from the old offsets on: checked once read, it never enters the lake.
    same_event_type = partial(confirm_identity, client, args.checkpoint / name, name)
    remove_unfinished_writes(args.checkpoint / name)
    writer = (reader.load().writeStream
              .foreachBatch(partial(write_batch, output=args.output, event_type=name,
                                    archive=archive_id(args.checkpoint / name),
                                    category=category, check=same_event_type))
              .option("checkpointLocation", str(args.checkpoint / name)))
    if args.once:
        writer = writer.trigger(availableNow=True)
    else:
        writer = writer.trigger(processingTime=f"{round(args.interval * 1000)} milliseconds")
    return writer.start()


def follow_subscription(client: BrokerClient, args: argparse.Namespace, name: str,
                        query: StreamingQuery) -> None:
    """Moves the subscription's cursors of an event type to the end of the last batch
    in the lake. Spark's checkpoint stays the record of progress; a failed update
    is reported and the next one catches up."""
    progress = query.lastProgress
    if not args.subscription_id or not progress or not progress.get("sources"):
        return
    end = progress["sources"][0].get("endOffset")
    if isinstance(end, str):
        end = json.loads(end)
    if end:
        try:
            client.reset_cursors(args.subscription_id, name, end)
        except BrokerError as error:
            print(f"nakadi-archive: {name}: subscription cursors not updated: {error}",
                  file=sys.stderr)


def run(args: argparse.Namespace) -> int:
    client = BrokerClient(args.url, args.token, args.token_file)
    names = event_types(args, client)
    if not names:
        print("nakadi-archive: the broker has no event types to archive", file=sys.stderr)
        return 0
    spark = start_spark(args.master, args.checkpoint / SPARK_LOG)
    from py4j.protocol import Py4JError  # type: ignore[import-untyped]
    from pyspark.errors import PySparkException

    stop = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: stop.set())
    queries = {}
    try:
        for name in names:
            queries[name] = start_query(spark, args, name)
    except (PySparkException, Py4JError, BrokerError) as failure:
        print(f"nakadi-archive: {name}: cannot start archiving: {_one_line(failure)}",
              file=sys.stderr)
        for query in queries.values():
            query.stop()
        spark.stop()
        return EXIT_FAILED
    progress = Progress(client, sys.stderr)
    failed = False
    refused: EventTypeRecreated | None = None
    next_report = time.monotonic() + progress.interval
    try:
        while not stop.is_set():
            restart_on_schema_change(spark, args, queries)
            if not any(q.isActive for q in queries.values()):
                break
            if time.monotonic() >= next_report:
                # Also finds one recreated without new events yet, whose query goes on.
                if refused := recreated(client, args, queries):
                    break
                progress.report(queries)
                for name, query in queries.items():
                    follow_subscription(client, args, name, query)
                next_report += progress.interval
            stop.wait(0.2)
        # A query that failed because its event type was recreated (a batch refused,
        # or the broker's answer to old offsets) ends with the refusal.
        refused = refused or recreated(client, args, [
            name for name, query in queries.items()
            if not query.isActive and query.exception() is not None])
    finally:
        for name, query in queries.items():
            if query.isActive:
                query.stop()
            if refused is not None and name == refused.event_type:
                continue  # its offsets are not the new event type's; the refusal says why
            follow_subscription(client, args, name, query)
            error = query.exception()
            if error is not None:
                failed = True
                print(f"nakadi-archive: {name}: {_one_line(error)}", file=sys.stderr)
        progress.report(queries, final=True)
        spark.stop()
    if refused is not None:
        raise refused  # as at start: one line, exit 2 (main)
    return EXIT_FAILED if failed else 0


def restart_on_schema_change(spark: SparkSession, args: argparse.Namespace,
                             queries: dict[str, StreamingQuery]) -> None:
    """Starts again, from its checkpoint, each query that ended because its event
    type's schema changed, so that the new schema's columns reach the lake."""
    from workers.pipeline.source import SCHEMA_CHANGED

    for name, query in queries.items():
        error = None if query.isActive else query.exception()
        if error is not None and SCHEMA_CHANGED in (line := _one_line(error)):
            print(f"nakadi-archive: {name}: {line.split(';')[0]}: starting its query again",
                  file=sys.stderr)
            queries[name] = start_query(spark, args, name)


def _one_line(error: BaseException) -> str:
    """The BrokerError inside a Spark error; else the exception a Python traceback
    in it ends with (an error raised in foreachBatch comes back as the JVM's
    error wrapping the Python worker's traceback), or, when that is py4j's
    report of a JVM call that failed, the JVM's exception it names next (say,
    why a batch's Parquet could not be written); else the error's first line."""
    text = str(getattr(error, "desc", None) or error)
    marker = "BrokerError: "
    if marker in text:
        return text.split(marker, 1)[1].splitlines()[0]
    lines = text.strip().splitlines()
    start = next((i for i, line in enumerate(lines)
                  if line.endswith("Traceback (most recent call last):")), None)
    after = lines[start + 1:] if start is not None else []
    for index, line in enumerate(after):
        if line and not line[0].isspace():  # the first line after the frames
            following = after[index + 1] if index + 1 < len(after) else ""
            if line.startswith("py4j.protocol.Py4JJavaError") and following.startswith(": "):
                line = following[2:]  # ": org.apache...SomeException: why"
            exception, _, message = line.partition(": ")
            return f"{exception.rsplit('.', 1)[-1]}: {message}" if message else line
    return lines[0] if lines else type(error).__name__


def main(argv: list[str] | None = None) -> int:
    args = arguments(argv)
    try:
        return run(args)
    except BrokerError as error:
        print(f"nakadi-archive: {error}", file=sys.stderr)
        return EXIT_USAGE


if __name__ == "__main__":
    sys.exit(main())
