"""Per-process cost: a `deltalite` command imports only what it uses, and one OPTIMIZE reads the log once."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import deltalake
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from airflow_provider_deltalite.cli import main, size_histogram
from airflow_provider_deltalite.cli.startup import PandasBlocker, pandas_kept_out
from airflow_provider_deltalite.engine.checkpoint_reader import _kept_pieces
from airflow_provider_deltalite.engine.errors import InvalidArgument
from airflow_provider_deltalite.engine.storage.table_storage import Storage
from airflow_provider_deltalite.maintenance.optimize import optimize
from airflow_provider_deltalite.table import DeltaTable
from tests.helpers import cli_failure, tree_state

# Top-level packages no local `describe` or `optimize` uses: pandas (pyarrow would import it for nothing), Airflow,
# Spark, fsspec (the local backend makes system calls), the object-store backends, their HTTP stacks and the XML parser
# of S3's listings, the peer engines.
HEAVY = {
    "pandas",
    "fsspec",
    "airflow",
    "pyspark",
    "py4j",
    "s3fs",
    "gcsfs",
    "adlfs",
    "aiobotocore",
    "botocore",
    "boto3",
    "aiohttp",
    "requests",
    "deltalake",
    "delta_kernel_rust_sharing_wrapper",
    "sqlalchemy",
    "pendulum",
    "grpc",
    "xml",
}

# Runs one command in a fresh interpreter, then reports on stderr which HEAVY packages and which of our maintenance
# modules it imported, whether it imported `pyarrow.compute` (the engine calls kernels through `arrow_compute`) and the
# expression modules (loaded where a predicate is parsed), and whether pandas still imports afterwards (the block is
# scoped to the command).
RUNNER = """
import json, sys
from airflow_provider_deltalite.cli import main
code = main(sys.argv[2:])
heavy = set(json.loads(sys.argv[1]))
report = {
    "code": code,
    "heavy": sorted({m.partition(".")[0] for m in sys.modules} & heavy),
    "maintenance": sorted(m for m in sys.modules if m.startswith("airflow_provider_deltalite.maintenance.")),
    "pyarrow.compute": "pyarrow.compute" in sys.modules,
    "expressions": "airflow_provider_deltalite.engine.expressions" in sys.modules,
}
import pandas
report["pandas_after"] = pandas.__name__
sys.stderr.write(json.dumps(report) + "\\n")
"""


def run_command(*args: str) -> tuple[dict[str, Any], dict[str, Any]]:
    out = subprocess.run(
        [sys.executable, "-c", RUNNER, json.dumps(sorted(HEAVY)), *args], capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout), json.loads(out.stderr.strip().splitlines()[-1])


def write_table(path: Path, commits: int, checkpoint_at: int | None = None) -> None:
    for i in range(commits):
        rows = pa.table({"id": pa.array(range(i * 10, i * 10 + 10), pa.int64()), "p": ["x", "y"] * 5})
        deltalake.write_deltalake(str(path), rows, mode="append", partition_by=["p"])
        if i == checkpoint_at:
            deltalake.DeltaTable(str(path)).create_checkpoint()


def test_describe_and_optimize_import_nothing_heavy(tmp_path: Path) -> None:
    table = tmp_path / "t"
    write_table(table, 3)
    doc, report = run_command("describe", "--json", str(table))
    # the options module is the CLI's argument parsing, the histogram counting is health's; no operation is loaded
    loaded = [
        f"airflow_provider_deltalite.maintenance.{m}"
        for m in (
            "health",
            "health.histogram",
            "health.metrics",
            "optimize_stats",
            "option_values",
            "options",
            "wording",
        )
    ]
    assert report == {
        "code": 0,
        "heavy": [],
        "maintenance": loaded,
        "pyarrow.compute": False,
        "expressions": False,
        "pandas_after": "pandas",
    }
    oracle = deltalake.DeltaTable(str(table))
    assert (doc["version"], doc["numFiles"]) == (oracle.version(), len(oracle.file_uris())) == (2, 6)

    stats, report = run_command("optimize", "--json", "--compression", "zstd", str(table))
    assert (report["code"], report["heavy"], report["pyarrow.compute"], report["expressions"]) == (0, [], False, False)
    assert report["pandas_after"] == "pandas"
    assert "airflow_provider_deltalite.maintenance.optimize" in report["maintenance"]
    # nor health's modules, nor the other commands' (the CLI loads the one command it runs)
    assert not [m for m in report["maintenance"] if ".vacuum" in m or ".changes" in m or ".health" in m]
    oracle = deltalake.DeltaTable(str(table))
    assert (stats["numFilesRemoved"], stats["numFilesAdded"]) == (6, 2)
    assert oracle.version() == 3 and len(oracle.file_uris()) == 2
    assert sorted(oracle.to_pyarrow_table().column("id").to_pylist()) == list(range(30))
    codecs = {pq.ParquetFile(uri).metadata.row_group(0).column(0).compression for uri in oracle.file_uris()}
    assert codecs == {"ZSTD"}


def test_optimize_with_where_loads_the_expressions_it_needs(tmp_path: Path) -> None:
    table = tmp_path / "t"
    write_table(table, 3)
    stats, report = run_command("optimize", "--json", "--where", "p = 'x'", str(table))
    assert (report["code"], report["expressions"]) == (0, True)
    oracle = deltalake.DeltaTable(str(table))
    # only partition x's three files were compacted; y's three stay
    assert (stats["numFilesRemoved"], stats["numFilesAdded"], oracle.version()) == (3, 1, 3)
    assert sorted(Path(uri).parent.name for uri in oracle.file_uris()) == ["p=x", "p=y", "p=y", "p=y"]
    assert sorted(oracle.to_pyarrow_table().column("id").to_pylist()) == list(range(30))


def test_a_bad_codec_is_one_line_and_writes_nothing(tmp_path: Path) -> None:
    table = tmp_path / "t"
    write_table(table, 2)
    before = tree_state(table)
    line = cli_failure("optimize", str(table), "--compression", "lzo")
    assert line == (
        f"deltalite: error: table {table}: compression must be one of snappy, zstd, gzip, brotli, lz4, none, got 'lzo'"
    )
    assert tree_state(table) == before


def test_the_block_is_scoped_to_pandas_free_commands_on_the_local_executor() -> None:
    with pandas_kept_out("describe", None) as blocked:
        assert blocked == ("pandas" not in sys.modules)
        assert any(isinstance(f, PandasBlocker) for f in sys.meta_path) == blocked
    assert not any(isinstance(f, PandasBlocker) for f in sys.meta_path)
    for command, executor in (("scan", None), ("optimize", "spark"), ("demo", None)):
        with pandas_kept_out(command, executor) as blocked:
            assert blocked is False
            assert not any(isinstance(f, PandasBlocker) for f in sys.meta_path)


class ReadCounter:
    """Counts the outermost `Storage` reads and listings by file name (`read_many` calls `read`: one read each)."""

    METHODS = ("read", "read_many", "read_range", "open_input", "open_data_file", "list_from", "list_dir", "exists")

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.calls: Counter[tuple[str, str]] = Counter()
        self.local = threading.local()  # the executor's threads read at the same time; nesting is per thread
        self.lock = threading.Lock()
        for name in self.METHODS:
            monkeypatch.setattr(Storage, name, self._counting(name, getattr(Storage, name)))

    def _counting(self, name: str, method: Any) -> Any:
        counter = self

        def counted(storage: Storage, target: str | Iterable[str], *args: Any, **kwargs: Any) -> Any:
            if isinstance(target, str):
                names = [target]
            else:
                target = list(target)
                names = target
            depth = getattr(counter.local, "depth", 0)
            if depth == 0:
                with counter.lock:
                    for n in names:
                        counter.calls[(name, n.rsplit("/", 1)[-1])] += 1
            counter.local.depth = depth + 1
            try:
                return method(storage, target, *args, **kwargs)
            finally:
                counter.local.depth = depth

        return counted

    def log_reads(self) -> dict[tuple[str, str], int]:
        """The reads of the log: not the data files an OPTIMIZE opens, or reads ranges of when it stitches them."""
        log_file = re.compile(r"^(\d{20}\.|_last_checkpoint$|_delta_log$|_sidecars$)")
        return {k: v for k, v in self.calls.items() if k[0] != "open_data_file" and log_file.match(k[1])}


def test_vacuum_from_a_local_inventory_imports_nothing_heavy(tmp_path: Path) -> None:
    from tests.maintenance.test_vacuum_inventory import _inventory_rows, _table, _write

    path = _table(tmp_path / "t")  # two removed files and an orphan, 30 days old
    csv = _write(_inventory_rows(path), tmp_path / "inventory.csv")
    doc, report = run_command("vacuum", "--json", "--dry-run", str(path), "--inventory", str(csv))
    assert (report["code"], report["heavy"], report["pyarrow.compute"]) == (0, [], False)
    # delta-rs also deletes the hidden p=a/.hidden.crc, which the reference keeps
    expected = set(deltalake.DeltaTable(str(path)).vacuum(dry_run=True, full=True)) - {"p=a/.hidden.crc"}
    assert {f["path"] for f in doc["filesToDelete"]} == expected and len(expected) == 3


@pytest.mark.parametrize("mode", ["full", "lite"])
def test_vacuum_from_a_checkpoint_imports_neither_heavy_packages_nor_pyarrow_compute(tmp_path: Path, mode: str) -> None:
    # Arrow's methods (`Table.filter`, `Array.cast`, `take`) import pyarrow.compute, 55-70 ms of one core, on their
    # first call: a VACUUM of a table with a checkpoint and tombstones reached three of them.
    table = tmp_path / "t"
    write_table(table, 4, checkpoint_at=1)
    deltalake.DeltaTable(str(table)).optimize.compact()  # 4 commits of 2 files: 8 tombstones, after the checkpoint
    expected = set(deltalake.DeltaTable(str(table)).vacuum(retention_hours=0, enforce_retention_duration=False))
    args = ["--retention-hours", "0", "--no-enforce-retention-duration", "--mode", mode]
    doc, report = run_command("vacuum", "--json", *args, str(table))
    assert (report["code"], report["heavy"], report["pyarrow.compute"], report["expressions"]) == (0, [], False, False)
    assert doc["objectsDeleted"] == len(expected) == 8
    assert not [p for p in expected if (table / p).exists()]
    oracle = deltalake.DeltaTable(str(table))
    assert sorted(oracle.to_pyarrow_table().column("id").to_pylist()) == list(range(40))


def test_one_optimize_loads_the_snapshot_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    table = tmp_path / "t"
    write_table(table, 13, checkpoint_at=10)  # versions 0-12, a checkpoint at 10
    counter = ReadCounter(monkeypatch)
    assert main(["optimize", "--json", str(table)]) == 0
    stats = json.loads(capsys.readouterr().out)
    # one snapshot: _last_checkpoint, one listing of the log, the checkpoint, the two commits after it; the commit
    # of version 13 is a create-only write of a version nobody took, so nothing is read again
    assert counter.log_reads() == {
        ("read", "_last_checkpoint"): 1,
        ("list_from", "_delta_log"): 1,
        ("read_many", "00000000000000000010.checkpoint.parquet"): 1,
        ("read_many", "00000000000000000011.json"): 1,
        ("read_many", "00000000000000000012.json"): 1,
    }
    oracle = deltalake.DeltaTable(str(table))
    assert oracle.version() == stats["committedVersion"] == 13
    assert sum(n for (m, _), n in counter.calls.items() if m == "open_data_file") == 26 == stats["numFilesRemoved"]


def test_checkpoint_rows_are_sliced_when_few_runs_and_filtered_when_fragmented() -> None:
    values = pa.array([f"path-{i}" for i in range(10_000)])
    few = np.ones(10_000, dtype=bool)
    few[[0, 1, 5_000]] = False  # the non-add rows of a checkpoint, one superseded file
    pieces = _kept_pieces(values, pa.array(few))
    assert [(p.offset, len(p)) for p in pieces] == [(2, 4_998), (5_001, 4_999)]
    # slices share the decoded buffer: nothing copied
    assert {p.buffers()[2].address for p in pieces} == {values.buffers()[2].address}
    fragmented = np.arange(10_000) % 3 != 0  # 3,333 runs: more than _MIN_RUNS and than one per 1,024 rows
    (piece,) = _kept_pieces(values, pa.array(fragmented))
    assert piece.offset == 0 and piece.to_pylist() == [f"path-{i}" for i in range(10_000) if i % 3]
    assert _kept_pieces(values, pa.array(np.zeros(10_000, dtype=bool)))[0].to_pylist() == []


def test_size_histogram_bins_at_the_limits() -> None:
    mb, gb = 1 << 20, 1 << 30
    sizes = [0, mb - 1, mb, 8 * mb - 1, 8 * mb, 64 * mb, 128 * mb - 1, 128 * mb, gb - 1, gb, 5 * gb]
    expected = {"<1MB": 2, "<8MB": 2, "<64MB": 1, "<128MB": 2, "<1GB": 2, ">=1GB": 2}
    assert size_histogram(sizes) == size_histogram(pa.array(sizes)) == expected


def test_a_snapshot_of_another_table_is_refused_before_anything_is_written(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    write_table(a, 2)
    write_table(b, 2)
    before = tree_state(a)
    with pytest.raises(InvalidArgument) as info:
        optimize(DeltaTable(str(a)), snapshot=DeltaTable(str(b)).snapshot())
    assert str(info.value) == f"table {a}: the snapshot passed is of another table ({b})"
    assert tree_state(a) == before


def run_process(script: str, argv: list[str], variable: str, value: str | None) -> tuple[Any, Any]:
    """Run ``script`` in a fresh interpreter with ``variable`` set to ``value`` (None: unset); its JSON output and the
    JSON report on the last line of its error output."""
    env = {k: v for k, v in os.environ.items() if k != variable}
    if value is not None:
        env[variable] = value
    out = subprocess.run([sys.executable, "-c", script, *argv], capture_output=True, text=True, timeout=120, env=env)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout), json.loads(out.stderr.strip().splitlines()[-1])


ALLOCATOR = """
import json, os, sys
import pyarrow as pa
from airflow_provider_deltalite.cli import console_run, main
before = pa.default_memory_pool().backend_name
in_main = pa.default_memory_pool().backend_name  # importing the CLI chose nothing
code, _ = console_run(sys.argv[1:])
sys.stderr.write(json.dumps([before, in_main, pa.default_memory_pool().backend_name, code]) + "\\n")
"""


@pytest.mark.parametrize("chosen", [None, "system"])
def test_the_deltalite_process_streams_on_jemalloc_unless_the_user_chose(tmp_path: Path, chosen: str | None) -> None:
    # mimalloc, pyarrow's default, kept ~28-57 MB more resident for a streamed read
    # (cli/startup.load_pyarrow_for_the_engine)
    table = tmp_path / "t"
    write_table(table, 2)
    doc, report = run_process(ALLOCATOR, ["describe", "--json", str(table)], "ARROW_DEFAULT_MEMORY_POOL", chosen)
    assert doc["numFiles"] == len(deltalake.DeltaTable(str(table)).file_uris()) == 4
    before, in_main, after, code = report
    assert (before, in_main, after, code) == (chosen or "mimalloc", chosen or "mimalloc", chosen or "jemalloc", 0)
    # `main` inside a longer-lived program leaves the program's allocator alone
    assert main(["describe", "--json", str(table)]) == 0
    assert pa.default_memory_pool().backend_name == os.environ.get("ARROW_DEFAULT_MEMORY_POOL", "mimalloc")


ENGINE_LOAD = """
import ctypes, json, os, sys
from airflow_provider_deltalite.cli import console_run
from airflow_provider_deltalite.cli.startup import UnusedModuleBlocker, load_pyarrow_for_the_engine
if sys.argv[1] == "loaded-first":  # as the benchmarks' runner does before its preload: console_run loads it again
    load_pyarrow_for_the_engine()
