"""The Spark 4.0 environment the tests use for the oldest supported Spark (`make env-spark40`, .venv-spark40).

A client-only virtualenv: pyspark-client 4.0 with pyarrow, fsspec and numpy, this package installed without its
dependencies (so no Airflow and no classic pyspark), and the Spark 4.0 distribution (classic pyspark, installed with
``--target`` beside it, not importable from the venv) to start a 4.0 Spark Connect server from.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
VENV = ROOT / ".venv-spark40"
PYTHON = VENV / "bin" / "python"
SERVER_HOME = VENV / "server" / "pyspark"  # the Spark 4.0 distribution (bin/, jars/) for the Connect server
VERSION = "4.0.4"  # constraints-spark40.txt

# The CLI with the clustering shuffle forced (every partition through it, one map task per file), as the Spark
# shuffle tests do in-process; argv holds the CLI's own arguments.
SHUFFLED_CLI = (
    "import sys\n"
    "from airflow_provider_deltalite.maintenance.clustering import shuffle\n"
    "shuffle.SHUFFLE_ABOVE_BYTES = 0\n"
    "shuffle.GROUP_BYTES = 1\n"
    "from airflow_provider_deltalite.cli import main\n"
    "sys.exit(main(sys.argv[1:]))\n"
)


def ensure_env() -> None:
    """Create or update .venv-spark40 with the project's own Makefile when it is missing or older than its inputs.

    Raises:
        RuntimeError: make failed (the message carries its output's tail).
    """
    if subprocess.run(["make", "-q", "env-spark40"], cwd=ROOT, capture_output=True, check=False).returncode == 0:
        return
    env = {**os.environ, "PYTHON": os.environ.get("PYTHON", _base_python())}
    out = subprocess.run(["make", "env-spark40"], cwd=ROOT, capture_output=True, text=True, env=env, check=False)
    if out.returncode != 0:
        raise RuntimeError(f"make env-spark40 failed:\n{(out.stdout + out.stderr)[-3000:]}")


def _base_python() -> str:
    """The interpreter this test venv was made from (the Makefile's python3.11 may not be on PATH)."""
    base = Path(sys.base_prefix) / "bin" / f"python{sys.version_info.major}.{sys.version_info.minor}"
    return str(base) if base.exists() else "python3"


def run(
    args: list[str], *, module: str = "airflow_provider_deltalite", code: str | None = None, timeout: int = 600
) -> subprocess.CompletedProcess:
    """Run ``python -m module ARGS`` (``code``: ``python -c code ARGS``) in the 4.0 environment on this checkout's
    package, without the caller's PYTHONPATH, SPARK_REMOTE or SPARK_HOME."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "SPARK_REMOTE", "SPARK_HOME")}
    env["PYTHONPATH"] = str(ROOT)
    cmd = [str(PYTHON), *(["-c", code] if code is not None else ["-m", module]), *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env, cwd=str(ROOT), check=False)


def failure(args: list[str], *, module: str = "airflow_provider_deltalite") -> str:
    """`tests.helpers.cli_failure` for the 4.0 environment's CLI: exit 2, nothing on stdout, one stderr line."""
    out = run(args, module=module)
    assert out.returncode == 2, out
    assert out.stdout == ""
    assert out.stderr.endswith("\n") and out.stderr.count("\n") == 1, out.stderr
    return out.stderr.rstrip("\n")
