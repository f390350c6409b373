"""PySpark integration: the ``pulsar`` data source and helpers for executors.

::

    from magnetar.spark import PulsarDataSource
    spark.dataSource.register(PulsarDataSource)

    df = (spark.read.format("pulsar")
          .option("service_url", "pulsar://localhost:6650")
          .option("topic", "events")
          .load())                       # key, value, topic, partition, message_id, ...

    (df.selectExpr("key", "upper(cast(value as string)) as value")
       .write.format("pulsar").mode("append")
       .option("service_url", "pulsar://localhost:6650").option("topic", "events-upper")
       .save())

Inside UDFs, ``mapInArrow``, ``foreachPartition``::

    conf = magnetar.ClientConfig("pulsar://localhost:6650")   # picklable

    def produce(batches):
        producer = magnetar.spark.producer(conf, "out")        # one client per worker process
        for batch in batches:
            magnetar.spark.send_arrow(producer, batch)          # waits for every receipt
            yield batch

Needs PySpark >= 4.0 (admission control and ``Trigger.AvailableNow`` need 4.2) and pyarrow.
See ``docs/spark.md``.
"""

from __future__ import annotations

from .._config import ClientConfig
from ._arrow import send_arrow
from ._read import DataLossError
from ._source import CONNECTOR_SCHEMA, READ_SCHEMA, PulsarDataSource
from ._workers import client, close_all, process_stats, producer

DefaultSource = PulsarDataSource
"""The name PySpark's auto-registration of ``pyspark_*`` modules looks for."""

__all__ = [
    "CONNECTOR_SCHEMA",
    "READ_SCHEMA",
    "ClientConfig",
    "DataLossError",
    "DefaultSource",
    "PulsarDataSource",
    "client",
    "close_all",
    "process_stats",
    "producer",
    "send_arrow",
]
