"""`DeltaLiteSparkSubmitHook`: the Spark provider's SparkSubmitHook with what deltalite's jobs need on top.

- ``spark_default`` that is not defined means ``local[*]`` (the Spark provider would fall back to ``yarn``); any other
  Spark connection id that is not defined is an error instead of a silent fallback.
- The Spark that runs is the site's, found as the Spark provider finds it: ``spark_binary`` (the operator argument,
  else the connection's ``spark-binary`` extra, else ``spark-submit``) on ``PATH``, with the environment's
  ``SPARK_HOME`` (and so its ``conf/spark-defaults.conf``) inherited unchanged; the connection's ``spark-home`` extra
  is refused by the provider. When the binary is not on ``PATH``, ``$SPARK_HOME/bin/<binary>`` runs. Only when there
  is no other Spark at all (not on ``PATH``, no ``SPARK_HOME``) does the installed pyspark package's ``spark-submit``
  run, by absolute path, with ``SPARK_HOME`` pointing at that package (`locate_spark_submit`).
- ``PYSPARK_PYTHON`` defaults to this interpreter when the driver runs here (local master or standalone client mode).
- Secret environment variables (storage credentials) are set on the spark-submit process only, never turned into
  ``--conf`` arguments; in cluster deploy mode (`driver_runs_here` is False) they cannot reach the driver that way,
  and the operator ships a file instead.
- spark-submit runs in its own process group, and `on_kill` ends the whole group (the JVM and the Python driver it
  started), not just the launcher script.
- The driver's one-line ``deltalite: error: ...`` is captured from the output, for the task's failure message.

The operators build this hook from SparkSubmitHook's public constructor arguments (those the user passed to the
operator); what it adds still overrides two methods that are private in the Spark provider
(`_build_spark_common_args`, for the secret environment; `_process_spark_submit_log`, for the error line) and reads
the resolved connection (``_connection``; its ``spark_binary`` becomes an absolute path in the fallback cases):
tests/airflow/test_operators.py and test_site_spark.py run them against the provider version the ``test`` extra pins.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from airflow.providers.apache.spark.hooks.spark_submit import DEFAULT_SPARK_BINARY, SparkSubmitHook
from airflow.providers.common.compat.sdk import AirflowNotFoundException, Connection

from airflow_provider_deltalite.executors.spark_session import classic_pyspark_missing
from airflow_provider_deltalite.hooks.deltalite import InvalidConnection

DEFAULT_SPARK_CONN_ID = "spark_default"
LOCAL_MASTER = "local[*]"
ERROR_PREFIX = "deltalite: error: "
# Seconds between SIGTERM and SIGKILL of the spark-submit process group in on_kill.
KILL_GRACE_SECONDS = 10.0


def pyspark_home() -> Path:
    """The installed classic pyspark package directory: a complete Spark distribution (``bin/``, ``jars/``).

    Raises:
        InvalidConnection: classic pyspark is not installed (pyspark-client alone has no ``bin/``): one line naming
            the ``spark`` extra and the pyspark version to install with it.
    """
    import importlib.util

    missing = classic_pyspark_missing(
        "spark-submit (not on PATH, SPARK_HOME not set)",
        instead="set SPARK_HOME to your Spark, or use a spark_connect connection",
    )
    spec = importlib.util.find_spec("pyspark")
    if missing is not None or spec is None or spec.origin is None:
        raise InvalidConnection(missing or "pyspark is not installed")
    return Path(spec.origin).resolve().parent


def bundled_spark_submit() -> str:
    """Absolute path of ``spark-submit`` in the installed pyspark package."""
    return str(pyspark_home() / "bin" / "spark-submit")


def locate_spark_submit(binary: str, environ: Mapping[str, str] | None = None) -> tuple[str, str | None]:
    """The spark-submit command to run for ``binary`` and the ``SPARK_HOME`` to set for it (None: leave it as is).

    As the Spark provider: a path, or a name found on ``PATH``, runs as given, and the child inherits ``SPARK_HOME``
    (Spark's scripts then take that installation and its ``conf/``). A name not on ``PATH`` runs from
    ``$SPARK_HOME/bin``; with no ``SPARK_HOME`` either, ``spark-submit`` is the installed pyspark package's.

    Raises:
        InvalidConnection: no such binary on ``PATH`` or in ``$SPARK_HOME/bin``, and no classic pyspark package (one
            with ``bin/spark-submit``) to fall back to (`pyspark_home`).
    """
    env = os.environ if environ is None else environ
    if os.sep in binary or shutil.which(binary, path=env.get("PATH", os.defpath)):
        return binary, None
    home = env.get("SPARK_HOME")
    if home:
        candidate = Path(home) / "bin" / binary
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate), None
        raise InvalidConnection(f"{binary} is not on PATH and SPARK_HOME ({home}) has no bin/{binary}")
    if binary != DEFAULT_SPARK_BINARY:
        raise InvalidConnection(f"{binary} is not on PATH and SPARK_HOME is not set")
    # pyspark-client installs the pyspark package without bin/ and jars/: it can talk Spark Connect, not submit
    bundled = Path(bundled_spark_submit())
    if not bundled.is_file():
        raise InvalidConnection(
            f"spark-submit is not on PATH, SPARK_HOME is not set, and the installed pyspark ({bundled.parents[1]}) has "
            "no bin/spark-submit: set SPARK_HOME to your Spark"
        )
    return str(bundled), str(bundled.parent.parent)


class DeltaLiteSparkSubmitHook(SparkSubmitHook):
    """SparkSubmitHook for deltalite jobs (see the module docstring for what differs).

    Args:
        secret_env: environment variables for the spark-submit process only (credentials); never on the command line.
            `set_job` adds more.
        pyspark_python: the Python of the driver and executors (``PYSPARK_PYTHON``); default: this interpreter when
            the driver runs on this machine.
        **kwargs: the arguments of SparkSubmitHook.
    """

    def __init__(
        self,
        *args: Any,
        secret_env: Mapping[str, str] | None = None,
        pyspark_python: str | None = None,
        **kwargs: Any,
    ) -> None:
        self._process_env = dict(secret_env or {})
        super().__init__(*args, **kwargs)
        # env_vars reach the spark-submit process too (the provider puts them in its environment): a SPARK_HOME there
        # is the one its scripts will use
        environ = {**os.environ, **{k: str(v) for k, v in (self._env_vars or {}).items()}}
        command, spark_home = locate_spark_submit(self._connection["spark_binary"], environ)
        # every use of the binary (submit, driver status, driver kill) reads it from the resolved connection
        self._connection["spark_binary"] = command
        if spark_home is not None:
            self._process_env.setdefault("SPARK_HOME", spark_home)
        master = self._connection["master"]
        env = dict(self._env_vars or {})
        if pyspark_python:
            env["PYSPARK_PYTHON"] = pyspark_python
            self._conf = {**self._conf, "spark.pyspark.python": pyspark_python}
        elif master.startswith("local") or (master.startswith("spark://") and self.driver_runs_here):
            # The driver's PYSPARK_PYTHON is also what executors start: right for a local master and for workers on
            # this machine; on YARN or Kubernetes the executors' Python is the cluster's (pass pyspark_python).
            env.setdefault("PYSPARK_PYTHON", sys.executable)
        if master.startswith("local"):
            env.setdefault("SPARK_LOCAL_IP", "127.0.0.1")  # a local driver needs no address others can reach
        self._env_vars = env
        self.error_lines: list[str] = []
        self.output_tail: list[str] = []

    # -- connection ---------------------------------------------------------------------------------------------

    def get_connection(self, conn_id: str) -> Connection:  # type: ignore[override]
        """The Spark connection; an undefined ``spark_default`` is ``local[*]``, any other undefined id an error."""
        try:
            return super().get_connection(conn_id)
        except AirflowNotFoundException:
            if conn_id == DEFAULT_SPARK_CONN_ID:
                return Connection(conn_id=conn_id, conn_type="spark", host=LOCAL_MASTER)
            # Not an AirflowException: the Spark provider would swallow it and submit to yarn.
            raise InvalidConnection(
                f"Spark connection {conn_id!r} is not defined (add it, or use {DEFAULT_SPARK_CONN_ID!r}, which is "
                f"{LOCAL_MASTER} when it is not defined)"
            ) from None

    # -- where credentials may go -------------------------------------------------------------------------------

    @property
    def spark_submit_command(self) -> str:
        """The spark-submit that runs: the binary as the Spark provider finds it, or an absolute path."""
        return self._connection["spark_binary"]

    @property
    def master(self) -> str:
        """The resolved Spark master URL."""
        return self._connection["master"]

    @property
    def deploy_mode(self) -> str:
        """``client`` or ``cluster``."""
        return self._connection["deploy_mode"] or "client"

    @property
    def driver_runs_here(self) -> bool:
        """True in local and client mode: the driver is a child of spark-submit and inherits its environment."""
        return self.deploy_mode != "cluster"

    def set_job(self, application_args: list[str], files: str | None, process_env: Mapping[str, str]) -> None:
        """Set what is decided once the connection is resolved: the application arguments, ``--files``, and
        environment variables for the spark-submit process only (credentials; never turned into ``--conf``)."""
        self._application_args = list(application_args)
        self._files = files
        self._process_env.update(process_env)

    def _build_spark_common_args(self) -> list[str]:
        args = super()._build_spark_common_args()
        if self._process_env:
            # The Popen environment of spark-submit only (SparkSubmitHook.submit() merges self._env into it); the
            # Spark provider turns env_vars into --conf arguments on YARN and Kubernetes, so secrets never go there.
            self._env = {**(self._env or {}), **self._process_env}
        return args

    # -- running and stopping -----------------------------------------------------------------------------------

    def submit(self, application: str = "", **kwargs: Any) -> str | None:
        """Run spark-submit in a process group of its own (so `on_kill` can end every process it starts)."""
        kwargs.setdefault("start_new_session", True)
        return super().submit(application, **kwargs)

    def _process_spark_submit_log(self, itr: Iterator[Any]) -> None:
        def watched() -> Iterator[Any]:
            for raw in itr:
                line = str(raw).strip()
                if line.startswith(ERROR_PREFIX):
                    self.error_lines.append(line)
                if line:
                    self.output_tail = [*self.output_tail[-19:], line]
                yield raw

        super()._process_spark_submit_log(watched())

    def on_kill(self) -> None:
        """Stop the Spark application: SIGTERM to spark-submit's process group, SIGKILL after a grace period, then
        whatever the Spark provider does for the deploy mode (driver kill, YARN kill, pod deletion)."""
        process = self._submit_sp
        if process is not None and process.poll() is None:
            self.log.info("Stopping the Spark application (process group %s)", process.pid)
            _signal_group(process.pid, signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(timeout=KILL_GRACE_SECONDS)
            _signal_group(process.pid, signal.SIGKILL)  # children that ignored SIGTERM
            deadline = time.monotonic() + 5
            while (process.poll() is None or _group_exists(process.pid)) and time.monotonic() < deadline:
                time.sleep(0.05)
        super().on_kill()


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def _group_exists(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
