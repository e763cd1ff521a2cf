"""Spark in local mode for the pipeline tests: one session for the whole test
session, so the JVM starts once, and the session's real broker."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator

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
               .getOrCreate())
    session.sparkContext.setLogLevel("ERROR")
    session.dataSource.register(NakadiDataSource)
    yield session
    session.stop()
