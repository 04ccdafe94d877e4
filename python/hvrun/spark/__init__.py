"""Horovod's Spark API on hvrun: `hvrun.spark.run(fn, ...)` runs fn as hvrun ranks on the tasks
of a Spark barrier stage (docs/spark.md)."""
from hvrun.spark.runner import run

__all__ = ["run"]
