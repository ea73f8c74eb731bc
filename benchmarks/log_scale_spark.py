"""Planning one partition with the Spark executor, the checkpoint read by Spark tasks (issue 28 item 3), next to the
local path, on `log_scale.py`'s generated 1M- and 10M-file logs (cached under /tmp/deltalite-bench).

Per log, fresh processes, rotated, medians of ``--reps``, the package bytecode-compiled first:
- local: ``deltalite optimize T --where "p = 'p00042'" --dry-run --json`` (the local pruned replay);
- spark tasks: the same with ``--executor spark --spark-master local[2] --spark-checkpoint-tasks 0`` (every
  checkpoint read by Spark tasks: two rounds, one task per row-group range);
- spark local plan: ``--executor spark ... --spark-checkpoint-tasks <huge>`` (a Spark session, the plan made in the
  driver process as without tasks): what the tasks cost or save with the session's own cost equal.
Each run reports its whole-process wall, the driver's Python peak RSS (``ru_maxrss`` of the process itself) and
the JVM's (sampled every 50 ms from /proc, `_harness.run_measured`), the process tree's summed peak (Spark's Python
workers included), and in-process: the session start (``SparkExecutor.start``), the operation, the session stop.
All runs check the plan: 1,010 files considered.

What sets the default threshold (`engine.checkpoint_tasks.DEFAULT_CHECKPOINT_TASK_BYTES`): the operation time with
tasks against the local plan's, per checkpoint size (62 MB at 1M files, 622 MB at 10M).

``--whole-table``: the whole-table operations instead (`maintenance.health.task_sums`), written to
``results/log_scale_spark_whole_table.json``:
- ``health --json`` locally (the stream) and with ``--executor spark --spark-master local[2]
  --spark-checkpoint-tasks 0`` (each task sums its slice of the checkpoint, the driver merges);
- ``maintain --dry-run --json`` likewise (the planner's first pass on the tasks, which also return their files'
  partition numbers and sizes; the compactions planned from those, any pruned replay, in the driver).
Every run's figures are checked against the local run's: the health's file count and a digest of its per-partition
figures and size histogram; the plan's actions (without their reasons' wording).

Run: ``.venv/bin/python benchmarks/log_scale_spark.py`` (``--reps N``, ``--sizes 1M 10M``, ``--whole-table``,
``--no-write``).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import _harness as h

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results" / "log_scale_spark.json"
RESULTS_WHOLE_TABLE = HERE / "results" / "log_scale_spark_whole_table.json"
CHILD_TIMEOUT_S = 1800
EXPECTED_CONSIDERED = 1_010
CODE_UNDER_TEST = ("engine/**/*.py", "executors/*.py", "maintenance/**/*.py", "cli/*.py")
NEVER = str(1 << 60)
TASKS = ["--executor", "spark", "--spark-master", "local[2]", "--spark-checkpoint-tasks", "0"]
CONFIGS = {
    "local": [],
    "spark tasks": TASKS,
    "spark local plan": ["--executor", "spark", "--spark-master", "local[2]", "--spark-checkpoint-tasks", NEVER],
}
# --whole-table: (operation, configuration) -> the CLI's argv before the table
WHOLE_TABLE = {
    "health local": (["health"], []),
    "health spark tasks": (["health"], TASKS),
    "maintain local": (["maintain", "--dry-run"], []),
    "maintain spark tasks": (["maintain", "--dry-run"], TASKS),
}


def digest(doc: dict[str, Any]) -> dict[str, Any]:
    """What a whole-table run is checked by (its figures that do not depend on the clock)."""
    import hashlib

    def h(value: Any) -> str:
        return hashlib.sha256(json.dumps(value, sort_keys=True).encode()).hexdigest()[:16]

    if "plan" in doc:
        actions = [{k: v for k, v in a.items() if k != "reasons"} for a in doc["plan"]["actions"]]
        return {"files": doc["healthBefore"]["files"], "actions": len(actions), "digest": h(actions)}
    return {"files": doc["files"], "digest": h([doc["partitions"], doc["sizeHistogram"], doc["tombstones"]["files"]])}


def child(table: str, config: str) -> dict[str, Any]:
    """Runs in the measured process: the CLI's optimize dry run, timed in phases."""
    import contextlib
    import io
    import resource

    t0 = time.perf_counter()
    from airflow_provider_deltalite.cli import main as cli_main
    from airflow_provider_deltalite.executors.spark import SparkExecutor

    t1 = time.perf_counter()
    phases = {"session_start_s": 0.0, "session_stop_s": 0.0}
    start, close = SparkExecutor.start.__func__, SparkExecutor.close  # type: ignore[attr-defined]

    def timed_start(cls: Any, *args: Any, **kwargs: Any) -> Any:
        s = time.perf_counter()
        try:
            return start(cls, *args, **kwargs)
        finally:
            phases["session_start_s"] += time.perf_counter() - s

    def timed_close(self: Any) -> None:
        s = time.perf_counter()
        try:
            close(self)
        finally:
            phases["session_stop_s"] += time.perf_counter() - s

    SparkExecutor.start = classmethod(timed_start)  # type: ignore[method-assign,assignment]
    SparkExecutor.close = timed_close  # type: ignore[method-assign]
    if config in WHOLE_TABLE:
        head, tail = WHOLE_TABLE[config]
        argv = [*head, table, "--json", *tail]
    else:
        argv = ["optimize", table, "--where", "p = 'p00042'", "--dry-run", "--json", *CONFIGS[config]]
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = cli_main(argv)
    t2 = time.perf_counter()
    doc = json.loads(out.getvalue()) if code == 0 else {}
    checked = digest(doc) if config in WHOLE_TABLE and code == 0 else {}
    return {
        **checked,
        "code": code,
        "import_s": t1 - t0,
        "call_s": t2 - t1,
        "operation_s": t2 - t1 - phases["session_start_s"] - phases["session_stop_s"],
        **phases,
        "driver_python_peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "considered": doc.get("totalConsideredFiles"),
    }


