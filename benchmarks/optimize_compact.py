"""Benchmark: OPTIMIZE (bin-packing compaction) of 400 small files into 4, deltalite vs delta-rs vs a pyarrow floor.

Input: a generated table (fixed numpy seed) of 400 files x 20,000 rows in 4 partitions (100 files each), about
250 MB: ``a`` int64, ``b`` int64, ``c`` float64, ``s`` string (random letters and spaces), partition column ``part``.
Written by delta-rs: the table created empty (version 0), then 100 appends of one file per partition (versions
1-100; delta-rs checkpoints version 99); cached under ``$TMPDIR/deltalite-bench/``. The compaction commits version 101,
which neither engine checkpoints (deltalite checkpoints a multiple of the interval, as Delta does, delta-rs the version
before one): both write one checkpoint per 100 commits, and a table where the compaction's commit landed on a multiple
of 100 would charge deltalite with one that delta-rs writes a commit earlier. OPTIMIZE changes the table, so every
measured run works on a fresh full copy (no hard links) of the pristine table.

Engines, each run in a fresh subprocess, all with the same target size T = 256 MiB (every ~60 MB partition becomes
one file; minimum file size T too, so every file is a candidate):

  local     deltalite ``optimize(DeltaTable(path), target_size=T, min_file_size=T, executor=LocalExecutor(2))``
  spark[2]  the same with ``SparkExecutor.start("local[2]")``; the JVM/session start (which includes starting the
            Python workers when ``start`` warms them up) is timed separately; a wrapper around the executor records
            when each task ran on its worker, to split the rewrite phase into worker start-up and tasks
  spark[1]  the same on ``local[1]``, for the local[1] -> local[2] speed-up of the rewrite phase
  delta-rs  ``deltalake.DeltaTable(path).optimize.compact(target_size=T, max_concurrent_tasks=2)``
  floor     plain pyarrow, no Delta: per partition (2 partitions at a time) read the 100 files and write one
            snappy Parquet file (one row group, like deltalite's default 128 MiB row groups here)

Wall time spans opening the table to the end of the commit (floor: listing the files to the last file written).
Peak RSS: ``ru_maxrss`` of the child from ``wait4`` (the process alone for local / delta-rs / floor), and for every run
the peak of the summed RSS of the child's whole process tree (JVM and Spark's Python workers included), sampled by
the parent from /proc every 50 ms; the parent is a child subreaper, so the JVM and the Python worker daemon stay in
the tree after the driver exits and their CPU time is collected too. Every run is then checked by a separate child:
the table's rows (read by delta-rs ``to_pyarrow_table()`` and by deltalite ``scan``) must equal the original rows as
a multiset (sorted by all columns, then hashed); the floor's four output files must hold the input rows.

Targets: local wall <= 0.8x delta-rs; local wall <= 1.2x floor; local peak RSS <= delta-rs peak RSS; spark[2]
rewrite phase (JVM start excluded) <= 1.5x local; spark rewrite speed-up local[1] -> local[2] >= 1.6x; identical rows.

Run:  .venv/bin/python benchmarks/optimize_compact.py [--reps 3] [--only local|spark|deltars|floor ...]
      [--regenerate] [--profile]
Results: printed table, and benchmarks/results/optimize_compact.json.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import resource
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import _harness as h

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results" / "optimize_compact.json"
CACHE = Path(tempfile.gettempdir()) / "deltalite-bench"
WORK = CACHE / f"optimize-compact-work-{os.getpid()}"  # per run: two runs at once must not share the copy

MIB = h.MIB
TARGET_SIZE = 256 * MIB  # every engine; each ~60 MB partition becomes one file
CHILD_TIMEOUT_S = 900
# -- targets --------------------------------------------------------------------------------------------------
TARGET_VS_DELTARS = 0.8  # local wall <= 0.8x delta-rs
TARGET_VS_FLOOR = 1.2  # local wall <= 1.2x floor
TARGET_RSS_VS_DELTARS = 1.0  # local peak RSS <= delta-rs peak RSS
TARGET_SPARK_VS_LOCAL = 1.5  # spark[2] rewrite phase <= 1.5x local
TARGET_SPARK_SPEEDUP = 1.6  # spark rewrite local[1] / local[2] >= 1.6

# -- generated table -----------------------------------------------------------------------------------------
GEN_FORMAT = 2  # bump when the generator changes, to invalidate the cache
SEED = 20261123
N_PARTITIONS = 4
FILES_PER_PARTITION = 100
ROWS_PER_FILE = 20_000
N_FILES = N_PARTITIONS * FILES_PER_PARTITION
N_ROWS = N_FILES * ROWS_PER_FILE
COLUMNS = ("a", "b", "c", "s", "part")

# configuration name -> (child kind, argument)
CONFIGS = {
    "local": ("local", "2"),
    "spark[2]": ("spark", "local[2]"),
    "spark[1]": ("spark", "local[1]"),
    "delta-rs": ("deltars", "2"),
    "delta-rs/snappy": ("deltars", "2,snappy"),  # informative: delta-rs' compact defaults to zstd; not in targets
    "floor": ("floor", "2"),
}
ONLY = {
    "local": ["local"],
    "spark": ["spark[2]", "spark[1]"],
    "deltars": ["delta-rs", "delta-rs/snappy"],
    "floor": ["floor"],
}


# -- generation ----------------------------------------------------------------------------------------------


def _strings(rng: Any, n: int) -> Any:
    """``n`` random strings of 4..14 letters and spaces (text-like; snappy cannot shrink them much)."""
    import numpy as np
    import pyarrow as pa

    lengths = rng.integers(4, 15, n)
    offsets = np.zeros(n + 1, dtype=np.int32)
    np.cumsum(lengths, out=offsets[1:])
    alphabet = np.frombuffer(b"abcdefghijklmnopqrstuvwxyz      ", dtype=np.uint8)
    data = alphabet[rng.integers(0, len(alphabet), int(offsets[-1]))]
    return pa.StringArray.from_buffers(n, pa.py_buffer(offsets.tobytes()), pa.py_buffer(data.tobytes()))


def generate_batch(rng: Any, partitions: list[str]) -> Any:
    """One append: ROWS_PER_FILE rows for each of ``partitions``."""
    import numpy as np
    import pyarrow as pa

    n = ROWS_PER_FILE * len(partitions)
    return pa.table(
        {
            "a": pa.array(rng.integers(0, 1000, n), pa.int64()),
            "b": pa.array(rng.integers(0, 10**9, n), pa.int64()),
            "c": pa.array(rng.standard_normal(n), pa.float64()),
            "s": _strings(rng, n),
            "part": pa.array(np.repeat(np.array(partitions, dtype=object), ROWS_PER_FILE), pa.string()),
        }
    )


def generate_child(dest: str) -> dict[str, Any]:
    """Write the pristine table with delta-rs: created empty, then 100 appends of one 20,000-row file per partition."""
    import deltalake
    import numpy as np
    import pyarrow as pa

    rng = np.random.default_rng(SEED)
    partitions = [f"p{k}" for k in range(N_PARTITIONS)]
    deltalake.DeltaTable.create(
        dest, generate_batch(np.random.default_rng(0), partitions[:1]).schema, partition_by=["part"]
    )
    batches = []
    for _ in range(FILES_PER_PARTITION):
        batch = generate_batch(rng, partitions)
        deltalake.write_deltalake(dest, batch, partition_by=["part"], mode="append")
        batches.append(batch)
    expected = rows_digest(pa.concat_tables(batches))
    return {"expected": expected}


def prepare_table(regenerate: bool) -> tuple[Path, dict[str, Any], str]:
    """The pristine table (generated once, then cached) and its description (row digest, files, bytes)."""
    root = CACHE / f"optimize-compact-f{GEN_FORMAT}-s{SEED}"
    table = root / "pristine"
    cached = h.cached_info(root, regenerate)
    if cached is not None:
        return table, cached, "cached"
    start = time.perf_counter()
    gen, err = h.run_child(__file__, ["--generate", str(table)], CHILD_TIMEOUT_S)
    if gen is None:
        raise SystemExit(f"generating the table failed: {err}")
    files = h.data_files(table)
    per_partition = {f"p{k}": len(list((table / f"part=p{k}").glob("*.parquet"))) for k in range(N_PARTITIONS)}
    if len(files) != N_FILES or set(per_partition.values()) != {FILES_PER_PARTITION}:
        raise SystemExit(f"generated table has {len(files)} files ({per_partition}), expected 100 per partition")
    check, err = h.run_child(__file__, ["--verify-delta", str(table), json.dumps(gen["expected"])], CHILD_TIMEOUT_S)
    if check is None or not check["identical"]:
        raise SystemExit(f"generated table does not read back as generated: {check or err}")
    checkpoints = sorted(p.name for p in (table / "_delta_log").glob("*.checkpoint.parquet"))
    if check["version"] != FILES_PER_PARTITION or checkpoints != [f"{FILES_PER_PARTITION - 1:020d}.checkpoint.parquet"]:
        # the compaction's commit (version 101) must be one that neither engine checkpoints (module docstring)
        raise SystemExit(f"generated table is at version {check['version']} with checkpoints {checkpoints}")
    info = {
        "path": str(table),
        "files": len(files),
        "files_per_partition": per_partition,
        "bytes": sum(p.stat().st_size for p in files),
        "rows": N_ROWS,
        "version": check["version"],
        "expected": gen["expected"],
        "generated_in_s": round(time.perf_counter() - start, 1),
    }
    (root / "info.json").write_text(json.dumps(info, indent=2) + "\n")
    return table, info, f"generated in {info['generated_in_s']}s"


# -- row digest (multiset equality) --------------------------------------------------------------------------


def rows_digest(table: Any) -> dict[str, Any]:
    """Order-independent identity of ``table``'s rows: sort by every column, hash the sorted columns."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    types = {"a": pa.int64(), "b": pa.int64(), "c": pa.float64(), "s": pa.large_string(), "part": pa.large_string()}
    cols = {}
    for name in COLUMNS:
        col = table.column(name)
        if pa.types.is_dictionary(col.type):
            col = col.cast(col.type.value_type)
        cols[name] = col.cast(types[name])
    normal = pa.table(cols)
    keys = [(name, "ascending") for name in ("c", "b", "a", "s", "part")]  # c is (almost surely) unique
    order = pc.sort_indices(normal, sort_keys=keys)
    digest = hashlib.sha256()
    for name in COLUMNS:
        col = normal.column(name).take(order).combine_chunks()
        digest.update(name.encode())
        digest.update(str(col.null_count).encode())
        if pa.types.is_large_string(col.type):
            bufs = col.buffers()
            offsets = np.frombuffer(bufs[1], dtype=np.int64)[col.offset : col.offset + len(col) + 1]
            digest.update(np.diff(offsets).tobytes())
            digest.update(memoryview(bufs[2])[int(offsets[0]) : int(offsets[-1])])
        else:
            digest.update(col.to_numpy(zero_copy_only=False).tobytes())
    return {"rows": normal.num_rows, "sha256": digest.hexdigest()}


