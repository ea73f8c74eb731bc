"""Crash injection: SIGKILL the process running OPTIMIZE, Z-order, VACUUM or a checkpoint, then check the table.

Each kill prepares a fresh copy of a small table (written by delta-rs 1.6.3, or a Spark-written corpus table), reads
its rows with delta-rs, and starts the operation in a child process: the ``deltalite`` CLI (local executor) or
``spark-submit`` running the job (`jobs/driver.py`, engine zip, ``local[2]``). The child dies by SIGKILL either
at a named crash point (``DELTALITE_CRASH_AT``, see `engine.crash_points`) or after a random delay, uniform over
the duration of an unkilled run of the same operation on the same table. After the kill:

(a) the table opens with deltalite (snapshot and scan) and with delta-rs;
(b) the latest version has the same rows as before the operation (delta-rs, and deltalite's scan);
(c) the same operation re-runs to completion (exit 0), the rows are still the same, and the table reaches the state
    an unkilled run leaves (OPTIMIZE/Z-order: as many live files; VACUUM: no file but the live ones; checkpoint:
    ``_last_checkpoint`` at the latest version);
(d) a VACUUM with retention 0 (``--retention-hours 0 --no-enforce-retention-duration``) exits 0 and leaves exactly
    the live files
    (delta-rs ``file_uris()``) outside ``_delta_log``: every file the killed run left behind is gone (hidden files the
    table already had, the corpus table's Hadoop ``.crc`` files, are left out: VACUUM never deletes hidden files);
(e) the log has no gaps, every commit parses, every checkpoint Parquet file is whole, and ``_last_checkpoint`` (if
    any) names a complete checkpoint with the size it records. Checked after the kill and at the end.

Each kill also records what it left: versions committed before it, files written but never committed, files
deleted, and hidden temporary files in ``_delta_log`` (a commit or checkpoint killed between writing its temporary
file and linking or renaming it into place leaves one there; nothing removes them, and readers ignore them).

A kill is *delivered* when the child died by SIGKILL (exit -9; 137 from spark-submit when the Python driver killed
itself); a child that exits 0 first *finished before the kill* (possible with random delays only). A kill is a
*corruption* when any check fails. Run::

    .venv/bin/python -m tests.reliability.crash_harness --kills 100 [--seed S] [--spark-kills 8] [--json PATH]

Local children are forked from a fork server that has already imported the CLI and the maintenance modules, so a
child runs ``airflow_provider_deltalite.cli.main(argv)`` (what ``python -m airflow_provider_deltalite`` runs) at
once: a random delay then falls inside the operation, not inside the ~0.8 s of interpreter start-up and imports.
Spark kills SIGKILL the whole spark-submit process group (launcher, JVM, the Python driver and Python workers);
their random delay is measured from the moment the Python driver process exists.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import re
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
DEFAULT_JSON = REPO / "benchmarks" / "results" / "crash_injection.json"
CRASH_ENV = "DELTALITE_CRASH_AT"
OPERATIONS = ("optimize", "zorder", "vacuum", "checkpoint")
SPARK_OPERATIONS = ("optimize", "zorder", "vacuum")  # the spark-submit job has no checkpoint command
VACUUM_ZERO = ("--retention-hours", "0", "--no-enforce-retention-duration")
SPARK_EXIT_DRIVER_KILLED = 128 + signal.SIGKILL  # spark-submit passes on its Python driver's death by SIGKILL
LOCAL_TIMEOUT_S = 120.0
SPARK_TIMEOUT_S = 600.0
CORPUS_TABLE = "delta-kernel-defaults/basic-with-checkpoint"

# Modules the fork server imports once; the CLI imports these lazily, so without them each child would pay for them.
PRELOAD = (
    "airflow_provider_deltalite.cli",
    "airflow_provider_deltalite.engine.checkpoint_writer",
    "airflow_provider_deltalite.engine.features",
    "airflow_provider_deltalite.engine.log_cleanup",
    "airflow_provider_deltalite.executors",
    "airflow_provider_deltalite.maintenance.executor",
    "airflow_provider_deltalite.maintenance.optimize",
    "airflow_provider_deltalite.maintenance.vacuum",
    "airflow_provider_deltalite.maintenance.clustering.zorder",
    "fsspec.implementations.local",
    "pandas",  # pyarrow imports it on its first array built from Python objects (~0.3 s)
    "pyarrow.compute",
    "pyarrow.dataset",
    "pyarrow.parquet",
    "tests.reliability.crash_harness",
)


# -- tables ---------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TableKind:
    """A table shape the harness prepares: who writes it, and the options its operations run with.

    Attributes:
        name: short name used in results.
        description: one line for the report.
        zorder_by: the ``--columns`` columns of Z-order.
        optimize_args: extra OPTIMIZE arguments (``--batch-size 1``: one commit per partition).
    """

    name: str
    description: str
    zorder_by: str
    optimize_args: tuple[str, ...] = ()


KINDS: dict[str, TableKind] = {
    k.name: k
    for k in (
        TableKind("flat", "delta-rs 1.6.3, 24 appends of 100 rows, unpartitioned", "id,value"),
        TableKind(
            "partitioned",
            "delta-rs 1.6.3, 24 appends of 100 rows, partitioned by part (3 values); OPTIMIZE --batch-size 1 "
            "(one commit per partition)",
            "id,value",
            ("--batch-size", "1"),
        ),
        TableKind(
            "checkpointed",
            "delta-rs 1.6.3, 24 appends, delta.checkpointInterval=2: the operation's commit writes a checkpoint",
            "id,value",
        ),
        TableKind("corpus", f"Spark/Delta 2.2 corpus table {CORPUS_TABLE} (30 files, checkpoint at 10)", "id"),
    )
}

# The named points each (operation, table kind) reaches. ``@N``: the N-th hit (the 2nd OPTIMIZE batch of the
# partitioned table, VACUUM END's commit). VACUUM on the checkpointed table checkpoints at VACUUM END (version 26).
_REWRITE_POINTS = ("after_data_files", "during_commit_write")
_VACUUM_POINTS = ("vacuum_after_start", "during_commit_write", "vacuum_before_end", "during_commit_write@2")
NAMED_POINTS: dict[tuple[str, str], tuple[str, ...]] = {
    ("optimize", "flat"): _REWRITE_POINTS,
    ("optimize", "partitioned"): (*_REWRITE_POINTS, "after_data_files@2", "during_commit_write@3"),
    ("optimize", "checkpointed"): (*_REWRITE_POINTS, "during_checkpoint_write"),
    ("optimize", "corpus"): _REWRITE_POINTS,
    ("zorder", "flat"): _REWRITE_POINTS,
    ("zorder", "partitioned"): _REWRITE_POINTS,
    ("zorder", "checkpointed"): (*_REWRITE_POINTS, "during_checkpoint_write"),
    ("zorder", "corpus"): _REWRITE_POINTS,
    ("vacuum", "flat"): _VACUUM_POINTS,
    ("vacuum", "partitioned"): _VACUUM_POINTS,
    ("vacuum", "checkpointed"): (*_VACUUM_POINTS, "during_checkpoint_write"),
    ("vacuum", "corpus"): _VACUUM_POINTS,
    ("checkpoint", "flat"): ("during_checkpoint_write",),
    ("checkpoint", "partitioned"): ("during_checkpoint_write",),
    ("checkpoint", "checkpointed"): ("during_checkpoint_write",),
    ("checkpoint", "corpus"): ("during_checkpoint_write",),
}


def _write_delta_rs_table(path: Path, *, partitioned: bool, configuration: dict[str, str] | None) -> None:
    import deltalake
    import pyarrow as pa

    for i in range(24):
        ids = range(i * 100, (i + 1) * 100)
        rows = pa.table(
            {
                "id": pa.array(ids, pa.int64()),
                "value": pa.array([None if n % 11 == 0 else (n * 37 % 1000) / 10 for n in ids], pa.float64()),
                "name": pa.array([None if n % 7 == 0 else f"n{n % 50}" for n in ids], pa.string()),
                "part": pa.array([("a", "b", "c")[i % 3]] * 100, pa.string()),
            }
        )
        deltalake.write_deltalake(
            str(path),
            rows,
            mode="append",
            partition_by=["part"] if partitioned else None,
            configuration=configuration if i == 0 else None,
        )


def _build_template(kind: str, dest: Path) -> None:
    if kind == "flat":
        _write_delta_rs_table(dest, partitioned=False, configuration=None)
    elif kind == "partitioned":
        _write_delta_rs_table(dest, partitioned=True, configuration=None)
    elif kind == "checkpointed":
        _write_delta_rs_table(dest, partitioned=False, configuration={"delta.checkpointInterval": "2"})
    elif kind == "corpus":
        from tests.helpers import copy_table

        copy_table(CORPUS_TABLE, dest)
    else:
        raise ValueError(f"unknown table kind {kind!r}")


def _link_or_copy(src: str, dst: str) -> None:
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)


class Templates:
    """Each table kind built once (and its VACUUM variant: the same table compacted by delta-rs, so 24-30 removed
    files wait for VACUUM); every kill works on a copy."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._rows: dict[str, list[tuple]] = {}

    def path(self, kind: str, operation: str) -> Path:
        name = f"{kind}-vacuum" if operation == "vacuum" else kind
        path = self.root / name
        if not path.exists():
            if operation == "vacuum":
                import deltalake

                shutil.copytree(self.path(kind, "optimize"), path)
                deltalake.DeltaTable(str(path)).optimize.compact()
            else:
                _build_template(kind, path)
        return path

    def copy(self, kind: str, operation: str, dest: Path) -> Path:
        """A copy of the template made of hard links: nothing writes a file in place (data files are new names,
        commits are create-only, checkpoints and ``_last_checkpoint`` are renamed into place), so the template
        cannot change, and a copy costs no data."""
        shutil.copytree(self.path(kind, operation), dest, copy_function=_link_or_copy)
        return dest

    def rows(self, kind: str, operation: str) -> list[tuple]:
        key = f"{kind}/{operation == 'vacuum'}"
        if key not in self._rows:
            self._rows[key] = delta_rs_rows(self.path(kind, operation))
        return self._rows[key]