def bench(table: Path, reps: int, configs: list[str], files: int) -> dict[str, Any]:
    runs: dict[str, list[dict[str, Any]]] = {c: [] for c in configs}
    for rep in range(reps):
        for config in h.rotated(configs, rep):
            load = round(__import__("os").getloadavg()[0], 2)
            start = time.perf_counter()
            result, err, tree = h.run_measured(__file__, ["--child", str(table), config], CHILD_TIMEOUT_S)
            wall = time.perf_counter() - start
            r: dict[str, Any] = {"load_1m": load, "process_wall_s": wall, **tree}
            if result is None:
                r["error"] = err[-600:]
            else:
                r.update(result)
                if config in WHOLE_TABLE:
                    if result.get("files") != files:
                        r["error"] = f"counted {result.get('files')} files, expected {files}"
                elif result.get("considered") != EXPECTED_CONSIDERED:
                    r["error"] = f"planned {result.get('considered')} files, expected {EXPECTED_CONSIDERED}"
            runs[config].append(r)
            status = r.get("error") or (
                f"wall {r['process_s']:.2f}s op {r['operation_s']:.2f}s start {r['session_start_s']:.2f}s "
                f"python {r['driver_python_peak_rss_mb']:.0f}MB jvm {r['jvm_peak_rss_mb']:.0f}MB "
                f"tree {r['tree_peak_rss_mb']:.0f}MB"
            )
            print(f"  {config:<20} rep {rep + 1}: {status}  [load {load}]", flush=True)
    _same_figures(runs)
    return {c: summarise(rs) for c, rs in runs.items()}


def _same_figures(runs: dict[str, list[dict[str, Any]]]) -> None:
    """A whole-table run on tasks whose figures differ from the local run's is an error."""
    for config, rs in runs.items():
        if config not in WHOLE_TABLE or not config.endswith("spark tasks"):
            continue
        local = [r.get("digest") for r in runs.get(config.replace("spark tasks", "local"), []) if "error" not in r]
        for r in rs:
            if "error" not in r and local and r.get("digest") != local[0]:
                r["error"] = f"figures differ from the local run's ({r.get('digest')} != {local[0]})"


