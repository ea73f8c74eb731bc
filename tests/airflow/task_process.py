"""Running a DAG with ``dag.test()`` the way a worker runs its tasks: each task in a task process of its own under
Airflow's supervisor, which writes the task log file, with a secrets masker that knows only what that task
registered (``dag.test()``'s in-process runner would share one masker across tasks, and write no log files).

The same runner as the secrets sweep's DAG file (tests/airflow/secrets_dags/secrets_dags.py), for the DAG files of
other sweeps; importing this module defines no DAG.
"""

from __future__ import annotations

import json
import traceback
from pathlib import Path
from types import SimpleNamespace
from typing import Any


def append_record(out: Path, name: str, record: dict[str, Any]) -> None:
    """Append ``record`` as one JSON line to ``out/name``."""
    with (out / name).open("a") as handle:
        handle.write(json.dumps(record, default=str) + "\n")


def failure_record(context: Any) -> dict[str, Any]:
    """What an on_failure_callback sees of the task's exception: its type, ``str``, ``repr``, args and traceback."""
    exc = context.get("exception")
    return {
        "task": context["ti"].task_id,
        "type": type(exc).__name__,
        "str": str(exc),
        "repr": repr(exc),
        "args": [repr(a) for a in getattr(exc, "args", ())],
        "traceback": "".join(traceback.format_exception(exc)) if isinstance(exc, BaseException) else "",
    }


def decoded_metadata(run: Any, dag_id: str) -> dict[str, Any]:
    """What the metadata database holds about the run, decoded by Airflow's own models: XCom values and rendered
    template fields."""
    from airflow.models.renderedtifields import RenderedTaskInstanceFields as Rendered
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session

    with create_session() as session:
        xcoms = session.query(XComModel).filter(XComModel.dag_run_id == run.id)
        rendered = session.query(Rendered).filter(Rendered.dag_id == dag_id, Rendered.run_id == run.run_id)
        return {
            "xcom": [{"task": x.task_id, "key": x.key, "value": XComModel.deserialize_value(x)} for x in xcoms],
            "rendered": [{"task": r.task_id, "fields": r.rendered_fields} for r in rendered],
        }


def run_in_a_task_process(dag_file: str) -> Any:
    """A stand-in for `dag.test()`'s in-process runner that runs each task of the DAG in ``dag_file`` (a name in the
    DAGS_FOLDER) in a task process under `supervise_task`, talking to the in-process execution API."""

    def run(ti: Any, task: Any, client: Any = None) -> Any:
        from airflow.configuration import conf
        from airflow.executors.workloads import BundleInfo, ExecuteTask
        from airflow.models.taskinstance import TaskInstance
        from airflow.sdk.execution_time.supervisor import InProcessTestSupervisor, TaskRunResult, supervise_task
        from airflow.utils.session import create_session

        with create_session() as session:
            model = session.get(TaskInstance, ti.id)
            workload = ExecuteTask.make(model, dag_rel_path=dag_file, bundle_info=BundleInfo(name="dags-folder"))
        supervise_task(
            ti=workload.ti,
            bundle_info=workload.bundle_info,
            dag_rel_path=workload.dag_rel_path,
            token=workload.token,
            log_path=str(Path(conf.get("logging", "base_log_folder")) / workload.log_path),
            client=client or InProcessTestSupervisor._api_client(task.dag),
        )
        with create_session() as session:
            state = session.get(TaskInstance, ti.id).state
        return TaskRunResult(ti=SimpleNamespace(state=state, task=task), state=state, msg=None, error=None)

    return run


def run_dag(dag: Any, dag_file: str, out: Path) -> None:
    """Run ``dag`` once, each task in its own task process; write ``metadata.json`` to ``out`` and print the run's
    state and every task's state as one ``RESULT {json}`` line."""
    from airflow.sdk.execution_time import supervisor

    supervisor.run_task_in_process = run_in_a_task_process(dag_file)
    run = dag.test()
    states = {ti.task_id: str(ti.state) for ti in run.get_task_instances()}
    (out / "metadata.json").write_text(json.dumps(decoded_metadata(run, dag.dag_id), default=str))
    print("RESULT " + json.dumps({"run_id": run.run_id, "state": str(run.state), "tasks": states}), flush=True)
