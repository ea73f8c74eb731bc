"""A Spark Connect server for the secrets sweep over Spark Connect: the `spark_connect_server` fixture's server, plus
an authentication token, an event log and the Spark UI on a loopback port, so that every place a query's plan is
shown can be searched.

The token reaches the server through its environment (``SPARK_CONNECT_AUTHENTICATE_TOKEN``), not its command line.
"""

from __future__ import annotations

import socket
import subprocess
import time
from pathlib import Path

from tests.executors.spark_cluster import FAST_JVM_OPTIONS, ConnectServer, free_port, spark_env, spark_home


def start_sweep_server(
    work_dir: Path, *, token: str, event_log_dir: Path, ui_port: int, timeout: float = 120.0
) -> ConnectServer:
    """Start a local[2] Spark Connect server on 127.0.0.1 that requires ``token``, writes its event log to
    ``event_log_dir`` and serves its UI on ``ui_port``; its log is ``work_dir/connect.log``.

    Raises:
        RuntimeError: the server exited or did not listen within ``timeout`` seconds (the message carries its log).
    """
    work_dir.mkdir(parents=True, exist_ok=True)
    event_log_dir.mkdir(parents=True, exist_ok=True)
    port = free_port()
    settings = {
        "spark.connect.grpc.binding.address": "127.0.0.1",
        "spark.connect.grpc.binding.port": str(port),
        "spark.ui.enabled": "true",
        "spark.ui.port": str(ui_port),
        "spark.driver.host": "127.0.0.1",
        "spark.driver.bindAddress": "127.0.0.1",
        "spark.driver.extraJavaOptions": FAST_JVM_OPTIONS,
        "spark.eventLog.enabled": "true",
        "spark.eventLog.dir": event_log_dir.as_uri(),
        "spark.eventLog.compress": "false",  # searched as text
    }
    cmd = [
        str(spark_home() / "bin" / "spark-submit"),
        "--class",
        "org.apache.spark.sql.connect.service.SparkConnectServer",
        "--name",
        "deltalite-connect-sweep",
        "--master",
        "local[2]",
        *[arg for key, value in settings.items() for arg in ("--conf", f"{key}={value}")],
        "--driver-memory",
        "1g",
        "spark-internal",
    ]
    env = spark_env()
    env.pop("SPARK_DAEMON_MEMORY", None)
    env["SPARK_CONNECT_AUTHENTICATE_TOKEN"] = token
    with (work_dir / "connect.log").open("wb") as log:
        proc = subprocess.Popen(
            cmd, env=env, cwd=work_dir, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
            start_new_session=True,
        )  # fmt: skip
    server = ConnectServer(f"sc://127.0.0.1:{port}", work_dir, proc)
    deadline = time.monotonic() + timeout
    try:
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"the Spark Connect server exited during start-up\n{server.logs()}")
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                socket.create_connection(("127.0.0.1", ui_port), timeout=1).close()
                return server
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"the Spark Connect server did not listen within {timeout:g}s\n{server.logs()}")
            time.sleep(0.2)
    except BaseException:
        server.stop()
        raise