code, _ = console_run(sys.argv[2:])
blockers = sum(isinstance(finder, UnusedModuleBlocker) for finder in sys.meta_path)
with open("/proc/self/maps") as maps:  # the OpenBLAS numpy loaded, asked how many threads it runs
    library = next(line.split()[-1] for line in maps if "openblas" in line.rsplit("/", 1)[-1])
blas = ctypes.CDLL(library)
counts = [n for n in ("scipy_openblas_get_num_threads64_", "openblas_get_num_threads") if hasattr(blas, n)]
threads = getattr(blas, counts[0])()
report = [code, threads, os.environ.get("OPENBLAS_NUM_THREADS"), "pyarrow._s3fs" in sys.modules, blockers]
sys.stderr.write(json.dumps(report) + "\\n")
"""


@pytest.mark.parametrize("first", ["console-run", "loaded-first"])
@pytest.mark.parametrize("chosen", [None, "2"])
def test_the_deltalite_process_runs_one_openblas_thread_and_no_object_store_of_pyarrow(
    tmp_path: Path, chosen: str | None, first: str
) -> None:
    # OpenBLAS's idle threads spun on the cores the compaction used (cli/startup.load_pyarrow_for_the_engine); the
    # user's own setting is kept, and the processes this one starts inherit no setting of ours. Loading pyarrow so
    # twice (the benchmarks' runner, then console_run) leaves one blocker and the same settings.
    table = tmp_path / "t"
    write_table(table, 2)
    doc, report = run_process(ENGINE_LOAD, [first, "optimize", "--json", str(table)], "OPENBLAS_NUM_THREADS", chosen)
    assert report == [0, int(chosen or 1), chosen, False, 1]
    assert (doc["numFilesRemoved"], doc["numFilesAdded"]) == (4, 2)
    oracle = deltalake.DeltaTable(str(table))
    assert (oracle.version(), len(oracle.file_uris())) == (2, 2)
    assert sorted(oracle.to_pyarrow_table().column("id").to_pylist()) == list(range(20))


END_PROCESS = """
import sys, threading
from airflow_provider_deltalite.cli.startup import end_process
done = sys.argv[1]
# The thread finishes only once end_process has returned, so it still runs when end_process looks, however late the
# machine schedules this process (a fixed sleep let a stalled main thread find it finished: exit 3, not 4).
returned = threading.Event()
if sys.argv[2] == "thread":  # a thread that is no daemon still runs: the process ends the usual way, after it
    def work():
        returned.wait()
        open(done, "w").write("finished")
    threading.Thread(target=work).start()
