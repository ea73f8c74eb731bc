"""Sustained load on one Delta table on moto's S3 API (issue 9, item 5).

For ``--seconds`` seconds, as separate OS processes against one table:

- 4 appenders: blind appends through the engine's `Transaction` (one Parquet file with stats per commit, written by
  `write_data_file`), one commit every 0.5-1 s each; every row has a unique ``id`` (writer, seq);
- 3 OPTIMIZE loops: ``optimize(DeltaTable(...))`` with ``min_file_size = target_size`` = `COMPACT_BYTES`, so new
  small files always give them work; a lost race is a typed `ConcurrentModification` (counted);
- 1 VACUUM loop: ``vacuum(DeltaTable(...))`` with the table's own retention, which the table sets at creation to
  `RETENTION_S` seconds (``delta.deletedFileRetentionDuration``; the default 7 days would delete nothing), so files
  OPTIMIZE removed are really deleted during the run; the executor it is given is a pass-through that records every
  path the store confirmed deleted;
- 1 sensor: ``NewVersionSensor(since=<last reported>).poke(context)`` in a loop, through a ``deltalite``
  Airflow connection given as ``AIRFLOW_CONN_SOAKLAKE`` (no metadata database is needed for a poke).

Every process logs what it did as JSON lines. When the time is up the writers stop, then the sensor catches up (it
pokes until a poke finds nothing new), and `analyze` checks, with exact values:

1. rows: the ids delta-rs 1.6.3 reads from the final version == the ids of every append reported committed, each once
   (an append may fail only with a typed error, and its ids are then not there);
2. versions: 0..latest all exist and parse, no two commits share a txnId, and every version after 0 is claimed by
   exactly one loop's report, whose commit matches it (an append: its txnId, WRITE, its one file; OPTIMIZE: the
   operation and the numbers of files removed and added; VACUUM: START/END);
3. files: no path a VACUUM deleted is live in any version from that VACUUM's snapshot on, every live file of the final
   version exists, and delta-rs reads the final version. The protocol's own assumption is that no writer takes longer
   than the retention between writing a file and committing it; when one does and VACUUM deletes the file meanwhile,
   the violation says so (with the writer's write-to-commit time);
4. sensor: the versions it reported, concatenated == the data-changing versions of the log (the appends), in order,
   each once, each report starting where the previous one ended; its ``added_rows`` sum to the rows appended.

OPTIMIZE may fail only by losing a race (`ConcurrentModification`); VACUUM and the sensor never fail.

Run by hand (starts its own moto_server on a free 127.0.0.1 port; exit status 1 when an invariant failed)::

    .venv/bin/python -m tests.reliability.soak --seconds 300 --json benchmarks/results/sustained_load.json

The test suite runs the same code for `DELTALITE_SOAK_SECONDS` (tests/reliability/test_sustained_load.py). Worker
processes are this module too (``--worker ROLE``).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import unquote

from tests.moto_server import deltars_s3_options, start_moto_server, stop_moto_server

REPO = Path(__file__).resolve().parents[2]
APPENDERS = 4
OPTIMIZERS = 3
RETENTION_S = 20  # the table's delta.deletedFileRetentionDuration
COMPACT_BYTES = 48 * 1024  # OPTIMIZE's min_file_size and target_size: appends are ~2-4 KiB, so there is always work
APPEND_EVERY_S = (0.5, 1.0)
ROWS_PER_APPEND = (5, 20)
OPTIMIZE_PAUSE_S = (0.5, 1.5)
VACUUM_PAUSE_S = 2.0
SENSOR_POLL_S = 0.5
CONN_ID = "soaklake"
TABLE = "table"
PARTITIONS = ("p0", "p1")
ID_STRIDE = 1_000_000_000  # id = writer * ID_STRIDE + seq

T = TypeVar("T")
R = TypeVar("R")

SCHEMA = {
    "type": "struct",
    "fields": [
        {"name": "id", "type": "long", "nullable": False, "metadata": {}},
        {"name": "writer", "type": "long", "nullable": False, "metadata": {}},
        {"name": "seq", "type": "long", "nullable": False, "metadata": {}},
        {"name": "batch", "type": "long", "nullable": False, "metadata": {}},
        {"name": "payload", "type": "string", "nullable": False, "metadata": {}},
        {"name": "part", "type": "string", "nullable": False, "metadata": {}},
    ],
}


# -- the table --------------------------------------------------------------------------------------------------


def table_uri(bucket: str) -> str:
    """The soak table's URI in ``bucket``."""
    return f"s3://{bucket}/{TABLE}"


def create_table(uri: str, options: Mapping[str, Any], retention_s: int = RETENTION_S) -> None:
    """Version 0: protocol 1/2 and a metaData partitioned by ``part`` whose deleted-file retention is ``retention_s``
    seconds."""
    from airflow_provider_deltalite.engine.storage import Storage

    now = int(time.time() * 1000)
    actions = [
        {"commitInfo": {"timestamp": now, "operation": "CREATE TABLE", "operationParameters": {}}},
        {"protocol": {"minReaderVersion": 1, "minWriterVersion": 2}},
        {
            "metaData": {
                "id": str(uuid.uuid4()),
                "format": {"provider": "parquet", "options": {}},
                "schemaString": json.dumps(SCHEMA),
                "partitionColumns": ["part"],
                "configuration": {"delta.deletedFileRetentionDuration": f"interval {retention_s} seconds"},
                "createdTime": now,
            }
        },
    ]
    body = "".join(json.dumps(a, separators=(",", ":")) + "\n" for a in actions).encode()
    Storage(uri, options).write_create_only("_delta_log/00000000000000000000.json", body)


