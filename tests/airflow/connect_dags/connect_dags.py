"""The DAG of the Spark Connect operator tests (tests/airflow/test_connect_operators.py, test_connect_secrets.py) and
the driver that runs it (``__main__``).

This folder is the DAGS_FOLDER of the run, so it holds only this file. The test defines the connections as
``AIRFLOW_CONN_*`` variables: ``lake`` (a deltalite connection: the base URI and the storage credentials),
``spark_connect`` (the Spark provider's ``spark_connect`` type, naming the test's server), ``spark_unreachable`` (an
``sc://`` address nothing listens on) and, for the sweep, ``spark_bad_token`` (the server with a wrong token).

- ``optimize >> zorder >> vacuum`` on the table ``events``, each through ``spark_connect``, and ``zorder_shuffle`` on
  the table ``shuffled``: Z-order through the clustering shuffle (`ShuffledZOrder`);
- ``optimize_skipped``: through the unreachable address on the table ``compacted``, which has nothing to compact;
- the failures, each on the table ``idle`` (so that "nothing written" is checked on a table nothing else touches):
  ``optimize_unreachable``, ``optimize_bad_where`` (without the preflight, so the run on Connect raises it) and,
  when ``$DELTALITE_CONNECT_BAD_TOKEN`` is set, ``optimize_bad_token``;
- when ``$DELTALITE_CONNECT_GLUE`` is set, ``optimize_glue``: OPTIMIZE of the table ``glued`` by its Glue name,
  through ``lake_glue`` (the credentials of ``lake``, a Glue database as base URI).

Every operator runs under `probe`: while it executes, a thread lists the task process's descendants (their command
lines) every 20 ms, and a canary child (``sleep``) is ended once the listing saw it (or after 10 s); the listing is
recorded with whether PySpark's Java gateway exists in the task process, to ``probes.jsonl`` in
``$DELTALITE_CONNECT_OUT``. Failed tasks record their exception in ``failures.jsonl``.

Driver: ``python connect_dags.py`` runs ``dag.test()`` once, each task in a task process of its own
(`tests.airflow.task_process`), and prints one ``RESULT {json}`` line.
"""

from __future__ import annotations

import datetime as dt
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from airflow.sdk import DAG

from airflow_provider_deltalite.operators.optimize import OptimizeOperator
from airflow_provider_deltalite.operators.vacuum import VacuumOperator
from airflow_provider_deltalite.operators.zorder import ZOrderOperator
from tests.airflow.task_process import append_record, failure_record, run_dag

DAG_ID = "deltalite_spark_connect"
OUT = Path(os.environ.get("DELTALITE_CONNECT_OUT", "."))
BAD_TOKEN = bool(os.environ.get("DELTALITE_CONNECT_BAD_TOKEN"))
GLUE = bool(os.environ.get("DELTALITE_CONNECT_GLUE"))
CANARY = ("sleep", "30")


