"""``make demo``: a small-file Delta table, the ``deltalite_nightly_compaction`` example DAG run with
``airflow dags test`` on local Spark in a throw-away Airflow home, and a before/after summary.

The table is written by deltalite's own engine (`create_small_file_table`): one commit per file, so it ends up as
many small files, the way a streaming or micro-batch writer leaves a table. The DAG optimizes it, Z-orders it and
vacuums it with a retention of 0 hours (allowed here, since nobody else reads the demo table). The stats printed come
from the tasks' XComs, read back from the Airflow metadata database.

Example:
    $ python -m airflow_provider_deltalite demo --workdir /tmp/deltalite-demo --keep
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

DAG_ID = "deltalite_nightly_compaction"
DAG_FILE = "nightly_compaction.py"
PARTITIONS = ("2026-11-20", "2026-11-21")
ZORDER_COLUMNS = ("user_id", "amount")
# Test JVMs live seconds: C1-only JIT and the serial GC start them seconds sooner on a small machine.
FAST_JVM_CONF = {
    "spark.driver.extraJavaOptions": "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC",
    "spark.executor.extraJavaOptions": "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC",
    "spark.ui.enabled": "false",
}

_SCHEMA = {
    "type": "struct",
    "fields": [
        {"name": "event_id", "type": "long", "nullable": False, "metadata": {}},
        {"name": "user_id", "type": "long", "nullable": False, "metadata": {}},
        {"name": "amount", "type": "double", "nullable": True, "metadata": {}},
        {"name": "country", "type": "string", "nullable": True, "metadata": {}},
        {"name": "date", "type": "string", "nullable": False, "metadata": {}},
    ],
}
_COUNTRIES = ("DE", "FR", "NL", "PL", "SE", "US", None)


def create_small_file_table(
    uri: str,
    *,
    files: int = 40,
    rows_per_file: int = 250,
    storage_options: Mapping[str, Any] | None = None,
) -> None:
    """Create a Delta table at ``uri`` partitioned by ``date`` with ``files`` small files, one commit each.

    Deterministic rows (no randomness): file ``i`` holds events ``i*rows_per_file ...`` of partition
    ``PARTITIONS[i % 2]``. Written with deltalite's engine: version 0 holds protocol and metadata, each later
    version appends one file through a `Transaction`.

    Raises:
        FileExistsError: a table exists at ``uri`` already.
    """
    import pyarrow as pa

    from airflow_provider_deltalite.engine.data_file_writer import WriterOptions
    from airflow_provider_deltalite.engine.rewrite import TableContext, write_data_file
    from airflow_provider_deltalite.engine.storage import Storage
    from airflow_provider_deltalite.table import DeltaTable

    storage = Storage(uri, storage_options)
    now = int(time.time() * 1000)
    version0 = [
        {"commitInfo": {"timestamp": now, "operation": "CREATE TABLE", "operationParameters": {}}},
        {"protocol": {"minReaderVersion": 1, "minWriterVersion": 2}},
        {
            "metaData": {
                "id": str(uuid.uuid4()),
                "format": {"provider": "parquet", "options": {}},
                "schemaString": json.dumps(_SCHEMA),
                "partitionColumns": ["date"],
                "configuration": {},
                "createdTime": now,
            }
        },
    ]
    body = "".join(json.dumps(action, separators=(",", ":")) + "\n" for action in version0).encode()
    storage.write_create_only("_delta_log/00000000000000000000.json", body)
    table = DeltaTable(uri, storage_options=storage_options)
    for i in range(files):
        start = i * rows_per_file
        ids = list(range(start, start + rows_per_file))
        rows = pa.table(
            {
                "event_id": pa.array(ids, pa.int64()),
                "user_id": pa.array([(n * 7919) % 1000 for n in ids], pa.int64()),
                "amount": pa.array([None if n % 13 == 0 else round((n * 37 % 10000) / 100, 2) for n in ids]),
                "country": pa.array([_COUNTRIES[n % len(_COUNTRIES)] for n in ids], pa.string()),
            }
        )
        snapshot = table.snapshot()
        add = write_data_file(
            TableContext.from_snapshot(snapshot), {"date": PARTITIONS[i % len(PARTITIONS)]}, [rows], WriterOptions()
        )
        assert add is not None
        txn = table.transaction(snapshot)
        txn.add({**add, "dataChange": True})
        txn.commit("WRITE", {"mode": "Append", "partitionBy": json.dumps(["date"])})


def airflow_env(home: str | os.PathLike[str], dags_folder: str | os.PathLike[str]) -> dict[str, str]:
    """Environment for ``airflow`` subprocesses in a throw-away home: no examples, this interpreter's bin on PATH."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AIRFLOW__", "AIRFLOW_CONN_", "AIRFLOW_VAR_"))}
    env.update(
        AIRFLOW_HOME=str(home),
        AIRFLOW__CORE__LOAD_EXAMPLES="False",
        AIRFLOW__CORE__UNIT_TEST_MODE="False",
        AIRFLOW__CORE__DAGS_FOLDER=str(dags_folder),
        PATH=f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}",
    )
    return env