def verify_delta_child(path: str, expected: dict[str, Any]) -> dict[str, Any]:
    """Read the table with delta-rs and with deltalite; compare both with ``expected``."""
    import deltalake

    out: dict[str, Any] = {}
    dt_rs = deltalake.DeltaTable(path)
    out["version"] = dt_rs.version()
    out["files_after"] = len(dt_rs.file_uris())
    out["delta_rs"] = rows_digest(dt_rs.to_pyarrow_table())
    del dt_rs
    try:
        from airflow_provider_deltalite import DeltaTable
        from airflow_provider_deltalite.engine.scan import scan

        rows, _ = scan(DeltaTable(path).snapshot())
        out["deltalite"] = rows_digest(rows)
    except Exception as exc:  # reported, not fatal: delta-rs read the table above
        out["deltalite"] = {"error": f"{type(exc).__name__}: {exc}"}
    out["identical_delta_rs"] = out["delta_rs"] == expected
    out["identical_deltalite"] = out["deltalite"] == expected
    out["identical"] = out["identical_delta_rs"] and out["identical_deltalite"]
    return out


def verify_floor_child(out_dir: str, expected: dict[str, Any]) -> dict[str, Any]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    parts = []
    wrote_part = False
    files = sorted(Path(out_dir).rglob("*.parquet"))
    for f in files:
        t = pq.ParquetFile(f).read()  # not read_table: it would add `part` from the hive-style directory name
        if "part" in t.column_names:
            t = t.drop_columns(["part"])
            wrote_part = True
        value = f.parent.name.split("=", 1)[1]
        parts.append(t.append_column("part", pa.array([value] * t.num_rows, pa.string())))
    got = rows_digest(pa.concat_tables(parts))
    return {"files_after": len(files), "floor": got, "identical": got == expected, "files_hold_part": wrote_part}