def _descendants(root: int) -> dict[int, list[str]]:
    """The command lines of every process below ``root``, by process id."""
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as handle:
                    parents[int(entry)] = int(handle.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
    found: dict[int, list[str]] = {}
    for pid in parents:
        up = pid
        while up in parents and up not in (0, 1, root):
            up = parents[up]
        if up == root and pid != root:
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as handle:
                    raw = handle.read()
            except OSError:
                continue
            if raw:  # empty between fork and exec, and once the process exited
                found[pid] = [p.decode(errors="replace") for p in raw.rstrip(b"\0").split(b"\0")]
    return found


def probe(operator_class: type) -> type:
    """``operator_class`` whose execute is watched for child processes and a Java gateway (see the module doc)."""

    class Probed(operator_class):  # type: ignore[misc, valid-type]
        def execute(self, context: Any) -> Any:
            me, seen, stop = os.getpid(), {}, threading.Event()

            def watch() -> None:
                while not stop.is_set():
                    seen.update(_descendants(me))
                    stop.wait(0.02)

            watcher = threading.Thread(target=watch, daemon=True)
            watcher.start()
            canary = subprocess.Popen(CANARY)
            try:
                return super().execute(context)
            finally:
                deadline = time.monotonic() + 10
                while seen.get(canary.pid) != list(CANARY) and time.monotonic() < deadline:
                    time.sleep(0.05)
                canary.kill()
                canary.wait()
                stop.set()
                watcher.join()
                pyspark = sys.modules.get("pyspark")
                gateway = pyspark.SparkContext._gateway if pyspark is not None else None
                append_record(
                    OUT,
                    "probes.jsonl",
                    {
                        "task": self.task_id,
                        "pid": me,
                        "children": sorted(seen.values()),
                        "gateway": repr(gateway),
                        "pyspark_connect_loaded": "pyspark.sql.connect.session" in sys.modules,
                    },
                )

    Probed.__name__ = operator_class.__name__
    return Probed


class ShuffledZOrder(probe(ZOrderOperator)):  # type: ignore[misc]
    """Z-order through the clustering shuffle (`SparkExecutor.map_reduce`) whatever the partition size: the threshold
    is lowered in this task process, and the shuffles run are counted to ``shuffles.jsonl``."""

    def execute(self, context: Any) -> Any:
        from airflow_provider_deltalite.executors.spark import SparkExecutor
        from airflow_provider_deltalite.maintenance.clustering import shuffle

        assert hasattr(shuffle, "SHUFFLE_ABOVE_BYTES"), "the shuffle threshold moved: point this test at it"
        shuffle.SHUFFLE_ABOVE_BYTES = 0
        calls: list[int] = []
        original = SparkExecutor.map_reduce

        def counted(executor: Any, *args: Any, **kwargs: Any) -> Any:
            calls.append(1)
            return original(executor, *args, **kwargs)

        SparkExecutor.map_reduce = counted  # type: ignore[method-assign]
        try:
            return super().execute(context)
        finally:
            SparkExecutor.map_reduce = original  # type: ignore[method-assign]
            append_record(OUT, "shuffles.jsonl", {"task": self.task_id, "map_reduce_calls": len(calls)})


def record_failure(context: Any) -> None:
    append_record(OUT, "failures.jsonl", failure_record(context))


Optimize, ZOrder, Vacuum = probe(OptimizeOperator), probe(ZOrderOperator), probe(VacuumOperator)

with DAG(
    DAG_ID,
    schedule=None,
    start_date=dt.datetime(2026, 1, 1, tzinfo=dt.UTC),
    default_args={"on_failure_callback": record_failure, "retries": 0},
) as dag:
    connect = {"deltalite_conn_id": "lake", "spark_conn_id": "spark_connect"}
    optimize = Optimize(task_id="optimize", table_uri="events", **connect)
    # executor_memory means nothing to a Connect server: the task log says it was ignored
    zorder = ZOrder(
        task_id="zorder", table_uri="events", columns=["user_id", "amount"], executor_memory="1g", **connect
    )
    vacuum = Vacuum(
        task_id="vacuum", table_uri="events", retention_hours=0, enforce_retention_duration=False, **connect
    )
    optimize >> zorder >> vacuum
    # the shuffle path of Z-order, on a table of its own
    ShuffledZOrder(task_id="zorder_shuffle", table_uri="shuffled", columns=["user_id", "amount"], **connect)

    # nothing to compact in ``compacted``: the preflight decides in the worker, no server is contacted
    Optimize(
        task_id="optimize_skipped", table_uri="compacted", deltalite_conn_id="lake", spark_conn_id="spark_unreachable"
    )
    Optimize(
        task_id="optimize_unreachable", table_uri="idle", deltalite_conn_id="lake", spark_conn_id="spark_unreachable"
    )
    # the engine's error from the run on Connect (no preflight to catch it first)
    Optimize(task_id="optimize_bad_where", table_uri="idle", where="amount > 3", preflight=False, **connect)
    if BAD_TOKEN:
        Optimize(
            task_id="optimize_bad_token", table_uri="idle", deltalite_conn_id="lake", spark_conn_id="spark_bad_token"
        )
    if GLUE:
        # the name is resolved in the worker: the Connect session works on the table's location
        Optimize(
            task_id="optimize_glue", table_uri="glued", deltalite_conn_id="lake_glue", spark_conn_id="spark_connect"
        )


if __name__ == "__main__":
    run_dag(dag, Path(__file__).name, OUT)