_READ_XCOMS = """
import json, sys
from airflow.models.dagrun import DagRun
from airflow.models.taskinstance import TaskInstance
from airflow.models.xcom import XComModel
from airflow.utils.session import create_session
with create_session() as session:
    run = session.query(DagRun).filter(DagRun.dag_id == sys.argv[1]).order_by(DagRun.id.desc()).first()
    out = {"run_id": None, "state": None, "tasks": {}, "xcoms": {}}
    if run is not None:
        out["run_id"], out["state"] = run.run_id, str(run.state)
        tis = session.query(TaskInstance).filter(TaskInstance.dag_id == run.dag_id, TaskInstance.run_id == run.run_id)
        out["tasks"] = {ti.task_id: str(ti.state) for ti in tis}
        rows = session.query(XComModel).filter(XComModel.dag_run_id == run.id, XComModel.key == "return_value")
        out["xcoms"] = {row.task_id: XComModel.deserialize_value(row) for row in rows}
print(json.dumps(out))
"""


def read_return_values(env: Mapping[str, str], dag_id: str) -> dict[str, Any]:
    """The latest run of ``dag_id`` in the Airflow home of ``env``: ``{"run_id", "state", "tasks": {task: state},
    "xcoms": {task: return value}}``."""
    out = subprocess.run(
        [sys.executable, "-c", _READ_XCOMS, dag_id], env=dict(env), capture_output=True, text=True, check=False
    )
    if out.returncode != 0:
        raise RuntimeError(f"reading XComs failed: {out.stderr.strip().splitlines()[-1:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def example_dags_dir() -> Path:
    """The repository's example_dags directory (next to the package in a checkout or editable install)."""
    return Path(__file__).resolve().parents[1] / "example_dags"


def _files(table_uri: str) -> tuple[int, int, int]:
    """Live files, their bytes, and rows of the latest version."""
    from airflow_provider_deltalite.table import DeltaTable

    snapshot = DeltaTable(table_uri).snapshot()
    sizes = snapshot.files.column("size").to_pylist()
    rows = sum(json.loads(s)["numRecords"] for s in snapshot.files.column("stats").to_pylist())
    return len(sizes), sum(sizes), rows


def _data_files_on_disk(table_path: Path) -> int:
    return sum(1 for p in table_path.rglob("*.parquet") if "_delta_log" not in p.parts)


def _rows(table_uri: str) -> list[str]:
    from airflow_provider_deltalite.engine.scan import scan
    from airflow_provider_deltalite.table import DeltaTable

    rows, _ = scan(DeltaTable(table_uri).snapshot())
    return sorted(map(repr, rows.to_pylist()))


def _run(step: str, cmd: Sequence[str], env: Mapping[str, str], log: Path) -> None:
    with log.open("a") as handle:
        handle.write(f"\n$ {' '.join(cmd)}\n")
        handle.flush()
        code = subprocess.run(list(cmd), env=dict(env), stdout=handle, stderr=subprocess.STDOUT, check=False).returncode
    if code != 0:
        tail = log.read_text(errors="replace").splitlines()[-40:]
        print("\n".join(tail), file=sys.stderr)
        raise SystemExit(f"demo: {step} failed (exit code {code}); full output in {log}")


def run_demo(workdir: str | None = None, *, keep: bool = False, files: int = 40, rows_per_file: int = 250) -> int:
    """Run the demo; returns 0 when the DAG succeeded and every row survived. Prints the summary on stdout."""
    base = Path(workdir or tempfile.mkdtemp(prefix="deltalite-demo-")).resolve()
    base.mkdir(parents=True, exist_ok=True)
    home, dags, table_path, log = base / "airflow", base / "dags", base / "events", base / "demo.log"
    try:
        dags.mkdir(exist_ok=True)
        shutil.copyfile(example_dags_dir() / DAG_FILE, dags / DAG_FILE)
        env = airflow_env(home, dags)
        airflow = str(Path(sys.executable).with_name("airflow"))
        table = str(table_path)

        print(f"work directory: {base}" + ("" if keep or workdir else " (removed at the end)"))
        print(f"1. creating {table} with deltalite's engine: {files} commits of {rows_per_file} rows each")
        create_small_file_table(table, files=files, rows_per_file=rows_per_file)
        before_files, before_bytes, before_rows = _files(table)
        before = _rows(table)
        print(f"   before: {before_files} files, {before_bytes} bytes, {before_rows} rows")

        print(f"2. airflow db migrate (AIRFLOW_HOME={home})")
        _run("airflow db migrate", [airflow, "db", "migrate"], env, log)

        conf = {
            "table_uri": table,
            "zorder_columns": list(ZORDER_COLUMNS),
            "min_small_files": 2,
            "retention_hours": 0,
            "enforce_retention_duration": False,
            "spark_conf": FAST_JVM_CONF,
        }
        print(f"3. airflow dags test {DAG_ID} (optimize -> Z-order -> vacuum, each a spark-submit on local[*])")
        started = time.monotonic()
        _run("airflow dags test", [airflow, "dags", "test", DAG_ID, "-c", json.dumps(conf)], env, log)
        print(f"   DAG run finished in {time.monotonic() - started:.0f} s")

        result = read_return_values(env, DAG_ID)
        xcoms = result["xcoms"]
        optimize, zorder, vacuum = xcoms.get("optimize"), xcoms.get("zorder"), xcoms.get("vacuum")
        after_files, after_bytes, after_rows = _files(table)
        same = _rows(table) == before
        on_disk = _data_files_on_disk(table_path)

        print("\n4. OptimizeStats (XCom of task optimize):")
        print(json.dumps(optimize, indent=2, sort_keys=True))
        print("\n   Z-order (XCom of task zorder):")
        print(json.dumps({k: zorder.get(k) for k in ("numFilesRemoved", "numFilesAdded", "zOrderStats")}, indent=2))
        print("\n   VacuumStats (XCom of task vacuum):")
        print(json.dumps(vacuum, indent=2, sort_keys=True))
        print(
            f"\n   before: {before_files} files, {before_bytes} bytes, {before_rows} rows"
            f"\n   after:  {after_files} files, {after_bytes} bytes, {after_rows} rows; {on_disk} data files on disk"
        )
        ok = result["state"] == "success" and same and vacuum is not None
        print(
            f"demo: {before_files} files -> {after_files}, {after_rows} rows identical: {'yes' if same else 'NO'}; "
            f"OPTIMIZE {optimize['numFilesRemoved']} -> {optimize['numFilesAdded']}, "
            f"Z-ORDER {zorder['numFilesRemoved']} -> {zorder['numFilesAdded']}, "
            f"VACUUM deleted {vacuum['numFilesToDelete']} files"
        )
        return 0 if ok else 1
    finally:
        if not (keep or workdir):
            shutil.rmtree(base, ignore_errors=True)