# -- reading a table the independent way ----------------------------------------------------------------------------


def _normalized(table: Any) -> list[tuple]:
    names = sorted(table.column_names)
    columns = [table.column(n).to_pylist() for n in names]
    rows = list(zip(*columns, strict=True)) if columns else []
    return sorted(rows, key=lambda row: tuple((v is None, v if v is not None else 0) for v in row))


def delta_rs_rows(path: Path) -> list[tuple]:
    """The latest version's rows as read by delta-rs, columns by name, rows sorted."""
    import deltalake

    return _normalized(deltalake.DeltaTable(str(path)).to_pyarrow_table())


def engine_rows(path: Path) -> tuple[int, list[tuple]]:
    """The latest version and its rows as read by deltalite's engine (snapshot + scan)."""
    from airflow_provider_deltalite import DeltaTable
    from airflow_provider_deltalite.engine.scan import scan

    snapshot = DeltaTable(str(path)).snapshot()
    rows, _ = scan(snapshot)
    return snapshot.version, _normalized(rows)


def live_files(path: Path) -> set[str]:
    """The live data files of the latest version (delta-rs ``file_uris()``), relative to the table root."""
    import deltalake

    return _relative(deltalake.DeltaTable(str(path)).file_uris(), path)


def _relative(uris: Iterable[str], table: Path) -> set[str]:
    root = os.path.realpath(table)
    return {os.path.relpath(os.path.realpath(u.removeprefix("file://")), root) for u in uris}


