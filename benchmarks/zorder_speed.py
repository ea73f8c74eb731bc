"""Benchmark: Z-ORDER of a 400-file / 8M-row / ~260 MB table by two columns, deltalite vs delta-rs.

Input: the generated table of ``benchmarks/optimize_compact.py`` (its generator is imported, and its cache shared):
400 files x 20,000 rows in 4 partitions, ``a`` int64 (0..999), ``b`` int64 (0..10^9), ``c`` float64, ``s`` string,
partition column ``part``; written by delta-rs, fixed seed, cached under ``$TMPDIR/deltalite-bench/``. Z-ORDER
rewrites the table, so every measured run works on a fresh full copy of the pristine table.

Engines, each run in a fresh subprocess, Z-ordering by ``(a, b)`` with target size T = 64 MiB (every ~65 MB partition
becomes one file):

  local            deltalite ``zorder(DeltaTable(path), ["a", "b"], target_size=T, executor=LocalExecutor(2))``
  spark[2]         the same with ``SparkExecutor.start("local[2]")``; the JVM/session start is timed separately
  delta-rs         ``deltalake.DeltaTable(path).optimize.z_order(["a", "b"], target_size=T, max_concurrent_tasks=2)``
                   (delta-rs' optimize writes zstd by default; deltalite writes snappy)
  delta-rs/snappy  the same with ``WriterProperties(compression="SNAPPY")``, for reference (not in the targets)

Wall time spans opening the table to the end of the commit (spark: the ``zorder`` call, JVM start apart). Peak RSS:
``ru_maxrss`` of the child from ``wait4`` (the process alone), and the peak of the summed RSS of the child's whole
process tree (JVM and Spark's Python workers included), sampled from /proc every 50 ms; the parent is a child
subreaper, so the JVM and the worker daemon stay in the tree until they exit. Runs during which other work used more
than half a core are repeated (up to 3 times). Every run is then checked by a separate child: the table's rows (read
by delta-rs and by deltalite) must equal the input rows as a multiset (optimize_compact's ``rows_digest``).

Targets: deltalite wall <= 0.5x delta-rs wall, deltalite peak RSS <= 0.5x delta-rs peak RSS, identical rows; checked
for local (its own RSS) and for spark[2] (wall without the JVM start; RSS of the whole tree, JVM included).

Run:  .venv/bin/python benchmarks/zorder_speed.py [--reps 3] [--only local|spark|deltars ...] [--regenerate]
      [--profile]
Results: printed table, and benchmarks/results/zorder_speed.json.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results" / "zorder_speed.json"
CACHE = Path(tempfile.gettempdir()) / "deltalite-bench"
WORK = CACHE / "zorder-speed-work"

MIB = 1024 * 1024
TARGET_SIZE = 64 * MIB
COLUMNS = ["a", "b"]
CHILD_TIMEOUT_S = 900
SAMPLE_EVERY_S = 0.05

TARGET_WALL_VS_DELTARS = 0.5
TARGET_RSS_VS_DELTARS = 0.5

# configuration name -> (child kind, argument)
CONFIGS = {
    "local": ("local", "2"),
    "spark[2]": ("spark", "local[2]"),
    "delta-rs": ("deltars", "2"),
    "delta-rs/snappy": ("deltars", "2,snappy"),  # informative: same codec as deltalite; not in the targets
}
ONLY = {"local": ["local"], "spark": ["spark[2]"], "deltars": ["delta-rs", "delta-rs/snappy"]}


def optimize_compact() -> Any:
    """benchmarks/optimize_compact.py as a module: its table generator, row digest and /proc sampling helpers."""
    spec = importlib.util.spec_from_file_location("optimize_compact", HERE / "optimize_compact.py")
    module = importlib.util.module_from_spec(spec)
    assert spec.loader is not None
    spec.loader.exec_module(module)
    return module


# Measurement helpers shared with the OPTIMIZE benchmark (that module imports only the standard library at load time).
_OC = optimize_compact()
_maxrss_mb, _rss_now_mb, _ratio, machine_info = _OC._maxrss_mb, _OC._rss_now_mb, _OC._ratio, _OC.machine_info


CODE_UNDER_TEST = (
    "airflow_provider_deltalite/maintenance/clustering/zorder.py",
    "airflow_provider_deltalite/maintenance/clustering/runs.py",
    "airflow_provider_deltalite/maintenance/clustering/curves.py",
    "airflow_provider_deltalite/engine/rewrite.py",
    "airflow_provider_deltalite/engine/data_files.py",
    "airflow_provider_deltalite/maintenance/executor.py",
    "airflow_provider_deltalite/executors/spark.py",
)


def code_under_test() -> dict[str, Any]:
    """The commit and the content hashes of the files under test (other work may change them during a run)."""
    import hashlib

    root = HERE.parent
    commit = None
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        commit = subprocess.run(
            ["git", "rev-parse", "HEAD"], capture_output=True, text=True, cwd=root, timeout=10
        ).stdout.strip()
    files = {}
    for rel in CODE_UNDER_TEST:
        with contextlib.suppress(OSError):
            files[rel] = hashlib.sha256((root / rel).read_bytes()).hexdigest()[:16]
    return {"git_head": commit, "sha256_16": files}


# -- profiling (also used by zorder_skipping.py) -------------------------------------------------------------


class ProfiledLocalExecutor:
    """A LocalExecutor whose worker threads each run under their own cProfile (merged afterwards)."""

    def __init__(self, workers: int) -> None:
        import threading

        from airflow_provider_deltalite.executors import LocalExecutor

        self._inner = LocalExecutor(workers)
        self.name = self._inner.name
        self.profiles: list[Any] = []
        self._lock = threading.Lock()

    @property
    def parallelism(self) -> int:
        return self._inner.parallelism

    def map(self, fn: Any, items: Any) -> Any:
        import cProfile
        import threading

        def profiled(item: Any) -> Any:
            if threading.current_thread() is threading.main_thread():
                return fn(item)  # run inline (one item): the main thread's profiler sees it; do not displace it
            prof = cProfile.Profile()
            prof.enable()
            try:
                return fn(item)
            finally:
                prof.disable()
                with self._lock:
                    self.profiles.append(prof)

        return self._inner.map(profiled, items)

    def close(self) -> None:
        self._inner.close()


def print_profile(main_prof: Any, worker_profs: list[Any], wall: float, what: str) -> None:
    import io
    import pstats

    merged = pstats.Stats(main_prof, stream=io.StringIO())
    for prof in worker_profs:
        merged.add(prof)
    for key, n in (("cumulative", 30), ("tottime", 25)):
        out = io.StringIO()
        merged.stream = out
        merged.sort_stats(key).print_stats(n)
        text = out.getvalue()
        print(
            f"--- cProfile of {what} (main thread + {len(worker_profs)} tasks on worker threads, merged: times of "
            f"worker functions are summed over threads), sorted by {key} (wall {wall:.2f}s) ---",
            file=sys.stderr,
        )
        print(text[text.find("   ncalls") :], file=sys.stderr)


# -- measured child ------------------------------------------------------------------------------------------


def child_run(kind: str, arg: str, path: str, profile: bool) -> dict[str, Any]:
    import pyarrow as pa

    pa.array([0])  # pyarrow's one-time first use (imports pandas) stays out of the timings, as in snapshot_load.py
    result: dict[str, Any] = {"kind": kind, "arg": arg}
    if kind in ("local", "spark"):
        from airflow_provider_deltalite import DeltaTable
        from airflow_provider_deltalite.executors import LocalExecutor
        from airflow_provider_deltalite.maintenance.clustering.zorder import zorder

        executor: Any
        if kind == "spark":
            from airflow_provider_deltalite.executors.spark import SparkExecutor

            t0 = time.perf_counter()
            executor = SparkExecutor.start(arg)
            result["parallelism"] = executor.parallelism
            result["jvm_start_s"] = time.perf_counter() - t0
        elif profile:
            executor = ProfiledLocalExecutor(int(arg))
        else:
            executor = LocalExecutor(int(arg))
        result["baseline_rss_mb"] = _rss_now_mb()
        cpu0 = os.times()
        prof = None
        if profile:
            import cProfile

            prof = cProfile.Profile()
            prof.enable()
        start = time.perf_counter()
        stats = zorder(DeltaTable(path), COLUMNS, target_size=TARGET_SIZE, executor=executor)
        wall = time.perf_counter() - start
        if prof is not None:
            prof.disable()
        cpu1 = os.times()
        result["peak_rss_mb"] = _maxrss_mb()
        if kind == "spark":
            t1 = time.perf_counter()
            executor.close()
            result["close_s"] = time.perf_counter() - t1
        result.update(
            wall_s=wall,
            cpu_s=(cpu1.user - cpu0.user) + (cpu1.system - cpu0.system),
            files_removed=stats.num_files_removed,
            files_added=stats.num_files_added,
            committed_version=stats.committed_version,
            z_order_stats=stats.z_order_stats,
        )
        if profile:
            print_profile(prof, executor.profiles, wall, "deltalite zorder local")
    elif kind == "deltars":
        import deltalake

        tasks, _, codec = arg.partition(",")
        writer = deltalake.WriterProperties(compression=codec.upper()) if codec else None
        result["baseline_rss_mb"] = _rss_now_mb()
        cpu0 = os.times()
        start = time.perf_counter()
        metrics = deltalake.DeltaTable(path).optimize.z_order(
            COLUMNS, target_size=TARGET_SIZE, max_concurrent_tasks=int(tasks), writer_properties=writer
        )
        wall = time.perf_counter() - start
        cpu1 = os.times()
        result.update(
            wall_s=wall,
            cpu_s=(cpu1.user - cpu0.user) + (cpu1.system - cpu0.system),
            peak_rss_mb=_maxrss_mb(),
            files_removed=metrics.get("numFilesRemoved"),
            files_added=metrics.get("numFilesAdded"),
            num_batches=metrics.get("numBatches"),
        )
    else:
        raise SystemExit(f"unknown kind {kind}")
    return result


# -- parent: process-tree sampling ---------------------------------------------------------------------------


def run_measured(oc: Any, args: list[str]) -> tuple[dict[str, Any] | None, str, dict[str, Any]]:
    """Run one child of this script; sample its process tree (optimize_compact's /proc helpers)."""
    cmd = [sys.executable, str(Path(__file__).resolve()), *args]
    names: dict[int, str] = {}
    cpu_seen: dict[int, float] = {}
    peak = {"total": 0.0, "java": 0.0, "largest": 0.0}
    busy0, _ = oc._machine_busy()
    t0 = time.perf_counter()
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        proc = subprocess.Popen(cmd, stdout=out, stderr=err, cwd=HERE.parent)
        killed = False
        while True:
            s = oc._sample([proc.pid, *oc._descendants(proc.pid)], names, cpu_seen)
            peak = {k: max(peak[k], s[k]) for k in peak}
            pid, status, rusage = os.wait4(proc.pid, os.WNOHANG)
            if pid == proc.pid:
                break
            if time.perf_counter() - t0 > CHILD_TIMEOUT_S and not killed:
                proc.kill()
                killed = True
            time.sleep(SAMPLE_EVERY_S)
        proc.returncode = os.waitstatus_to_exitcode(status)
        child_exit_s = time.perf_counter() - t0
        # orphans (JVM, worker daemon) were re-parented to us: sample them until they exit, reap them for CPU time
        orphan_cpu = 0.0
        deadline = time.perf_counter() + 60
        while True:
            with contextlib.suppress(ChildProcessError):
                while True:
                    pid, _, ru = os.wait4(-1, os.WNOHANG)
                    if pid == 0:
                        break
                    orphan_cpu += ru.ru_utime + ru.ru_stime
            left = oc._descendants(os.getpid())
            if not left:
                break
            s = oc._sample(left, names, cpu_seen)
            peak = {k: max(peak[k], s[k]) for k in peak}
            if time.perf_counter() > deadline:
                for pid in left:  # descendants of the child we started, still alive after 60 s
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(pid, 9)
                deadline = float("inf")
            time.sleep(SAMPLE_EVERY_S)
        busy1, _ = oc._machine_busy()
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read(), err.read()
    tree_cpu = max(rusage.ru_utime + rusage.ru_stime + orphan_cpu, sum(cpu_seen.values()))
    tree = {
        "tree_peak_rss_mb": peak["total"],
        "jvm_peak_rss_mb": peak["java"],
        "largest_process_peak_rss_mb": peak["largest"],
        "child_maxrss_mb": rusage.ru_maxrss / 1024,
        "tree_cpu_s": tree_cpu,
        "process_s": child_exit_s,
        "others_cpu_s": max(0.0, (busy1 - busy0) - tree_cpu),
        "process_names": sorted(set(names.values())),
    }
    lines = [ln for ln in stdout.splitlines() if ln.startswith("{")]
    if killed:
        return None, f"timed out after {CHILD_TIMEOUT_S}s", tree
    if proc.returncode != 0 or not lines:
        tail = [ln for ln in stderr.strip().splitlines() if ln.strip()]
        return None, tail[-1] if tail else f"exit code {proc.returncode}", tree
    return json.loads(lines[-1]), stderr, tree


def run_plain(args: list[str]) -> tuple[dict[str, Any] | None, str]:
    cmd = [sys.executable, str(Path(__file__).resolve()), *args]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=CHILD_TIMEOUT_S, cwd=HERE.parent)
    except subprocess.TimeoutExpired:
        return None, f"timed out after {CHILD_TIMEOUT_S}s"
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    if proc.returncode != 0 or not lines:
        tail = [ln for ln in proc.stderr.strip().splitlines() if ln.strip()]
        return None, tail[-1] if tail else f"exit code {proc.returncode}"
    return json.loads(lines[-1]), proc.stderr


