"""Fixtures of the Airflow-layer tests.

- `airflow_home` (session): a throw-away AIRFLOW_HOME migrated with `airflow db migrate`, and the environment to run
  `airflow ...` subprocesses in it. Airflow reads AIRFLOW_HOME when it is first imported, so tests that need the
  metadata database run Airflow as a subprocess with ``airflow_home.env`` (plus their own AIRFLOW_CONN_* variables).
- DB-free tests may import Airflow into the pytest process itself (build an operator, sensor or trigger and call it):
  importing this conftest points that in-process Airflow at its own throw-away home first, so no test reads or writes
  ~/airflow or a developer's AIRFLOW_HOME.
"""

from __future__ import annotations

import atexit
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
EXAMPLE_DAGS = REPO / "example_dags"
AIRFLOW_BIN = Path(sys.executable).with_name("airflow")

# Airflow reads its home once, at first import: set it before any test module imports airflow.
if "airflow" not in sys.modules:
    _IN_PROCESS_HOME = tempfile.mkdtemp(prefix="deltalite-airflow-inprocess-")
    os.environ["AIRFLOW_HOME"] = _IN_PROCESS_HOME
    os.environ["AIRFLOW__CORE__LOAD_EXAMPLES"] = "False"
    atexit.register(shutil.rmtree, _IN_PROCESS_HOME, True)


@dataclass(frozen=True)
class AirflowHome:
    """A migrated Airflow home.

    Attributes:
        path: the AIRFLOW_HOME directory (sqlite metadata database inside).
        env: environment for subprocesses: AIRFLOW_HOME, no example DAGs, DAGS_FOLDER = the repository's
            example_dags, the virtualenv's bin first on PATH.
    """

    path: Path
    env: dict[str, str]

    def run(
        self, *args: str, extra_env: Mapping[str, str] | None = None, timeout: float = 300
    ) -> subprocess.CompletedProcess:
        """Run ``airflow ARGS`` in this home and capture its output (text)."""
        return subprocess.run(
            [str(AIRFLOW_BIN), *args],
            env={**self.env, **(extra_env or {})},
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )


def airflow_env(home: Path) -> dict[str, str]:
    """The environment of an `airflow` subprocess using ``home`` (the demo's, with the repository's example_dags)."""
    from airflow_provider_deltalite.demo import airflow_env as demo_env

    return {**demo_env(home, EXAMPLE_DAGS), "AIRFLOW__LOGGING__LOGGING_LEVEL": "INFO"}


def migrated_home(path: Path) -> AirflowHome:
    """A new AIRFLOW_HOME at ``path`` (created when missing), its database migrated with `airflow db migrate`."""
    path.mkdir(parents=True, exist_ok=True)
    home = AirflowHome(path, airflow_env(path))
    out = home.run("db", "migrate", timeout=600)
    if out.returncode != 0:
        pytest.fail(f"airflow db migrate failed:\n{out.stdout[-3000:]}\n{out.stderr[-3000:]}")
    return home


@pytest.fixture(scope="session")
def airflow_home(tmp_path_factory: pytest.TempPathFactory) -> AirflowHome:
    """A migrated AIRFLOW_HOME shared by the session (`airflow db migrate` costs ~10 s)."""
    return migrated_home(tmp_path_factory.mktemp("airflow_home"))
