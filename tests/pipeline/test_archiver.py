"""``nakadi-archive`` as a user runs it: a process against the session's broker,
killed and restarted, its lake read back by pyarrow and by Spark."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import IO

import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest
import requests
from pyspark.errors import StreamingQueryException

from deploy.localstack import free_port
from tests.helpers.broker import ONE_PARTITION, business_event, new_event_type, post
from tests.helpers.waiting import wait_until
from workers.pipeline import read_archive
from workers.pipeline.archiver import arguments, event_types, follow_subscription, start_query
from workers.pipeline.client import BrokerClient

ARCHIVER = str(Path(sys.executable).parent / "nakadi-archive")


def publish(base_url: str, name: str, count: int) -> set[str]:
    """``count`` events in posts of 100; their eids."""
    eids = set()
    for start in range(0, count, 100):
        events = [business_event(n) for n in range(start, min(start + 100, count))]
        assert post(base_url, name, events).status_code == 200
        eids |= {event["metadata"]["eid"] for event in events}
    return eids


def archiver(base_url: str, tmp_path: Path, *args: str) -> list[str]:
    return [ARCHIVER, "--url", base_url, "--output", str(tmp_path / "lake"),
            "--checkpoint", str(tmp_path / "checkpoint"), *args]


def start_archiver(command: list[str], stderr: IO[str] | int = subprocess.DEVNULL
                   ) -> subprocess.Popen:
    """A continuous archiver in a session of its own (so its Spark goes with it)."""
    return subprocess.Popen(command, env=dict(os.environ, PYSPARK_PYTHON=sys.executable),
                            stdout=subprocess.DEVNULL, stderr=stderr, start_new_session=True)


def archive_once(command: list[str]) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable)
    done = subprocess.run([*command, "--once"], env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return done


def lake_rows(lake: Path, name: str) -> list[dict]:
    table = ds.dataset(str(lake), partitioning="hive").to_table(
        columns=["eid", "partition", "offset", "event_type", "date"])
    return [row for row in table.to_pylist() if row["event_type"] == name]


def assert_exactly_once(rows: list[dict], eids: set[str]) -> None:
    assert len({(r["partition"], r["offset"]) for r in rows}) == len(rows), "duplicates"
    assert len({r["eid"] for r in rows}) == len(rows), "duplicate eids"
    assert {r["eid"] for r in rows} == eids, "missing or foreign events"


def test_once_archives_several_event_types_exactly_once_readable_by_any_reader(
        spark, base_url, tmp_path):
    orders, payments = new_event_type(base_url), new_event_type(base_url)
    order_eids, payment_eids = publish(base_url, orders, 150), publish(base_url, payments, 30)
    done = archive_once(archiver(base_url, tmp_path, "--event-type", orders,
                                 "--event-type", payments))
    assert f"{orders}: 150 events archived, lag 0" in done.stderr
    assert_exactly_once(lake_rows(tmp_path / "lake", orders), order_eids)
    assert_exactly_once(lake_rows(tmp_path / "lake", payments), payment_eids)

    frame = read_archive(spark, tmp_path / "lake", orders)
    assert frame.columns[:4] == ["eid", "event_type", "partition", "offset"]
    assert {"order_number", "amount", "metadata", "date"} <= set(frame.columns)
    row = frame.where(frame.amount == 7).first()
    assert row["order_number"] == "ORDER-7" and row["event_type"] == orders
    assert row["date"].isoformat() == row["metadata"]["received_at"][:10]


def test_after_a_kill_mid_run_a_restart_continues_leaving_every_event_exactly_once(
        base_url, tmp_path):
    name = new_event_type(base_url)
    eids = publish(base_url, name, 600)
    command = archiver(base_url, tmp_path, "--event-type", name,
                       "--max-events-per-trigger", "200", "--interval", "0.5")
    running = start_archiver(command)
    try:
        lake = tmp_path / "lake" / f"event_type={name}"
        wait_until(lambda: any(lake.glob("date=*/*.parquet")), timeout=120,
                   what="a first micro-batch in the lake")
    finally:
        os.killpg(running.pid, signal.SIGKILL)  # the archiver and its JVM, mid-run
        running.wait()
    assert len(lake_rows(tmp_path / "lake", name)) < 600, "the kill came after the end"
    eids |= publish(base_url, name, 200)
    archive_once(command)
    assert_exactly_once(lake_rows(tmp_path / "lake", name), eids)


def test_a_kill_while_spark_wrote_the_first_offsets_does_not_block_the_checkpoint(
        base_url, tmp_path):
    """Spark's first offsets file, cut short by a kill before its rename: what the
    archiver's checkpoint holds after it (checkpoint files are named by their batch)."""
    name = new_event_type(base_url)
    eids = publish(base_url, name, 30)
    offsets = tmp_path / "checkpoint" / name / "offsets"
    offsets.mkdir(parents=True)
    (offsets / ".0.9a4b1f52-5d1e-4c1f-9a3b-2f1f3c0e7d11.tmp").touch()
    (offsets / "..0.9a4b1f52-5d1e-4c1f-9a3b-2f1f3c0e7d11.tmp.crc").touch()
    archive_once(archiver(base_url, tmp_path, "--event-type", name))
    assert_exactly_once(lake_rows(tmp_path / "lake", name), eids)
    assert not list(offsets.glob(".*.tmp*"))


