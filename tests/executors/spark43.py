"""The Spark 4.3 environment the tests use for the newest supported Spark (`make env-spark43`, .venv-spark43).

Classic pyspark 4.3.0 with its `connect` extra (the package index has no pyspark-client 4.3), pyarrow, fsspec and
numpy, and this package installed without its dependencies (no Airflow). One environment is three things: the 4.3
Spark Connect client, the Spark 4.3 distribution a 4.3 Connect server is started from (`SERVER_HOME`), and the 4.3
spark-submit (`SPARK_SUBMIT`).
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from tests.executors.spark40 import ROOT, _base_python

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
    """Create or update .venv-spark43 with the project's own Makefile when it is missing or older than its inputs.

    Raises:
        RuntimeError: make failed (the message carries its output's tail).
    """
    if subprocess.run(["make", "-q", "env-spark43"], cwd=ROOT, capture_output=True, check=False).returncode == 0:
        return
    env = {**os.environ, "PYTHON": os.environ.get("PYTHON", _base_python())}
    out = subprocess.run(["make", "env-spark43"], cwd=ROOT, capture_output=True, text=True, env=env, check=False)
    if out.returncode != 0:
        raise RuntimeError(f"make env-spark43 failed:\n{(out.stdout + out.stderr)[-3000:]}")


def run(
    args: list[str], *, module: str = "airflow_provider_deltalite", code: str | None = None, timeout: int = 600
) -> subprocess.CompletedProcess:
    """Run ``python -m module ARGS`` (``code``: ``python -c code ARGS``) in the 4.3 environment on this checkout's
    package, without the caller's PYTHONPATH, SPARK_REMOTE or SPARK_HOME."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "SPARK_REMOTE", "SPARK_HOME")}
    env["PYTHONPATH"] = str(ROOT)
    cmd = [str(PYTHON), *(["-c", code] if code is not None else ["-m", module]), *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env, cwd=str(ROOT), check=False)