def summarise(runs: list[dict[str, Any]]) -> dict[str, Any]:
    ok = [r for r in runs if "error" not in r]
    if not ok:
        return {"ok": False, "error": runs[0].get("error") if runs else "no run", "runs": runs}
    out: dict[str, Any] = {"ok": len(ok) == len(runs), "runs": runs}
    for key in ("process_s", "operation_s", "session_start_s", "session_stop_s", "import_s", "load_1m"):
        out[key] = h.median(r[key] for r in ok)
    for key in ("driver_python_peak_rss_mb", "jvm_peak_rss_mb", "tree_peak_rss_mb"):
        out[key] = max(r[key] for r in ok)
    return out


def print_rows(title: str, summary: dict[str, dict[str, Any]]) -> None:
    print(f"\n{title}")
    print(
        f"  {'configuration':<20} {'wall_s':>7} {'op_s':>6} {'start_s':>7} {'python_MB':>9} {'jvm_MB':>7} "
        f"{'tree_MB':>7} {'load':>5}"
    )
    for config, s in summary.items():
        if s.get("process_s") is None:
            print(f"  {config:<20} ERROR {s.get('error')}")
            continue
        print(
            f"  {config:<20} {s['process_s']:>7.2f} {s['operation_s']:>6.2f} {s['session_start_s']:>7.2f} "
            f"{s['driver_python_peak_rss_mb']:>9.0f} {s['jvm_peak_rss_mb']:>7.0f} {s['tree_peak_rss_mb']:>7.0f} "
            f"{s['load_1m']:>5.1f}"
        )


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        print(json.dumps(child(sys.argv[2], sys.argv[3])))
        return 0
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--sizes", nargs="+", default=["1M", "10M"], choices=["100k", "1M", "10M"])
    parser.add_argument("--whole-table", action="store_true", help="health and maintain --dry-run (see above)")
    parser.add_argument("--no-write", action="store_true")
    parser.add_argument(
        "--merge", action="store_true", help="keep the results file's other logs (a 10M run with fewer reps)"
    )
    args = parser.parse_args()
    configs = list(WHOLE_TABLE) if args.whole_table else list(CONFIGS)
    started = time.perf_counter()
    h.compile_bytecode()
    h.become_subreaper()
    scale = h.load_benchmark("log_scale")
    report: dict[str, Any] = {
        "machine": h.machine_info(java=True),
        "code": h.code_under_test(CODE_UNDER_TEST),
        "logs": {},
    }
    summaries: dict[str, dict[str, Any]] = {}
    for label in args.sizes:
        table, info, how = scale.prepare_log(label, False)
        checkpoint = sum(p.stat().st_size for p in (table / "_delta_log").glob("*.checkpoint*.parquet"))
        print(f"{label}: {info['files']:,} files, checkpoint {checkpoint / 1e6:.0f} MB ({how})", flush=True)
        summaries[label] = bench(table, args.reps, configs, info["files"])
        report["logs"][label] = {"info": info, "checkpoint_bytes": checkpoint, "summary": summaries[label]}
        what = (
            "health and maintain --dry-run" if args.whole_table else f"plan one partition ({EXPECTED_CONSIDERED} files)"
        )
        print_rows(f"the {label} log: {what}", summaries[label])
    targets = []
    for label in args.sizes:
        s = summaries[label]
        # maintain holds each file's partition number and size (and any pruned replay) with or without tasks: no target
        for config in [c for c in configs if c in ("spark tasks", "health spark tasks")]:
            if s.get(config, {}).get("ok"):
                targets.append(
                    h.target(
                        f"{label} {config}: driver Python peak RSS MiB (reported)",
                        s[config]["driver_python_peak_rss_mb"],
                        400,
                        note=f"JVM {s[config]['jvm_peak_rss_mb']:.0f} MiB",
                    )
                )
    results = RESULTS_WHOLE_TABLE if args.whole_table else RESULTS
    if args.merge and results.exists():
        earlier = json.loads(results.read_text())
        report["logs"] = {**earlier.get("logs", {}), **report["logs"]}
        kept = [t for t in earlier.get("targets", []) if not any(t["target"].startswith(f"{s} ") for s in args.sizes)]
        targets = kept + targets
    report["targets"] = targets
    h.print_targets(targets)
    return h.finish(report, targets, results, started, not args.no_write)


if __name__ == "__main__":
    raise SystemExit(main())
