"""The lake: Parquet files of archived events, one directory per event type and
date, written so that each event is there exactly once.

Layout: ``<output>/event_type=<name>/date=<yyyy-mm-dd>/part-<archive>-<batch>-<n>.parquet``
(Hive-style, so Spark, pyarrow and DuckDB all see ``event_type`` and ``date``
columns). The date is the UTC day of ``metadata.received_at`` of business and
data events, or the day of archiving for undefined ones; a payload column named
``date`` is kept as ``payload_date``.

Why exactly once: Spark writes a micro-batch's offsets to its checkpoint before
running it and marks it done only after ``write_batch`` returns, so after a
kill it runs the unfinished batch again with the same batch id and the same
offsets, hence the same events. ``write_batch`` is idempotent per batch id: it
writes the batch into a staging directory first, then replaces whatever an
earlier attempt of the same batch left with the new files, moved in by atomic
renames. Files are named by checkpoint (``archive_id``) and batch id, so no two
batches ever touch each other's files, not even those of an archive started
afresh with a new checkpoint into the same lake, and readers never see a
half-written file.
"""

from __future__ import annotations

import json
import os
import shutil
import uuid
from collections.abc import Callable
from functools import reduce
from pathlib import Path

import pyarrow.parquet as pq
from py4j.protocol import Py4JJavaError  # type: ignore[import-untyped]
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from workers.pipeline.schema_merge import conform, merge_structs

STAGING = "_staging"  # Spark, pyarrow and DuckDB skip names starting with "_"
# A value per event: Parquet's dictionary encoding only costs time on them.
UNIQUE_COLUMNS = ("eid", "offset")
# Where Spark keeps a Parquet file's Spark schema in its footer.
SPARK_SCHEMA_KEY = b"org.apache.spark.sql.parquet.row.metadata"


def event_type_dir(output: Path, event_type: str) -> Path:
    return output / f"event_type={event_type}"


def with_date(frame: DataFrame, category: str) -> DataFrame:
    """The rows with their ``date`` column (UTC day received: for business and data
    events ``metadata.received_at``, for undefined ones, whose ``metadata`` is a
    payload property if anything, the day of archiving), without the
    ``event_type`` column that the directory names already. A payload column
    named ``date`` (in any case, as Spark resolves names) becomes
    ``payload_<name>``, as payload columns named like broker columns do."""
    frame = frame.withColumnsRenamed({name: f"payload_{name}" for name in frame.columns
                                      if name.lower() == "date"})
    if category not in ("business", "data"):
        received = F.lit(None).cast("string")
    elif "metadata" in frame.columns:
        received = F.col("metadata.received_at")
    elif "raw" in frame.columns:
        received = F.get_json_object(F.col("raw"), "$.metadata.received_at")
    else:
        received = F.lit(None).cast("string")
    day = F.coalesce(F.to_date(F.try_to_timestamp(received)), F.current_date())
    return frame.withColumn("date", day).drop("event_type")


def archive_id(checkpoint: Path) -> str:
    """The id of the archive kept in a checkpoint directory, made on first use."""
    checkpoint.mkdir(parents=True, exist_ok=True)
    path = checkpoint / "archive-id"
    if not path.exists():
        temporary = checkpoint / "archive-id.new"
        temporary.write_text(uuid.uuid4().hex[:12])
        os.replace(temporary, path)
    return path.read_text().strip()


def write_batch(frame: DataFrame, batch_id: int, output: Path, event_type: str,
                archive: str, category: str = "business",
                check: Callable[[], None] | None = None) -> None:
    """Put one micro-batch of an event type into the lake, replacing what an
    earlier attempt of the same batch of the same archive wrote. ``check`` runs
    once the batch's events are read (written to staging) and before they enter
    the lake; an error it raises keeps them out."""
    staging = output / STAGING / event_type / f"{archive}-{batch_id}"
    shutil.rmtree(staging, ignore_errors=True)
    writer = with_date(frame, category).write.partitionBy("date")
    for unique in UNIQUE_COLUMNS:
        writer = writer.option(f"parquet.enable.dictionary#{unique}", "false")
    writer.parquet(str(staging))
    if check is not None:
        try:
            check()
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
    target = event_type_dir(output, event_type)
    prefix = f"part-{archive}-{batch_id:010d}-"
    for earlier in target.glob(f"date=*/{prefix}*.parquet"):
        earlier.unlink()
    for number, written in enumerate(sorted(staging.glob("date=*/*.parquet"))):
        destination = target / written.parent.name / f"{prefix}{number:05d}.parquet"
        destination.parent.mkdir(parents=True, exist_ok=True)
        os.replace(written, destination)
    shutil.rmtree(staging, ignore_errors=True)


def read_archive(spark: SparkSession, output: str | Path, event_type: str) -> DataFrame:
    """The archived events of one event type, with the columns the data source
    gives (``event_type`` from the directory) plus ``date``.

    Spark merges the schemas of all files, which works when schema versions only
    added fields. When versions gave a column different Spark types, the files of
    each schema are read apart and made to agree (``schema_merge``), so every row
    is read; that costs a look at every file's footer, so only such lakes pay it."""
    directory = event_type_dir(Path(output), event_type)
    try:
        frame = spark.read.option("mergeSchema", "true").parquet(str(directory))
    except Py4JJavaError as error:
        if error.java_exception.getCondition() != "CANNOT_MERGE_SCHEMAS":
            raise
        frame = _read_disagreeing_files(spark, directory)
    columns = [F.col(name) for name in frame.columns]
    return frame.select(*columns[:1], F.lit(event_type).alias("event_type"), *columns[1:])


def _read_disagreeing_files(spark: SparkSession, directory: Path) -> DataFrame:
    """The lake's files grouped by schema, each group read with its own and turned
    into the merged one, then put together; ``date`` comes from the paths, as in a
    read of the whole directory."""
    groups: dict[str, tuple[StructType, list[str]]] = {}
    for path in sorted(directory.glob("date=*/part-*.parquet")):
        schema = _spark_schema(path)
        groups.setdefault(schema.json(), (schema, []))[1].append(str(path))
    merged = merge_structs([schema for schema, _ in groups.values()])
    frames = []
    for schema, paths in groups.values():
        present = {field.name: field.dataType for field in schema.fields}
        frame = spark.read.schema(schema).option("basePath", str(directory)).parquet(*paths)
        frames.append(frame.select(
            *(conform(_column(field.name), present.get(field.name),
                      field.dataType).alias(field.name) for field in merged.fields),
            "date"))
    return reduce(DataFrame.union, frames)


def _column(name: str) -> Column:
    """A top-level column by its exact name (a payload property may hold dots)."""
    return F.col("`" + name.replace("`", "``") + "`")


def _spark_schema(path: Path) -> StructType:
    """The Spark schema a lake file was written with, from its footer."""
    metadata = pq.read_schema(path).metadata or {}
    return StructType.fromJson(json.loads(metadata[SPARK_SCHEMA_KEY]))
