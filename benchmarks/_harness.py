"""What every benchmark script measures with: child processes, RSS and CPU, the machine, the code, the summary.

Each benchmark runs its measured work in fresh child processes of its own script (``run_child``, or
``run_measured`` to also sample the child's whole process tree from /proc: the JVM and Spark's Python workers
included, with this process a child subreaper so that orphaned descendants stay in view until they exit). Inside a
child, ``rss_now_mb``, ``maxrss_mb`` and ``status_mb("VmHWM:")`` (after ``reset_peak_rss``) give the memory figures.
The parent records ``machine_info`` and ``code_hashes`` (others may edit the package while a benchmark runs),
summarises with ``median``/``ratio``/``target`` and ends with ``print_targets`` and ``write_results``.

Standard library only: the scripts import it at load time, before any child sets up its own imports. Linux only
(/proc, prctl).
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import datetime as dt
import hashlib
import io
import json
import os
import platform
import random
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from importlib import metadata
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
MIB = 1024 * 1024
SAMPLE_EVERY_S = 0.05
_PAGE_MB = os.sysconf("SC_PAGE_SIZE") / MIB
_HZ = os.sysconf("SC_CLK_TCK")


# -- inside a measured child --------------------------------------------------------------------------------------


def maxrss_mb() -> float:
    """Peak RSS of this process so far (``ru_maxrss``, KiB on Linux)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def status_mb(key: str) -> float:
    """A memory line of /proc/self/status in MB (``"VmRSS:"``, ``"VmHWM:"``); 0.0 when absent."""
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith(key):
                return int(line.split()[1]) / 1024
    return 0.0


def rss_now_mb() -> float:
    return status_mb("VmRSS:")


def reset_peak_rss() -> None:
    """Reset the peak-RSS mark (Linux: clear_refs 5), so that VmHWM afterwards is the peak of what follows alone."""
    with open("/proc/self/clear_refs", "w") as fh:
        fh.write("5")


class Measured:
    """Measures the block it guards in a child: RSS before, then wall and CPU time and the peak RSS of the process
    (``ru_maxrss``: imports done before the block count too), with a cProfile of the block when asked."""

    def __init__(self, profile: bool = False) -> None:
        self.profile: Any = None
        if profile:
            import cProfile

            self.profile = cProfile.Profile()
        self.record: dict[str, Any] = {}

    def __enter__(self) -> Measured:
        self.record["baseline_rss_mb"] = rss_now_mb()
        self._cpu0 = os.times()
        if self.profile is not None:
            self.profile.enable()
        self._start = time.perf_counter()
        return self

    def __exit__(self, *exc: object) -> None:
        wall = time.perf_counter() - self._start
        if self.profile is not None:
            self.profile.disable()
        cpu1 = os.times()
        cpu = (cpu1.user - self._cpu0.user) + (cpu1.system - self._cpu0.system)
        self.record.update(wall_s=wall, cpu_s=cpu, peak_rss_mb=maxrss_mb())

    @property
    def wall_s(self) -> float:
        return self.record["wall_s"]


def proc_start_epoch() -> float:
    """When this process started (seconds since the epoch), from /proc."""
    with open("/proc/self/stat") as fh:
        ticks = int(fh.read().rsplit(")", 1)[1].split()[19])
    with open("/proc/stat") as fh:
        boot = next(int(line.split()[1]) for line in fh if line.startswith("btime"))
    return boot + ticks / _HZ


# -- the parent: process tree, machine load ---------------------------------------------------------------------


