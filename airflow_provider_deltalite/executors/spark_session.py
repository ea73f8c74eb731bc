"""Starting the SparkSession a `SparkExecutor` owns: reachability checks, environment defaults, the session itself.

Spark fails slowly and vaguely when its master is unreachable (three registration attempts 20 s apart) or when no
executor can register (it waits for ever), and picks the first non-loopback interface and whatever ``python3`` is on
PATH unless told otherwise; the checks and defaults here turn those into errors in seconds and a local session that
works out of the box. PySpark is imported lazily.
"""

from __future__ import annotations

import ipaddress
import os
import socket
import sys
import time
import warnings
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from airflow_provider_deltalite.engine.errors import ExecutorError, redact_uri
from airflow_provider_deltalite.executors.spark_errors import first_line

if TYPE_CHECKING:
    from pyspark import SparkContext
    from pyspark.sql import SparkSession

_launch_settings: set[str] = set()  # the Spark settings the JVM of this process was launched with


def start_session(
    master: str, app_name: str, conf: Mapping[str, str] | None = None, *, connect_timeout: float = 5.0
) -> SparkSession:
    """A new classic SparkSession for ``master``, with the defaults `SparkExecutor.start` documents.

    Raises:
        ExecutorError: the master cannot be reached, SPARK_REMOTE asks for Spark Connect, another SparkContext is
            already running in this process, or Spark failed to start.
    """
    shown = redact_uri(master) or master
    if master.startswith("spark://"):
        check_reachable(master, shown, connect_timeout)
    if os.environ.get("SPARK_REMOTE") or os.environ.get("SPARK_CONNECT_MODE_ENABLED"):
        raise ExecutorError("SPARK_REMOTE is set: the Spark executor needs a classic SparkSession, not Spark Connect")

    from pyspark import SparkConf, SparkContext
    from pyspark.sql import SparkSession

    active = SparkContext._active_spark_context
    if active is not None:
        raise ExecutorError(
            f"a SparkContext (master {redact_uri(active.master)}) is already running in this process; "
            "wrap its session with SparkExecutor(spark) or stop it first"
        )
    loopback = is_loopback_master(master)
    settings: dict[str, str] = {
        "spark.master": master,
        "spark.app.name": app_name,
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
    }
    env: dict[str, str] = {}
    if loopback:
        settings["spark.driver.host"] = "127.0.0.1"
        settings["spark.driver.bindAddress"] = "127.0.0.1"
        # Read once, when the JVM starts; without it Spark picks the first non-loopback interface.
        env["SPARK_LOCAL_IP"] = "127.0.0.1"
        # SparkContext reads PYSPARK_PYTHON (default: whatever `python3` is on PATH) for the workers it starts.
        env["PYSPARK_PYTHON"] = sys.executable
    settings.update({str(k): str(v) for k, v in (conf or {}).items()})
    try:
        with _env_defaults(env), warnings.catch_warnings():
            # PySpark 4.2 warns about pandas 3 while it starts, although RDD jobs never touch pandas.
            warnings.filterwarnings(
                "ignore", message="PySpark does not yet fully support pandas", category=FutureWarning
            )
            launching = SparkContext._gateway is None
            spark_conf = SparkConf()  # once the JVM runs, this loads its system properties
            if not launching:
                # The settings that launched the JVM became its system properties and would apply to every
                # later context too (a previous start's executor memory, say); drop those not set this time.
                jconf = spark_conf._jconf
                assert jconf is not None  # with the JVM running, SparkConf keeps its settings there
                for key in _launch_settings - settings.keys():
                    jconf.remove(key)
            spark_conf.setAll(list(settings.items()))
            # Not SparkSession.builder: it rebuilds the conf from the JVM defaults and would bring them back.
            sc = SparkContext(conf=spark_conf)
            if launching:
                _launch_settings.update(settings)
            try:
                spark = SparkSession(sc)
            except BaseException:
                sc.stop()
                raise
    except Exception as exc:
        raise ExecutorError(f"could not start Spark with master {shown}: {first_line(exc)}") from None
    spark.sparkContext.setLogLevel("WARN")
    return spark


def check_reachable(master: str, shown: str, timeout: float) -> None:
    """Fail in seconds when no master of ``spark://h1:p1[,h2:p2]`` accepts a TCP connection.

    Spark itself retries registration three times 20 s apart before giving up; a closed port or an unknown host is
    known after one connect.
    """
    reasons = []
    for hostport in master[len("spark://") :].split(","):
        host, _, port_text = hostport.strip().rpartition(":")
        try:
            port = int(port_text)
        except ValueError:
            raise ExecutorError(f"Spark master {shown} has no port (expected spark://host:port)") from None
        try:
            socket.create_connection((host.strip("[]"), port), timeout=timeout).close()
            return
        except OSError as exc:
            reasons.append(f"{host}:{port}: {exc.strerror or type(exc).__name__}")
    raise ExecutorError(f"cannot reach Spark master {shown} ({'; '.join(reasons)})")


def wait_for_executor(sc: SparkContext, shown: str, timeout: float) -> None:
    """Wait until at least one executor registered with the master; fail after ``timeout`` seconds."""
    # The driver registers itself as an executor too, so a cluster with one executor reports two entries.
    tracker = sc._jsc.sc().statusTracker()
    deadline = time.monotonic() + timeout
    while len(tracker.getExecutorInfos()) < 2:
        if time.monotonic() > deadline:
            memory = sc.getConf().get("spark.executor.memory", "1g")
            raise ExecutorError(
                f"no Spark executor registered with master {shown} within {timeout:g}s "
                f"(are workers running with a free core and {memory} of free memory?)"
            )
        time.sleep(0.1)


def is_loopback_master(master: str) -> bool:
    """Whether every host of ``master`` is this machine (``local[...]``, localhost, a loopback address)."""
    if master.startswith("local"):
        return True
    if not master.startswith("spark://"):
        return False
    hosts = [urlsplit(f"spark://{hp.strip()}").hostname or "" for hp in master[len("spark://") :].split(",")]
    return all(_is_loopback_host(h) for h in hosts)


def _is_loopback_host(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


@contextmanager
def _env_defaults(values: Mapping[str, str]) -> Iterator[None]:
    # PySpark reads these from os.environ while the gateway and the context start; set them only for that moment.
    added = [key for key in values if key not in os.environ]
    for key in added:
        os.environ[key] = values[key]
    try:
        yield
    finally:
        for key in added:
            os.environ.pop(key, None)