# -- parent: runs, summary, report ---------------------------------------------------------------------------


def fresh_copy(pristine: Path) -> Path:
    shutil.rmtree(WORK, ignore_errors=True)
    WORK.mkdir(parents=True)
    table = WORK / "table"
    shutil.copytree(pristine, table)  # real copies: Z-ORDER must not touch the pristine files
    return table


def _data_files(table: Path) -> list[Path]:
    return sorted(p for p in table.rglob("*.parquet") if "_delta_log" not in p.relative_to(table).parts)


def one_run(oc: Any, config: str, pristine: Path, expected: dict[str, Any], args: argparse.Namespace) -> dict:
    kind, arg = CONFIGS[config]
    busy, waited = oc.wait_for_quiet(args.max_busy, args.max_wait)
    load = [round(x, 2) for x in os.getloadavg()]
    table = fresh_copy(pristine)
    before = set(_data_files(table))
    res, err, tree = run_measured(oc, ["--child", kind, arg, str(table)])
    run: dict[str, Any] = {
        "config": config,
        "busy_cores_before": round(busy, 2),
        "waited_for_quiet_s": round(waited, 1),
        "load_average_1_5_15": load,
        **tree,
    }
    if res is None:
        run["error"] = err
        return run
    run.update(res)
    new = [p for p in _data_files(table) if p not in before]
    run["new_files"], run["new_bytes"] = len(new), sum(p.stat().st_size for p in new)
    check, verr = run_plain(["--verify-delta", str(table), json.dumps(expected)])
    run["verify"] = check if check is not None else {"error": verr}
    run["identical"] = bool(check and check.get("identical"))
    return run