def files_on_disk(path: Path) -> set[str]:
    """Every file below the table root outside ``_delta_log``, hidden names included."""
    out = set()
    for dirpath, dirnames, filenames in os.walk(path):
        if Path(dirpath) == path:
            dirnames[:] = [d for d in dirnames if d != "_delta_log"]
        for name in filenames:
            out.add(os.path.relpath(os.path.join(dirpath, name), path))
    return out


def _hidden(relative: str) -> bool:
    return any(part.startswith((".", "_")) for part in relative.split("/"))


_COMMIT = re.compile(r"([0-9]{20})\.json")
_CHECKPOINT = re.compile(r"([0-9]{20})\.checkpoint(\.[0-9]{10}\.[0-9]{10}|\.[0-9a-fA-F-]{36})?\.parquet")
_ACTIONS = {"add", "remove", "metaData", "protocol", "commitInfo", "txn", "cdc", "domainMetadata", "checkpointMetadata"}


@dataclass
class LogState:
    """What check (e) found in ``_delta_log``."""

    latest: int | None
    checkpoints: list[int]
    last_checkpoint: int | None
    temp_files: int
    problems: list[str]


def check_log(path: Path) -> LogState:
    """Check (e): contiguous commits from 0, each line of each commit one JSON action, every checkpoint Parquet file
    readable, and ``_last_checkpoint`` naming a complete checkpoint whose row count matches ``size``."""
    import pyarrow.parquet as pq

    log = path / "_delta_log"
    names = sorted(os.listdir(log))
    problems: list[str] = []
    commits = sorted(int(m.group(1)) for n in names if (m := _COMMIT.fullmatch(n)))
    if not commits:
        return LogState(None, [], None, 0, ["no commit files"])
    if commits != list(range(commits[0], commits[-1] + 1)):
        problems.append(f"gap in the log: versions {sorted(set(range(commits[0], commits[-1] + 1)) - set(commits))}")
    if commits[0] != 0:
        problems.append(f"the log starts at version {commits[0]}")
    for v in commits:
        text = (log / f"{v:020d}.json").read_text(encoding="utf-8")
        lines = [line for line in text.split("\n") if line.strip()]
        if not lines:
            problems.append(f"commit {v} is empty")
        for line in lines:
            try:
                action = json.loads(line)
            except ValueError:
                problems.append(f"commit {v} has a line that is not JSON")
                break
            if not (isinstance(action, dict) and len(action) == 1 and next(iter(action)) in _ACTIONS):
                problems.append(f"commit {v} has a line that is not one action: {line[:80]}")
                break
    checkpoint_rows: dict[str, int] = {}
    checkpoints = set()
    for name in names:
        m = _CHECKPOINT.fullmatch(name)
        if not m:
            continue
        try:
            checkpoint_rows[name] = pq.read_metadata(log / name).num_rows
        except Exception as exc:  # any failure to read the footer is a torn checkpoint
            problems.append(f"checkpoint {name} is unreadable: {type(exc).__name__}")
            continue
        checkpoints.add(int(m.group(1)))
    last = None
    if (log / "_last_checkpoint").exists():
        try:
            hint = json.loads((log / "_last_checkpoint").read_text(encoding="utf-8"))
            last = int(hint["version"])
        except (ValueError, KeyError, TypeError):
            problems.append("_last_checkpoint does not parse")
        else:
            if hint.get("v2Checkpoint"):
                files = [hint["v2Checkpoint"]["path"]]
            elif hint.get("parts"):
                files = [
                    f"{last:020d}.checkpoint.{i:010d}.{hint['parts']:010d}.parquet" for i in range(1, hint["parts"] + 1)
                ]
            else:
                files = [f"{last:020d}.checkpoint.parquet"]
            missing = [f for f in files if f not in checkpoint_rows]
            if missing:
                problems.append(f"_last_checkpoint names version {last}, but {missing[0]} is missing or unreadable")
            elif "size" in hint and not hint.get("v2Checkpoint"):
                rows = sum(checkpoint_rows[f] for f in files)
                if rows != hint["size"]:
                    problems.append(f"_last_checkpoint says {hint['size']} actions, the checkpoint holds {rows}")
            if last > commits[-1]:
                problems.append(f"_last_checkpoint names version {last}, after the latest commit {commits[-1]}")
    temp = sum(1 for n in names if n.startswith(".") and n.endswith(".tmp"))
    return LogState(commits[-1], sorted(checkpoints), last, temp, problems)


# -- running the operation ------------------------------------------------------------------------------------------


def cli_args(operation: str, kind: TableKind, table: Path) -> list[str]:
    """The ``deltalite`` arguments of one operation on ``table``."""
    if operation == "optimize":
        return ["optimize", str(table), "--json", *kind.optimize_args]
    if operation == "zorder":
        return ["zorder", str(table), "--columns", kind.zorder_by, "--json"]
    if operation == "vacuum":
        return ["vacuum", str(table), *VACUUM_ZERO, "--json"]
    if operation == "checkpoint":
        return ["checkpoint", str(table), "--json"]
    raise ValueError(f"unknown operation {operation!r}")


def spark_job_args(operation: str, kind: TableKind, table: Path) -> list[str]:
    """The spark-submit job's arguments of one operation on ``table``."""
    if operation == "optimize":
        return ["optimize", "--table", str(table), *kind.optimize_args]
    if operation == "zorder":
        return ["zorder", "--table", str(table), "--columns", kind.zorder_by]
    if operation == "vacuum":
        return ["vacuum", "--table", str(table), *VACUUM_ZERO]
    raise ValueError(f"the spark job has no {operation!r} command")