# -- workers ----------------------------------------------------------------------------------------------------


class _Log:
    """One worker's JSON-lines log, flushed per line (the analysis reads it after the process exits)."""

    def __init__(self, path: Path) -> None:
        self._fh = path.open("a")

    def __call__(self, event: str, **fields: Any) -> None:
        self._fh.write(json.dumps({"event": event, "t": time.time(), **fields}) + "\n")
        self._fh.flush()


def _wait_for_go(workdir: Path, name: str) -> None:
    (workdir / "ready").mkdir(exist_ok=True)
    (workdir / "ready" / name).touch()
    deadline = time.monotonic() + 300
    while not (workdir / "go").exists():
        if time.monotonic() > deadline:
            raise SystemExit(f"{name}: no start signal")
        time.sleep(0.02)


def _stopping(workdir: Path) -> bool:
    return (workdir / "stop").exists()


def _pause(workdir: Path, seconds: float) -> None:
    """Sleep ``seconds``, waking early when the run stops (so the writers drain within one operation)."""
    end = time.monotonic() + seconds
    while not _stopping(workdir) and (left := end - time.monotonic()) > 0:
        time.sleep(min(left, 0.1))


def _error_fields(exc: BaseException) -> dict[str, Any]:
    from airflow_provider_deltalite.engine.errors import ConcurrentModification, DeltaLiteError

    return {
        "type": type(exc).__name__,
        "typed": isinstance(exc, DeltaLiteError),
        "conflict": isinstance(exc, ConcurrentModification),
        "message": str(exc)[:500],
    }


def append_rows(table: Any, part: str, ids: Sequence[int], seq: int, batch: int, payload: Sequence[str]) -> Any:
    """One blind append as the appenders make it: write one Parquet file with stats (`write_data_file`), add it in a
    `Transaction` on the newest snapshot, commit WRITE. Rows: ``ids[k]`` with writer ``ids[k] // ID_STRIDE`` and seq
    ``seq + k``.

    Returns:
        ``(transaction, add)``: the transaction with the add staged, for the caller to commit, and the add.
    """
    import pyarrow as pa

    from airflow_provider_deltalite.engine.data_file_writer import WriterOptions
    from airflow_provider_deltalite.engine.rewrite import TableContext, write_data_file

    n = len(ids)
    rows = pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "writer": pa.array([i // ID_STRIDE for i in ids], pa.int64()),
            "seq": pa.array(range(seq, seq + n), pa.int64()),
            "batch": pa.array([batch] * n, pa.int64()),
            "payload": pa.array(payload, pa.string()),
        }
    )
    snapshot = table.snapshot()
    add = write_data_file(TableContext.from_snapshot(snapshot), {"part": part}, [rows], WriterOptions())
    assert add is not None
    txn = table.transaction(snapshot)
    txn.add({**add, "dataChange": True})
    return txn, add


def _append_loop(args: argparse.Namespace, log: _Log) -> None:
    from airflow_provider_deltalite import DeltaTable

    options = json.loads(args.options)
    table = DeltaTable(args.uri, options)
    rng = random.Random(1000 + args.index)
    part = PARTITIONS[args.index % len(PARTITIONS)]
    seq = batch = 0
    _wait_for_go(Path(args.workdir), args.name)
    next_at = time.monotonic()
    while not _stopping(Path(args.workdir)):
        n = rng.randint(*ROWS_PER_APPEND)
        ids = [args.index * ID_STRIDE + s for s in range(seq, seq + n)]
        payload = [rng.randbytes(24).hex() for _ in range(n)]
        txn = add = None
        try:
            txn, add = append_rows(table, part, ids, seq, batch, payload)
            result = txn.commit("WRITE", {"mode": "Append", "partitionBy": json.dumps(["part"])})
        except Exception as exc:  # recorded and checked: its ids must not be in the table
            path = add["path"] if add else None
            log("error", ids=ids, txn_id=txn and txn.txn_id, path=path, **_error_fields(exc))
        else:
            log(
                "commit",
                version=result.version,
                txn_id=result.txn_id,
                attempts=result.attempts,
                path=add["path"],
                ids=ids,
                written_ms=add["modificationTime"],
                committed_ms=int(time.time() * 1000),
            )
        seq += n
        batch += 1
        next_at = max(next_at + rng.uniform(*APPEND_EVERY_S), time.monotonic())
        _pause(Path(args.workdir), next_at - time.monotonic())


def _optimize_loop(args: argparse.Namespace, log: _Log) -> None:
    from airflow_provider_deltalite import DeltaTable
    from airflow_provider_deltalite.maintenance.optimize import optimize

    options = json.loads(args.options)
    rng = random.Random(2000 + args.index)
    _wait_for_go(Path(args.workdir), args.name)
    while not _stopping(Path(args.workdir)):
        started = time.time()
        try:
            stats = optimize(DeltaTable(args.uri, options), min_file_size=COMPACT_BYTES, target_size=COMPACT_BYTES)
        except Exception as exc:  # a lost race is a typed ConcurrentModification; the analysis checks the rest
            log("conflict" if _error_fields(exc)["conflict"] else "error", **_error_fields(exc))
        else:
            fields = {
                "read_version": stats.read_version,
                "removed": stats.num_files_removed,
                "added": stats.num_files_added,
                "bins": stats.num_bins,
                "bytes_removed": stats.files_removed.total_size,
                "seconds": round(time.time() - started, 3),
            }
            if stats.committed_version is None:
                log("noop", **fields)
            else:
                log("commit", version=stats.committed_version, **fields)
        _pause(Path(args.workdir), rng.uniform(*OPTIMIZE_PAUSE_S))


