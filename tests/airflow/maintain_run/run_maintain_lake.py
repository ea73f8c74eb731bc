"""Runs the example DAG example_dags/maintain_lake.py with ``dag.test()`` (tests/airflow/test_maintenance_operator.py).

Usage: ``python run_maintain_lake.py OUT RUN_CONFS_JSON`` in a migrated Airflow home whose DAGS_FOLDER is the
repository's example_dags: one run per conf of the JSON list, one after the other. Writes ``OUT`` (a JSON list, a
record per run): the run's state, every task instance's state by ``task_id[map_index]``, the XCom return values by
the same key, decoded by Airflow's own model, and whether the run left every file under the prefixes as it was.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from pathlib import Path


def main(out: str, run_confs: str) -> None:
    from airflow.configuration import conf
    from airflow.models import DagBag
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session

    from tests.helpers import tree_state

    path = Path(conf.get("core", "dags_folder")) / "maintain_lake.py"
    dag = DagBag(dag_folder=str(path)).get_dag("deltalite_maintain_lake")

    def key(ti: object) -> str:
        index = getattr(ti, "map_index", -1)
        return ti.task_id + (f"[{index}]" if index >= 0 else "")  # type: ignore[attr-defined]

    def tree(prefix: str) -> str:
        return hashlib.sha256(repr(sorted(tree_state(Path(prefix)).items())).encode()).hexdigest()

    records = []
    for run_conf in json.loads(run_confs):
        prefixes = run_conf["prefixes"]
        tree_before = [tree(p) for p in prefixes]
        run = dag.test(run_conf=run_conf)
        with create_session() as session:
            xcoms = session.query(XComModel).filter(XComModel.dag_run_id == run.id, XComModel.key == "return_value")
            values = {key(x): XComModel.deserialize_value(x) for x in xcoms}
        states = {key(ti): str(ti.state) for ti in run.get_task_instances()}
        records.append(
            {
                "state": str(run.state),
                "tasks": states,
                "xcom": values,
                "tree_unchanged": [tree(p) for p in prefixes] == tree_before,
            }
        )
    Path(out).write_text(json.dumps(records, default=str))


if __name__ == "__main__":
    os.environ.pop("SPARK_REMOTE", None)
    main(sys.argv[1], sys.argv[2])
