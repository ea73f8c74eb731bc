"""The DAG of the secrets sweep (tests/airflow/test_secrets.py) and the driver that runs it (``__main__``).

This folder is the DAGS_FOLDER of the sweep's ``dag.test()`` run, so it holds only this file. Every task reads the
same S3 table (on moto) through deltalite connections holding distinctive credentials, defined by the test as
``AIRFLOW_CONN_*`` variables:

- ``lake`` (S3 key id, secret and session token, and login and password fields): the successful runs and the
  failures before and inside the Spark job;
- ``lake_uri``: an Airflow URI-format connection, ``deltalite://s3://user:password@bucket?__extra__=...``, whose extra
  holds Azure, GCS and S3 secret fields (all parsed and masked; the Azure and GCS ones do not apply to S3: refused);
- ``lake_host_userinfo``: a base URI (host) ``s3://user:password@bucket`` (refused);
- ``lake_glue``: the credentials of ``lake`` with a Glue database as base URI (``glue://<database>``, on moto's
  Glue), whose ``events`` is the table above as Spark's DeltaCatalog registers it and ``clicks`` a Parquet table.

Spark runs through ``spark3-submit``, a wrapper the test puts first on PATH that records the command lines. Each
task runs in a task process of its own under Airflow's supervisor, which writes the task log file
(`run_in_a_task_process`). Every failed task appends its exception (``str``, ``repr``, ``args`` and traceback) to
``failures.jsonl``, and the deferrable sensor the trigger it defers with (``serialize()``) to ``triggers.jsonl``, both
in ``$DELTALITE_SECRETS_OUT``.

Driver: ``python secrets_dags.py`` runs ``dag.test()`` once, writes ``metadata.json`` (what the metadata database
holds about the run, decoded by Airflow's models) and prints one ``RESULT {json}`` line.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import traceback
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from airflow.sdk import DAG

from airflow_provider_deltalite.operators.optimize import OptimizeOperator
from airflow_provider_deltalite.operators.vacuum import VacuumOperator
from airflow_provider_deltalite.operators.zorder import ZOrderOperator
from airflow_provider_deltalite.sensors.new_version import NewVersionSensor

DAG_ID = "deltalite_secrets_sweep"
OUT = Path(os.environ.get("DELTALITE_SECRETS_OUT", "."))
# Spark configuration of every job (JVM flags, private temp dirs): set by the test, parsed with the DAG.
SPARK_CONF: dict[str, str] = json.loads(os.environ.get("DELTALITE_SECRETS_SPARK_CONF", "{}"))
RESULT_URI = os.environ.get("DELTALITE_SECRETS_RESULT_URI", "s3://deltalite-results")
CONNECTIONS = ("lake_uri", "lake_host_userinfo")


def _append(name: str, record: dict[str, Any]) -> None:
    with (OUT / name).open("a") as out:
        out.write(json.dumps(record, default=str) + "\n")


def record_failure(context: Any) -> None:
    """on_failure_callback: the exception as the task saw it."""
    exc = context.get("exception")
    _append(
        "failures.jsonl",
        {
            "task": context["ti"].task_id,
            "type": type(exc).__name__,
            "str": str(exc),
            "repr": repr(exc),
            "args": [repr(a) for a in getattr(exc, "args", ())],
            "traceback": "".join(traceback.format_exception(exc)) if isinstance(exc, BaseException) else "",
        },
    )


class RecordingSensor(NewVersionSensor):
    """NewVersionSensor that records the trigger it defers with (the behaviour is the parent's)."""

    def defer(self, *, trigger: Any, **kwargs: Any) -> Any:
        classpath, trigger_kwargs = trigger.serialize()
        _append("triggers.jsonl", {"task": self.task_id, "classpath": classpath, "kwargs": trigger_kwargs})
        return super().defer(trigger=trigger, **kwargs)


with DAG(
    DAG_ID,
    schedule=None,
    start_date=dt.datetime(2026, 1, 1, tzinfo=dt.UTC),
    default_args={"on_failure_callback": record_failure, "retries": 0},
) as dag:
    local = {"deltalite_conn_id": "lake", "spark_conn_id": "spark_wrapped", "conf": SPARK_CONF}
    # Successes: OPTIMIZE, Z-order and VACUUM (each a spark-submit in local mode: credentials in its environment),
    # then a poke-mode sensor that finds the data commits, then a deferrable one that waits in NewVersionTrigger
    # until the test appends a commit.
    optimize = OptimizeOperator(task_id="optimize", table_uri="events", **local)
    zorder = ZOrderOperator(task_id="zorder", table_uri="events", columns=["user_id", "amount"], **local)
    vacuum = VacuumOperator(
        task_id="vacuum", table_uri="events", retention_hours=0, enforce_retention_duration=False, **local
    )
    new_data = NewVersionSensor(
        task_id="new_data", table_uri="events", deltalite_conn_id="lake", since=0, poke_interval=0.2,
        timeout=60, mode="poke",
    )  # fmt: skip
    deferred = RecordingSensor(
        task_id="deferred", table_uri="events", deltalite_conn_id="lake", deferrable=True, poke_interval=0.2,
        timeout=120, since="{{ ti.xcom_pull(task_ids='new_data')['version'] }}",
    )  # fmt: skip
    optimize >> zorder >> vacuum >> new_data >> deferred

    # Failures in the worker, before any JVM: the engine's typed error is the task's exception.
    OptimizeOperator(task_id="optimize_bad_where", table_uri="events", where="amount > 3", **local)
    ZOrderOperator(task_id="zorder_bad_column", table_uri="events", columns=["no_such_column"], **local)
    VacuumOperator(
        task_id="vacuum_bad_retention", table_uri="events", retention_hours=0, min_reclaimable_bytes=0, **local
    )
    NewVersionSensor(
        task_id="sensor_missing", table_uri="missing", deltalite_conn_id="lake", fail_if_missing=True,
        poke_interval=0.2, timeout=30, mode="poke",
    )  # fmt: skip
    # A failure inside the Spark job: the driver's one-line error becomes the task's exception.
    OptimizeOperator(
        task_id="optimize_fails_in_spark", table_uri="events", where="amount > 3", preflight=False, **local
    )
    # Cluster deploy mode on YARN: credentials go in a 0600 file shipped with --files. There is no YARN here: the
    # wrapper records the command and the file, then fails as spark-submit would.
    OptimizeOperator(
        task_id="optimize_cluster_mode", table_uri="events", deltalite_conn_id="lake",
        spark_conn_id="spark_yarn_cluster", result_uri=RESULT_URI,
        preflight=False, conf=SPARK_CONF, durable=False,  # durable YARN cluster mode needs the RM REST API
    )  # fmt: skip
    # Connections that cannot be used: the operators' shared resolve() and the sensor fail with InvalidConnection.
    # VACUUM plans nothing in the worker without a threshold: before the fix it took such a URI to spark-submit.
    OptimizeOperator(task_id="optimize_lake_uri", table_uri="events", **{**local, "deltalite_conn_id": "lake_uri"})
    VacuumOperator(
        task_id="vacuum_lake_host_userinfo", table_uri="events", **{**local, "deltalite_conn_id": "lake_host_userinfo"}
    )
    # Tables by their Glue name: resolved in the worker with the connection's credentials (Glue GetTable), then
    # planned there (the threshold skips Spark) or watched; a missing table and a table of another format fail.
    glue = {**local, "deltalite_conn_id": "lake_glue"}
    optimize_glue = OptimizeOperator(task_id="optimize_glue", table_uri="events", min_small_files=1000, **glue)
    sensor_glue = NewVersionSensor(
        task_id="sensor_glue", table_uri="events", deltalite_conn_id="lake_glue", since=0, poke_interval=0.2,
        timeout=30, mode="poke",
    )  # fmt: skip
    [optimize_glue, sensor_glue] >> optimize  # both see the table as created: six files, versions 1 to 6
    OptimizeOperator(task_id="optimize_glue_missing", table_uri="missing", **glue)
    NewVersionSensor(
        task_id="sensor_glue_not_delta", table_uri="clicks", deltalite_conn_id="lake_glue", since=0,
        poke_interval=0.2, timeout=10, mode="poke",
    )  # fmt: skip
    for conn_id in CONNECTIONS:
        NewVersionSensor(
            task_id=f"sensor_{conn_id}", table_uri="events", deltalite_conn_id=conn_id, poke_interval=0.2,
            timeout=10, mode="poke", since=0,
        )  # fmt: skip


def decoded_metadata(run: Any) -> dict[str, Any]:
    """What the metadata database holds about the run, decoded by Airflow's own models: XCom values, rendered
    template fields and triggers (kwargs decrypted)."""
    from airflow.models.renderedtifields import RenderedTaskInstanceFields as Rendered
    from airflow.models.trigger import Trigger
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session

    with create_session() as session:
        xcoms = session.query(XComModel).filter(XComModel.dag_run_id == run.id)
        rendered = session.query(Rendered).filter(Rendered.dag_id == DAG_ID, Rendered.run_id == run.run_id)
        return {
            "xcom": [{"task": x.task_id, "key": x.key, "value": XComModel.deserialize_value(x)} for x in xcoms],
            "rendered": [{"task": r.task_id, "fields": r.rendered_fields} for r in rendered],
            "trigger": [{"id": t.id, "classpath": t.classpath, "kwargs": t.kwargs} for t in session.query(Trigger)],
        }


def run_in_a_task_process(ti: Any, task: Any, client: Any = None) -> Any:
    """Stand-in for `dag.test()`'s in-process runner: the task runs the way a worker runs it, in a process of its own
    under Airflow's supervisor (`supervise_task`), which writes the task log file, with a secrets masker that knows
    only what that task registered. The supervisor talks to the in-process execution API (no API server)."""
    from airflow.configuration import conf
    from airflow.executors.workloads import BundleInfo, ExecuteTask
    from airflow.models.taskinstance import TaskInstance
    from airflow.models.trigger import Trigger
    from airflow.sdk.execution_time.comms import DeferTask
    from airflow.sdk.execution_time.supervisor import InProcessTestSupervisor, TaskRunResult, supervise_task
    from airflow.sdk.serde import serialize
    from airflow.utils.session import create_session

    with create_session() as session:
        model = session.get(TaskInstance, ti.id)
        workload = ExecuteTask.make(model, dag_rel_path=Path(__file__).name, bundle_info=BundleInfo(name="dags-folder"))
    supervise_task(
        ti=workload.ti,
        bundle_info=workload.bundle_info,
        dag_rel_path=workload.dag_rel_path,
        token=workload.token,
        log_path=str(Path(conf.get("logging", "base_log_folder")) / workload.log_path),
        client=client or InProcessTestSupervisor._api_client(task.dag),
    )
    with create_session() as session:
        model = session.get(TaskInstance, ti.id)
        state, msg = model.state, None
        if state == "deferred":  # dag.test() runs the trigger in line, then resumes the task
            trigger = session.get(Trigger, model.trigger_id)
            msg = DeferTask.model_construct(
                classpath=trigger.classpath,
                trigger_kwargs=serialize(trigger.kwargs),
                next_method=model.next_method,
                next_kwargs=model.next_kwargs,
            )
    return TaskRunResult(ti=SimpleNamespace(state=state, task=task), state=state, msg=msg, error=None)


def main() -> None:
    """Run the DAG once, each task in its own task process; print the run's state and every task's state, and write
    the decoded metadata."""
    from airflow.sdk.execution_time import supervisor

    supervisor.run_task_in_process = run_in_a_task_process
    run = dag.test()
    states = {ti.task_id: str(ti.state) for ti in run.get_task_instances()}
    (OUT / "metadata.json").write_text(json.dumps(decoded_metadata(run), default=str))
    print("RESULT " + json.dumps({"state": str(run.state), "tasks": states}), flush=True)


if __name__ == "__main__":
    main()
