"""DAGs that run NewVersionSensor in each mode under `dag.test()`, and the driver that runs them (``__main__``).

This folder is the DAGS_FOLDER of those runs (``dag.test()`` syncs the DAG from its bundle to the metadata database),
so it holds only this file. Every sensor is an `ObservedSensor`: the real sensor, which also appends what happened
(execute, each poke's result and baseline, execute_complete) to a JSON-lines file in ``$DELTALITE_TEST_MARKERS``, and
every sensor feeds a ``received`` task that records the XCom it pulled. The test reads those files to know when the
sensor is waiting (then it commits) and what each task saw.

Driver: ``python sensor_dags.py PLAN.json`` runs ``dag.test(run_after=..., run_conf=...)`` for each entry of the plan
in order, in this one process (the first run pays Airflow's start-up), and prints one ``RESULT {json}`` line per run.
"""

from __future__ import annotations

import datetime as dt
import json
import os
from pathlib import Path
from typing import Any

from airflow.sdk import DAG, Param, task

from airflow_provider_deltalite.sensors.new_version import NewVersionSensor

START = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)


def record(dag_id: str, **fields: Any) -> None:
    """Append one event to the run's marker file."""
    path = Path(os.environ["DELTALITE_TEST_MARKERS"]) / f"{dag_id}.jsonl"
    with path.open("a") as out:
        out.write(json.dumps(fields) + "\n")


class ObservedSensor(NewVersionSensor):
    """NewVersionSensor that records its calls for the test (the behaviour is the parent's)."""

    def execute(self, context: Any) -> Any:
        record(self.dag_id, task=self.task_id, event="execute", try_number=context["ti"].try_number)
        return super().execute(context)

    def poke(self, context: Any) -> Any:
        result = super().poke(context)
        baseline = self._baseline_or_none(context)
        record(self.dag_id, task=self.task_id, event="poke", done=bool(result), baseline=baseline)
        return result

    def _baseline_or_none(self, context: Any) -> int | None:
        try:
            return self.baseline_version(context)
        except Exception:  # the table does not exist yet
            return None

    def execute_complete(self, context: Any, event: dict[str, Any] | None = None) -> dict[str, Any]:
        record(self.dag_id, task=self.task_id, event="execute_complete")
        return super().execute_complete(context, event)


@task
def received(change: dict, *, name: str, dag_id: str) -> None:
    """What a downstream task pulls from the sensor's XCom."""
    record(dag_id, task=name, event="received", change=change)


def sensor_dag(dag_id: str, **sensor_kwargs: Any) -> DAG:
    with DAG(
        dag_id,
        schedule=None,
        start_date=START,
        params={"table_uri": Param("", type="string"), "since": Param("0", type="string")},
    ) as dag:
        wait = ObservedSensor(
            task_id="wait", table_uri="{{ params.table_uri }}", poke_interval=0.2, timeout=120, **sensor_kwargs
        )
        received.override(task_id="received")(wait.output, name="received", dag_id=dag_id)
    return dag


poke = sensor_dag("sensor_poke", mode="poke")
with poke:
    # The next batch: the baseline comes from the first sensor's XCom, through Jinja (so it arrives as text).
    wait_more = ObservedSensor(
        task_id="wait_more",
        table_uri="{{ params.table_uri }}",
        since="{{ ti.xcom_pull(task_ids='wait')['version'] }}",
        poke_interval=0.2,
        timeout=120,
    )
    poke.task_dict["received"] >> wait_more
    received.override(task_id="received_more")(wait_more.output, name="received_more", dag_id="sensor_poke")
reschedule = sensor_dag("sensor_reschedule", mode="reschedule")
deferrable = sensor_dag("sensor_deferrable", deferrable=True)
missing = sensor_dag("sensor_missing")
fail_if_missing = sensor_dag("sensor_fail_if_missing", fail_if_missing=True)
bad_since = sensor_dag("sensor_bad_since", since="{{ params.since }}")


def main(plan_path: str) -> None:
    dags = {d.dag_id: d for d in (poke, reschedule, deferrable, missing, fail_if_missing, bad_since)}
    plan = json.loads(Path(plan_path).read_text())
    for run in plan:
        dag = dags[run["dag_id"]]
        dr = dag.test(run_after=dt.datetime.fromisoformat(run["run_after"]), run_conf=run["conf"])
        states = {ti.task_id: str(ti.state) for ti in dr.get_task_instances()}
        print("RESULT " + json.dumps({"dag_id": dag.dag_id, "state": str(dr.state), "tasks": states}), flush=True)


if __name__ == "__main__":
    import sys

    main(sys.argv[1])
