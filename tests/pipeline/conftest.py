"""Spark in local mode for the pipeline tests: one session for the whole test
session, so the JVM starts once, and the session's real broker."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator

import orjson
import pytest

# The session's gunicorns and the choice of engine, shared with the API tests.
from tests.api.conftest import (  # noqa: F401
    base_url,
    default_storage,
    kafka_default_server,
    server,
)

# A gunicorn with authentication on and its token-info service, shared with the API's
# security tests (test_secured_broker).
from tests.api.security.conftest import (  # noqa: F401
    protected_event_types,
    reset_security_settings,
    secure_server,
    secure_url,
    token_info,
    token_info_ca,
)


@pytest.fixture(scope="session")
def spark() -> Iterator:
    """A local Spark with two cores and the ``nakadi`` format registered. Its Python
    workers run this interpreter, import the installed pyspark (as the archiver's
    do) and report errors without tracebacks, as the README tells users to
    configure."""
    os.environ["PYSPARK_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    from workers.pipeline import NakadiDataSource
    from workers.pipeline.spark_home import use_compiled_pyspark

    use_compiled_pyspark()

    session = (SparkSession.builder.master("local[2]").appName("nakadi-pipeline-tests")
               .config("spark.ui.enabled", "false")
               .config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.shuffle.partitions", "2")
               .config("spark.sql.session.timeZone", "UTC")
               .config("spark.sql.execution.pyspark.udf.hideTraceback.enabled", "true")
               .config("spark.executorEnv.SPARK_HIDE_TRACEBACK", "1")
               .getOrCreate())
    session.sparkContext.setLogLevel("ERROR")
    session.dataSource.register(NakadiDataSource)
    yield session
    session.stop()


@pytest.fixture
def compacted_event_type(base_url, pool) -> Iterator[tuple[str, dict[str, str]]]:  # noqa: F811
    """A one-partition compacted event type on the postgres storage: 4 rounds of the
    keys k0..k4 (amounts 0..4, 10..14, 20..24, 30..34), compacted, so that the
    events of the last round stay at offsets 15..19 and the 15 before are gaps.
    Its name and, per eid that stays, the offset the broker's stream gives it."""
    import requests

    from tests.helpers.broker import ONE_PARTITION, business_event, new_event_type, post
    from tests.helpers.storage import compact_postgres_now

    name = new_event_type(base_url, cleanup_policy="compact", default_statistic=ONE_PARTITION)
    for round_ in range(4):
        events = [business_event(round_ * 10 + k) for k in range(5)]
        for k, event in enumerate(events):
            event["metadata"]["partition_compaction_key"] = f"k{k}"
        assert post(base_url, name, events).status_code == 200
    compact_postgres_now(pool)
    stream = requests.get(
        f"{base_url}/event-types/{name}/events", timeout=30,
        headers={"X-Nakadi-Cursors": '[{"partition": "0", "offset": "begin"}]'},
        params={"batch_limit": 1, "stream_limit": 5, "batch_flush_timeout": 1})
    lines = [orjson.loads(line) for line in stream.text.splitlines()]
    survivors = {line["events"][0]["metadata"]["eid"]: line["cursor"]["offset"]
                 for line in lines if line.get("events")}
    assert sorted(survivors.values()) == [f"001-0001-{n:018d}" for n in range(15, 20)]
    yield name, survivors
    requests.delete(f"{base_url}/event-types/{name}")
