"""Benchmark: what planning maintenance costs, from the log only (`plan_maintenance`, `deltalite maintain --dry-run`).

Table: a generated log (no data files) of ``--files`` live files (default 100,000) in 100 date partitions: a third of
the files are fragments (1-8 MiB, below 1 GiB / 8), the rest 200-900 MiB; every 20th file has a deletion vector
removing 1-9% of its 1,000 rows; 1,000 tombstones, half of them older than the 7-day retention. Version 0 is the
protocol and metadata, version 1 adds everything, and a classic checkpoint at version 1 (written by deltalite) is
what a load reads. Cached under the system temp dir.

Each run is a fresh subprocess, the package bytecode-compiled first:

  inproc: imports done, then (1) the snapshot load, (2) `policy_health` on it, (3) `decide`, timed apart (wall and
          CPU), then a whole `plan_maintenance` call on a new table object; peak RSS of the process.
  cli:    `deltalite maintain TABLE --dry-run --json`, the whole process (wall, from the parent).

Run:  .venv/bin/python benchmarks/plan_maintenance.py [--reps 3] [--files 100000] [--regenerate]
Results: printed table, and benchmarks/results/plan_maintenance.json. Other work on the machine slows wall times;
the JSON records CPU and the load average.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import _harness as h

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results" / "plan_maintenance.json"
CACHE = Path(tempfile.gettempdir()) / "deltalite-bench"
GEN_FORMAT = 1
NOW_MS = 1_780_000_000_000
HOUR_MS = 3_600_000
MIB = 1024 * 1024
PARTITIONS = 100
TOMBSTONES = 1_000
CHILD_TIMEOUT_S = 600


def generate(root: Path, files: int) -> None:
    """The log described in the module docstring (seeded: the same table every time)."""
    sys.path.insert(0, str(h.REPO))
    from airflow_provider_deltalite.engine.table import Table
    from airflow_provider_deltalite.maintenance.checkpoint import checkpoint

    rng = random.Random(20261125)
    if root.exists():
        shutil.rmtree(root)
    log = root / "_delta_log"
    log.mkdir(parents=True)
    schema = {
        "type": "struct",
        "fields": [
            {"name": "id", "type": "long", "nullable": True, "metadata": {}},
            {"name": "day", "type": "date", "nullable": True, "metadata": {}},
        ],
    }
    head = [
        {"commitInfo": {"timestamp": NOW_MS - 900 * HOUR_MS, "operation": "CREATE TABLE"}},
        {
            "protocol": {
                "minReaderVersion": 3,
                "minWriterVersion": 7,
                "readerFeatures": ["deletionVectors"],
                "writerFeatures": ["deletionVectors"],
            }
        },
        {
            "metaData": {
                "id": "bench-plan-maintenance",
                "format": {"provider": "parquet", "options": {}},
                "schemaString": json.dumps(schema),
                "partitionColumns": ["day"],
                "configuration": {},
                "createdTime": NOW_MS - 900 * HOUR_MS,
            }
        },
    ]
    (log / f"{0:020d}.json").write_text("".join(json.dumps(a) + "\n" for a in head))
    lines = [json.dumps({"commitInfo": {"timestamp": NOW_MS - 800 * HOUR_MS, "operation": "WRITE"}})]
    for i in range(files):
        day = f"2026-{1 + (i % PARTITIONS) // 28:02d}-{1 + (i % PARTITIONS) % 28:02d}"
        size = rng.randint(1, 8) * MIB if i % 3 == 0 else rng.randint(200, 900) * MIB
        add = {
            "path": f"day={day}/part-{i:07d}.parquet",
            "partitionValues": {"day": day},
            "size": size,
            "modificationTime": NOW_MS - 800 * HOUR_MS,
            "dataChange": True,
            "stats": json.dumps({"numRecords": 1000, "minValues": {"id": i}, "maxValues": {"id": i + 999}}),
        }
        if i % 20 == 0:
            add["deletionVector"] = {
                "storageType": "u",
                "pathOrInlineDv": "ab^-aqEH.-t@S}K{vb[*k^",
                "offset": 1,
                "sizeInBytes": 36,
                "cardinality": rng.randint(10, 90),
            }
        lines.append(json.dumps({"add": add}))
    for j in range(TOMBSTONES):
        age = 300 if j % 2 == 0 else 24
        lines.append(
            json.dumps(
                {
                    "remove": {
                        "path": f"day=2025-01-01/gone-{j:05d}.parquet",
                        "deletionTimestamp": NOW_MS - age * HOUR_MS,
                        "dataChange": True,
                        "partitionValues": {"day": "2025-01-01"},
                        "size": 4 * MIB,
                    }
                }
            )
        )
    (log / f"{1:020d}.json").write_text("\n".join(lines) + "\n")
    checkpoint(Table(str(root)))


def table_path(files: int, regenerate: bool) -> Path:
    root = CACHE / f"plan_maintenance-v{GEN_FORMAT}-{files}"
    marker = root / ".complete"
    if regenerate or not marker.exists():
        print(f"generating {files} files under {root} ...", flush=True)
        generate(root, files)
        marker.write_text("ok\n")
    return root


def child_inproc(path: str) -> None:
    sys.path.insert(0, str(h.REPO))
    import pyarrow as pa

    from airflow_provider_deltalite.engine.table import Table
    from airflow_provider_deltalite.maintenance.planner import decide, plan_maintenance, policy_health
    from airflow_provider_deltalite.maintenance.planner.policy import MaintenancePolicy

    pa.array([0])  # pyarrow's one-time first use, outside the clock
    policy = MaintenancePolicy()

    def timed(call):  # type: ignore[no-untyped-def]
        cpu0, wall0 = time.process_time(), time.perf_counter()
        value = call()
        return value, time.perf_counter() - wall0, time.process_time() - cpu0

    def load():  # type: ignore[no-untyped-def]
        loaded = table.snapshot()
        assert loaded.files.num_rows >= 0  # the file list materialised, as planning uses it
        return loaded

    table = Table(path)
    snapshot, load_s, load_cpu = timed(load)
    health, health_s, health_cpu = timed(lambda: policy_health(table, policy, snapshot=snapshot, now=NOW_MS))
    plan, decide_s, decide_cpu = timed(lambda: decide(health, snapshot, policy, NOW_MS))
    again, total_s, total_cpu = timed(lambda: plan_maintenance(Table(path), policy, now=NOW_MS))
    assert again == plan
    print(
        json.dumps(
            {
                "files": snapshot.num_files,
                "actions": [[a.operation, len(a.partitions)] for a in plan.actions],
                "deferred": [[d.operation, len(d.partitions)] for d in plan.deferred],
                "load_s": load_s,
                "load_cpu_s": load_cpu,
                "health_s": health_s,
                "health_cpu_s": health_cpu,
                "decide_s": decide_s,
                "decide_cpu_s": decide_cpu,
                "plan_maintenance_s": total_s,
                "plan_maintenance_cpu_s": total_cpu,
                "peak_rss_mb": h.maxrss_mb(),
            }
        )
    )


def run_cli(path: Path) -> dict[str, float]:
    start = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "airflow_provider_deltalite", "maintain", str(path), "--dry-run", "--json"],
        capture_output=True,
        text=True,
        cwd=h.REPO,
        timeout=CHILD_TIMEOUT_S,
        env={**os.environ, "PYTHONPATH": str(h.REPO)},
    )
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"deltalite maintain failed: {proc.stderr.strip()}")
    doc = json.loads(proc.stdout)
    return {"cli_s": wall, "cli_actions": len(doc["plan"]["actions"])}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--files", type=int, default=100_000)
    parser.add_argument("--regenerate", action="store_true")
    parser.add_argument("--no-write", action="store_true")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child_inproc(args.child)
        return 0
    started = time.perf_counter()
    h.compile_bytecode()
    path = table_path(args.files, args.regenerate)
    before = h.code_under_test(["maintenance/planner/*.py", "maintenance/health/*.py", "cli/maintain.py"])
    runs = []
    for rep in range(args.reps):
        result = h.run_child_or_exit(__file__, ["--child", str(path)], CHILD_TIMEOUT_S)
        result.update(run_cli(path))
        runs.append(result)
        print(
            f"  rep {rep + 1}: load {result['load_s']:.2f}s  health {result['health_s']:.2f}s  decide "
            f"{result['decide_s']:.2f}s (cpu {result['decide_cpu_s']:.2f}s)  plan_maintenance "
            f"{result['plan_maintenance_s']:.2f}s  cli {result['cli_s']:.2f}s  rss {result['peak_rss_mb']:.0f} MB",
            flush=True,
        )
    keys = [k for k in runs[0] if k.endswith("_s") or k == "peak_rss_mb"]
    summary = {k: h.median(r[k] for r in runs) for k in keys}
    print(f"\nplan_maintenance on {runs[0]['files']} files ({args.reps} runs, medians)")
    for k in keys:
        unit = "MB" if k == "peak_rss_mb" else "s"
        print(f"  {k:<26} {summary[k]:8.2f} {unit}")
    print(f"  plan: {runs[0]['actions']} deferred {runs[0]['deferred']}")
    report = {
        "benchmark": "plan_maintenance",
        "files": runs[0]["files"],
        "machine": h.machine_info(),
        "code_under_test": before,
        "runs": runs,
        "medians": summary,
    }
    h.note_code_change(
        report, before, h.code_under_test(["maintenance/planner/*.py", "maintenance/health/*.py", "cli/maintain.py"])
    )
    if not args.no_write:
        h.write_results(RESULTS, report, started)
    return 0


if __name__ == "__main__":
    sys.exit(main())
