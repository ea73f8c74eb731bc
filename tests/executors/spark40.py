"""The Spark 4.0 environment the tests use for the oldest supported Spark (`make env-spark40`, .venv-spark40).

A client-only virtualenv: pyspark-client 4.0 with pyarrow, fsspec and numpy, this package installed without its
dependencies (so no Airflow and no classic pyspark), and the Spark 4.0 distribution (classic pyspark, installed with
``--target`` beside it, not importable from the venv) to start a 4.0 Spark Connect server from.
"""

from __future__ import annotations

import subprocess

from tests.executors.version_env import ROOT, ensure, run_in

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
    """Create or update .venv-spark40 (`make env-spark40`) when it is missing or older than its inputs."""
    ensure("env-spark40")


def run(
    args: list[str], *, module: str = "airflow_provider_deltalite", code: str | None = None, timeout: int = 600
) -> subprocess.CompletedProcess:
    """Run ``python -m module ARGS`` (``code``: ``python -c code ARGS``) in the 4.0 environment (`run_in`)."""
    return run_in(PYTHON, args, module=module, code=code, timeout=timeout)


def failure(args: list[str], *, module: str = "airflow_provider_deltalite") -> str:
    """`tests.helpers.cli_failure` for the 4.0 environment's CLI: exit 2, nothing on stdout, one stderr line."""
    out = run(args, module=module)
    assert out.returncode == 2, out
    assert out.stdout == ""
    assert out.stderr.endswith("\n") and out.stderr.count("\n") == 1, out.stderr
    return out.stderr.rstrip("\n")
