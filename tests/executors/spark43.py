"""The Spark 4.3 environment the tests use for the newest supported Spark (`make env-spark43`, .venv-spark43).

Classic pyspark 4.3.0 with its `connect` extra (the package index has no pyspark-client 4.3), pyarrow, fsspec and
numpy, and this package installed without its dependencies (no Airflow). One environment is three things: the 4.3
Spark Connect client, the Spark 4.3 distribution a 4.3 Connect server is started from (`SERVER_HOME`), and the 4.3
spark-submit (`SPARK_SUBMIT`).
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from tests.executors.version_env import ROOT, ensure, run_in

VENV = ROOT / ".venv-spark43"
PYTHON = VENV / "bin" / "python"
VERSION = "4.3.0"  # constraints-spark43.txt


def _site_packages() -> Path:
    (site,) = VENV.glob("lib/python*/site-packages")
    return site


def server_home() -> Path:
    """The Spark 4.3 distribution (bin/, jars/): the classic pyspark package directory."""
    return _site_packages() / "pyspark"


def ensure_env() -> None:
    """Create or update .venv-spark43 (`make env-spark43`) when it is missing or older than its inputs."""
    ensure("env-spark43")


def run(
    args: list[str], *, module: str = "airflow_provider_deltalite", code: str | None = None, timeout: int = 600
) -> subprocess.CompletedProcess:
    """Run ``python -m module ARGS`` (``code``: ``python -c code ARGS``) in the 4.3 environment (`run_in`)."""
    return run_in(PYTHON, args, module=module, code=code, timeout=timeout)
