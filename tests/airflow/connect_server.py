"""A Spark Connect server for the secrets sweep over Spark Connect: the `spark_connect_server` fixture's server, plus
an authentication token, an event log and the Spark UI on a loopback port, so that every place a query's plan is
shown can be searched.

The token reaches the server through its environment (``SPARK_CONNECT_AUTHENTICATE_TOKEN``), not its command line.
"""

from __future__ import annotations

from pathlib import Path

from tests.executors.spark_cluster import ConnectServer, start_connect_server


def start_sweep_server(
    work_dir: Path, *, token: str, event_log_dir: Path, ui_port: int, timeout: float = 120.0
) -> ConnectServer:
    """Start a local[2] Spark Connect server on 127.0.0.1 that requires ``token``, writes its event log to
    ``event_log_dir`` and serves its UI on ``ui_port``; its log is ``work_dir/connect.log``.

    Raises:
        RuntimeError: the server exited or did not listen within ``timeout`` seconds (the message carries its log).
    """
    event_log_dir.mkdir(parents=True, exist_ok=True)
    settings = {
        "spark.ui.enabled": "true",
        "spark.ui.port": str(ui_port),
        "spark.eventLog.enabled": "true",
        "spark.eventLog.dir": event_log_dir.as_uri(),
        "spark.eventLog.compress": "false",  # searched as text
    }
    return start_connect_server(
        work_dir,
        timeout=timeout,
        settings=settings,
        env_extra={"SPARK_CONNECT_AUTHENTICATE_TOKEN": token},
        name="deltalite-connect-sweep",
        also_listening=(ui_port,),
    )