def fork_server() -> None:
    """The fork server's loop (run by `LocalRunner` as ``python -c``): import the CLI once, then for each request
    line ``{"argv", "env", "stdout", "stderr"}`` fork a child running the CLI, answer ``{"pid"}``, wait for it to end
    and answer ``{"status"}`` (the exit code, or minus the signal that ended it). EOF on stdin ends the server.

    The ended child is reaped only when the next request arrives: until then its pid stays a zombie that cannot be
    reused, so the harness may SIGKILL it at any moment before it has read the status (a late kill does nothing).
    """
    import importlib

    for module in PRELOAD:
        importlib.import_module(module)
    importlib.import_module("pyarrow").array([0])  # pyarrow's one-time first use; it starts no thread
    reply = sys.stdout
    reply.write("ready\n")
    reply.flush()
    ended = None
    for line in sys.stdin:
        if ended is not None:
            os.waitpid(ended, 0)
        request = json.loads(line)
        pid = os.fork()
        if pid == 0:
            _cli_child(**request)
        reply.write(json.dumps({"pid": pid}) + "\n")
        reply.flush()
        info = os.waitid(os.P_PID, pid, os.WEXITED | os.WNOWAIT)
        assert info is not None
        status = info.si_status if info.si_code == os.CLD_EXITED else -info.si_status
        reply.write(json.dumps({"status": status}) + "\n")
        reply.flush()
        ended = pid
    if ended is not None:
        os.waitpid(ended, 0)


def _cli_child(argv: list[str], env: dict[str, str], stdout: str, stderr: str) -> None:
    """A forked child: the ``deltalite`` CLI's ``main(argv)`` with ``env`` set and its output in two files."""
    code = 1
    try:
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        for fd, target in ((1, stdout), (2, stderr)):
            handle = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            os.dup2(handle, fd)
            os.close(handle)
        sys.stdin = open(0, closefd=False)  # noqa: SIM115 - the server's pipe must not be read by the child
        os.environ.update(env)
        from airflow_provider_deltalite.cli import main

        code = main(argv)
    except BaseException:
        import traceback

        traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


@dataclass
class ChildRun:
    """How a child ended: its exit code (negative: killed by that signal), seconds, and output."""

    exit_code: int
    seconds: float
    stdout: str
    stderr: str
    delay: float | None = None


class LocalRunner:
    """Runs CLI children forked from a server process that has the CLI imported (see the module docstring).

    The children are real processes (a SIGKILL ends one the way it ends ``python -m airflow_provider_deltalite``),
    they only skip the interpreter start and the imports.
    """

    def __init__(self) -> None:
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
        self.server = subprocess.Popen(
            [sys.executable, "-c", "from tests.reliability.crash_harness import fork_server; fork_server()"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            cwd=REPO,
            env=env,
        )
        assert self.server.stdin is not None and self.server.stdout is not None
        self._requests, self._replies = self.server.stdin, self.server.stdout.fileno()
        self._buffer = b""
        if self._readline(LOCAL_TIMEOUT_S) != b"ready":
            raise HarnessError(f"the fork server did not start (exit {self.server.wait()})")

    def _readline(self, timeout: float) -> bytes | None:
        """The server's next line, or None if none arrives within ``timeout`` seconds (unbuffered, so that a line
        already read is never waited for again)."""
        deadline = time.monotonic() + timeout
        while b"\n" not in self._buffer:
            ready, _, _ = select.select([self._replies], [], [], max(0.0, deadline - time.monotonic()))
            if not ready:
                return None
            chunk = os.read(self._replies, 65536)
            if not chunk:
                raise HarnessError(f"the fork server ended (exit {self.server.wait()})")
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        return line

    def run(
        self, argv: Sequence[str], workdir: Path, *, env: dict[str, str] | None = None, delay: float | None = None
    ) -> ChildRun:
        """Run ``deltalite ARGV``; with ``delay``, SIGKILL it after that many seconds unless it ended first."""
        out, err = workdir / f"stdout-{time.monotonic_ns()}", workdir / f"stderr-{time.monotonic_ns()}"
        request = {"argv": list(argv), "env": dict(env or {}), "stdout": str(out), "stderr": str(err)}
        start = time.monotonic()
        self._requests.write(json.dumps(request).encode() + b"\n")
        self._requests.flush()
        pid = json.loads(self._readline(LOCAL_TIMEOUT_S) or b"null")["pid"]
        line = self._readline(LOCAL_TIMEOUT_S if delay is None else delay)
        if line is None:
            os.kill(pid, signal.SIGKILL)  # running or a zombie: the server reaps it only at the next request
            line = self._readline(LOCAL_TIMEOUT_S)
            if delay is None:
                raise HarnessError(f"deltalite {' '.join(argv)} timed out after {LOCAL_TIMEOUT_S} s")
        status = json.loads(line or b"null")["status"]
        return ChildRun(status, time.monotonic() - start, _read(out), _read(err), delay)

    def close(self) -> None:
        """End the fork server (EOF on its stdin)."""
        self._requests.close()
        try:
            self.server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.server.kill()
            self.server.wait()


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        return ""


class HarnessError(RuntimeError):
    """The harness itself could not do what it needed (a timeout, a Spark that does not start)."""


class SparkRunner:
    """Runs the deltalite job with spark-submit on ``local[2]`` in its own process group."""

    def __init__(self, workdir: Path) -> None:
        from airflow_provider_deltalite.executors.engine_zip import build_package_zip
        from tests.executors.spark_cluster import FAST_JVM_OPTIONS, spark_env, spark_home

        self.local_dir = workdir / "spark-local"
        self.local_dir.mkdir(parents=True, exist_ok=True)
        job = REPO / "airflow_provider_deltalite" / "jobs" / "driver.py"
        self.command = [
            str(spark_home() / "bin" / "spark-submit"),
            "--master",
            "local[2]",
            *("--conf", "spark.ui.enabled=false"),
            *("--conf", "spark.driver.host=127.0.0.1"),
            *("--conf", "spark.driver.bindAddress=127.0.0.1"),
            *("--conf", f"spark.driver.extraJavaOptions={FAST_JVM_OPTIONS}"),
            *("--conf", f"spark.executor.extraJavaOptions={FAST_JVM_OPTIONS}"),
            *("--conf", f"spark.local.dir={self.local_dir}"),
            *("--py-files", build_package_zip()),
            str(job),
        ]
        # the driver takes the engine from the zip, as on a cluster machine without the package installed
        self.env = {**spark_env(), "PYTHONPATH": "", "PYSPARK_DRIVER_PYTHON": sys.executable}

    def run(
        self, argv: Sequence[str], workdir: Path, *, env: dict[str, str] | None = None, delay: float | None = None
    ) -> ChildRun:
        """Run the job; with ``delay``, SIGKILL the process group that long after the Python driver started."""
        out, err = workdir / f"spark-stdout-{time.monotonic_ns()}", workdir / f"spark-stderr-{time.monotonic_ns()}"
        with out.open("wb") as stdout, err.open("wb") as stderr:
            start = time.monotonic()
            proc = subprocess.Popen(
                [*self.command, *argv],
                stdout=stdout,
                stderr=stderr,
                env={**self.env, **(env or {})},
                cwd=REPO,
                start_new_session=True,  # its own process group: the JVM, the driver and the workers die together
            )
            try:
                driver_at = self._wait_for_driver(proc, start) if delay is not None else None
                if delay is not None and driver_at is not None:
                    try:
                        proc.wait(timeout=max(0.0, driver_at + delay - time.monotonic()))
                    except subprocess.TimeoutExpired:
                        os.killpg(proc.pid, signal.SIGKILL)
                try:
                    proc.wait(timeout=SPARK_TIMEOUT_S)
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait()
                    raise HarnessError(f"spark-submit {' '.join(argv)} timed out") from None
            finally:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)  # Python workers or a JVM that outlived the launcher
        seconds = time.monotonic() - start
        return ChildRun(proc.returncode, seconds, _read(out), _read(err), delay)

    def driver_seconds(self, argv: Sequence[str], workdir: Path) -> float:
        """Seconds from the Python driver's start to the end of an unkilled run (the span random delays cover)."""
        out = workdir / "spark-measure.out"
        with out.open("wb") as sink:
            start = time.monotonic()
            proc = subprocess.Popen(
                [*self.command, *argv], stdout=sink, stderr=sink, env=self.env, cwd=REPO, start_new_session=True
            )
            try:
                driver_at = self._wait_for_driver(proc, start)
                proc.wait(timeout=SPARK_TIMEOUT_S)
            finally:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
        if proc.returncode != 0 or driver_at is None:
            raise HarnessError(f"unkilled spark-submit run failed ({proc.returncode}): {_read(out)[-2000:]}")
        return time.monotonic() - driver_at

    @staticmethod
    def _wait_for_driver(proc: subprocess.Popen, start: float) -> float | None:
        """When the job's Python driver process appeared in the group (None: the launcher ended first)."""
        while proc.poll() is None:
            if _driver_pid(proc.pid) is not None:
                return time.monotonic()
            if time.monotonic() - start > SPARK_TIMEOUT_S:
                raise HarnessError("the Spark job's Python driver never started")
            time.sleep(0.02)
        return None


