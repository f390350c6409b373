"""Lets PySpark find the ``pulsar`` data source by module name:
``spark.read.format("pyspark_pulsar")`` (or register ``magnetar.spark.PulsarDataSource``)."""

from magnetar.spark import DefaultSource

__all__ = ["DefaultSource"]