@pytest.mark.parametrize(("url", "event_type", "message"), [
    (None, "no.such.type", "event type 'no.such.type' does not exist at "),
    ("http://127.0.0.1:{port}", "orders", "cannot reach the broker at http://127.0.0.1:"),
    ("localhost:8080", "orders", "the broker url 'localhost:8080' is not an http"),
])
def test_a_bad_url_unknown_event_type_or_broker_down_is_one_clear_line(
        base_url, tmp_path, url, event_type, message):
    url = (url or base_url).format(port=free_port())
    done = subprocess.run(archiver(url, tmp_path, "--event-type", event_type, "--once"),
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert done.stderr.startswith(f"nakadi-archive: {message}")
    assert len(done.stderr.splitlines()) == 1 and "Traceback" not in done.stderr


def test_a_subscription_follows_the_lake_and_starts_a_new_archive_at_its_cursors(
        spark, base_url, tmp_path):
    name = new_event_type(base_url)
    publish(base_url, name, 20)
    response = requests.post(f"{base_url}/subscriptions", json={
        "owning_application": "lake", "event_types": [name], "read_from": "begin"})
    assert response.status_code in (200, 201), response.text
    subscription = response.json()["id"]

    def unconsumed() -> int:
        [item] = requests.get(f"{base_url}/subscriptions/{subscription}/stats").json()["items"]
        return sum(p["unconsumed_events"] for p in item["partitions"])

    def archive(checkpoint: str) -> int:
        args = arguments(["--url", base_url, "--event-type", name, "--once",
                          "--subscription-id", subscription, "--output", str(tmp_path / "lake"),
                          "--checkpoint", str(tmp_path / checkpoint)])
        query = start_query(spark, args, name)
        query.awaitTermination()
        follow_subscription(BrokerClient(base_url), args, name, query)
        return sum(p["numInputRows"] for p in query.recentProgress)

    assert archive("checkpoint") == 20
    assert unconsumed() == 0
    publish(base_url, name, 4)
    assert unconsumed() == 4
    # Without a checkpoint, an archive starts at the subscription's cursors.
    assert archive("new-checkpoint") == 4
    assert unconsumed() == 0
    assert len(lake_rows(tmp_path / "lake", name)) == 24


def test_a_compacted_event_type_is_archived_once_per_event_that_stays(
        base_url, tmp_path, compacted_event_type):
    name, survivors = compacted_event_type
    done = archive_once(archiver(base_url, tmp_path, "--event-type", name,
                                 "--max-events-per-trigger", "8", "--master", "local[1]"))
    assert f"{name}: 5 events archived, lag 0" in done.stderr
    rows = lake_rows(tmp_path / "lake", name)
    assert sorted((r["eid"], r["offset"]) for r in rows) == sorted(survivors.items())


def test_an_event_type_deleted_and_created_again_is_refused_with_its_checkpoint(
        base_url, tmp_path):
    name = new_event_type(base_url, default_statistic=ONE_PARTITION)
    publish(base_url, name, 20)
    command = archiver(base_url, tmp_path, "--event-type", name, "--master", "local[1]")
    archive_once(command)
    assert requests.delete(f"{base_url}/event-types/{name}").status_code == 200
    new_event_type(base_url, name=name, default_statistic=ONE_PARTITION)
    eids = publish(base_url, name, 30)
    # Its checkpoint's offset (…019) is one of the new event type's: a restart would
    # skip the new events before it.
    done = subprocess.run([*command, "--once"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    assert done.stderr.startswith(f"nakadi-archive: event type {name!r} was deleted and "
                                  "created again")
    assert "archive it with a new --checkpoint" in done.stderr
    assert len(done.stderr.splitlines()) == 1
    archive_once([*command, "--checkpoint", str(tmp_path / "new-checkpoint")])
    new_rows = [r for r in lake_rows(tmp_path / "lake", name) if r["eid"] in eids]
    assert_exactly_once(new_rows, eids)


def test_payload_dates_are_kept_and_undefined_events_are_dated_by_the_archiving_day(
        spark, base_url, tmp_path):
    dated = new_event_type(base_url, default_statistic=ONE_PARTITION, schema={
        "type": "json_schema", "schema": json.dumps({"properties": {
            "n": {"type": "integer"}, "date": {"type": "string", "format": "date"}}})})
    events = [business_event(n, date=f"202{n}-01-02") for n in range(2)]
    assert post(base_url, dated, events).status_code == 200
    # An undefined event type's metadata is a payload property like any other.
    undefined = new_event_type(
        base_url, category="undefined", enrichment_strategies=[],
        default_statistic=ONE_PARTITION, schema={"type": "json_schema", "schema": json.dumps(
            {"properties": {"n": {"type": "integer"}, "metadata": {"type": "string"},
                            "DATE": {"type": "string"}}})})
    assert post(base_url, undefined, [{"n": n, "metadata": f"m{n}", "DATE": "someday"}
                                      for n in range(3)]).status_code == 200
    archive_once(archiver(base_url, tmp_path, "--event-type", dated, "--event-type",
                          undefined, "--master", "local[1]"))

    rows = read_archive(spark, tmp_path / "lake", dated).orderBy("n").collect()
    assert [r["payload_date"] for r in rows] == ["2020-01-02", "2021-01-02"]
    assert [r["date"].isoformat() for r in rows] == [
        r["metadata"]["received_at"][:10] for r in rows]
    today = datetime.now(UTC).date()
    rows = read_archive(spark, tmp_path / "lake", undefined).orderBy("n").collect()
    assert [(r["n"], r["metadata"], r["payload_DATE"]) for r in rows] == [
        (n, f"m{n}", "someday") for n in range(3)]
    assert {r["date"] for r in rows} <= {today, today - timedelta(days=1)}  # around midnight


@pytest.mark.parametrize(("args", "message"), [
    (["--starting-offsets", "garbage"], "--starting-offsets must be earliest, latest or JSON"),
    (["--starting-offsets", '{"0": 5}'], "--starting-offsets must map partitions to offset"),
    *((["--interval", value], "--interval must be between 0.001 and 86400 seconds")
      for value in ("0", "nan", "0.00001", "1e20")),
])
def test_bad_arguments_are_one_line_and_exit_2(base_url, tmp_path, args, message):
    done = subprocess.run(archiver(base_url, tmp_path, "--event-type", "orders", "--once",
                                   *args), capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert done.stderr.startswith(f"nakadi-archive: {message}")
    assert len(done.stderr.splitlines()) == 1 and "Traceback" not in done.stderr


def test_a_subscription_unknown_or_of_other_event_types_is_refused_before_spark_starts(
        base_url, tmp_path):
    name, other = new_event_type(base_url), new_event_type(base_url)
    response = requests.post(f"{base_url}/subscriptions", json={
        "owning_application": "lake", "event_types": [other]})
    assert response.status_code in (200, 201), response.text
    for subscription, message in (
            ("0bd5e6d1-5ab1-4a3e-9d64-6a3c1b2b9f00", "with 404"),
            (response.json()["id"], f"does not read {name!r}")):
        done = subprocess.run(archiver(base_url, tmp_path, "--event-type", name, "--once",
                                       "--subscription-id", subscription),
                              capture_output=True, text=True, timeout=60)
        assert done.returncode == 2
        assert message in done.stderr and done.stderr.startswith("nakadi-archive: ")
        assert len(done.stderr.splitlines()) == 1
    assert not (tmp_path / "checkpoint" / "_spark.log").exists()  # Spark never started


def lake_values(lake: Path, name: str, column: str) -> dict[str, object]:
    """Per eid, the column's value in each Parquet file that has the column (files
    of different schemas, read one by one)."""
    values: dict[str, object] = {}
    for path in (lake / f"event_type={name}").glob("date=*/*.parquet"):
        table = pq.read_table(path)
        if column in table.column_names:
            values.update(zip(table["eid"].to_pylist(), table[column].to_pylist(),
                              strict=True))
    return values


def test_a_continuous_archiver_restarts_its_query_when_the_schema_changes(base_url, tmp_path):
    name = new_event_type(base_url, default_statistic=ONE_PARTITION)
    eids = publish(base_url, name, 5)
    log = tmp_path / "archiver.log"
    with open(log, "w") as output:
        running = start_archiver(archiver(base_url, tmp_path, "--event-type", name,
                                          "--interval", "1", "--master", "local[1]"), output)
    lake = tmp_path / "lake"
    try:
        wait_until(lambda: len(lake_values(lake, name, "eid")) == 5, timeout=120,
                   what="the first events in the lake")
        body = requests.get(f"{base_url}/event-types/{name}").json()
        schema = json.loads(body["schema"]["schema"])
        schema["properties"]["added"] = {"type": "string"}
        body["schema"]["schema"] = json.dumps(schema)
        assert requests.put(f"{base_url}/event-types/{name}", json=body).status_code == 200
        events = [business_event(n, added=f"new-{n}") for n in range(5)]
        assert post(base_url, name, events).status_code == 200
        eids |= {event["metadata"]["eid"] for event in events}
        wait_until(lambda: len(lake_values(lake, name, "added")) == 5, timeout=120,
                   what="the new field in the lake")
    finally:
        running.send_signal(signal.SIGTERM)  # the archiver only: it stops its Spark
        try:
            running.wait(timeout=60)
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(running.pid, signal.SIGKILL)  # whatever it left
    assert running.returncode == 0, log.read_text()[-3000:]
    assert set(lake_values(lake, name, "added").values()) == {f"new-{n}" for n in range(5)}
    assert_exactly_once(lake_rows(lake, name), eids)
    assert (f"nakadi-archive: {name}: the schema of {name!r} from version 1.0.0 to 1.1.0 "
            "changed since the query started: starting its query again") in log.read_text()


# The JVM prints it itself at start (Spark's launcher adds the module), not Spark's log.
JVM_WARNING = "WARNING: Using incubator modules: jdk.incubator.vector"


def assert_only_the_archivers_lines(stderr: str, checkpoint: Path) -> None:
    """A failed run's stderr holds the archiver's own lines; Spark's log, with the
    failed query's stack traces, is in the checkpoint's ``_spark.log``."""
    assert [line for line in stderr.splitlines()
            if "nakadi-archive" not in line and line != JVM_WARNING] == []
    assert "terminated with error" in (checkpoint / "_spark.log").read_text()


def test_a_batch_that_cannot_be_written_fails_the_run_in_one_line(base_url, tmp_path):
    name = new_event_type(base_url, default_statistic=ONE_PARTITION)
    publish(base_url, name, 5)
    (tmp_path / "lake").mkdir()
    (tmp_path / "lake" / "_staging").write_text("not a directory")  # where batches are written
    done = subprocess.run([*archiver(base_url, tmp_path, "--event-type", name, "--master",
                                     "local[1]"), "--once"],
                          env=dict(os.environ, PYSPARK_PYTHON=sys.executable),
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 1
    # The JVM's reason, not py4j's "An error occurred while calling o86.parquet".
    assert f"nakadi-archive: {name}: ParentNotDirectoryException: Parent path is not a " \
           f"directory: file:{tmp_path / 'lake' / '_staging'}\n" in done.stderr
    assert_only_the_archivers_lines(done.stderr, tmp_path / "checkpoint")


def test_an_event_type_deleted_while_archived_ends_the_run_in_one_line(base_url, tmp_path):
    name = new_event_type(base_url, default_statistic=ONE_PARTITION)
    publish(base_url, name, 5)
    log = tmp_path / "archiver.log"
    with open(log, "w") as output:
        running = start_archiver(archiver(base_url, tmp_path, "--event-type", name,
                                          "--interval", "1", "--master", "local[1]"), output)
    try:
        wait_until(lambda: len(lake_values(tmp_path / "lake", name, "eid")) == 5,
                   timeout=120, what="the events in the lake")
        assert requests.delete(f"{base_url}/event-types/{name}").status_code == 200
        running.wait(timeout=120)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(running.pid, signal.SIGKILL)  # whatever it left
    assert running.returncode == 1
    assert f"nakadi-archive: {name}: " in log.read_text()
    assert f"EventType '{name}' does not exist" in log.read_text()
    assert_only_the_archivers_lines(log.read_text(), tmp_path / "checkpoint")


@pytest.mark.parametrize("option", ["--output", "--checkpoint"])
def test_a_directory_under_a_regular_file_is_one_line_and_exit_2(base_url, tmp_path, option):
    name = new_event_type(base_url)  # one that exists: the run gets as far as the directories
    (tmp_path / "somefile").write_text("not a directory")
    command = archiver(base_url, tmp_path, "--event-type", name, "--once")
    command[command.index(option) + 1] = str(tmp_path / "somefile" / "dir")
    done = subprocess.run(command, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert done.stderr.startswith(f"nakadi-archive: {option} {tmp_path / 'somefile' / 'dir'}")
    assert len(done.stderr.splitlines()) == 1 and "Traceback" not in done.stderr


def test_an_event_type_recreated_while_archived_ends_the_run_without_its_events(
        base_url, tmp_path):
    recreated = new_event_type(base_url, default_statistic=ONE_PARTITION)
    other = new_event_type(base_url, default_statistic=ONE_PARTITION)
    old_eids, other_eids = publish(base_url, recreated, 20), publish(base_url, other, 5)
    log = tmp_path / "archiver.log"
    with open(log, "w") as output:
        running = start_archiver(archiver(
            base_url, tmp_path, "--event-type", recreated, "--event-type", other,
            "--interval", "1", "--master", "local[1]"), output)
    lake = tmp_path / "lake"
    try:
        wait_until(lambda: len(lake_values(lake, recreated, "eid")) == 20
                   and len(lake_values(lake, other, "eid")) == 5,
                   timeout=120, what="the events in the lake")
        assert requests.delete(f"{base_url}/event-types/{recreated}").status_code == 200
        new_event_type(base_url, name=recreated, default_statistic=ONE_PARTITION)
        # The checkpoint's offset (…019) is one of these: going on from it would skip
        # the first 20 of them.
        publish(base_url, recreated, 30)
        running.wait(timeout=90)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(running.pid, signal.SIGKILL)  # whatever it left
    stderr = log.read_text()
    assert running.returncode == 2, stderr[-3000:]
    errors = [line for line in stderr.splitlines() if line.startswith("nakadi-archive: ")]
    assert len(errors) == 1 and errors == stderr.splitlines()[-1:], stderr[-3000:]
    assert errors[0].startswith(f"nakadi-archive: event type {recreated!r} was deleted and "
                                "created again")
    assert errors[0].endswith("; archive it with a new --checkpoint")
    assert [line for line in stderr.splitlines()
            if "nakadi-archive" not in line and line != JVM_WARNING] == []
    # Nothing of the new event type; the other event type's events stay.
    assert_exactly_once(lake_rows(lake, recreated), old_eids)
    assert_exactly_once(lake_rows(lake, other), other_eids)


def test_a_batch_read_after_its_event_type_was_recreated_stays_out_of_the_lake(
        spark, base_url, tmp_path):
    name = new_event_type(base_url, default_statistic=ONE_PARTITION)
    old_eids = publish(base_url, name, 20)
    args = arguments(["--url", base_url, "--event-type", name, "--once", "--output",
                      str(tmp_path / "lake"), "--checkpoint", str(tmp_path / "checkpoint")])
    event_types(args, BrokerClient(base_url))  # as at start: keeps its created_at
    start_query(spark, args, name).awaitTermination()
    assert requests.delete(f"{base_url}/event-types/{name}").status_code == 200
    new_event_type(base_url, name=name, default_statistic=ONE_PARTITION)
    publish(base_url, name, 30)
    # Recreated after the start's check: the query plans the new events after the
    # checkpoint's offset (…019), the batch is read and then refused.
    query = start_query(spark, args, name)
    with pytest.raises(StreamingQueryException, match="was deleted and created again"):
        query.awaitTermination()
    assert_exactly_once(lake_rows(tmp_path / "lake", name), old_eids)
    assert not any((tmp_path / "lake" / "_staging").rglob("*.parquet"))