def _driver_pid(pgid: int) -> int | None:
    """The pid of the Python process running driver.py in process group ``pgid`` (from /proc)."""
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2 :].split()
        if int(fields[2]) != pgid or len(cmdline) < 2:
            continue
        if b"python" in os.path.basename(cmdline[0]) and cmdline[1].endswith(b"jobs/driver.py"):
            return int(entry)
    return None


# -- one kill -------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Scenario:
    """One kill: the operation, the table kind, where (a named point, or None for a random delay), which executor.

    ``rerun_executor`` is where the checks' re-run of the operation runs (Spark kills: ``spark`` by default).
    """

    operation: str
    kind: str
    point: str | None
    executor: str = "local"
    rerun_executor: str | None = None

    @property
    def label(self) -> str:
        return self.point or "random"


@dataclass
class KillResult:
    """Everything measured and checked for one kill (see the module docstring for the checks)."""

    scenario: dict[str, Any]
    outcome: str = ""  # killed | finished | failed
    exit_code: int | None = None
    delay_s: float | None = None
    span_s: float | None = None
    version_before: int | None = None
    after_kill: dict[str, Any] = field(default_factory=dict)
    rerun: dict[str, Any] = field(default_factory=dict)
    checks: dict[str, bool] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)
    kill_s: float | None = None
    rerun_s: float | None = None
    seconds: float = 0.0
    kept: str | None = None

    @property
    def corrupt(self) -> bool:
        return bool(self.problems) or not all(self.checks.values())

    def check(self, name: str, ok: bool, problem: str) -> bool:
        self.checks[name] = self.checks.get(name, True) and ok
        if not ok:
            self.problems.append(f"{name}: {problem}")
        return ok

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "corrupt": self.corrupt}


def _rerun_stats(operation: str, doc: dict[str, Any]) -> dict[str, Any]:
    if operation in ("optimize", "zorder"):
        keys = ("numFilesAdded", "numFilesRemoved", "committedVersions")
        return {k: doc.get(k) for k in keys}
    if operation == "vacuum":
        return {k: doc.get(k) for k in ("objectsDeleted", "committedVersions")}
    return {"version": doc.get("checkpoint", {}).get("version")}


def _parse_stats(run: ChildRun, executor: str) -> dict[str, Any] | None:
    if executor == "spark":
        for line in run.stdout.splitlines():
            if line.startswith("DELTALITE_RESULT "):
                return json.loads(line.removeprefix("DELTALITE_RESULT "))
        return None
    try:
        return json.loads(run.stdout)
    except ValueError:
        return None


