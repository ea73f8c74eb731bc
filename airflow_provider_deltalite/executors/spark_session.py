"""Starting the SparkSession a `SparkExecutor` owns: reachability checks, environment defaults, the session itself.

Spark fails slowly and vaguely when its master is unreachable (three registration attempts 20 s apart) or when no
executor can register (it waits for ever), and picks the first non-loopback interface and whatever ``python3`` is on
PATH unless told otherwise; the checks and defaults here turn those into errors in seconds and a local session that
works out of the box. PySpark is imported lazily.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
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

# What installs classic pyspark of the installed pyspark-client's release (README, Installing): the same command.
CLASSIC_PYSPARK_COMMAND = "pip install \"pyspark==$(pip show pyspark-client | sed -n 's/^Version: //p')\""


def classic_pyspark_missing(
    needed_for: str, *, instead: str = "use a Spark Connect server (sc://host:port)"
) -> str | None:
    """None when classic pyspark (SparkContext, the JVM launcher) is importable; else one line saying that
    ``needed_for`` needs it and how to install it (classic pyspark of the release of the pyspark-client installed
    here, or the README's command when there is none), or what to do ``instead``.

    pyspark-client (which the Spark provider depends on) installs the same ``pyspark`` package without its classic
    half (``pyspark.core``, the jars, ``bin/spark-submit``): it talks to Spark Connect servers only.
    """
    try:
        if importlib.util.find_spec("pyspark.core") is not None:
            return None
    except ImportError:  # no pyspark package at all
        pass
    client = _distribution_version("pyspark-client")
    if client is None:
        return f"{needed_for} needs classic pyspark, which is not installed: {CLASSIC_PYSPARK_COMMAND}, or {instead}"
    return (
        f"{needed_for} needs classic pyspark, but only pyspark-client {client} is installed: "
        f"pip install 'pyspark=={client}' (the release of your pyspark-client), or {instead}"
    )


def pyspark_pair_mismatch() -> str | None:
    """One line when pyspark and pyspark-client are both installed at different versions, else None.

    Both install the same ``pyspark`` package, so whichever was installed last overwrote the other's files and the
    package mixes two releases (pip does not notice); `pip install pyspark` alone picks the newest pyspark, which
    may be newer than the pyspark-client the Spark provider brought (4.3.0 next to 4.2.0 in December 2026).
    """
    classic, client = _distribution_version("pyspark"), _distribution_version("pyspark-client")
    if classic is None or client is None or classic == client:
        return None
    return (
        f"pyspark {classic} and pyspark-client {client} are both installed and overwrite each other's pyspark "
        f"package: install one release of both, e.g. pip install --force-reinstall --no-deps 'pyspark=={client}' "
        f"'pyspark-client=={client}'"
    )


def require_classic_pyspark(needed_for: str) -> None:
    """Raise `ExecutorError` with `classic_pyspark_missing`'s line when classic pyspark is not installed."""
    missing = classic_pyspark_missing(needed_for)
    if missing is not None:
        raise ExecutorError(missing)


def _distribution_version(name: str) -> str | None:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


@contextmanager
def pandas_warning_ignored() -> Iterator[None]:
    """Ignore PySpark 4.2's warning about pandas 3 while the block runs: PySpark checks pandas when a session starts
    and when an Arrow UDF is built, although nothing here uses pandas.

    ``warnings.catch_warnings`` restores the filters of the whole process on exit, so blocks that overlap in
    threads can let the warning through now and then; it is only a warning.
    """
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="PySpark does not yet fully support pandas", category=FutureWarning)
        yield


def resolve_master(master: str | None) -> str:
    """The master to use: ``master`` when given, else ``SPARK_REMOTE`` (pyspark's convention), else ``local[*]``."""
    return master or os.environ.get("SPARK_REMOTE") or "local[*]"


def shown_master(master: str) -> str:
    """``master`` as messages show it: no credentials (a Spark Connect address loses its ``;token=...`` options)."""
    if master.startswith("sc://"):
        return master.split(";", 1)[0].rstrip("/")
    return redact_uri(master) or master


