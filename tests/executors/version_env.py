"""What the Spark 4.0 and 4.3 environments of the tests share: how the project's Makefile makes one, and how a command
runs in it on this checkout's package (`tests/executors/spark40.py`, `tests/executors/spark43.py`)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _base_python() -> str:
    """The interpreter this test venv was made from (the Makefile's python3.11 may not be on PATH)."""
    base = Path(sys.base_prefix) / "bin" / f"python{sys.version_info.major}.{sys.version_info.minor}"
    return str(base) if base.exists() else "python3"


def ensure(target: str) -> None:
    """Create or update an environment with the project's own Makefile ``target`` when it is missing or older than
    its inputs.

    Raises:
        RuntimeError: make failed (the message carries its output's tail).
    """
    if subprocess.run(["make", "-q", target], cwd=ROOT, capture_output=True, check=False).returncode == 0:
        return
    env = {**os.environ, "PYTHON": os.environ.get("PYTHON", _base_python())}
    out = subprocess.run(["make", target], cwd=ROOT, capture_output=True, text=True, env=env, check=False)
    if out.returncode != 0:
        raise RuntimeError(f"make {target} failed:\n{(out.stdout + out.stderr)[-3000:]}")


def run_in(
    python: Path, args: list[str], *, module: str, code: str | None, timeout: int
) -> subprocess.CompletedProcess:
    """Run ``python -m module ARGS`` (``code``: ``python -c code ARGS``) with ``python`` on this checkout's package,
    without the caller's PYTHONPATH, SPARK_REMOTE or SPARK_HOME."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "SPARK_REMOTE", "SPARK_HOME")}
    env["PYTHONPATH"] = str(ROOT)
    cmd = [str(python), *(["-c", code] if code is not None else ["-m", module]), *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env, cwd=str(ROOT), check=False)