class Harness:
    """Prepares tables, runs scenarios and checks them. Use as a context manager (it owns a fork server)."""

    def __init__(self, workdir: Path, *, seed: int = 0, keep: bool = False) -> None:
        self.workdir = workdir
        self.rng = random.Random(seed)
        self.keep = keep
        self.templates = Templates(workdir / "templates")
        self.templates.root.mkdir(parents=True, exist_ok=True)
        self.local = LocalRunner()
        self._spark: SparkRunner | None = None
        self._baselines: dict[tuple[str, str, str], dict[str, Any]] = {}
        self._count = 0

    def __enter__(self) -> Harness:
        return self

    def __exit__(self, *exc: object) -> None:
        self.local.close()

    @property
    def spark(self) -> SparkRunner:
        if self._spark is None:
            self._spark = SparkRunner(self.workdir)
        return self._spark

    def _runner(self, executor: str) -> LocalRunner | SparkRunner:
        return self.spark if executor == "spark" else self.local

    def _args(self, executor: str, operation: str, kind: str, table: Path) -> list[str]:
        if executor == "spark":
            return spark_job_args(operation, KINDS[kind], table)
        return cli_args(operation, KINDS[kind], table)

    def baseline(self, operation: str, kind: str, executor: str = "local") -> dict[str, Any]:
        """An unkilled run on a fresh copy: its duration (the random-delay span) and the live files it leaves."""
        key = (operation, kind, executor)
        if key not in self._baselines:
            dest = self.workdir / f"baseline-{operation}-{kind}-{executor}"
            table = self.templates.copy(kind, operation, dest / "table")
            args = self._args(executor, operation, kind, table)
            if executor == "spark":
                span = self.spark.driver_seconds(args, dest)
            else:
                run = self.local.run(args, dest)
                if run.exit_code != 0:
                    raise HarnessError(f"unkilled run failed ({run.exit_code}): {run.stderr.strip()}")
                span = run.seconds
            self._baselines[key] = {"span_s": span, "live_files": len(live_files(table))}
            shutil.rmtree(dest)
        return self._baselines[key]

    def run(self, scenario: Scenario) -> KillResult:
        """Prepare, kill, check; the table copy is removed afterwards unless it is corrupt (or ``keep``)."""
        self._count += 1
        started = time.monotonic()
        result = KillResult(scenario=asdict(scenario))
        dest = self.workdir / "kills" / f"{self._count:03d}-{scenario.executor}-{scenario.operation}-{scenario.kind}"
        dest.mkdir(parents=True)
        table = self.templates.copy(scenario.kind, scenario.operation, dest / "table")
        before_rows = self.templates.rows(scenario.kind, scenario.operation)
        before_files = files_on_disk(table)
        before_log = check_log(table)
        result.version_before = before_log.latest
        try:
            self._kill(scenario, table, dest, result)
            self._check_after_kill(scenario, table, dest, result, before_rows, before_files, before_log)
        except HarnessError:
            raise
        except Exception as exc:  # a check that could not even run is a failed check, with what happened
            result.check("harness", False, f"{type(exc).__name__}: {exc}")
        result.seconds = round(time.monotonic() - started, 3)
        if result.corrupt or self.keep:
            result.kept = str(dest)
        else:
            shutil.rmtree(dest)
        return result

    def _kill(self, scenario: Scenario, table: Path, dest: Path, result: KillResult) -> None:
        args = self._args(scenario.executor, scenario.operation, scenario.kind, table)
        runner = self._runner(scenario.executor)
        if scenario.point is not None:
            run = runner.run(args, dest, env={CRASH_ENV: scenario.point})
        else:
            span = self.baseline(scenario.operation, scenario.kind, scenario.executor)["span_s"]
            result.span_s = round(span, 4)
            run = runner.run(args, dest, delay=self.rng.uniform(0.0, span))
        result.exit_code = run.exit_code
        result.kill_s = round(run.seconds, 3)
        result.delay_s = None if run.delay is None else round(run.delay, 4)
        # A named point kills the Python driver, whose death spark-submit reports as 137; a random delay kills the
        # whole group, spark-submit included (-9).
        spark_named = scenario.executor == "spark" and scenario.point is not None
        if run.exit_code == (SPARK_EXIT_DRIVER_KILLED if spark_named else -signal.SIGKILL):
            result.outcome = "killed"
        elif run.exit_code == 0:
            result.outcome = "finished"
        else:
            result.outcome = "failed"
            result.check("killed_run", False, f"exit {run.exit_code}: {run.stderr.strip()[-500:]}")

    def _check_after_kill(
        self,
        scenario: Scenario,
        table: Path,
        dest: Path,
        result: KillResult,
        before_rows: list[tuple],
        before_files: set[str],
        before_log: LogState,
    ) -> None:
        # (e), (a) and (b) on the state the kill left
        log = check_log(table)
        result.check("e_log_after_kill", not log.problems, "; ".join(log.problems))
        view = _open_both(table, result, "after the kill", before_rows)
        result.check("a_opens_delta_rs", view.version == log.latest, f"delta-rs at {view.version}, log at {log.latest}")
        on_disk = files_on_disk(table)
        result.after_kill = {
            "versions_committed": (log.latest or 0) - (before_log.latest or 0),
            "new_unreferenced_files": len(on_disk - before_files - view.live),
            "deleted_files": len(before_files - on_disk),
            "log_temp_files": log.temp_files,
            "new_checkpoints": len(set(log.checkpoints) - set(before_log.checkpoints)),
            "last_checkpoint": log.last_checkpoint,
        }

        # (c) re-run to completion. Hidden files the table had before (the corpus table's Hadoop `.crc` files) are
        # outside the checks: VACUUM never deletes hidden files, by design.
        kept_hidden = {f for f in before_files if _hidden(f)}
        executor = scenario.rerun_executor or scenario.executor
        rerun = self._runner(executor).run(self._args(executor, scenario.operation, scenario.kind, table), dest)
        stats = _parse_stats(rerun, executor)
        result.rerun = {"executor": executor, "exit_code": rerun.exit_code, "stats": None}
        result.rerun_s = round(rerun.seconds, 3)
        if result.check(
            "c_rerun_completes",
            rerun.exit_code == 0 and stats is not None,
            f"exit {rerun.exit_code}: {rerun.stderr.strip()[-500:]}",
        ):
            result.rerun["stats"] = _rerun_stats(scenario.operation, stats)
        view = _open_both(table, result, "after the re-run", before_rows, engine=False)
        result.check("c_rows_after_rerun", view.rows == before_rows, "rows changed after the re-run")
        if scenario.operation in ("optimize", "zorder"):
            expected = self.baseline(scenario.operation, scenario.kind)["live_files"]
            count = len(view.live)
            result.check("c_end_state", count == expected, f"{count} live files, an unkilled run leaves {expected}")
        elif scenario.operation == "vacuum":
            extra = files_on_disk(table) - view.live - kept_hidden
            result.check("c_end_state", not extra, f"{len(extra)} files that are not live, e.g. {sorted(extra)[:3]}")
        else:
            log = check_log(table)
            result.check(
                "c_end_state",
                log.last_checkpoint == log.latest,
                f"_last_checkpoint at {log.last_checkpoint}, latest {log.latest}",
            )

        # (d) VACUUM with retention 0 leaves exactly the live files
        vacuum = self.local.run(cli_args("vacuum", KINDS[scenario.kind], table), dest)
        result.check(
            "d_vacuum_completes", vacuum.exit_code == 0, f"exit {vacuum.exit_code}: {vacuum.stderr.strip()[-500:]}"
        )
        view = _open_both(table, result, "after VACUUM", before_rows)
        on_disk = files_on_disk(table)
        extra = on_disk - view.live - kept_hidden
        result.check(
            "d_only_live_files_left",
            not extra and view.live <= on_disk,
            f"{len(extra)} files not live left (e.g. {sorted(extra)[:3]}), "
            f"{len(view.live - on_disk)} live files missing",
        )
        result.check("d_rows_after_vacuum", view.rows == before_rows, "rows changed after VACUUM")
        final = check_log(table)
        result.check("e_log_final", not final.problems, "; ".join(final.problems))
        result.after_kill["final_log_temp_files"] = final.temp_files


