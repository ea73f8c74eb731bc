"""Benchmark: the floor of Spark's exchange under the Z-order shuffle, to judge issue 18's CPU target.

The target of ``zorder_spark_scale.py`` asks the DataFrame exchange for at least 3x less CPU per GiB than the v0.1 RDD
shuffle. This script measures what no exchange through Spark can go below on the same 1 GiB partition, in three
parts, each in a fresh subprocess, bytecode compiled:

  in-process shuffle  the Z-order of ``zorder_spark_scale.py``'s cached 1 GiB table with the shuffle path's own map
                      and reduce functions (``_route_group``, ``_WriteOutputFile``) run in one Python process by a
                      ``map_reduce`` that hands the payloads from map to reduce in memory: the clustering work plus
                      the payloads' encoding and decoding, with no Spark at all. It also counts the payload bytes.
  local               the same Z-order through ``LocalExecutor(1)`` (``cluster_files``: no payloads at all).
  spark floor         ``local[2]``: a ``mapInArrow`` that emits incompressible 4 MiB binary rows (the exchange's
                      payload size) and does nothing else, ``repartition(8, "reducer")``, a ``mapInArrow`` that only
                      counts them: the CPU of the JVM and of Spark's Python workers to move 1 GiB, scaled to the
                      payload bytes the in-process run counted. The JVM's start is outside the measured query.

What the exchange adds over the local executor can then be no less than (in-process shuffle - local) + spark floor.
The script compares that with a third of what the v0.1 shuffle added over the local executor (from
``benchmarks/results/zorder_spark_scale.json``, which must exist: run that benchmark first).

Run:  .venv/bin/python benchmarks/spark_exchange_floor.py [--reps 3]
Results: printed table, and benchmarks/results/spark_exchange_floor.json.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import _harness as h

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results" / "spark_exchange_floor.json"
SCALE = HERE / "results" / "zorder_spark_scale.json"
GIB = 1024 * h.MIB
FLOOR_PAYLOAD = 4 * h.MIB  # the exchange's PAYLOAD_BYTES
FLOOR_BYTES = GIB
FLOOR_MAPS = 16
FLOOR_REDUCERS = 8
CHILD_TIMEOUT_S = 1800


def _zorder_child(mode: str, path: str) -> dict[str, Any]:
    """Z-order ``path`` by (a, b) into 128 MiB files in this process: ``local`` or ``in-process shuffle``."""
    from airflow_provider_deltalite import DeltaTable
    from airflow_provider_deltalite.maintenance.clustering import shuffle
    from airflow_provider_deltalite.maintenance.executor import LocalExecutor

    moved = {"payloads": 0, "bytes": 0}

    class InProcessShuffle(LocalExecutor):
        """A `ShuffleExecutor` with no Spark: map items one by one, hand payloads to reducers from memory."""

        def map_reduce(self, map_fn, items, reduce_fn, num_reducers):  # type: ignore[no-untyped-def]
            received: list[list[bytes]] = [[] for _ in range(num_reducers)]
            for item in items:
                for reducer, payload in map_fn(item):
                    received[reducer].append(payload)
                    moved["payloads"] += 1
                    moved["bytes"] += len(payload)
            return [reduce_fn(r, iter(received[r])) for r in range(num_reducers)]

    shuffle.SHUFFLE_ABOVE_BYTES = 0 if mode == "in-process shuffle" else 1 << 62
    executor = InProcessShuffle(1)
    start = time.perf_counter()
    cpu = time.process_time()
    stats = DeltaTable(path).zorder(["a", "b"], target_size=128 * h.MIB, executor=executor)
    return {
        "wall_s": time.perf_counter() - start,
        "cpu_s": time.process_time() - cpu,
        "files_added": stats.num_files_added,
        "payloads": moved["payloads"],
        "payload_bytes": moved["bytes"],
    }


def _floor_child() -> dict[str, Any]:
    """Move FLOOR_BYTES of incompressible FLOOR_PAYLOAD rows through mapInArrow -> repartition -> mapInArrow."""
    import pyarrow as pa
    from pyspark.sql import SparkSession

    from airflow_provider_deltalite.executors.spark_session import pandas_warning_ignored

    os.environ["PYSPARK_PYTHON"] = sys.executable
    spark = (
        SparkSession.builder.master("local[2]")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", str(FLOOR_REDUCERS))
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    blob = os.urandom(FLOOR_PAYLOAD)
    per_map = FLOOR_BYTES // FLOOR_MAPS // FLOOR_PAYLOAD
    schema = pa.schema([("reducer", pa.int32()), ("payload", pa.binary())])

    def emit(batches: Any) -> Any:
        for batch in batches:
            for _ in range(batch.num_rows):
                for i in range(per_map):
                    yield pa.RecordBatch.from_pydict(
                        {"reducer": [i % FLOOR_REDUCERS], "payload": [blob]}, schema=schema
                    )

    def consume(batches: Any) -> Any:
        yield pa.RecordBatch.from_pydict({"bytes": [sum(b.column(b.num_columns - 1).nbytes for b in batches)]})

    source = spark.range(FLOOR_MAPS, numPartitions=FLOOR_MAPS)
    with pandas_warning_ignored():
        source.mapInArrow(consume, "bytes long").collect()  # start the Python workers outside the measurement
        before = h.tree_cpu_s()
        start = time.perf_counter()
        rows = (
            source.mapInArrow(emit, "reducer int, payload binary")
            .repartition(FLOOR_REDUCERS, "reducer")
            .mapInArrow(consume, "bytes long")
            .collect()
        )
        wall = time.perf_counter() - start
        after = h.tree_cpu_s()
    spark.stop()
    return {
        "moved_bytes": sum(r.bytes for r in rows),
        "wall_s": wall,
        "jvm_cpu_s": after["java"] - before["java"],
        "workers_cpu_s": after["workers"] - before["workers"],
    }


def _child(args: list[str]) -> dict[str, Any]:
    return h.run_child_or_exit(__file__, ["--child", *args], CHILD_TIMEOUT_S)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--child", nargs="+", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        kind, *rest = args.child
        result = _floor_child() if kind == "floor" else _zorder_child(kind.replace("_", " "), rest[0])
        print(json.dumps(result))
        return 0
    scale = json.loads(SCALE.read_text())
    pristine = Path(scale["input"]["path"])
    if not pristine.exists():  # the cache was cleared: the same seeded rows again (file bytes differ by a few)
        pristine, info, _ = h.load_benchmark("zorder_spark_scale").prepare_table(scale.get("quick", False), False)
        if (info["files"], info["rows"]) != (scale["input"]["files"], scale["input"]["rows"]):
            raise SystemExit(f"regenerated table differs from zorder_spark_scale.json's: {info}")
    gib = scale["input"]["bytes"] / GIB
    h.compile_bytecode()
    runs: dict[str, list[dict[str, Any]]] = {"local": [], "in-process shuffle": [], "spark floor": []}
    work = Path(tempfile.mkdtemp(prefix="exchange-floor-"))
    try:
        for rep in range(args.reps):
            for mode in ("local", "in-process shuffle"):
                copy = h.fresh_copy(pristine, work / "t")
                runs[mode].append(_child([mode.replace(" ", "_"), str(copy)]))
                shutil.rmtree(copy)
            runs["spark floor"].append(_child(["floor"]))
            print(f"rep {rep + 1}: " + ", ".join(f"{k} {v[-1]}" for k, v in runs.items()), flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    local = h.median(r["cpu_s"] for r in runs["local"]) or 0.0
    inproc = h.median(r["cpu_s"] for r in runs["in-process shuffle"]) or 0.0
    payload_gib = runs["in-process shuffle"][0]["payload_bytes"] / GIB
    floor_per_gib = (
        h.median((r["jvm_cpu_s"] + r["workers_cpu_s"]) / (r["moved_bytes"] / GIB) for r in runs["spark floor"]) or 0.0
    )
    v01_added = (
        scale["results"]["rdd-v0.1"]["call_cpu_s_per_gib_median"]
        - scale["results"]["local"]["call_cpu_s_per_gib_median"]
    )
    exchange_added = (
        scale["results"]["exchange"]["call_cpu_s_per_gib_median"]
        - scale["results"]["local"]["call_cpu_s_per_gib_median"]
    )
    encode = (inproc - local) / gib
    floor_added = encode + floor_per_gib * payload_gib / gib
    print()
    print(f"table {gib:.2f} GiB; payloads {payload_gib:.2f} GiB in {runs['in-process shuffle'][0]['payloads']} rows")
    print(f"{'CPU s per GiB of table':<58}{'value':>8}")
    print(f"{'local executor (cluster_files, one thread)':<58}{local / gib:>8.1f}")
    print(f"{'in-process shuffle functions (no Spark)':<58}{inproc / gib:>8.1f}")
    print(f"{'  of which payload encoding/decoding over local':<58}{encode:>8.1f}")
    print(f"{'Spark moving the payloads (JVM + workers), floor':<58}{floor_per_gib * payload_gib / gib:>8.1f}")
    print(f"{'floor of what any Spark exchange adds over local':<58}{floor_added:>8.1f}")
    print(f"{'what the exchange adds today (zorder_spark_scale.json)':<58}{exchange_added:>8.1f}")
    print(f"{'what the v0.1 RDD shuffle adds (zorder_spark_scale.json)':<58}{v01_added:>8.1f}")
    print(f"{'a third of that (the target read as added CPU)':<58}{v01_added / 3:>8.1f}")
    report = {
        "benchmark": "spark_exchange_floor",
        "machine": h.machine_info(java=True),
        "code_under_test": h.code_under_test(["airflow_provider_deltalite/**/*.py"]),
        "table_gib": gib,
        "payload_gib": payload_gib,
        "runs": runs,
        "per_gib": {
            "local": local / gib,
            "in_process_shuffle": inproc / gib,
            "encoding_over_local": encode,
            "spark_moving_payloads_floor": floor_per_gib * payload_gib / gib,
            "floor_added_over_local": floor_added,
            "exchange_added_today": exchange_added,
            "v01_added": v01_added,
            "target_added": v01_added / 3,
        },
    }
    RESULTS.write_text(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