def summarise(runs: list[dict[str, Any]]) -> dict[str, Any]:
    ok = [r for r in runs if "error" not in r]
    errors = [r["error"] for r in runs if "error" in r]
    if not ok:
        return {"ok": False, "error": errors[0] if errors else "no run", "runs": runs}

    def med(key: str) -> float | None:
        vals = [r[key] for r in ok if r.get(key) is not None]
        return statistics.median(vals) if vals else None

    return {
        "ok": not errors,
        "error": errors[0] if errors else None,
        "wall_s_median": med("wall_s"),
        "wall_s_all": [round(r["wall_s"], 3) for r in ok],
        "cpu_s_median": med("cpu_s"),
        "tree_cpu_s_median": med("tree_cpu_s"),
        "jvm_start_s_median": med("jvm_start_s"),
        "peak_rss_mb_max": max(r["peak_rss_mb"] for r in ok),
        "child_maxrss_mb_max": max(r["child_maxrss_mb"] for r in ok),
        "tree_peak_rss_mb_max": max(r["tree_peak_rss_mb"] for r in ok),
        "jvm_peak_rss_mb_max": max(r["jvm_peak_rss_mb"] for r in ok),
        "baseline_rss_mb": med("baseline_rss_mb"),
        "new_files": ok[0].get("new_files"),
        "new_mb": ok[0].get("new_bytes", 0) / 1e6,
        "others_cores_during_max": max(r.get("others_cores_during", 0.0) for r in ok),
        "contended_runs_kept": sum(1 for r in ok if r.get("contended")),
        "identical": all(r.get("identical") for r in runs),
        "runs": runs,
    }