def is_connect_session(spark: object) -> bool:
    """Whether ``spark`` is a Spark Connect session (pyspark's ``pyspark.sql.connect`` classes) rather than classic."""
    return type(spark).__module__.startswith("pyspark.sql.connect")


def session_master(spark: SparkSession) -> str:
    """The master a session runs on, for messages (a Connect session: the server's own master)."""
    try:
        return shown_master(str(spark.conf.get("spark.master")))
    except Exception:  # a server that does not say; messages then name the kind of session
        return "Spark Connect" if is_connect_session(spark) else "Spark"


def start_session(
    master: str, app_name: str, conf: Mapping[str, str] | None = None, *, connect_timeout: float = 5.0
) -> SparkSession:
    """A new SparkSession for ``master``, with the defaults `SparkExecutor.start` documents: a Spark Connect session
    for an ``sc://`` address, else a classic one.

    Raises:
        ExecutorError: the master or server cannot be reached, another SparkContext is already running in this
            process, Spark failed to start, classic pyspark is missing for a classic master
            (`classic_pyspark_missing`), or pyspark and pyspark-client of different releases are installed.
    """
    shown = shown_master(master)
    mismatch = pyspark_pair_mismatch()
    if mismatch is not None:
        raise ExecutorError(mismatch)
    if master.startswith("sc://"):
        return start_connect_session(master, shown, app_name, conf, connect_timeout)
    require_classic_pyspark(f"Spark master {shown}")
    if master.startswith("spark://"):
        check_reachable(master, shown, connect_timeout)

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
        with _env_defaults(env), pandas_warning_ignored():
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


def start_connect_session(
    url: str, shown: str, app_name: str, conf: Mapping[str, str] | None, connect_timeout: float
) -> SparkSession:
    """A new Spark Connect session on the server at ``url`` (``sc://host:port[/;options]``).

    The server must accept a TCP connection within ``connect_timeout`` seconds (the gRPC client would otherwise
    retry for minutes), and answer a first request. ``conf`` is set on the session (runtime SQL settings only).
    """
    parts = urlsplit(url.split(";", 1)[0])
    try:
        port = parts.port or 15002  # Spark Connect's default port
    except ValueError:
        raise ExecutorError(f"Spark Connect address {shown} has a bad port (expected sc://host:port)") from None
    if not parts.hostname:
        raise ExecutorError(f"Spark Connect address {shown} has no host (expected sc://host:port)")
    refused = _unreachable(parts.hostname, port, connect_timeout)
    if refused is not None:
        raise ExecutorError(f"cannot reach Spark Connect server {shown} ({parts.hostname}:{port}: {refused})")
    try:
        with pandas_warning_ignored():
            from pyspark.sql.connect.session import SparkSession as ConnectSession

            # create(), not getOrCreate(): a session of its own, which `SparkExecutor.close` may stop.
            spark = ConnectSession.builder.remote(url).appName(app_name).create()
        for key, value in (conf or {}).items():
            spark.conf.set(str(key), str(value))
        spark.version  # noqa: B018 - the first request: a server that does not speak Spark Connect fails here
    except Exception as exc:
        raise ExecutorError(f"could not start a Spark Connect session on {shown}: {first_line(exc)}") from None
    return spark  # type: ignore[return-value]  # a Connect session has the classic session's API


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
        refused = _unreachable(host.strip("[]"), port, timeout)
        if refused is None:
            return
        reasons.append(f"{host}:{port}: {refused}")
    raise ExecutorError(f"cannot reach Spark master {shown} ({'; '.join(reasons)})")


def _unreachable(host: str, port: int, timeout: float) -> str | None:
    """None when ``host:port`` accepts a TCP connection within ``timeout`` seconds, else why not."""
    try:
        socket.create_connection((host, port), timeout=timeout).close()
    except OSError as exc:
        return exc.strerror or type(exc).__name__
    return None


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