def become_subreaper() -> bool:
    """Orphaned descendants (the JVM, Spark's Python worker daemon) are re-parented to us, so we can sample them
    until they exit and collect their CPU time."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(36, 1, 0, 0, 0) == 0  # PR_SET_CHILD_SUBREAPER
    except (OSError, AttributeError):
        return False


def descendants(pid: int) -> list[int]:
    out: list[int] = []
    stack = [pid]
    while stack:
        p = stack.pop()
        try:
            tasks = os.listdir(f"/proc/{p}/task")
        except OSError:
            continue
        for tid in tasks:
            try:
                with open(f"/proc/{p}/task/{tid}/children") as fh:
                    kids = [int(x) for x in fh.read().split()]
            except OSError:
                continue
            out.extend(kids)
            stack.extend(kids)
    return out


def tree_cpu_s() -> dict[str, float]:
    """CPU seconds (user+sys, with reaped children's) of this process and every live descendant, from /proc: in
    total, and the part of the JVM (``java``) and of Python processes other than this one (Spark's workers)."""
    out = {"total": 0.0, "java": 0.0, "workers": 0.0}
    me = os.getpid()
    for pid in [me, *descendants(me)]:
        try:
            with open(f"/proc/{pid}/stat") as fh:
                head, rest = fh.read().rsplit(")", 1)
        except OSError:
            continue
        cpu = sum(int(v) for v in rest.split()[11:15]) / os.sysconf("SC_CLK_TCK")
        name = head.split("(", 1)[1]
        out["total"] += cpu
        if name == "java":
            out["java"] += cpu
        elif pid != me and name.startswith("python"):
            out["workers"] += cpu
    return out


def sample(pids: list[int], names: dict[int, str], cpu_seen: dict[int, float]) -> dict[str, float]:
    """Summed RSS (MB) of ``pids``: in total, of the JVM (``java``) processes, and of the largest process."""
    total = java = largest = 0.0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/statm") as fh:
                rss = int(fh.read().split()[1]) * _PAGE_MB
            with open(f"/proc/{pid}/stat") as fh:
                fields = fh.read().rsplit(")", 1)[1].split()
            cpu_seen[pid] = (int(fields[11]) + int(fields[12])) / _HZ  # utime + stime
            with open(f"/proc/{pid}/comm") as fh:  # read every time: spark-submit execs into java
                names[pid] = fh.read().strip()
        except OSError:
            continue
        total += rss
        largest = max(largest, rss)
        if names[pid] == "java":
            java += rss
    return {"total": total, "java": java, "largest": largest}


def machine_busy() -> tuple[float, float]:
    """(busy, total) CPU seconds of the whole machine since boot, from /proc/stat."""
    with open("/proc/stat") as fh:
        fields = [int(x) for x in fh.readline().split()[1:]]
    idle = fields[3] + fields[4]  # idle + iowait
    return (sum(fields[:8]) - idle) / _HZ, sum(fields[:8]) / _HZ


def busy_cores(seconds: float = 1.0) -> float:
    b0, _ = machine_busy()
    time.sleep(seconds)
    b1, _ = machine_busy()
    return (b1 - b0) / seconds


def wait_for_quiet(max_busy: float, max_wait: float) -> tuple[float, float]:
    """Wait up to ``max_wait`` s until other work keeps fewer than ``max_busy`` cores busy; (busy, seconds waited)."""
    start = time.perf_counter()
    busy = busy_cores()
    while busy > max_busy and time.perf_counter() - start < max_wait:
        busy = busy_cores(2.0)
    return busy, time.perf_counter() - start


# -- the parent: children ---------------------------------------------------------------------------------------


def _last_json(stdout: str) -> dict[str, Any] | None:
    lines = [ln for ln in stdout.splitlines() if ln.startswith("{")]
    return json.loads(lines[-1]) if lines else None


def _failure(stderr: str, returncode: int | None) -> str:
    tail = [ln for ln in stderr.strip().splitlines() if ln.strip()]
    return tail[-1] if tail else f"exit code {returncode}"


def run_child(script: str | Path, args: Sequence[str], timeout: float) -> tuple[dict[str, Any] | None, str]:
    """Run ``python SCRIPT ARGS`` from the repository root; (the last JSON line it printed, its stderr), or (None, the
    last line of stderr) when it failed or printed no JSON."""
    cmd = [sys.executable, str(Path(script).resolve()), *args]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=REPO)
    except subprocess.TimeoutExpired:
        return None, f"timed out after {timeout}s"
    result = _last_json(proc.stdout)
    if proc.returncode != 0 or result is None:
        return None, _failure(proc.stderr, proc.returncode)
    return result, proc.stderr


def run_child_or_exit(script: str | Path, args: Sequence[str], timeout: float) -> dict[str, Any]:
    """``run_child`` for benchmarks that cannot go on without the result: a failed child ends the benchmark."""
    result, err = run_child(script, args, timeout)
    if result is None:
        raise SystemExit(f"child {list(args)} failed: {err}")
    return result


def run_measured(
    script: str | Path, args: Sequence[str], timeout: float
) -> tuple[dict[str, Any] | None, str, dict[str, Any]]:
    """``run_child`` that samples the child's process tree every 50 ms; (result or None, stderr, tree metrics).

    Call ``become_subreaper`` once first, so that the JVM and Spark's worker daemon stay in view after the driver
    exits: they are sampled until they exit (killed after 60 s) and reaped for their CPU time.
    """
    cmd = [sys.executable, str(Path(script).resolve()), *args]
    names: dict[int, str] = {}
    cpu_seen: dict[int, float] = {}
    peak = {"total": 0.0, "java": 0.0, "largest": 0.0}
    busy0, _ = machine_busy()
    t0 = time.perf_counter()
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        proc = subprocess.Popen(cmd, stdout=out, stderr=err, cwd=REPO)
        killed = False
        while True:
            s = sample([proc.pid, *descendants(proc.pid)], names, cpu_seen)
            peak = {k: max(peak[k], s[k]) for k in peak}
            pid, status, rusage = os.wait4(proc.pid, os.WNOHANG)
            if pid == proc.pid:
                break
            if time.perf_counter() - t0 > timeout and not killed:
                proc.kill()
                killed = True
            time.sleep(SAMPLE_EVERY_S)
        proc.returncode = os.waitstatus_to_exitcode(status)
        child_exit_s = time.perf_counter() - t0
        # orphans (JVM, worker daemon) were re-parented to us: sample them until they exit, reap them for CPU time
        orphan_cpu = 0.0
        orphan_maxrss = 0.0
        deadline = time.perf_counter() + 60
        while True:
            with contextlib.suppress(ChildProcessError):
                while True:
                    pid, _, ru = os.wait4(-1, os.WNOHANG)
                    if pid == 0:
                        break
                    orphan_cpu += ru.ru_utime + ru.ru_stime
                    orphan_maxrss = max(orphan_maxrss, ru.ru_maxrss / 1024)
            left = descendants(os.getpid())
            if not left:
                break
            s = sample(left, names, cpu_seen)
            peak = {k: max(peak[k], s[k]) for k in peak}
            if time.perf_counter() > deadline:
                for pid in left:  # descendants of the child we started, still alive after 60 s
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(pid, 9)
                deadline = float("inf")
            time.sleep(SAMPLE_EVERY_S)
        busy1, _ = machine_busy()
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read(), err.read()
    # rusage misses descendants reaped by processes that were themselves killed; the /proc samples miss each
    # process' last 50 ms: take the larger
    tree_cpu = max(rusage.ru_utime + rusage.ru_stime + orphan_cpu, sum(cpu_seen.values()))
    tree = {
        "tree_peak_rss_mb": peak["total"],
        "jvm_peak_rss_mb": peak["java"],
        "largest_process_peak_rss_mb": peak["largest"],
        "child_maxrss_mb": rusage.ru_maxrss / 1024,  # the child (and descendants it reaped itself)
        "orphans_maxrss_mb": orphan_maxrss,
        "tree_cpu_s": tree_cpu,
        "rusage_tree_cpu_s": rusage.ru_utime + rusage.ru_stime + orphan_cpu,
        "sampled_tree_cpu_s": sum(cpu_seen.values()),
        "process_s": child_exit_s,
        "machine_busy_cpu_s": busy1 - busy0,
        "others_cpu_s": max(0.0, (busy1 - busy0) - tree_cpu),
        "process_names": sorted(set(names.values())),
    }
    if killed:
        return None, f"timed out after {timeout}s", tree
    result = _last_json(stdout)
    if proc.returncode != 0 or result is None:
        return None, _failure(stderr, proc.returncode), tree
    return result, stderr, tree


# -- the parent: tables and repeated runs ------------------------------------------------------------------------


def quiet_measured_run(
    config: str, script: str | Path, args: Sequence[str], timeout: float, max_busy: float, max_wait: float
) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """One measured child run as the benchmarks record it: wait for a quiet machine, then `run_measured`.

    Returns (the run's record: config, how busy the machine was, the tree metrics and the child's result or its
    ``error``; the child's result or None).
    """
    busy, waited = wait_for_quiet(max_busy, max_wait)
    load = [round(x, 2) for x in os.getloadavg()]
    res, err, tree = run_measured(script, args, timeout)
    run: dict[str, Any] = {
        "config": config,
        "busy_cores_before": round(busy, 2),
        "waited_for_quiet_s": round(waited, 1),
        "load_average_1_5_15": load,
        **tree,
    }
    if res is None:
        run["error"] = err
    else:
        run.update(res)
    return run, res


def record_verification(run: dict[str, Any], script: str | Path, args: Sequence[str], timeout: float) -> None:
    """Run a verifying child (it prints ``{"identical": ...}``) and record its answer in ``run``."""
    check, err = run_child(script, args, timeout)
    run["verify"] = check if check is not None else {"error": err}
    run["identical"] = bool(check and check.get("identical"))


def compile_bytecode() -> None:
    """Compile the package and every installed package of this interpreter to bytecode, as ``pip install`` does.

    Users pay imports with compiled bytecode. Without it (``uv pip install`` compiles nothing unless asked, and
    ``PYTHONDONTWRITEBYTECODE`` keeps Python from caching what it compiles) every measured process compiles numpy's and
    pyarrow's modules from source again: 0.14 s of a deltalite process, next to nothing of delta-rs's. Files already
    compiled are skipped, so a second call takes a few seconds.
    """
    import sysconfig

    places = {str(REPO / "airflow_provider_deltalite")} | {sysconfig.get_paths()[k] for k in ("purelib", "platlib")}
    # errors in files no measured process imports (test data shipped inside packages) do not matter here
    subprocess.run([sys.executable, "-m", "compileall", "-q", "-j0", *sorted(places)], capture_output=True)


def data_files(table: Path) -> list[Path]:
    """The Parquet files of a table outside ``_delta_log`` (checkpoints are not data)."""
    return sorted(p for p in table.rglob("*.parquet") if "_delta_log" not in p.relative_to(table).parts)


def fresh_copy(src: Path, dest: Path) -> Path:
    """A full copy of ``src`` at ``dest`` (no hard links: the measured run must not touch the pristine files)."""
    shutil.rmtree(dest, ignore_errors=True)
    dest.parent.mkdir(parents=True, exist_ok=True)
    shutil.copytree(src, dest)
    return dest


def cached_info(root: Path, regenerate: bool) -> dict[str, Any] | None:
    """The ``info.json`` of inputs generated earlier under ``root``; None after clearing ``root`` to generate anew."""
    info_path = root / "info.json"
    if info_path.exists() and not regenerate:
        return json.loads(info_path.read_text())
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    return None


def load_benchmark(name: str) -> Any:
    """Another benchmark script (``benchmarks/NAME.py``) as a module, for its generator or its constants."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(name, Path(__file__).with_name(f"{name}.py"))
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def add_engine_args(parser: argparse.ArgumentParser, only: Iterable[str]) -> None:
    """The options of the engine-against-engine benchmarks: --only, --profile, --no-write and the contention ones."""
    parser.add_argument("--only", action="append", choices=sorted(only), help="run only these engines (repeatable)")
    parser.add_argument("--profile", action="store_true", help="also cProfile one deltalite local run (not timed)")
    parser.add_argument("--no-write", action="store_true", help="do not write the JSON results file")
    add_contention_args(parser)


def add_contention_args(parser: argparse.ArgumentParser) -> None:
    """--max-busy, --max-wait and --max-retries: how ``measure_until_quiet`` deals with other work on the machine."""
    parser.add_argument(
        "--max-busy", type=float, default=0.5, help="before each run, wait until other work uses fewer cores"
    )
    parser.add_argument("--max-wait", type=float, default=60.0, help="longest wait for a quiet machine (s)")
    parser.add_argument(
        "--max-retries", type=int, default=3, help="run again when other work used more than --max-busy cores"
    )


def rotated(items: list[str], rep: int) -> list[str]:
    """``items`` rotated by ``rep``, so that no configuration always runs first (against drift)."""
    k = rep % len(items)
    return items[k:] + items[:k]


def measure_until_quiet(
    run_once: Callable[[], dict[str, Any]], args: argparse.Namespace, show: Callable[[dict[str, Any]], None]
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Run ``run_once`` (a ``run_measured`` record) again while other work used more than ``args.max_busy`` cores
    during it, at most ``args.max_retries`` times; (the kept run, the discarded ones). When every attempt was
    contended, the least disturbed one is kept."""
    attempts: list[dict[str, Any]] = []
    for attempt in range(args.max_retries + 1):
        r = run_once()
        r["attempt"] = attempt + 1
        r["others_cores_during"] = r["others_cpu_s"] / r["process_s"] if r["process_s"] else 0.0
        r["contended"] = r["others_cores_during"] > args.max_busy
        attempts.append(r)
        show(r)
        if not r["contended"] or "error" in r:
            break
        if attempt < args.max_retries:
            print(f"            other work used {r['others_cores_during']:.2f} cores during the run: run again")
    kept = attempts[-1] if not attempts[-1]["contended"] else min(attempts, key=lambda a: a["others_cores_during"])
    if kept is not attempts[-1]:
        least = f"the least other work: {kept['others_cores_during']:.2f} cores"
        print(f"            kept attempt {kept['attempt']} ({least})")
    return kept, [a for a in attempts if a is not kept]


def print_run(config: str, rep: int, r: dict[str, Any], width: int = 15) -> None:
    """One line per measured run: wall, CPU, RSS, files written, rows identical, and the machine's other work."""
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
        f"  {config:<{width}} rep {rep + 1}: {status}   [load {r['load_average_1_5_15'][0]}, other work: "
        f"{r['busy_cores_before']} cores before, {r['others_cores_during']:.2f} during]",
        flush=True,
    )
    if r.get("verify") and not r.get("identical"):
        print(f"            verify: {json.dumps(r['verify'])[:400]}")


