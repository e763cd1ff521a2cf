"""The data pipeline on PySpark (installed with the ``spark`` extra): the ``nakadi``
data source and the ``nakadi-archive`` lake archiver. It talks to the broker only
over HTTP; the broker itself never imports it."""

from workers.pipeline.client import BrokerError
from workers.pipeline.lake import read_archive
from workers.pipeline.source import NakadiDataSource
from workers.pipeline.spark_home import use_compiled_pyspark

__all__ = ["BrokerError", "NakadiDataSource", "read_archive", "use_compiled_pyspark"]