def evaluate(summary: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    def get(config: str, key: str) -> float | None:
        s = summary.get(config)
        return s.get(key) if s and s.get("wall_s_median") is not None else None

    rs_wall, rs_rss = get("delta-rs", "wall_s_median"), get("delta-rs", "peak_rss_mb_max")
    targets = []

    def add(name: str, value: float | None, limit: float, note: str = "") -> None:
        verdict = "n/a" if value is None else ("PASS" if value <= limit else "FAIL")
        targets.append({"target": f"{name} <= {limit}", "value": value, "verdict": verdict, "note": note})

    add("local wall / delta-rs wall", _ratio(get("local", "wall_s_median"), rs_wall), TARGET_WALL_VS_DELTARS)
    add("local peak RSS / delta-rs peak RSS", _ratio(get("local", "peak_rss_mb_max"), rs_rss), TARGET_RSS_VS_DELTARS)
    add(
        "spark[2] wall / delta-rs wall",
        _ratio(get("spark[2]", "wall_s_median"), rs_wall),
        TARGET_WALL_VS_DELTARS,
        note="zorder call only, JVM start excluded",
    )
    add(
        "spark[2] tree RSS / delta-rs peak RSS",
        _ratio(get("spark[2]", "tree_peak_rss_mb_max"), rs_rss),
        TARGET_RSS_VS_DELTARS,
        note="driver + JVM + Python workers",
    )
    for config in ("local", "spark[2]", "delta-rs"):
        s = summary.get(config)
        value = s["identical"] if s and s.get("runs") else None
        targets.append(
            {
                "target": f"{config}: rows identical to the input",
                "value": value,
                "verdict": "n/a" if value is None else ("PASS" if value else "FAIL"),
                "note": "",
            }
        )
    return targets


def print_table(summary: dict[str, dict[str, Any]], targets: list[dict[str, Any]], reps: int) -> None:
    rs = summary.get("delta-rs", {})
    rs_wall, rs_rss = rs.get("wall_s_median"), rs.get("peak_rss_mb_max")
    wall_head = f"wall_s (median of {reps})"
    head = (
        f"{'engine':<16} {wall_head:<21} {'jvm_start_s':>11} {'cpu_s':>6}  {'peak_rss_MB':>11} {'tree_rss_MB':>11} "
        f"{'jvm_rss_MB':>10}  {'files':>8} {'out_MB':>7}  {'wall/rs':>7} {'rss/rs':>6}  {'others':>6}  rows identical"
    )
    print(head)
    print("-" * len(head))
    for config in CONFIGS:
        s = summary.get(config)
        if s is None:
            continue
        if s.get("wall_s_median") is None:
            print(f"{config:<16} ERROR: {s.get('error')}")
            continue
        spark = config.startswith("spark")
        w = s["wall_s_median"]
        jvm = f"{s['jvm_start_s_median']:.2f}" if s.get("jvm_start_s_median") is not None else "-"
        cpu = s["tree_cpu_s_median"] if spark else s["cpu_s_median"]
        rss_for_target = s["tree_peak_rss_mb_max"] if spark else s["peak_rss_mb_max"]
        vs_wall = f"{w / rs_wall:.2f}" if rs_wall else "-"
        vs_rss = f"{rss_for_target / rs_rss:.2f}" if rs_rss else "-"
        jvm_rss = f"{s['jvm_peak_rss_mb_max']:.0f}" if spark else "-"
        print(
            f"{config:<16} {w:<21.2f} {jvm:>11} {cpu:>6.1f}  {s['peak_rss_mb_max']:>11.0f} "
            f"{s['tree_peak_rss_mb_max']:>11.0f} {jvm_rss:>10}  {'400->' + str(s['new_files']):>8} "
            f"{s['new_mb']:>7.1f}  {vs_wall:>7} {vs_rss:>6}  {s['others_cores_during_max']:>6.2f}  "
            f"{'yes' if s['identical'] else 'no'}"
        )
        if s.get("error"):
            print(f"{'':<16} note: {s['error']}")
    print(
        f"Z-order by (a, b), target_size {TARGET_SIZE // MIB} MiB, 2 workers/tasks for every engine. wall = open table "
        ".. commit (spark: the zorder call, JVM/session start apart).\n"
        "peak_rss = ru_maxrss of the child (spark: the Python driver alone); tree_rss = peak summed RSS of the child's "
        "process tree, sampled every 50 ms\n(spark: driver + JVM + Python workers); rss/rs compares tree_rss for "
        "spark, peak_rss otherwise, with delta-rs' peak_rss.\n"
        "cpu_s = user+sys of the timed part (spark: the whole process tree, JVM start included). others = the most "
        "cores other work used during a kept run.\n"
        "delta-rs writes zstd by default, deltalite snappy: delta-rs/snappy is shown for reference."
    )
    print()
    for t in targets:
        value = t["value"]
        shown = "-" if value is None else (("yes" if value else "no") if isinstance(value, bool) else f"{value:.2f}")
        note = f"  ({t['note']})" if t["note"] else ""
        print(f"  {t['verdict']:<4}  {t['target']:<44} {shown}{note}")


def _print_run(config: str, rep: int, r: dict[str, Any]) -> None:
    if "error" in r:
        status = f"ERROR {r['error']}"
    else:
        jvm = f" (+ jvm start {r['jvm_start_s']:.2f}s)" if "jvm_start_s" in r else ""
        status = (
            f"{r['wall_s']:.2f}s{jvm} cpu {r['tree_cpu_s']:.1f}s rss {r['peak_rss_mb']:.0f}MB "
            f"tree {r['tree_peak_rss_mb']:.0f}MB -> {r.get('new_files')} files; "
            f"rows identical: {'yes' if r['identical'] else 'no'}"
        )
    print(
        f"  {config:<16} rep {rep + 1}: {status}   [load {r['load_average_1_5_15'][0]}, other work: "
        f"{r['busy_cores_before']} cores before, {r['others_cores_during']:.2f} during]",
        flush=True,
    )
    if r.get("verify") and not r.get("identical"):
        print(f"            verify: {json.dumps(r['verify'])[:400]}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--only", action="append", choices=sorted(ONLY), help="run only these engines (repeatable)")
    parser.add_argument("--regenerate", action="store_true", help="rebuild the generated table (optimize_compact's)")
    parser.add_argument("--profile", action="store_true", help="also cProfile one deltalite local run (not timed)")
    parser.add_argument("--no-write", action="store_true", help="do not write the JSON results file")
    parser.add_argument(
        "--max-busy", type=float, default=0.5, help="before each run, wait until other work uses fewer cores"
    )
    parser.add_argument("--max-wait", type=float, default=60.0, help="longest wait for a quiet machine (s)")
    parser.add_argument(
        "--max-retries", type=int, default=3, help="run again when other work used more than --max-busy cores"
    )
    parser.add_argument("--child", nargs=3, metavar=("KIND", "ARG", "PATH"), help=argparse.SUPPRESS)
    parser.add_argument("--child-profile", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--verify-delta", nargs=2, metavar=("PATH", "EXPECTED"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child_run(*args.child, profile=args.child_profile)))
        return 0
    if args.verify_delta:
        oc = _OC
        print(json.dumps(oc.verify_delta_child(args.verify_delta[0], json.loads(args.verify_delta[1]))))
        return 0

    t_start = time.perf_counter()
    code_before = code_under_test()
    oc = _OC
    subreaper = oc._become_subreaper()
    CACHE.mkdir(parents=True, exist_ok=True)
    pristine, info, note = oc.prepare_table(args.regenerate)
    print(
        f"table: {note} -> {pristine} ({info['files']} files, {info['bytes'] / 1e6:.0f} MB, {info['rows']:,} rows, "
        f"version {info['version']})"
    )
    configs = [c for c in CONFIGS if not args.only or any(c in ONLY[o] for o in args.only)]
    runs: dict[str, list[dict[str, Any]]] = {c: [] for c in configs}
    discarded: dict[str, list[dict[str, Any]]] = {c: [] for c in configs}
    for rep in range(args.reps):
        order = configs[rep % len(configs) :] + configs[: rep % len(configs)]  # rotate against drift
        for config in order:
            for attempt in range(args.max_retries + 1):
                r = one_run(oc, config, pristine, info["expected"], args)
                r["attempt"] = attempt + 1
                r["others_cores_during"] = r["others_cpu_s"] / r["process_s"] if r["process_s"] else 0.0
                r["contended"] = r["others_cores_during"] > args.max_busy
                _print_run(config, rep, r)
                if not r["contended"] or "error" in r or attempt == args.max_retries:
                    break
                discarded[config].append(r)
                print(f"            other work used {r['others_cores_during']:.2f} cores during the run: run again")
            runs[config].append(r)
    summary = {c: summarise(runs[c]) for c in configs}
    targets = evaluate(summary)
    print()
    print_table(summary, targets, args.reps)
    report: dict[str, Any] = {
        "benchmark": "zorder_speed",
        "description": (
            "Z-order by (a, b) of 400 files x 20,000 rows (4 partitions) into 64 MiB files; fresh subprocess and "
            "fresh table copy per run"
        ),
        "target_size": TARGET_SIZE,
        "columns": COLUMNS,
        "targets": targets,
        "reps": args.reps,
        "machine": machine_info(),
        "subreaper": subreaper,
        "code_under_test": code_before,
        "input": info,
        "results": summary,
        "discarded_contended_runs": discarded,
        "profile": None,
        "total_runtime_s": None,
    }
    if args.profile:
        print("\n=== cProfile: deltalite local (extra run, not in the timings) ===")
        table = fresh_copy(pristine)
        res, err, _ = run_measured(oc, ["--child", "local", "2", str(table), "--child-profile"])
        text = err if res is not None else f"ERROR {err}"
        print(text)
        report["profile"] = text
    shutil.rmtree(WORK, ignore_errors=True)
    code_after = code_under_test()
    report["code_under_test"]["git_head_at_end"] = code_after["git_head"]
    if code_after["sha256_16"] != code_before["sha256_16"]:
        report["code_under_test_changed_during_run"] = code_after
        print(f"\nWARNING: the code under test changed during the run: {code_before} -> {code_after}")
    report["total_runtime_s"] = round(time.perf_counter() - t_start, 1)
    if not args.no_write:
        RESULTS.parent.mkdir(parents=True, exist_ok=True)
        RESULTS.write_text(json.dumps(report, indent=2) + "\n")
        print(f"\nresults written to {RESULTS.relative_to(HERE.parent)} (total {report['total_runtime_s']}s)")
    return 0 if all(t["verdict"] != "FAIL" for t in targets) else 2


if __name__ == "__main__":
    sys.exit(main())