# -- measured children ---------------------------------------------------------------------------------------


def _timed_task(fn: Any, item: Any) -> tuple[Any, dict[str, Any]]:
    """Runs on the Spark worker: ``fn(item)`` plus when it ran, its process CPU time and pyarrow's thread count."""
    import pyarrow as pa

    r0 = resource.getrusage(resource.RUSAGE_SELF)
    t0 = time.time()
    result = fn(item)
    t1 = time.time()
    r1 = resource.getrusage(resource.RUSAGE_SELF)
    cpu = (r1.ru_utime + r1.ru_stime) - (r0.ru_utime + r0.ru_stime)
    timing = {"pid": os.getpid(), "process_start": h.proc_start_epoch(), "start": t0, "end": t1, "cpu_s": cpu}
    timing["pyarrow_cpu_count"] = pa.cpu_count()
    return result, timing


class _TaskTimingExecutor:
    """Wraps the Spark executor: every task also reports when it ran on its worker (two getrusage calls more)."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner
        self.name = inner.name
        self.timings: list[dict[str, Any]] = []

    @property
    def parallelism(self) -> int:
        return self._inner.parallelism

    def map(self, fn: Any, items: Any) -> Any:
        import functools

        for result, timing in self._inner.map(functools.partial(_timed_task, fn), items):
            self.timings.append(timing)
            yield result

    def close(self) -> None:
        self._inner.close()


def _task_summary(timings: list[dict[str, Any]], start_epoch: float) -> dict[str, Any]:
    """Where the Spark rewrite phase went: before the first task, the task phase, after the last task."""
    if not timings:
        return {}
    first = min(t["start"] for t in timings)
    last = max(t["end"] for t in timings)
    return {
        "workers": len({t["pid"] for t in timings}),
        "worker_process_start_s": [round(t - start_epoch, 2) for t in sorted({t["process_start"] for t in timings})],
        "first_task_start_s": first - start_epoch,
        "task_phase_s": last - first,
        "task_wall_s": [round(t["end"] - t["start"], 2) for t in sorted(timings, key=lambda t: t["start"])],
        "task_cpu_s": [round(t["cpu_s"], 2) for t in sorted(timings, key=lambda t: t["start"])],
        "task_cpu_s_total": sum(t["cpu_s"] for t in timings),
        "worker_pyarrow_cpu_count": sorted({t["pyarrow_cpu_count"] for t in timings}),
        "after_last_task_s": None,  # filled in by the caller, who knows when optimize returned
    }


def child_run(kind: str, arg: str, path: str, out_dir: str, profile: bool) -> dict[str, Any]:
    import pyarrow as pa

    # pyarrow's one-time first use (imports pandas) stays out of the timings, as in snapshot_load.py
    pa.array([0])
    result: dict[str, Any] = {"kind": kind, "arg": arg}
    if kind in ("local", "spark"):
        from airflow_provider_deltalite import DeltaTable
        from airflow_provider_deltalite.executors import LocalExecutor
        from airflow_provider_deltalite.maintenance.optimize import optimize

        executor: Any
        if kind == "spark":
            from pyspark import cloudpickle

            from airflow_provider_deltalite.executors.spark import SparkExecutor

            # _timed_task calls the harness on the workers, where benchmarks/ is not on sys.path: ship it by value
            cloudpickle.register_pickle_by_value(h)
            t0 = time.perf_counter()
            executor = _TaskTimingExecutor(SparkExecutor.start(arg))
            result["parallelism"] = executor.parallelism
            result["jvm_start_s"] = time.perf_counter() - t0  # includes warming the Python workers, if start() does
            result["warmed_workers"] = len(getattr(executor._inner, "warmed_workers", ()) or ())
        elif profile:
            executor = h.ProfiledLocalExecutor(int(arg))
        else:
            executor = LocalExecutor(int(arg))
        start_epoch = time.time()
        with h.Measured(profile) as run:
            stats = optimize(DeltaTable(path), target_size=TARGET_SIZE, min_file_size=TARGET_SIZE, executor=executor)
        wall = run.wall_s
        result.update(run.record)
        if kind == "spark":
            tasks = _task_summary(executor.timings, start_epoch)
            if tasks:
                tasks["after_last_task_s"] = wall - tasks["first_task_start_s"] - tasks["task_phase_s"]
            result["spark_tasks"] = tasks
        if kind == "spark":
            t1 = time.perf_counter()
            executor.close()
            result["close_s"] = time.perf_counter() - t1
        result.update(
            files_removed=stats.num_files_removed,
            files_added=stats.num_files_added,
            bytes_added=stats.files_added.total_size if hasattr(stats.files_added, "total_size") else None,
            committed_version=stats.committed_version,
        )
        if profile:
            h.print_profile(run.profile, executor.profiles, wall, "deltalite local", lines=20)
    elif kind == "deltars":
        import deltalake

        tasks, _, codec = arg.partition(",")
        # delta-rs' optimize writes zstd unless told otherwise (its write_deltalake writes snappy)
        writer = deltalake.WriterProperties(compression=codec.upper()) if codec else None
        with h.Measured() as run:
            metrics = deltalake.DeltaTable(path).optimize.compact(
                target_size=TARGET_SIZE, max_concurrent_tasks=int(tasks), writer_properties=writer
            )
        result.update(
            run.record,
            files_removed=metrics.get("numFilesRemoved"),
            files_added=metrics.get("numFilesAdded"),
        )
    elif kind == "floor":
        from concurrent.futures import ThreadPoolExecutor

        import pyarrow.parquet as pq

        def compact(partition_dir: Path) -> int:
            files = sorted(str(p) for p in partition_dir.glob("*.parquet"))
            rows = pq.read_table(files, partitioning=None)  # data columns only, as in the files
            dest = Path(out_dir) / partition_dir.name
            dest.mkdir(parents=True, exist_ok=True)
            pq.write_table(rows, dest / "compacted.snappy.parquet", compression="snappy", row_group_size=rows.num_rows)
            return len(files)

        with h.Measured() as run:
            partitions = sorted(p for p in Path(path).iterdir() if p.is_dir() and p.name.startswith("part="))
            with ThreadPoolExecutor(max_workers=int(arg)) as pool:
                removed = sum(pool.map(compact, partitions))
        result.update(
            run.record,
            files_removed=removed,
            files_added=len(partitions),
        )
    else:
        raise SystemExit(f"unknown kind {kind}")
    return result


# -- parent: process-tree sampling ---------------------------------------------------------------------------


# -- parent: runs, summary, report ---------------------------------------------------------------------------


CODE_UNDER_TEST = (
    "engine/**/*.py",
    "executors/*.py",
    "jobs/*.py",
    "maintenance/optimize*.py",
    "maintenance/bin_*.py",
    "maintenance/options.py",
    "maintenance/executor.py",
)


def fresh_copy(pristine: Path) -> tuple[Path, Path]:
    shutil.rmtree(WORK, ignore_errors=True)
    return h.fresh_copy(pristine, WORK / "table"), WORK / "floor-out"


def _dir_bytes(path: Path) -> tuple[int, int]:
    files = h.data_files(path) if path.exists() else []
    return len(files), sum(p.stat().st_size for p in files)


def one_run(config: str, pristine: Path, expected: dict[str, Any], args: argparse.Namespace) -> dict[str, Any]:
    kind, arg = CONFIGS[config]
    busy, waited = h.wait_for_quiet(args.max_busy, args.max_wait)
    load = [round(x, 2) for x in os.getloadavg()]
    table, floor_out = fresh_copy(pristine)
    code = h.digest(h.code_hashes(CODE_UNDER_TEST))
    before = set(h.data_files(table))
    log_before = set(os.listdir(table / "_delta_log"))
    res, err, tree = h.run_measured(__file__, ["--child", kind, arg, str(table), str(floor_out)], CHILD_TIMEOUT_S)
    run: dict[str, Any] = {
        "config": config,
        "code_digest": code,
        "busy_cores_before": round(busy, 2),
        "waited_for_quiet_s": round(waited, 1),
        "load_average_1_5_15": load,
        **tree,
    }
    run["code_changed_during_run"] = h.digest(h.code_hashes(CODE_UNDER_TEST)) != code
    if res is None:
        run["error"] = err
        return run
    run.update(res)
    if kind == "floor":
        run["new_files"], run["new_bytes"] = _dir_bytes(floor_out)
        check, verr = h.run_child(__file__, ["--verify-floor", str(floor_out), json.dumps(expected)], CHILD_TIMEOUT_S)
    else:
        new = [p for p in h.data_files(table) if p not in before]
        run["new_files"], run["new_bytes"] = len(new), sum(p.stat().st_size for p in new)
        run["new_log_files"] = sorted(set(os.listdir(table / "_delta_log")) - log_before)
        check, verr = h.run_child(__file__, ["--verify-delta", str(table), json.dumps(expected)], CHILD_TIMEOUT_S)
    run["verify"] = check if check is not None else {"error": verr}
    run["identical"] = bool(check and check.get("identical"))
    return run


def summarise(runs: list[dict[str, Any]]) -> dict[str, Any]:
    base = h.summarise_runs(runs)
    ok = [r for r in runs if "error" not in r]
    if not ok:
        return base
    spark = {
        "spark_first_task_start_s_median": _med_nested(ok, "first_task_start_s"),
        "spark_task_phase_s_median": _med_nested(ok, "task_phase_s"),
        "spark_task_cpu_s_median": _med_nested(ok, "task_cpu_s_total"),
        "spark_worker_start_s_median": _med_nested(ok, "worker_process_start_s", first=True),
        "spark_worker_pyarrow_cpu_count": sorted(
            {n for r in ok if r.get("spark_tasks") for n in r["spark_tasks"].get("worker_pyarrow_cpu_count", [])}
        ),
    }
    return {**base, **spark, "runs": base.pop("runs")}


def _med_nested(runs: list[dict[str, Any]], key: str, first: bool = False) -> float | None:
    vals = [r["spark_tasks"][key] for r in runs if r.get("spark_tasks") and r["spark_tasks"].get(key) is not None]
    if first:
        vals = [v[0] for v in vals if v]
    return statistics.median(vals) if vals else None


def evaluate(summary: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    def get(config: str, key: str) -> float | None:
        s = summary.get(config)
        return s.get(key) if s and s.get("wall_s_median") is not None else None

    local = get("local", "wall_s_median")
    targets = []

    def add(name: str, value: float | None, limit: float, higher_is_better: bool = False) -> None:
        targets.append(h.target(name, value, limit, higher_is_better))

    add("local wall / delta-rs wall", h.ratio(local, get("delta-rs", "wall_s_median")), TARGET_VS_DELTARS)
    add("local wall / floor wall", h.ratio(local, get("floor", "wall_s_median")), TARGET_VS_FLOOR)
    add(
        "local peak RSS / delta-rs peak RSS",
        h.ratio(get("local", "peak_rss_mb_max"), get("delta-rs", "peak_rss_mb_max")),
        TARGET_RSS_VS_DELTARS,
    )
    add("spark[2] rewrite / local wall", h.ratio(get("spark[2]", "wall_s_median"), local), TARGET_SPARK_VS_LOCAL)
    add(
        "spark rewrite speed-up local[1] -> local[2]",
        h.ratio(get("spark[1]", "wall_s_median"), get("spark[2]", "wall_s_median")),
        TARGET_SPARK_SPEEDUP,
        higher_is_better=True,
    )
    measured = [s for s in summary.values() if s.get("runs")]
    identical = all(s["identical"] for s in measured) if measured else None
    targets.append(
        {
            "target": "identical rows everywhere",
            "value": identical,
            "verdict": "n/a" if identical is None else ("PASS" if identical else "FAIL"),
            "note": "",
        }
    )
    return targets


def print_table(summary: dict[str, dict[str, Any]], targets: list[dict[str, Any]], reps: int) -> None:
    rs = summary.get("delta-rs", {}).get("wall_s_median")
    floor = summary.get("floor", {}).get("wall_s_median")

    def versus(config: str, s: dict[str, Any]) -> str:
        w = s["wall_s_median"]
        return f"{f'{w / rs:.2f}' if rs else '-':>11} {f'{w / floor:.2f}' if floor else '-':>8}"

    h.print_engine_table(summary, CONFIGS, reps, N_FILES, f"{'vs_delta-rs':>11} {'vs_floor':>8}", versus)
    print(
        f"T = target_size = min_file_size = {TARGET_SIZE // MIB} MiB for every engine. wall = open table .. commit "
        "(floor: list .. last write); spark: the optimize call (rewrite phase), JVM/session start apart.\n"
        "peak_rss = ru_maxrss of the child (spark: the Python driver alone); tree_rss = peak summed RSS of the child's "
        "process tree, sampled every 50 ms\n(spark: driver + JVM + Python workers); jvm_rss = the JVM's part of it. "
        "cpu_s = user+sys of the timed part (spark: the whole process tree, JVM start included).\n"
        "others = the most cores other work on the machine used during a kept run "
        "(/proc/stat busy minus this tree's CPU)"
    )
    for config in ("spark[2]", "spark[1]"):
        sp = summary.get(config) or {}
        if sp.get("spark_task_phase_s_median") is None:
            continue
        print(
            f"{config} rewrite phase {sp['wall_s_median']:.2f}s (medians): first Python worker process forked at "
            f"{sp['spark_worker_start_s_median']:.2f}s, first task started at "
            f"{sp['spark_first_task_start_s_median']:.2f}s, tasks ran {sp['spark_task_phase_s_median']:.2f}s "
            f"(task CPU {sp['spark_task_cpu_s_median']:.2f}s; pyarrow.cpu_count() in the workers: "
            f"{sp['spark_worker_pyarrow_cpu_count']}; a negative time is before the optimize call, in start())"
        )
    s2, s1 = summary.get("spark[2]") or {}, summary.get("spark[1]") or {}
    if s2.get("spark_task_phase_s_median") and s1.get("spark_task_phase_s_median"):
        print(
            f"spark task phase alone (first task start .. last task end): local[1] -> local[2] speed-up "
            f"{s1['spark_task_phase_s_median'] / s2['spark_task_phase_s_median']:.2f}x (informative)"
        )
    print()
    h.print_targets(targets)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--regenerate", action="store_true", help="rebuild the generated table")
    h.add_engine_args(parser, ONLY)
    parser.add_argument("--child", nargs=4, metavar=("KIND", "ARG", "PATH", "OUT"), help=argparse.SUPPRESS)
    parser.add_argument("--child-profile", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--generate", metavar="PATH", help=argparse.SUPPRESS)
    parser.add_argument("--verify-delta", nargs=2, metavar=("PATH", "EXPECTED"), help=argparse.SUPPRESS)
    parser.add_argument("--verify-floor", nargs=2, metavar=("DIR", "EXPECTED"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child_run(*args.child, profile=args.child_profile)))
        return 0
    if args.generate:
        print(json.dumps(generate_child(args.generate)))
        return 0
    if args.verify_delta:
        print(json.dumps(verify_delta_child(args.verify_delta[0], json.loads(args.verify_delta[1]))))
        return 0
    if args.verify_floor:
        print(json.dumps(verify_floor_child(args.verify_floor[0], json.loads(args.verify_floor[1]))))
        return 0

    t_start = time.perf_counter()
    code_start = h.code_hashes(CODE_UNDER_TEST)
    subreaper = h.become_subreaper()
    CACHE.mkdir(parents=True, exist_ok=True)
    pristine, info, note = prepare_table(args.regenerate)
    print(
        f"table: {note} -> {pristine} ({info['files']} files, {info['bytes'] / 1e6:.0f} MB, {info['rows']:,} rows, "
        f"version {info['version']})"
    )
    configs = [c for c in CONFIGS if not args.only or any(c in ONLY[o] for o in args.only)]
    runs: dict[str, list[dict[str, Any]]] = {c: [] for c in configs}
    discarded: dict[str, list[dict[str, Any]]] = {c: [] for c in configs}  # runs repeated because of other work
    for rep in range(args.reps):
        for config in h.rotated(configs, rep):
            kept, dropped = h.measure_until_quiet(
                lambda config=config: one_run(config, pristine, info["expected"], args),
                args,
                lambda r, config=config, rep=rep: h.print_run(config, rep, r),
            )
            discarded[config].extend(dropped)
            runs[config].append(kept)
    summary = {c: summarise(runs[c]) for c in configs}
    targets = evaluate(summary)
    digests = sorted({r["code_digest"] for rs in runs.values() for r in rs})
    changed = [r["config"] for rs in runs.values() for r in rs if r.get("code_changed_during_run")]
    code_end = h.code_hashes(CODE_UNDER_TEST)
    changed_files = sorted(f for f in code_start.keys() | code_end.keys() if code_start.get(f) != code_end.get(f))
    if len(digests) > 1 or changed:
        print(
            f"\nWARNING: the code under test changed while the benchmark ran ({len(digests)} versions; changed "
            f"during a run of: {', '.join(changed) or 'none'}; files: {', '.join(changed_files)}); "
            "rerun for clean numbers"
        )
    print()
    print_table(summary, targets, args.reps)
    report: dict[str, Any] = {
        "benchmark": "optimize_compact",
        "description": (
            "OPTIMIZE compaction of 400 files x 20,000 rows (4 partitions) into one file per partition; "
            "fresh subprocess and fresh table copy per run"
        ),
        "target_size": TARGET_SIZE,
        "targets": targets,
        "reps": args.reps,
        "machine": h.machine_info(("pyarrow", "deltalake", "numpy", "pyspark", "pyspark-client"), java=True),
        "subreaper": subreaper,
        "code_digests": digests,
        "code_under_test": {"at_start": code_start, "at_end": code_end, "changed_files": changed_files},
        "input": info,
        "results": summary,
        "discarded_contended_runs": discarded,
        "profile": None,
        "total_runtime_s": None,
    }
    if args.profile:
        print("\n=== cProfile: deltalite local (extra run, not in the timings) ===")
        table, floor_out = fresh_copy(pristine)
        res, err, _ = h.run_measured(
            __file__, ["--child", "local", "2", str(table), str(floor_out), "--child-profile"], CHILD_TIMEOUT_S
        )
        report["profile"] = h.profile_output(res, err)
    shutil.rmtree(WORK, ignore_errors=True)
    return h.finish(report, targets, RESULTS, t_start, write=not args.no_write)


if __name__ == "__main__":
    sys.exit(main())