@dataclass
class _View:
    version: int | None = None
    rows: list[tuple] | None = None
    live: set[str] = field(default_factory=set)


def _open_both(path: Path, result: KillResult, when: str, before_rows: list[tuple], *, engine: bool = True) -> _View:
    """Open with delta-rs (version, rows, live files) and, with ``engine``, with deltalite (version and rows, which
    must equal ``before_rows``); a failure to open is a failed check named after ``when``."""
    import deltalake

    view = _View()
    try:
        dt = deltalake.DeltaTable(str(path))
        view.version, view.rows = dt.version(), _normalized(dt.to_pyarrow_table())
        view.live = _relative(dt.file_uris(), path)
    except Exception as exc:
        result.check("a_opens_delta_rs", False, f"{when}: {type(exc).__name__}: {exc}")
    if engine:
        try:
            version, rows = engine_rows(path)
        except Exception as exc:
            result.check("a_opens_engine", False, f"{when}: {type(exc).__name__}: {exc}")
        else:
            result.check("a_opens_engine", version == view.version, f"{when}: deltalite at version {version}")
            result.check("b_rows_equal_engine", rows == before_rows, f"{when}: deltalite reads other rows than before")
    if view.rows is not None and when == "after the kill":
        result.check("b_rows_equal", view.rows == before_rows, "delta-rs reads other rows than before")
    return view


# -- plans, summary, command line -----------------------------------------------------------------------------------


def named_scenarios(executor: str = "local") -> list[Scenario]:
    """Every (operation, table kind, named point) that applies, in a fixed order."""
    ops = SPARK_OPERATIONS if executor == "spark" else OPERATIONS
    return [
        Scenario(op, kind, point, executor)
        for (op, kind), points in NAMED_POINTS.items()
        if op in ops
        for point in points
    ]


# Spark kills of the full run, in this order: named points first, then random delays.
SPARK_PLAN = (
    Scenario("optimize", "flat", "after_data_files", "spark"),
    Scenario("vacuum", "partitioned", "vacuum_before_end", "spark"),
    Scenario("zorder", "checkpointed", "during_checkpoint_write", "spark"),
    Scenario("optimize", "partitioned", "during_commit_write@2", "spark"),
    Scenario("optimize", "partitioned", None, "spark"),
    Scenario("zorder", "flat", None, "spark"),
    Scenario("vacuum", "flat", None, "spark"),
    Scenario("optimize", "checkpointed", None, "spark"),
)


def plan(kills: int, spark_kills: int, rng: random.Random) -> list[Scenario]:
    """``kills`` scenarios: ``spark_kills`` from `SPARK_PLAN` (cycled), every local named point once (as many as
    fit), and random-delay kills spread evenly over every (operation, table kind) for the rest."""
    spark = [SPARK_PLAN[i % len(SPARK_PLAN)] for i in range(min(spark_kills, kills))]
    local_budget = kills - len(spark)
    named = named_scenarios()[:local_budget]
    pairs = [(op, kind) for op in OPERATIONS for kind in KINDS]
    randoms = [Scenario(*pairs[i % len(pairs)], None) for i in range(local_budget - len(named))]
    rng.shuffle(randoms)
    return [*named, *randoms, *spark]


def summarize(results: Iterable[KillResult]) -> list[dict[str, Any]]:
    """One row per (executor, operation, point): kills delivered, finished before the kill, corruptions, and what the
    delivered kills left (commits made before the kill, files left unreferenced, hidden temporary files in the log)."""
    rows: dict[tuple[str, str, str], Counter] = {}
    for r in results:
        s = r.scenario
        key = (s["executor"], s["operation"], s["point"] or "random")
        c = rows.setdefault(key, Counter())
        c["runs"] += 1
        c["delivered"] += r.outcome == "killed"
        c["finished"] += r.outcome == "finished"
        c["failed"] += r.outcome == "failed"
        c["corruptions"] += r.corrupt
        if r.outcome == "killed":
            c["committed_before_kill"] += bool(r.after_kill.get("versions_committed"))
            c["left_unreferenced_files"] += bool(r.after_kill.get("new_unreferenced_files"))
            c["left_log_temp_files"] += bool(r.after_kill.get("log_temp_files"))
    return [
        {"executor": e, "operation": o, "point": p, **{k: c[k] for k in SUMMARY_COLUMNS}}
        for (e, o, p), c in sorted(
            rows.items(), key=lambda kv: (kv[0][0], OPERATIONS.index(kv[0][1]), kv[0][2] == "random", kv[0][2])
        )
    ]


