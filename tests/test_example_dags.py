"""Every example DAG parses in a real Airflow (a throw-away AIRFLOW_HOME) without import errors."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = sorted((Path(__file__).resolve().parents[1] / "example_dags").glob("example_*.py"))

_PARSE = """
import json, sys
from airflow.models import DagBag
bag = DagBag(dag_folder=sys.argv[1])
print(json.dumps({"errors": {k: str(v)[:300] for k, v in bag.import_errors.items()}, "dags": sorted(bag.dag_ids)}))
"""


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_example_dag_parses(path: Path, tmp_path: Path) -> None:
    env = {
        **os.environ,
        "AIRFLOW_HOME": str(tmp_path),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__CORE__UNIT_TEST_MODE": "False",
    }
    out = subprocess.run(
        [sys.executable, "-c", _PARSE, str(path)], env=env, capture_output=True, text=True, timeout=300, check=False
    )
    assert out.returncode == 0, out.stderr[-2000:]
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result == {"errors": {}, "dags": [path.stem]}


def test_there_are_example_dags() -> None:
    assert [p.name for p in EXAMPLES] == ["example_deltalite_nightly_compaction.py"]
