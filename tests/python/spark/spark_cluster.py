"""A Spark cluster of its own for a test module: `local-cluster[2,2,1024]` (a master and two
workers inside the driver's JVM, each worker starting an executor JVM of 2 cores), everything it
writes (logs, event log, the workers' folders) under one temporary folder."""
import os
import shutil
import sys

LOG4J = """\
rootLogger.level = info
rootLogger.appenderRef.file.ref = file
appender.file.type = File
appender.file.name = file
appender.file.append = true
appender.file.fileName = ${sys:hvrun.test.log}
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = %d %p %c: %m%n
"""


def spark_home_copy(folder):
    """pyspark's folder as SPARK_HOME, linked entry by entry: the workers write their executors'
    folders into SPARK_HOME/work, which must not be the shared environment's package."""
    import pyspark
    source = os.path.dirname(pyspark.__file__)
    home = os.path.join(folder, "spark-home")
    os.makedirs(os.path.join(home, "work"))
    for entry in os.listdir(source):
        if entry != "work":
            os.symlink(os.path.join(source, entry), os.path.join(home, entry))
    return home


def start(folder, executor_pythonpath):
    """The SparkSession; raises whatever Spark raises when Java cannot start."""
    os.environ["SPARK_HOME"] = spark_home_copy(folder)
    # The workers, their executors and the driver on loopback only (not the host name's address).
    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    log4j = os.path.join(folder, "log4j2.properties")
    with open(log4j, "w") as out:
        out.write(LOG4J)
    events = os.path.join(folder, "events")
    os.makedirs(events)
    java_options = "-Dlog4j2.configurationFile=file:%s -Dhvrun.test.log=%s" % (
        log4j, os.path.join(folder, "spark.log"))
    from pyspark.sql import SparkSession
    return (SparkSession.builder.master("local-cluster[2,2,1024]").appName("hvrun-spark-test")
            .config("spark.driver.host", "127.0.0.1")
            .config("spark.driver.bindAddress", "127.0.0.1")
            .config("spark.ui.enabled", "false")
            .config("spark.executor.memory", "512m")
            .config("spark.driver.extraJavaOptions", java_options)
            .config("spark.executor.extraJavaOptions", java_options)
            .config("spark.eventLog.enabled", "true")
            .config("spark.eventLog.dir", "file://" + events)
            .config("spark.executorEnv.PYTHONPATH", executor_pythonpath)
            .config("spark.executorEnv.OMP_NUM_THREADS", "1")
            .getOrCreate())


def wait_for_executors(spark, count, timeout):
    import time
    sc = spark.sparkContext
    deadline = time.monotonic() + timeout
    while sc._jsc.sc().getExecutorIds().size() < count:
        if time.monotonic() > deadline:
            raise TimeoutError("%d Spark executors did not register within %d s" % (count, timeout))
        time.sleep(0.5)


def java_missing():
    return shutil.which("java") is None and not os.environ.get("JAVA_HOME")