class RecordingExecutor:
    """A `LocalExecutor` that also records the paths every VACUUM delete batch reports deleted.

    Everything runs as it would without it; it only looks at the `DeleteOutcome` results going by.
    """

    name = "local"

    def __init__(self, threads: int) -> None:
        from airflow_provider_deltalite.executors import LocalExecutor

        self._inner = LocalExecutor(threads)
        self.deleted: list[str] = []

    @property
    def parallelism(self) -> int:
        return self._inner.parallelism

    def map(self, fn: Callable[[T], R], items: Sequence[T]) -> Iterator[R]:
        from airflow_provider_deltalite.engine.storage import DeleteOutcome

        for result in self._inner.map(fn, items):
            if isinstance(result, DeleteOutcome):
                self.deleted.extend(result.deleted)
            yield result

    def close(self) -> None:
        self._inner.close()


def _vacuum_loop(args: argparse.Namespace, log: _Log) -> None:
    from airflow_provider_deltalite import DeltaTable
    from airflow_provider_deltalite.maintenance.vacuum import vacuum

    options = json.loads(args.options)
    _wait_for_go(Path(args.workdir), args.name)
    while not _stopping(Path(args.workdir)):
        executor = RecordingExecutor(8)
        started = time.time()
        try:
            stats = vacuum(DeltaTable(args.uri, options), executor=executor)
        except Exception as exc:
            log("error", deleted=executor.deleted, **_error_fields(exc))
        else:
            log(
                "run",
                snapshot_version=stats.latest_commit_version,
                versions=list(stats.committed_versions),
                deleted=executor.deleted,
                objects_deleted=stats.objects_deleted,
                files_to_delete=stats.num_files_to_delete,
                bytes_to_delete=stats.size_of_data_to_delete,
                seconds=round(time.time() - started, 3),
            )
        finally:
            executor.close()
        _pause(Path(args.workdir), VACUUM_PAUSE_S)


def _sensor_loop(args: argparse.Namespace, log: _Log) -> None:
    """Poke a fresh sensor after the last reported version until the writers are done and a poke finds nothing."""
    from airflow.providers.common.compat.sdk import PokeReturnValue

    from airflow_provider_deltalite.sensors.new_version import NewVersionSensor

    workdir = Path(args.workdir)
    after = 0  # version 0 creates the table; it holds no data
    # No start barrier: the sensor reports everything after version 0 whenever it starts (Airflow's import is slow)
    pokes = failures = 0
    while True:
        writers_done = (workdir / "writers_done").exists()  # read before the poke: its answer is then final
        sensor = NewVersionSensor(
            task_id="soak_sensor",
            table_uri=TABLE,
            deltalite_conn_id=CONN_ID,
            since=after,
            poke_interval=SENSOR_POLL_S,
        )
        pokes += 1
        try:
            result = sensor.poke({})
        except Exception as exc:
            log("error", after=after, **_error_fields(exc))
            result = None
            failures += 1
            if writers_done and failures >= 10:
                break  # a sensor that keeps failing on a quiet table never catches up; the analysis reports it
        else:
            failures = 0
        if isinstance(result, PokeReturnValue) and result.is_done:
            payload = result.xcom_value
            log(
                "report",
                baseline=payload["baseline_version"],
                version=payload["version"],
                versions=payload["versions"],
                skipped=payload["skipped"],
                operations=payload["operations"],
                added_rows=payload["added_rows"],
                added_files=payload["added_files"],
            )
            after = payload["version"]
            continue  # more may be waiting: look again at once
        if result is False and writers_done:
            break
        time.sleep(SENSOR_POLL_S)
    log("done", pokes=pokes, last=after)


WORKERS: dict[str, Callable[[argparse.Namespace, _Log], None]] = {
    "appender": _append_loop,
    "optimize": _optimize_loop,
    "vacuum": _vacuum_loop,
    "sensor": _sensor_loop,
}


def run_worker(args: argparse.Namespace) -> None:
    log = _Log(Path(args.workdir) / f"{args.name}.jsonl")
    WORKERS[args.worker](args, log)
    log("exit")


# -- the run ----------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Worker:
    """One worker process of a run."""

    name: str
    role: str
    index: int
    process: subprocess.Popen
    output: Any  # the open file its stdout and stderr go to