SUMMARY_COLUMNS = (
    "runs",
    "delivered",
    "finished",
    "failed",
    "corruptions",
    "committed_before_kill",
    "left_unreferenced_files",
    "left_log_temp_files",
)


def format_table(summary: Sequence[dict[str, Any]]) -> str:
    """The summary as a fixed-width text table with a total line."""
    headers = (
        "executor",
        "operation",
        "point",
        "runs",
        "delivered",
        "finished",
        "failed",
        "corrupt",
        "committed",
        "orphans",
        "log tmp",
    )
    lines = []
    for row in summary:
        lines.append((row["executor"], row["operation"], row["point"], *(str(row[k]) for k in SUMMARY_COLUMNS)))
    totals = ("total", "", "", *(str(sum(row[k] for row in summary)) for k in SUMMARY_COLUMNS))
    widths = [max(len(str(x)) for x in col) for col in zip(headers, *lines, totals, strict=True)]

    def fmt(cells: Sequence[str]) -> str:
        return "  ".join(
            c.ljust(w) if i < 3 else c.rjust(w) for i, (c, w) in enumerate(zip(cells, widths, strict=True))
        )

    rule = "  ".join("-" * w for w in widths)
    return "\n".join([fmt(headers), rule, *(fmt(line) for line in lines), rule, fmt(totals)])


def run_harness(
    scenarios: Sequence[Scenario],
    *,
    seed: int = 0,
    workdir: Path | None = None,
    keep: bool = False,
    progress: bool = False,
) -> dict[str, Any]:
    """Run ``scenarios`` and return the report (the JSON document): summary rows, every kill, totals, wall time.

    Example:
        >>> report = run_harness([Scenario("optimize", "flat", "after_data_files")])  # doctest: +SKIP
        >>> report["totals"]["corruptions"]  # doctest: +SKIP
        0
    """
    start, load_before = time.monotonic(), os.getloadavg()
    own = workdir is None
    root = Path(tempfile.mkdtemp(prefix="deltalite-crash-")) if own else workdir
    results: list[KillResult] = []
    try:
        with Harness(root, seed=seed, keep=keep) as harness:
            for i, scenario in enumerate(scenarios, 1):
                result = harness.run(scenario)
                results.append(result)
                if progress:
                    sys.stderr.write(
                        f"[{i}/{len(scenarios)}] {scenario.executor} {scenario.operation} {scenario.kind} "
                        f"{scenario.label}: {result.outcome}"
                        f"{' CORRUPT ' + '; '.join(result.problems) if result.corrupt else ''}"
                        f" ({result.seconds:.1f} s)\n"
                    )
            baselines = {f"{o}/{k}/{e}": b for (o, k, e), b in harness._baselines.items()}
    finally:
        if own and not keep and not any(r.corrupt for r in results):
            shutil.rmtree(root, ignore_errors=True)
    summary = summarize(results)
    return {
        "seed": seed,
        "wall_seconds": round(time.monotonic() - start, 1),
        # the machine is shared: wall times mean little without the load they ran under
        "load_average_start": [round(x, 2) for x in load_before],
        "load_average_end": [round(x, 2) for x in os.getloadavg()],
        "cpu_count": os.cpu_count(),
        "table_kinds": {k.name: k.description for k in KINDS.values()},
        "baselines": baselines,
        "summary": summary,
        "totals": {k: sum(row[k] for row in summary) for k in SUMMARY_COLUMNS},
        "kills": [r.to_dict() for r in results],
        "workdir": str(root) if (keep or not own or any(r.corrupt for r in results)) else None,
    }


def main(argv: Sequence[str] | None = None) -> int:
    """Command line: run ``--kills`` kills, print the table, write the JSON; exit 1 when anything was corrupted."""
    parser = argparse.ArgumentParser(prog="crash_harness", description=__doc__.split("\n\n")[0])
    parser.add_argument("--kills", type=int, default=100)
    parser.add_argument("--spark-kills", type=int, default=8, help="how many of the kills hit the Spark job's driver")
    parser.add_argument("--seed", type=int, default=None, help="random delays and order (default: random)")
    parser.add_argument(
        "--json", type=Path, default=DEFAULT_JSON, help=f"report file (default {DEFAULT_JSON.relative_to(REPO)})"
    )
    parser.add_argument("--workdir", type=Path, help="work directory (default: a temporary one)")
    parser.add_argument("--keep", action="store_true", help="keep every table copy")
    args = parser.parse_args(argv)
    if args.kills < 1 or not 0 <= args.spark_kills <= args.kills:
        parser.error("--kills must be at least 1, and --spark-kills between 0 and --kills")
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(1 << 31)
    scenarios = plan(args.kills, args.spark_kills, random.Random(seed))
    report = run_harness(scenarios, seed=seed, workdir=args.workdir, keep=args.keep, progress=True)
    print(format_table(report["summary"]))
    t = report["totals"]
    print(
        f"{t['runs']} kills (seed {seed}): {t['delivered']} delivered, {t['finished']} finished before the kill, "
        f"{t['failed']} failed otherwise, {t['corruptions']} corruptions; wall time {report['wall_seconds']} s"
    )
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")
    print(f"report: {args.json}")
    return 1 if t["corruptions"] or t["failed"] else 0


if __name__ == "__main__":
    raise SystemExit(main())