print("flushed", end="")  # still in stdout's buffer (a pipe: block-buffered)
end_process(3)
returned.set()
sys.exit(4)
"""


@pytest.mark.parametrize("mode", ["alone", "thread"])
def test_end_process_flushes_then_exits_unless_a_thread_still_runs(tmp_path: Path, mode: str) -> None:
    done = tmp_path / "done"
    out = subprocess.run([sys.executable, "-c", END_PROCESS, str(done), mode], capture_output=True, text=True)
    assert out.stdout == "flushed"
    assert (out.returncode, done.exists()) == ((3, False) if mode == "alone" else (4, True))


def test_the_deltalite_command_prints_its_whole_document_and_exit_code(tmp_path: Path) -> None:
    # `console_main` ends an engine-only command's process at once: what it printed must all be there
    table = tmp_path / "t"
    write_table(table, 2)
    ok = subprocess.run(
        [sys.executable, "-m", "airflow_provider_deltalite", "files", "--json", str(table)],
        capture_output=True,
        text=True,
    )
    assert ok.returncode == 0, ok.stderr
    doc = json.loads(ok.stdout)
    oracle = deltalake.DeltaTable(str(table))
    assert (doc["version"], len(doc["files"])) == (oracle.version(), len(oracle.file_uris())) == (1, 4)
    bad = subprocess.run(
        [sys.executable, "-m", "airflow_provider_deltalite", "files", "--json", str(tmp_path / "missing")],
        capture_output=True,
        text=True,
    )
    assert (bad.returncode, bad.stdout) == (2, "")
    assert bad.stderr == f"deltalite: error: table {tmp_path / 'missing'}: path does not exist\n"