def _worker_env(options: Mapping[str, Any], bucket: str, workdir: Path, role: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AIRFLOW__", "AIRFLOW_CONN_"))}
    env["AWS_EC2_METADATA_DISABLED"] = "true"
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    if role == "sensor":
        home = workdir / "airflow_home"
        home.mkdir(exist_ok=True)
        extra = {
            "aws_access_key_id": options["key"],
            "aws_secret_access_key": options["secret"],
            "endpoint_url": options["endpoint_url"],
            "region_name": "us-east-1",
        }
        env.update(
            AIRFLOW_HOME=str(home),
            AIRFLOW__CORE__LOAD_EXAMPLES="False",
            AIRFLOW__CORE__UNIT_TEST_MODE="False",
            AIRFLOW__LOGGING__LOGGING_LEVEL="WARNING",
        )
        env[f"AIRFLOW_CONN_{CONN_ID.upper()}"] = json.dumps(
            {"conn_type": "deltalite", "host": f"s3://{bucket}", "extra": extra}
        )
    return env


def _spawn(options: Mapping[str, Any], bucket: str, workdir: Path, role: str, index: int) -> Worker:
    name = f"{role}-{index}"
    args = [
        sys.executable,
        "-m",
        "tests.reliability.soak",
        "--worker",
        role,
        "--index",
        str(index),
        "--name",
        name,
        "--uri",
        table_uri(bucket),
        "--options",
        json.dumps(dict(options)),
        "--workdir",
        str(workdir),
    ]
    out = (workdir / f"{name}.out").open("w")
    proc = subprocess.Popen(
        args, cwd=REPO, env=_worker_env(options, bucket, workdir, role), stdout=out, stderr=subprocess.STDOUT
    )
    return Worker(name, role, index, proc, out)


def _join(workers: Sequence[Worker], timeout: float) -> dict[str, int | None]:
    """Wait for ``workers``; return each exit code (None: killed after ``timeout``)."""
    deadline = time.monotonic() + timeout
    codes: dict[str, int | None] = {}
    for w in workers:
        try:
            codes[w.name] = w.process.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            w.process.kill()
            w.process.wait()
            codes[w.name] = None
    return codes


def run_soak(
    options: Mapping[str, Any],
    seconds: float,
    workdir: Path,
    *,
    bucket: str | None = None,
    retention_s: int = RETENTION_S,
    progress: Callable[[str], None] | None = None,
    vacuumed_within: float | None = None,
) -> dict[str, Any]:
    """Create the table in a new bucket of the S3 endpoint ``options`` (s3fs options), run the load for ``seconds``,
    stop everything, and return `analyze`'s report (``report["violations"]`` is empty when every invariant held).

    ``vacuumed_within``: the load goes on past ``seconds`` until a VACUUM run has deleted files, for at most this many
    seconds in all. A file becomes deletable only a retention after OPTIMIZE removed it, so on a slow machine a short
    run may end before any VACUUM run could delete one, and the checks of VACUUM would hold vacuously.

    Example:
        >>> report = run_soak(s3_options, 45, Path("/tmp/soak"))  # doctest: +SKIP
        >>> report["violations"], report["counts"]["final_rows"]  # doctest: +SKIP
        ([], 6480)
    """
    import s3fs

    say = progress or (lambda _msg: None)
    wall = time.monotonic()
    workdir.mkdir(parents=True, exist_ok=True)
    bucket = bucket or f"soak-{uuid.uuid4().hex[:12]}"
    s3fs.S3FileSystem(**options).call_s3("create_bucket", Bucket=bucket)
    uri = table_uri(bucket)
    create_table(uri, options, retention_s)
    roles = (
        [("appender", i) for i in range(APPENDERS)]
        + [("optimize", i) for i in range(OPTIMIZERS)]
        + [("vacuum", 0), ("sensor", 0)]
    )
    workers = [_spawn(options, bucket, workdir, role, i) for role, i in roles]
    try:
        deadline = time.monotonic() + 180
        ready = workdir / "ready"
        writers = [w for w in workers if w.role != "sensor"]
        while not ready.exists() or len(list(ready.iterdir())) < len(writers):
            crashed = [w.name for w in workers if w.process.poll() is not None]
            if crashed or time.monotonic() > deadline:
                raise RuntimeError(f"workers did not start: {crashed or 'timeout'}; see {workdir}/*.out")
            time.sleep(0.05)
        setup_s = time.monotonic() - wall
        (workdir / "go").touch()
        say(f"{len(writers)} writer processes started in {setup_s:.1f} s; load for {seconds:g} s")
        load = time.monotonic()
        time.sleep(seconds)
        if vacuumed_within is not None:
            while time.monotonic() < load + vacuumed_within and not _vacuum_deleted(workdir):
                time.sleep(0.5)
        (workdir / "stop").touch()
        stopped = time.monotonic()
        codes = _join(writers, timeout=120)
        drain_s = time.monotonic() - stopped
        load_s = time.monotonic() - load
        (workdir / "writers_done").touch()
        codes.update(_join([w for w in workers if w.role == "sensor"], timeout=120))
        say(f"writers stopped {drain_s:.1f} s after the stop signal; checking")
    finally:
        for w in workers:
            if w.process.poll() is None:
                w.process.kill()
                w.process.wait()
            w.output.close()
    checking = time.monotonic()
    report = analyze(uri, options, workdir, codes)
    report["timing"] = {
        "seconds_requested": seconds,
        "setup_s": round(setup_s, 1),
        "load_s": round(load_s, 1),
        "drain_s": round(drain_s, 1),
        "check_s": round(time.monotonic() - checking, 1),
        "wall_s": round(time.monotonic() - wall, 1),
    }
    report["config"] = {
        "appenders": APPENDERS,
        "optimize_loops": OPTIMIZERS,
        "vacuum_loops": 1,
        "sensors": 1,
        "deletedFileRetentionDuration": f"interval {retention_s} seconds",
        "optimize_min_file_size": COMPACT_BYTES,
        "optimize_target_size": COMPACT_BYTES,
        "append_every_s": list(APPEND_EVERY_S),
        "rows_per_append": list(ROWS_PER_APPEND),
        "sensor_poll_s": SENSOR_POLL_S,
        "vacuum_pause_s": VACUUM_PAUSE_S,
    }
    return report


# -- the checks -------------------------------------------------------------------------------------------------


def _vacuum_deleted(workdir: Path) -> bool:
    """Whether a VACUUM run has deleted files so far (read while the loop may still be writing its log)."""
    return any(e["event"] == "run" and e["deleted"] for e in _events(workdir, "vacuum-0", unfinished=True))


def _events(workdir: Path, name: str, *, unfinished: bool = False) -> list[dict[str, Any]]:
    """The events a loop logged; ``unfinished``: the loop may still be writing, and a line it has not finished is left
    out (once every loop has stopped, a line that does not parse is an error)."""
    path = workdir / f"{name}.jsonl"
    events = []
    for line in path.read_text().splitlines() if path.exists() else []:
        try:
            events.append(json.loads(line))
        except ValueError:
            if not unfinished:
                raise
    return events


def read_log(uri: str, options: Mapping[str, Any]) -> tuple[list[int], dict[int, list[dict[str, Any]]], list[str]]:
    """Every commit of the table: the versions listed, the actions of each, and the problems found (unparsable)."""
    from airflow_provider_deltalite.engine.log_path import LogFileKind
    from airflow_provider_deltalite.engine.log_segment import list_log
    from airflow_provider_deltalite.engine.storage import Storage

    storage = Storage(uri, options)
    files = [f for f in list_log(storage, 0) if f.parsed.kind is LogFileKind.COMMIT]
    versions = sorted(f.version for f in files)
    problems: list[str] = []
    commits: dict[int, list[dict[str, Any]]] = {}
    for f, data in zip(files, storage.read_many([f.path for f in files]), strict=True):
        try:
            commits[f.version] = [json.loads(line) for line in data.decode().splitlines() if line.strip()]
        except ValueError as exc:
            problems.append(f"version {f.version} does not parse: {exc}")
    return versions, commits, problems


def _percentiles(values: Sequence[float]) -> dict[str, float]:
    ordered = sorted(values)
    if not ordered:
        return {"p50": 0, "p90": 0, "p99": 0, "max": 0}
    at = {q: ordered[min(len(ordered) - 1, int(q * len(ordered)))] for q in (0.5, 0.9, 0.99)}
    return {"p50": round(at[0.5], 2), "p90": round(at[0.9], 2), "p99": round(at[0.99], 2), "max": round(ordered[-1], 2)}


def _slash(p: Mapping[str, float]) -> str:
    return f"{p['p50']} / {p['p99']} / {p['max']}"


def _interval_ms(text: str | None) -> float:
    from airflow_provider_deltalite.engine.properties import parse_interval_ms

    return parse_interval_ms(text) if text else float("inf")


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [""])[0][:300]