def summarise_runs(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Medians (times) and maxima (memory) over the measured runs of one configuration, and whether all were right."""
    ok = [r for r in runs if "error" not in r]
    errors = [r["error"] for r in runs if "error" in r]
    if not ok:
        return {"ok": False, "error": errors[0] if errors else "no run", "runs": runs}

    def med(key: str) -> float | None:
        return median(r.get(key) for r in ok)

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
        "others_cpu_s_median": med("others_cpu_s"),
        "others_cores_during_max": max(r.get("others_cores_during", 0.0) for r in ok),
        "contended_runs_kept": sum(1 for r in ok if r.get("contended")),
        "identical": all(r.get("identical") for r in runs),
        "runs": runs,
    }


def print_engine_table(
    summary: dict[str, dict[str, Any]],
    configs: Iterable[str],
    reps: int,
    input_files: int,
    extra_head: str,
    extra_cells: Callable[[str, dict[str, Any]], str],
) -> None:
    """One row per configuration of ``summarise_runs`` results: wall, JVM start, CPU, RSS (the child, its process
    tree, the JVM), files written, then the benchmark's own columns (``extra_head``, ``extra_cells(config, s)``),
    the other work on the machine and whether the rows are identical."""
    wall_head = f"wall_s (median of {reps})"
    head = (
        f"{'engine':<16} {wall_head:<22} {'jvm_start_s':>11} {'cpu_s':>6}  {'peak_rss_MB':>11} {'tree_rss_MB':>11} "
        f"{'jvm_rss_MB':>10}  {'files':>9} {'out_MB':>7}  {extra_head}  {'others':>6}  rows identical"
    )
    print(head)
    print("-" * len(head))
    for config in configs:
        s = summary.get(config)
        if s is None:
            continue
        if s.get("wall_s_median") is None:
            print(f"{config:<16} ERROR: {s.get('error')}")
            continue
        spark = config.startswith("spark")
        jvm = f"{s['jvm_start_s_median']:.2f}" if s.get("jvm_start_s_median") is not None else "-"
        cpu = s["tree_cpu_s_median"] if spark else s["cpu_s_median"]
        jvm_rss = f"{s['jvm_peak_rss_mb_max']:.0f}" if spark else "-"
        files = f"{input_files}->{s['new_files']}"
        print(
            f"{config:<16} {s['wall_s_median']:<22.2f} {jvm:>11} {cpu:>6.1f}  {s['peak_rss_mb_max']:>11.0f} "
            f"{s['tree_peak_rss_mb_max']:>11.0f} {jvm_rss:>10}  {files:>9} {s['new_mb']:>7.1f}  "
            f"{extra_cells(config, s)}  {s['others_cores_during_max']:>6.2f}  {'yes' if s['identical'] else 'no'}"
        )
        if s.get("error"):
            print(f"{'':<16} note: {s['error']}")


# -- profiling a local run ---------------------------------------------------------------------------------------


class ProfiledLocalExecutor:
    """A LocalExecutor whose worker threads each run under their own cProfile (merged afterwards)."""

    def __init__(self, workers: int) -> None:
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

        def profiled(item: Any) -> Any:
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


def print_profile(main_prof: Any, worker_profs: list[Any], wall: float, what: str, lines: int = 25) -> None:
    """The merged profiles of the main thread and the worker threads, to stderr, by cumulative and by own time."""
    import pstats

    merged = pstats.Stats(main_prof, stream=io.StringIO())
    for prof in worker_profs:
        merged.add(prof)
    for key, n in (("cumulative", 30), ("tottime", lines)):
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


# -- the record: machine, code ------------------------------------------------------------------------------------


def version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def machine_info(dists: Iterable[str] = ("pyarrow", "deltalake", "numpy"), java: bool = False) -> dict[str, Any]:
    """The machine, its load and the versions of ``dists`` (and ``java -version`` when asked)."""
    info: dict[str, Any] = {
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "cpu_count": os.cpu_count(),
        "memory_gb": round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1),
        "load_average_1_5_15": [round(x, 2) for x in os.getloadavg()],
        "platform": platform.platform(),
        "python": platform.python_version(),
    }
    info.update({dist: version(dist) for dist in dists})
    if java:
        info["java"] = None
        with contextlib.suppress(OSError, IndexError):
            info["java"] = subprocess.run(["java", "-version"], capture_output=True, text=True).stderr.splitlines()[0]
    info["airflow_provider_deltalite"] = version("airflow-provider-deltalite")
    return info


def git_head() -> str | None:
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        return subprocess.run(
            ["git", "rev-parse", "HEAD"], capture_output=True, text=True, cwd=REPO, timeout=10
        ).stdout.strip()
    return None


def code_hashes(patterns: Iterable[str], length: int = 12) -> dict[str, str]:
    """Content hashes of the package sources matching ``patterns`` (globs below airflow_provider_deltalite/)."""
    root = REPO / "airflow_provider_deltalite"
    out = {}
    for pattern in patterns:
        for path in sorted(root.glob(pattern)):
            with contextlib.suppress(OSError):
                out[str(path.relative_to(root))] = hashlib.sha256(path.read_bytes()).hexdigest()[:length]
    return out


def code_under_test(patterns: Iterable[str]) -> dict[str, Any]:
    """The commit and the content hashes of the sources under test, to compare before and after a run."""
    return {"git_head": git_head(), "sha256_16": code_hashes(patterns, length=16)}


def note_code_change(report: dict[str, Any], before: dict[str, Any], after: dict[str, Any]) -> None:
    """Record in ``report`` (and say) whether the sources under test changed while the benchmark ran."""
    report["code_under_test"]["git_head_at_end"] = after["git_head"]
    if after["sha256_16"] != before["sha256_16"]:
        report["code_under_test_changed_during_run"] = after
        print(f"\nWARNING: the code under test changed during the run: {before} -> {after}")


def digest(hashes: dict[str, str]) -> str:
    """One short hash of ``code_hashes``: equal before and after a run when the code did not change under it."""
    return hashlib.sha256(json.dumps(hashes, sort_keys=True).encode()).hexdigest()[:12]


# -- summary and report -----------------------------------------------------------------------------------------


def median(values: Iterable[float | None]) -> float | None:
    """The median of the values that are not None; None when there are none."""
    present = [v for v in values if v is not None]
    return statistics.median(present) if present else None


def median_interval(values: Sequence[float], share: float, draws: int = 4000) -> list[float] | None:
    """A percentile-bootstrap interval (``share`` of the resampled medians; fixed seed, so a rerun of the same figures
    prints the same interval) of the median of ``values``; None for fewer than 3 values.

    On a machine whose speed drifts, one side-by-side ratio says little: a median of a dozen ratios is uncertain by
    several percent, and a target it meets by less than that is not shown to hold.
    """
    if len(values) < 3:
        return None
    rng = random.Random(29)
    medians = sorted(statistics.median(rng.choices(values, k=len(values))) for _ in range(draws))
    tail = (1 - share) / 2
    return [medians[int(tail * draws)], medians[int((1 - tail) * draws) - 1]]


def ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a is not None and b else None


def target(
    name: str, value: float | None, limit: float, higher_is_better: bool = False, note: str = "", unit: str = ""
) -> dict[str, Any]:
    """One target's row: ``name <= limit`` (``>=`` when higher is better), its value and PASS, FAIL or n/a."""
    if value is None:
        verdict = "n/a"
    elif higher_is_better:
        verdict = "PASS" if value >= limit else "FAIL"
    else:
        verdict = "PASS" if value <= limit else "FAIL"
    op = ">=" if higher_is_better else "<="
    return {"target": f"{name} {op} {limit}{unit}", "value": value, "verdict": verdict, "note": note}


def check(name: str, ok: bool | None) -> dict[str, Any]:
    """A yes/no target's row (rows identical, ...); None: not measured."""
    verdict = "n/a" if ok is None else ("PASS" if ok else "FAIL")
    return {"target": name, "value": ok, "verdict": verdict, "note": ""}


def print_targets(targets: list[dict[str, Any]], width: int = 52, value_format: str = "{:.2f}") -> None:
    for t in targets:
        value = t["value"]
        if value is None:
            shown = "-"
        elif isinstance(value, bool):
            shown = "yes" if value else "no"
        else:
            shown = value_format.format(value)
        note = f"  ({t['note']})" if t.get("note") else ""
        print(f"  {t['verdict']:<4}  {t['target']:<{width}} {shown}{note}")


def passed(targets: list[dict[str, Any]]) -> bool:
    return all(t["verdict"] != "FAIL" for t in targets)


def profile_output(result: dict[str, Any] | None, err: str) -> str:
    """Print and return what a ``--child-profile`` run wrote to stderr (its cProfile tables), or its error."""
    text = err if result is not None else f"ERROR {err}"
    print(text)
    return text


def finish(report: dict[str, Any], targets: list[dict[str, Any]], path: Path, started: float, write: bool) -> int:
    """Write ``report`` (unless ``write`` is false) and return the exit code: 0, or 2 when a target failed."""
    if write:
        write_results(path, report, started)
    return 0 if passed(targets) else 2


def write_results(path: Path, report: dict[str, Any], started: float) -> None:
    """Set ``total_runtime_s`` (from ``started``, a perf_counter value), write ``report`` as JSON and say where."""
    report["total_runtime_s"] = round(time.perf_counter() - started, 1)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(report, indent=2) + "\n")
    print(f"\nresults written to {path.relative_to(REPO)} (total {report['total_runtime_s']}s)")
