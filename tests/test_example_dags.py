"""Every example DAG parses in a real Airflow (a throw-away AIRFLOW_HOME): no import errors, at least one DAG, and
no connection looked up while parsing (Airflow's own rule for example DAGs)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from airflow_provider_deltalite.demo import airflow_env

pytestmark = pytest.mark.airflow  # parses the DAGs in a real Airflow, in a subprocess

EXAMPLES = sorted((Path(__file__).resolve().parents[1] / "example_dags").glob("*.py"))

# Parse each file with its own DagBag in one interpreter, counting connection lookups per file.
_PARSE = """
import json, sys
from airflow.sdk.bases.hook import BaseHook
from airflow.sdk.definitions.connection import Connection
calls = []
def counting(original):
    def wrapper(*args, **kwargs):
        calls.append(args[-1] if args else kwargs)
        return original(*args, **kwargs)
    return wrapper
BaseHook.get_connection = classmethod(counting(BaseHook.get_connection.__func__))
Connection.get = classmethod(counting(Connection.get.__func__))
from airflow.models import DagBag
out = {}
for path in sys.argv[1:]:
    calls.clear()
    bag = DagBag(dag_folder=path)
    out[path] = {
        "errors": {k: str(v)[:500] for k, v in bag.import_errors.items()},
        "dags": sorted(bag.dag_ids),
        "connection_lookups": len(calls),
    }
print(json.dumps(out))
"""


# A DAG file that looks a connection up while parsing: the counter must see it, or a zero proves nothing.
_PROBE = """
import datetime as dt
from airflow.sdk import DAG
from airflow_provider_deltalite.hooks.deltalite import DeltaLiteHook
try:
    DeltaLiteHook("parse_time_lookup").get_storage_options()
except Exception:
    pass
dag = DAG("looks_up", schedule=None, start_date=dt.datetime(2026, 1, 1))
"""


@pytest.fixture(scope="module")
def parsed(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    home = tmp_path_factory.mktemp("airflow_home")
    probe = home / "probe" / "looks_up.py"
    probe.parent.mkdir()
    probe.write_text(_PROBE)
    out = subprocess.run(
        [sys.executable, "-c", _PARSE, *map(str, EXAMPLES), str(probe)],
        env=airflow_env(home, home / "dags"),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    result = json.loads(out.stdout.strip().splitlines()[-1])
    return {"probe": result.pop(str(probe)), **result}


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_example_dag_parses_without_errors_or_connection_lookups(path: Path, parsed: dict[str, Any]) -> None:
    result = parsed[str(path)]
    assert result["errors"] == {}
    assert len(result["dags"]) >= 1
    assert result["connection_lookups"] == 0


def test_the_examples_are_the_documented_ones(parsed: dict[str, Any]) -> None:
    dags = {Path(p).name: r["dags"] for p, r in parsed.items() if p != "probe"}
    assert dags["nightly_compaction.py"] == ["deltalite_nightly_compaction"]
    assert dags["retention_enforcement.py"] == ["deltalite_retention_enforcement"]
    assert dags["maintain_lake.py"] == ["deltalite_maintain_lake"]
    assert {"asset_watcher.py", "new_commits_trigger.py", "nightly_compaction.py", "retention_enforcement.py"} <= set(
        dags
    )


def test_connection_lookups_while_parsing_are_counted(parsed: dict[str, Any]) -> None:
    assert parsed["probe"]["dags"] == ["looks_up"]
    assert parsed["probe"]["connection_lookups"] >= 1


def test_the_declared_airflow_versions_agree_with_the_examples() -> None:
    # Airflow 3 only: the package metadata says so, and every example is written for it (airflow.sdk) and says so
    import tomllib
    from importlib.metadata import version

    from packaging.requirements import Requirement
    from packaging.version import Version

    pyproject = tomllib.loads((Path(__file__).resolve().parents[1] / "pyproject.toml").read_text())
    [airflow] = [r for r in map(Requirement, pyproject["project"]["dependencies"]) if r.name == "apache-airflow"]
    assert str(airflow.specifier) == ">=3.0.0"
    assert not airflow.specifier.contains(Version("2.11.2"))
    assert airflow.specifier.contains(Version(version("apache-airflow")))  # the Airflow the tests run on
    for path in EXAMPLES:
        text = path.read_text()
        assert "from airflow.sdk import " in text, path.name
        assert "Needs Airflow 3.0 or later (the ``airflow.sdk`` authoring interface)" in text, path.name