def _info(actions: list[dict[str, Any]]) -> dict[str, Any]:
    return next((a["commitInfo"] for a in actions if "commitInfo" in a), {})


def _files(actions: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [a[kind] for a in actions if kind in a]


def _is_data_change(actions: list[dict[str, Any]]) -> bool:
    """Independent of the code under test: any add or remove with dataChange true (the protocol's definition)."""
    return any(f.get("dataChange", True) for kind in ("add", "remove") for f in _files(actions, kind))


def analyze(
    uri: str, options: Mapping[str, Any], workdir: Path, exit_codes: Mapping[str, int | None]
) -> dict[str, Any]:
    """Check the four invariants (module docstring) on the finished table; return counts, facts and violations."""
    import deltalake
    import s3fs

    from airflow_provider_deltalite import DeltaTable
    from airflow_provider_deltalite.engine.scan import scan

    violations: list[str] = []
    for name, code in sorted(exit_codes.items()):
        if code != 0:
            violations.append(f"{name} exited with {code} (see {workdir}/{name}.out)")
    appenders = {f"appender-{i}": _events(workdir, f"appender-{i}") for i in range(APPENDERS)}
    optimizers = {f"optimize-{i}": _events(workdir, f"optimize-{i}") for i in range(OPTIMIZERS)}
    vacuums = _events(workdir, "vacuum-0")
    sensor = _events(workdir, "sensor-0")

    versions, commits, problems = read_log(uri, options)
    violations += problems
    latest = versions[-1]
    if versions != list(range(latest + 1)):
        missing = sorted(set(range(latest + 1)) - set(versions))
        violations.append(f"versions 0..{latest} are not all there: missing {missing[:10]}")
    txn_ids = Counter(_info(a).get("txnId") for a in commits.values() if _info(a).get("txnId"))
    shared = sorted(t for t, n in txn_ids.items() if n > 1)
    if shared:
        violations.append(f"{len(shared)} txnIds are shared by two commits, e.g. {shared[0]}")
    operations = {v: _info(a).get("operation") for v, a in commits.items()}
    metadata = next((a["metaData"] for a in commits.get(0, []) if "metaData" in a), {})
    retention = (metadata.get("configuration") or {}).get("delta.deletedFileRetentionDuration")

    # (2) every version after 0 is claimed by exactly one loop report, and the commit matches the report
    claims: Counter[int] = Counter()
    for name, events in appenders.items():
        for e in events:
            if e["event"] != "commit":
                continue
            claims[e["version"]] += 1
            actions = commits.get(e["version"], [])
            adds = [unquote(a["path"]) for a in _files(actions, "add")]
            info = _info(actions)
            if (info.get("txnId"), info.get("operation"), adds) != (e["txn_id"], "WRITE", [unquote(e["path"])]):
                violations.append(f"{name}: version {e['version']} is not its append (txnId {info.get('txnId')})")
    for name, events in optimizers.items():
        for e in events:
            if e["event"] != "commit":
                continue
            claims[e["version"]] += 1
            actions = commits.get(e["version"], [])
            got = (operations.get(e["version"]), len(_files(actions, "remove")), len(_files(actions, "add")))
            if got != ("OPTIMIZE", e["removed"], e["added"]):
                violations.append(f"{name}: version {e['version']} is {got}, not its OPTIMIZE")
    for e in vacuums:
        if e["event"] != "run":
            continue
        claims.update(e["versions"])
        ops = [operations.get(v) for v in e["versions"]]
        metrics = [_info(commits.get(v, [])).get("operationMetrics", {}) for v in e["versions"]]
        actions = [a for v in e["versions"] for a in commits.get(v, []) if "commitInfo" not in a]
        # START counts the plan; VACUUM then re-checks it against commits made since planning, which can only keep
        # files, so the stats' count may be lower than START's
        if (
            ops != ["VACUUM START", "VACUUM END"]
            or int(metrics[0].get("numFilesToDelete", -1)) < e["files_to_delete"]
            or metrics[1].get("numDeletedFiles") != str(e["objects_deleted"])
            or actions
        ):
            violations.append(
                f"vacuum: versions {e['versions']} are operations {ops} with metrics {metrics}, not VACUUM START (>= "
                f"{e['files_to_delete']} files to delete) and VACUUM END ({e['objects_deleted']} deleted) without "
                "file actions"
            )
    twice = sorted(v for v, n in claims.items() if n > 1)
    unclaimed = sorted(set(range(1, latest + 1)) - set(claims))
    if twice:
        violations.append(f"{len(twice)} versions were reported by two loops, e.g. {twice[:5]}")
    if unclaimed:
        ops = Counter(operations.get(v) for v in unclaimed)
        violations.append(f"{len(unclaimed)} versions were reported by no loop, e.g. {unclaimed[:5]} ({dict(ops)})")

    # (1) rows: what delta-rs reads == what the appenders were told was committed, each once
    committed_ids = sorted(
        i for events in appenders.values() for e in events if e["event"] == "commit" for i in e["ids"]
    )
    failed_ids = {i for events in appenders.values() for e in events if e["event"] == "error" for i in e["ids"]}
    final_ids: list[int] = []
    readable = False
    try:
        theirs = deltalake.DeltaTable(uri, storage_options=deltars_s3_options(options))
        final_ids = sorted(theirs.to_pyarrow_table(columns=["id"]).column("id").to_pylist())
        readable = True
        if theirs.version() != latest:
            violations.append(f"delta-rs read version {theirs.version()}, the log ends at {latest}")
    except Exception as exc:  # reported with the other violations: the checks below still say why
        violations.append(f"delta-rs cannot read the final version: {type(exc).__name__}: {_first_line(exc)}")
    else:
        if final_ids != committed_ids:
            got, want = Counter(final_ids), Counter(committed_ids)
            lost = sorted((want - got).elements())
            extra = sorted((got - want).elements())
            violations.append(
                f"rows: {len(lost)} committed ids lost (e.g. {lost[:5]}), {len(extra)} extra (e.g. {extra[:5]})"
            )
        try:
            ours, _ = scan(DeltaTable(uri, options).snapshot(), columns=["id"])
        except Exception as exc:
            violations.append(f"deltalite cannot scan the final version: {type(exc).__name__}: {_first_line(exc)}")
        else:
            if sorted(ours.column("id").to_pylist()) != final_ids:
                violations.append("deltalite's scan of the final version differs from delta-rs's")
    if failed_ids & set(final_ids):
        violations.append(f"{len(failed_ids & set(final_ids))} ids of appends reported failed are in the table")

    # (3) files: no deleted path is live at or after its VACUUM's snapshot; every final live file exists
    last_live: dict[str, float] = {}  # path -> newest version it is live in (inf: live at the end)
    added_in: dict[str, tuple[int, int]] = {}  # path -> (version of its first add, the add's modificationTime)
    live: dict[str, int] = {}
    for v in range(latest + 1):
        for r in _files(commits.get(v, []), "remove"):
            p = unquote(r["path"])
            if p in live:
                del live[p]
                last_live[p] = max(last_live.get(p, -1), v - 1)
        for a in _files(commits.get(v, []), "add"):
            p = unquote(a["path"])
            live[p] = v
            added_in.setdefault(p, (v, int(a.get("modificationTime") or 0)))
    for p in live:
        last_live[p] = float("inf")
    deleted_total = 0
    deleted_live = 0
    for e in vacuums:
        deleted_total += len(e.get("deleted", []))
        snap = e.get("snapshot_version", 0)
        bad = [p for p in e.get("deleted", []) if last_live.get(p, -1) >= snap]
        deleted_live += len(bad)
        for p in bad[:5]:
            version, written = added_in[p]
            if version <= snap:
                why = f"live in VACUUM's own snapshot (added in version {version})"
            else:
                took = (_info(commits[version]).get("timestamp", 0) - written) / 1000
                why = (
                    f"not yet committed when VACUUM planned: written {took:.1f} s before its commit (version "
                    f"{version}), longer than the table's deletedFileRetentionDuration ({retention})"
                )
            violations.append(f"VACUUM from version {snap} deleted {p}, live until {last_live[p]}: {why}")
    bucket_root = uri.removeprefix("s3://")
    present = {k.removeprefix(bucket_root + "/") for k in s3fs.S3FileSystem(**options).find(bucket_root)}
    gone = sorted(p for p in live if p not in present)
    if gone:
        violations.append(f"{len(gone)} live files of the final version are missing, e.g. {gone[0]}")

    # (4) the sensor: every data-changing version once, in order, nothing else
    data_versions = [v for v in range(1, latest + 1) if _is_data_change(commits.get(v, []))]
    append_versions = sorted(e["version"] for events in appenders.values() for e in events if e["event"] == "commit")
    reports = [e for e in sensor if e["event"] == "report"]
    reported = [v for e in reports for v in e["versions"]]
    if data_versions != append_versions:
        violations.append("the data-changing versions of the log are not exactly the appends")
    if reported != data_versions:
        dup = sorted(v for v, n in Counter(reported).items() if n > 1)
        missed = sorted(set(data_versions) - set(reported))
        extra = sorted(set(reported) - set(data_versions))
        violations.append(
            f"sensor: {len(reported)} versions reported vs {len(data_versions)} data versions; duplicated {dup[:5]}, "
            f"missed {missed[:5]}, not data {extra[:5]}, in order: {reported == sorted(reported)}"
        )
    baselines = [e["baseline"] for e in reports]
    if baselines != [0, *(e["version"] for e in reports)][: len(reports)]:
        violations.append("sensor: a report's baseline is not the version the previous report ended at")
    sensor_rows = sum(e["added_rows"] or 0 for e in reports)
    if sensor_rows != len(committed_ids):
        violations.append(f"sensor: added_rows sum to {sensor_rows}, {len(committed_ids)} rows were appended")
    if not any(e["event"] == "done" for e in sensor):
        violations.append("sensor: did not finish its catch-up poll")

    # A failed append is acceptable when it is typed (its ids were checked absent above); anything else that failed
    # is not: OPTIMIZE may only lose a race (ConcurrentModification, logged as a conflict), VACUUM and the sensor
    # never fail.
    append_failures = [e for events in appenders.values() for e in events if e["event"] == "error"]
    errors = {
        name: [e for e in events if e["event"] == "error" and not (name.startswith("appender") and e["typed"])]
        for name, events in {**appenders, **optimizers, "vacuum-0": vacuums, "sensor-0": sensor}.items()
    }
    for name, errs in errors.items():
        if errs:
            violations.append(f"{name}: {len(errs)} errors, first {errs[0]['type']}: {errs[0]['message'][:200]}")

    def count(events: list[dict[str, Any]], kind: str) -> int:
        return sum(1 for e in events if e["event"] == kind)

    conflicts = Counter(e["type"] for events in optimizers.values() for e in events if e["event"] == "conflict")
    append_latency = [
        e["committed_ms"] - e["written_ms"] for events in appenders.values() for e in events if e["event"] == "commit"
    ]
    optimize_seconds = [e["seconds"] for events in optimizers.values() for e in events if e["event"] == "commit"]
    counts = {
        "commits": {
            **{name: count(events, "commit") for name, events in appenders.items()},
            **{name: count(events, "commit") for name, events in optimizers.items()},
            "vacuum-0": sum(len(e.get("versions", [])) for e in vacuums),
        },
        "append_commits": len(append_versions),
        "append_failures_typed": len(append_failures),
        "append_failures_by_type": dict(sorted(Counter(e["type"] for e in append_failures).items())),
        "append_attempts_max": max(
            (e["attempts"] for events in appenders.values() for e in events if e["event"] == "commit"), default=0
        ),
        "append_write_to_commit_s": _percentiles([ms / 1000 for ms in append_latency]),
        "appends_slower_than_retention": sum(1 for ms in append_latency if ms > _interval_ms(retention)),
        "optimize_commits": sum(count(events, "commit") for events in optimizers.values()),
        "optimize_noops": sum(count(events, "noop") for events in optimizers.values()),
        "optimize_conflicts": sum(conflicts.values()),
        "optimize_conflicts_by_type": dict(sorted(conflicts.items())),
        "optimize_files_removed": sum(e["removed"] for ev in optimizers.values() for e in ev if e["event"] == "commit"),
        "optimize_files_added": sum(e["added"] for ev in optimizers.values() for e in ev if e["event"] == "commit"),
        "optimize_commit_seconds_max": max(optimize_seconds, default=0),
        "vacuum_run_seconds": _percentiles([e["seconds"] for e in vacuums if e["event"] == "run"]),
        "vacuum_runs": count(vacuums, "run"),
        "vacuum_runs_deleting": sum(1 for e in vacuums if e["event"] == "run" and e["deleted"]),
        "files_vacuumed": deleted_total,
        "sensor_events": len(reports),
        "sensor_versions_reported": len(reported),
        "sensor_pokes": next((e["pokes"] for e in sensor if e["event"] == "done"), None),
        "errors": sum(len(errs) for errs in errors.values()),
        "final_version": latest,
        "appended_rows": len(committed_ids),
        "final_rows": len(final_ids) if readable else None,  # None: delta-rs cannot read the final version
        "final_live_files": len(live),
    }
    return {
        "violations": violations,
        "counts": counts,
        "facts": {
            "versions_contiguous": versions == list(range(latest + 1)),
            "shared_txn_ids": len(shared),
            "unclaimed_versions": len(unclaimed),
            "versions_claimed_twice": len(twice),
            "rows_equal_committed": readable and final_ids == committed_ids,
            "duplicate_ids": sum(n - 1 for n in Counter(final_ids).values() if n > 1),
            "deleted_live_files": deleted_live,
            "missing_live_files": len(gone),
            "sensor_exactly_data_versions": reported == data_versions,
            "data_versions": len(data_versions),
        },
    }


# -- the script -------------------------------------------------------------------------------------------------


def summary_table(report: Mapping[str, Any]) -> str:
    """The printed summary: one line per figure."""
    c, t = report["counts"], report["timing"]
    rows = [
        ("load seconds (requested)", f"{t['load_s']} ({t['seconds_requested']:g})"),
        ("setup / drain / check seconds", f"{t['setup_s']} / {t['drain_s']} / {t['check_s']}"),
        ("wall seconds", t["wall_s"]),
    ]
    rows += [(f"commits {name}", n) for name, n in c["commits"].items()]
    rows += [
        ("OPTIMIZE no-op runs", c["optimize_noops"]),
        ("OPTIMIZE conflicts (typed)", f"{c['optimize_conflicts']} {c['optimize_conflicts_by_type']}"),
        ("OPTIMIZE files removed / added", f"{c['optimize_files_removed']} / {c['optimize_files_added']}"),
        ("VACUUM runs (deleting)", f"{c['vacuum_runs']} ({c['vacuum_runs_deleting']})"),
        ("files vacuumed", c["files_vacuumed"]),
        ("sensor events / versions reported", f"{c['sensor_events']} / {c['sensor_versions_reported']}"),
        ("sensor pokes", c["sensor_pokes"]),
        ("final version", c["final_version"]),
        ("final rows", "unreadable" if c["final_rows"] is None else c["final_rows"]),
        ("final live files", c["final_live_files"]),
        ("append write->commit s p50/p99/max", _slash(c["append_write_to_commit_s"])),
        ("appends slower than the retention", c["appends_slower_than_retention"]),
        ("VACUUM run s p50/p99/max", _slash(c["vacuum_run_seconds"])),
        ("max OPTIMIZE run s", c["optimize_commit_seconds_max"]),
        ("errors", c["errors"]),
        ("violations", len(report["violations"])),
    ]
    width = max(len(k) for k, _ in rows)
    lines = [f"{k:<{width}}  {v}" for k, v in rows]
    lines += [f"  VIOLATION: {v}" for v in report["violations"]]
    return "\n".join(lines)


def _machine() -> dict[str, Any]:
    from importlib.metadata import version

    return {
        "date": time.strftime("%Y-%m-%dT%H:%M:%S+00:00", time.gmtime()),
        "cpu_count": os.cpu_count(),
        "load_average_1_5_15": [round(x, 2) for x in os.getloadavg()],
        "platform": platform.platform(),
        "python": platform.python_version(),
        **{p: version(p) for p in ("deltalake", "pyarrow", "s3fs", "moto", "apache-airflow")},
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=300.0, help="how long the load runs")
    parser.add_argument("--json", type=Path, help="also write the report here")
    parser.add_argument(
        "--retention-seconds", type=int, default=RETENTION_S, help="the table's delta.deletedFileRetentionDuration"
    )
    parser.add_argument("--workdir", type=Path, help="worker logs (default: a temporary directory, removed)")
    # a worker process of a run (internal)
    parser.add_argument("--worker", choices=sorted(WORKERS), help=argparse.SUPPRESS)
    parser.add_argument("--index", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--name", help=argparse.SUPPRESS)
    parser.add_argument("--uri", help=argparse.SUPPRESS)
    parser.add_argument("--options", default="{}", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        run_worker(args)
        return 0
    if args.seconds <= 0 or args.retention_seconds < 1:
        parser.error("--seconds and --retention-seconds must be positive")
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="deltalite-soak-"))
    workdir.mkdir(parents=True, exist_ok=True)
    moto, options = start_moto_server(workdir / "moto.log")
    try:
        report = run_soak(
            options,
            args.seconds,
            workdir / "run",
            retention_s=args.retention_seconds,
            progress=lambda m: print(m, flush=True),
        )
    finally:
        stop_moto_server(moto)
    report = {"benchmark": "sustained_load", "machine": _machine(), **report}
    print(summary_table(report))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(report, indent=2) + "\n")
    if args.workdir is None and not report["violations"]:
        shutil.rmtree(workdir, ignore_errors=True)
    elif report["violations"]:
        print(f"worker logs kept in {workdir}", file=sys.stderr)
    return 1 if report["violations"] else 0


if __name__ == "__main__":
    sys.exit(main())
