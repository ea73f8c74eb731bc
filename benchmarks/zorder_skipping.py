"""Benchmark: data skipping after clustering, the Delta Lake paper's experiment (VLDB 2020, section 6.2, figure 5).

Input: 1,000,000 network-flow records with four columns, fixed numpy seed: ``sourceIP`` and ``destIP`` (uniform
random 32-bit integers, int64), ``sourcePort`` and ``destPort`` (uniform random 16-bit integers, int32 like Spark's
``integer``), stored as 100 files of 10,000 rows. Layouts, every one a Delta table whose files carry exact min/max
stats (checked against the files' contents):

  (a) global sort   sorted by (sourceIP, sourcePort, destIP, destPort), written by delta-rs as 100 equal files
  (b) zorder        deltalite ``zorder(t, cols, curve="zorder", target_size=T, executor=LocalExecutor(2))``
  (c) hilbert       the same with ``curve="hilbert"``
  (d) delta-rs      delta-rs ``DeltaTable.optimize.z_order(cols, target_size=T_rs, max_concurrent_tasks=2)``
  (e) unclustered   the input of (b), (c) and (d): 100 files of 10,000 rows in random order, written by delta-rs

with ``T = total_bytes // 100`` of (e) (deltalite rewrites a partition into ``round(bytes / T)`` files, so 100).
delta-rs cuts its output at ``target_size`` of *written* bytes, so its ``T_rs`` is calibrated (cached) until it gives
95..105 files. (a) and (e) are generated once and cached under ``$TMPDIR/deltalite-bench/``; (b), (c) and (d) are
rebuilt on every run (a fresh copy of (e), a fresh subprocess each; wall time and ``ru_maxrss`` are reported for
information).

Queries: for each column, 200 point queries ``col = v`` with v drawn from the data (fixed seed). A file is skipped when
``v < min`` or ``v > max`` of that column (stats of ``DeltaTable(path).snapshot().files``, cross-checked against
delta-rs' ``get_add_actions``); reported is the percentage of files skipped, averaged over the 200 queries, per
column and on average over the four columns.

Targets (the paper's figure 5 numbers for Z-order): deltalite Z-order skips >= 43% for every column and >= 54% on
average; the best deltalite curve skips >= 60% on average. Every layout must hold exactly the input rows.

Run:  .venv/bin/python benchmarks/zorder_skipping.py [--reps 1] [--regenerate] [--profile]
Results: printed table, and benchmarks/results/zorder_skipping.json.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import _harness as h

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results" / "zorder_skipping.json"
CACHE = Path(tempfile.gettempdir()) / "deltalite-bench"
WORK = CACHE / "zorder-skipping-work"
CHILD_TIMEOUT_S = 900

GEN_FORMAT = 1  # bump when the generator changes, to invalidate the cache
SEED = 20200831  # VLDB 2020
QUERY_SEED = 6_2
N_ROWS = 1_000_000
N_FILES = 100
ROWS_PER_FILE = N_ROWS // N_FILES
N_QUERIES = 200
COLUMNS = ("sourceIP", "sourcePort", "destIP", "destPort")
WORKERS = 2

# -- targets (the paper, figure 5: Z-order over the four columns) --------------------------------------------
TARGET_ZORDER_MIN_COLUMN = 43.0  # % of files skipped, every column
TARGET_ZORDER_AVERAGE = 54.0  # % of files skipped, average over the columns
TARGET_BEST_AVERAGE = 60.0  # best deltalite curve, average over the columns
PAPER = {
    "source": "Armbrust et al., Delta Lake: High-Performance ACID Table Storage over Cloud Object Stores, "
    "VLDB 2020, section 6.2 / figure 5",
    "global_sort": "99% skipped for sourceIP, close to 0% for the other three columns",
    "zorder": "at least 43% skipped for every column, 54% on average",
}

# layout name -> (label, child kind); the order is the printed order
LAYOUTS = {
    "global-sort": "(a) global sort (sIP, sPort, dIP, dPort)",
    "zorder": "(b) deltalite Z-order",
    "hilbert": "(c) deltalite Hilbert",
    "delta-rs": "(d) delta-rs z_order",
    "unclustered": "(e) unclustered (input of b, c, d)",
}
BUILT = ("zorder", "hilbert", "delta-rs")  # rebuilt on every run


# -- generation ----------------------------------------------------------------------------------------------


def generate_data() -> Any:
    """The 1,000,000 input rows, in random (generation) order."""
    import numpy as np
    import pyarrow as pa

    rng = np.random.default_rng(SEED)
    return pa.table(
        {
            "sourceIP": pa.array(rng.integers(0, 2**32, N_ROWS), pa.int64()),
            "sourcePort": pa.array(rng.integers(0, 2**16, N_ROWS).astype(np.int32), pa.int32()),
            "destIP": pa.array(rng.integers(0, 2**32, N_ROWS), pa.int64()),
            "destPort": pa.array(rng.integers(0, 2**16, N_ROWS).astype(np.int32), pa.int32()),
        }
    )


def queries(data: Any) -> dict[str, list[int]]:
    """200 point-query values per column, drawn from the data (fixed seed; each column its own rows)."""
    import numpy as np

    rng = np.random.default_rng(QUERY_SEED)
    out = {}
    for name in COLUMNS:
        rows = rng.integers(0, data.num_rows, N_QUERIES)
        out[name] = [int(v) for v in data.column(name).to_numpy()[rows]]
    return out


def rows_digest(table: Any) -> dict[str, Any]:
    """Order-independent identity of ``table``'s rows (sorted by all columns, then hashed)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    types = {"sourceIP": pa.int64(), "sourcePort": pa.int32(), "destIP": pa.int64(), "destPort": pa.int32()}
    normal = pa.table({c: table.column(c).cast(types[c]) for c in COLUMNS})
    order = pc.sort_indices(normal, sort_keys=[(c, "ascending") for c in COLUMNS])
    digest = hashlib.sha256()
    for name in COLUMNS:
        col = normal.column(name).take(order).combine_chunks()
        digest.update(name.encode())
        digest.update(str(col.null_count).encode())
        digest.update(col.to_numpy(zero_copy_only=False).tobytes())
    return {"rows": normal.num_rows, "sha256": digest.hexdigest()}


def _write_files(dest: str, rows: Any) -> None:
    """Write ``rows`` with delta-rs as ``N_FILES`` files of ``ROWS_PER_FILE`` rows, one append each."""
    import deltalake

    for i in range(N_FILES):
        deltalake.write_deltalake(dest, rows.slice(i * ROWS_PER_FILE, ROWS_PER_FILE), mode="append")


def generate_child(root: str) -> dict[str, Any]:
    """Write the unclustered table (e) and the globally sorted table (a) under ``root``."""
    import pyarrow.compute as pc

    data = generate_data()
    _write_files(os.path.join(root, "unclustered"), data)
    order = pc.sort_indices(data, sort_keys=[(c, "ascending") for c in COLUMNS])
    _write_files(os.path.join(root, "global-sort"), data.take(order))
    return {"expected": rows_digest(data), "queries": queries(data)}


def prepare_inputs(regenerate: bool) -> tuple[Path, dict[str, Any], str]:
    root = CACHE / f"zorder-skipping-f{GEN_FORMAT}-s{SEED}"
    cached = h.cached_info(root, regenerate)
    if cached is not None:
        return root, cached, "cached"
    start = time.perf_counter()
    gen, err = h.run_child(__file__, ["--generate", str(root)], CHILD_TIMEOUT_S)
    if gen is None:
        raise SystemExit(f"generating the tables failed: {err}")
    unclustered = root / "unclustered"
    files = h.data_files(unclustered)
    if len(files) != N_FILES or len(h.data_files(root / "global-sort")) != N_FILES:
        raise SystemExit(f"generated tables do not have {N_FILES} files each")
    info = {
        "rows": N_ROWS,
        "files": N_FILES,
        "unclustered_bytes": sum(p.stat().st_size for p in files),
        "expected": gen["expected"],
        "queries": gen["queries"],
        "generated_in_s": round(time.perf_counter() - start, 1),
    }
    (root / "info.json").write_text(json.dumps(info) + "\n")
    return root, info, f"generated in {info['generated_in_s']}s"


# -- children ------------------------------------------------------------------------------------------------


def cluster_child(kind: str, path: str, target_size: int, profile: bool) -> dict[str, Any]:
    """Cluster the table at ``path`` (a fresh copy of (e)) in place; timings and what the engine reported."""
    import pyarrow as pa

    pa.array([0])  # pyarrow's one-time first use (imports pandas) stays out of the timings, as in snapshot_load
    result: dict[str, Any] = {"kind": kind, "target_size": target_size}
    cpu0 = os.times()
    if kind in ("zorder", "hilbert"):
        from airflow_provider_deltalite import DeltaTable
        from airflow_provider_deltalite.executors import LocalExecutor
        from airflow_provider_deltalite.maintenance.clustering.zorder import zorder

        executor: Any = LocalExecutor(WORKERS)
        prof = None
        if profile:
            import cProfile

            executor = h.ProfiledLocalExecutor(WORKERS)
            prof = cProfile.Profile()
            prof.enable()
        start = time.perf_counter()
        stats = zorder(DeltaTable(path), list(COLUMNS), curve=kind, target_size=target_size, executor=executor)
        wall = time.perf_counter() - start
        if prof is not None:
            prof.disable()
            h.print_profile(prof, executor.profiles, wall, f"deltalite {kind} (skipping table)")
        result.update(
            files_added=stats.num_files_added,
            files_removed=stats.num_files_removed,
            bytes_added=stats.files_added.total_size,
            z_order_stats=stats.z_order_stats,
        )
    elif kind == "delta-rs":
        import deltalake

        start = time.perf_counter()
        metrics = deltalake.DeltaTable(path).optimize.z_order(
            list(COLUMNS), target_size=target_size, max_concurrent_tasks=WORKERS
        )
        wall = time.perf_counter() - start
        added = metrics.get("filesAdded")
        added = json.loads(added) if isinstance(added, str) else added
        result.update(
            files_added=metrics.get("numFilesAdded"),
            files_removed=metrics.get("numFilesRemoved"),
            bytes_added=(added or {}).get("totalSize"),
        )
    else:
        raise SystemExit(f"unknown kind {kind}")
    cpu1 = os.times()
    result.update(wall_s=wall, cpu_s=(cpu1.user - cpu0.user) + (cpu1.system - cpu0.system), peak_rss_mb=h.maxrss_mb())
    return result


def measure_child(path: str, expected: dict[str, Any]) -> dict[str, Any]:
    """Per live file: min/max of the four columns from deltalite's parsed stats, checked against delta-rs' stats
    and against the file's contents; and the table's rows against ``expected``."""
    import deltalake
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    from airflow_provider_deltalite import DeltaTable

    files = DeltaTable(path).snapshot().files
    paths = files.column("path").to_pylist()
    stats = files.column("stats_parsed").to_pylist()
    mins = {c: [s["minValues"][c] for s in stats] for c in COLUMNS}
    maxs = {c: [s["maxValues"][c] for s in stats] for c in COLUMNS}
    records = [s["numRecords"] for s in stats]
    problems: list[str] = []

    # delta-rs' view of the same stats
    actions = deltalake.DeltaTable(path).get_add_actions(flatten=True)
    if not isinstance(actions, pa.Table):
        actions = pa.RecordBatchReader.from_stream(actions).read_all()
    rs_rows = {p: i for i, p in enumerate(actions.column("path").to_pylist())}
    if set(rs_rows) != set(paths):
        problems.append(f"delta-rs sees {len(rs_rows)} files, deltalite {len(paths)}")
    else:
        for c in COLUMNS:
            rs_min = actions.column(f"min.{c}").to_pylist()
            rs_max = actions.column(f"max.{c}").to_pylist()
            for i, p in enumerate(paths):
                j = rs_rows[p]
                if (rs_min[j], rs_max[j]) != (mins[c][i], maxs[c][i]):
                    problems.append(
                        f"{p}: {c} stats differ: deltalite {mins[c][i]}..{maxs[c][i]}, delta-rs "
                        f"{rs_min[j]}..{rs_max[j]}"
                    )
                    break

    # exact: the stats are the min/max of the file's contents
    parts = []
    for i, p in enumerate(paths):
        t = pq.read_table(os.path.join(path, p), columns=list(COLUMNS))
        parts.append(t)
        if t.num_rows != records[i]:
            problems.append(f"{p}: numRecords {records[i]}, file has {t.num_rows} rows")
        for c in COLUMNS:
            mm = pc.min_max(t.column(c)).as_py()
            if (mm["min"], mm["max"]) != (mins[c][i], maxs[c][i]):
                problems.append(f"{p}: {c} stats {mins[c][i]}..{maxs[c][i]}, contents {mm['min']}..{mm['max']}")
    got = rows_digest(pa.concat_tables(parts))
    return {
        "files": len(paths),
        "paths": paths,
        "num_records": records,
        "sizes": files.column("size").to_pylist(),
        "min": mins,
        "max": maxs,
        "stats_exact": not problems,
        "problems": problems[:10],
        "rows": got,
        "identical": got == expected,
    }


# -- parent --------------------------------------------------------------------------------------------------


def skipping(measured: dict[str, Any], qs: dict[str, list[int]]) -> dict[str, Any]:
    """Percentage of files skipped by min/max per column (mean over the queries), and the mean over the columns."""
    import numpy as np

    per_column = {}
    read_files = {}
    for c in COLUMNS:
        v = np.array(qs[c], dtype=np.int64)[:, None]
        lo = np.array(measured["min"][c], dtype=np.int64)[None, :]
        hi = np.array(measured["max"][c], dtype=np.int64)[None, :]
        skipped = (v < lo) | (v > hi)  # (queries, files)
        per_column[c] = float(skipped.mean() * 100)
        read_files[c] = float((~skipped).sum(axis=1).mean())
    return {
        "skipped_pct": per_column,
        "average_pct": statistics.mean(per_column.values()),
        "min_column_pct": min(per_column.values()),
        "files_read_per_query": read_files,
    }


def fresh_copy(src: Path, name: str) -> Path:
    return h.fresh_copy(src, WORK / name)


def build(kind: str, unclustered: Path, target: int, profile: bool = False) -> tuple[dict[str, Any] | None, str, Path]:
    table = fresh_copy(unclustered, kind)
    args = ["--cluster", kind, str(table), str(target)] + (["--child-profile"] if profile else [])
    res, err = h.run_child(__file__, args, CHILD_TIMEOUT_S)
    return res, err, table


def calibrate_deltars(unclustered: Path, total: int, cache: Path) -> tuple[int, list[dict[str, Any]]]:
    """A delta-rs target size that yields 95..105 files (delta-rs cuts at written, compressed bytes)."""
    if cache.exists():
        saved = json.loads(cache.read_text())
        return saved["target_size"], saved["attempts"]
    target = total // N_FILES
    attempts: list[dict[str, Any]] = []
    for _ in range(6):
        res, err, _ = build("delta-rs", unclustered, target)
        if res is None:
            raise SystemExit(f"delta-rs z_order failed while calibrating: {err}")
        attempts.append({"target_size": target, "files": res["files_added"], "bytes": res["bytes_added"]})
        print(f"  calibrating delta-rs target_size: {target} -> {res['files_added']} files", flush=True)
        if abs(res["files_added"] - N_FILES) <= 5:
            break
        target = max(1, res["bytes_added"] // N_FILES)
        if any(a["target_size"] == target for a in attempts):
            target = int(target * 0.99)
    cache.write_text(json.dumps({"target_size": target, "attempts": attempts}) + "\n")
    return target, attempts


def evaluate(layouts: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    targets = []

    def add(name: str, value: float | None, limit: float, note: str = "") -> None:
        targets.append(h.target(name, value, limit, higher_is_better=True, note=note, unit="%"))

    def skip(layout: str) -> dict[str, Any] | None:
        return (layouts.get(layout) or {}).get("skipping")

    z = skip("zorder")
    add("deltalite Z-order, every column", z["min_column_pct"] if z else None, TARGET_ZORDER_MIN_COLUMN)
    add("deltalite Z-order, average", z["average_pct"] if z else None, TARGET_ZORDER_AVERAGE)
    best = [(skip(c)["average_pct"], c) for c in ("zorder", "hilbert") if skip(c)]
    add(
        "best deltalite curve, average",
        max(best)[0] if best else None,
        TARGET_BEST_AVERAGE,
        note=f"best: {max(best)[1]}" if best else "",
    )
    measured = [s for s in layouts.values() if s.get("measure")]
    identical = all(s["measure"]["identical"] and s["measure"]["stats_exact"] for s in measured) if measured else None
    targets.append(h.check("every layout holds the input rows, with exact stats", identical))
    return targets


def print_table(layouts: dict[str, dict[str, Any]], targets: list[dict[str, Any]], reps: int) -> None:
    cols = "".join(f" {c:>10}" for c in COLUMNS)
    head = (
        f"{'layout':<40} {'files':>5} {'rows/file':>9}  % files skipped:{cols} {'average':>8}   "
        f"{'build_s':>7} {'rss_MB':>6}  exact stats, rows identical"
    )
    print(head)
    print("-" * len(head))
    for name, label in LAYOUTS.items():
        s = layouts.get(name) or {}
        if not s.get("skipping"):
            print(f"{label:<40} ERROR: {s.get('error')}")
            continue
        m, k = s["measure"], s["skipping"]
        per = "".join(f" {k['skipped_pct'][c]:>10.1f}" for c in COLUMNS)
        rows_per_file = statistics.mean(m["num_records"])
        build_s = f"{s['build_wall_s_median']:.2f}" if s.get("build_wall_s_median") is not None else "-"
        rss = f"{s['build_peak_rss_mb_max']:.0f}" if s.get("build_peak_rss_mb_max") is not None else "-"
        ok = f"{'yes' if m['stats_exact'] else 'NO'}, {'yes' if m['identical'] else 'NO'}"
        print(
            f"{label:<40} {m['files']:>5} {rows_per_file:>9.0f}  {'':<16}{per} {k['average_pct']:>8.1f}   "
            f"{build_s:>7} {rss:>6}  {ok}"
        )
        if s.get("error"):
            print(f"{'':<40} note: {s['error']}")
        if s.get("deterministic") is False:
            print(f"{'':<40} note: the {len(s['builds'])} runs wrote files with different stats (last run shown)")
        if m["problems"]:
            print(f"{'':<40} stats: {m['problems'][0]}")
    print(
        f"{N_QUERIES} point queries per column (col = v, v drawn from the data); a file is skipped when v < min or "
        "v > max of its stats.\n"
        f"build_s / rss_MB = wall time (median of {reps}) and ru_maxrss of the clustering child (information, "
        f"{WORKERS} workers; fresh copy of (e) per run).\n"
        "Paper (figure 5): global sort skips 99% for sourceIP and ~0% for the rest; Z-order >= 43% per column, "
        "54% on average."
    )
    print()
    h.print_targets(targets, width=58, value_format="{:.1f}%")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--reps", type=int, default=1, help="clustering runs per layout (timings; must agree)")
    parser.add_argument("--regenerate", action="store_true", help="rebuild the cached input tables")
    parser.add_argument("--profile", action="store_true", help="also cProfile one deltalite Z-order run")
    parser.add_argument("--no-write", action="store_true", help="do not write the JSON results file")
    parser.add_argument("--generate", metavar="ROOT", help=argparse.SUPPRESS)
    parser.add_argument("--cluster", nargs=3, metavar=("KIND", "PATH", "TARGET"), help=argparse.SUPPRESS)
    parser.add_argument("--child-profile", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--measure", nargs=2, metavar=("PATH", "EXPECTED"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.generate:
        print(json.dumps(generate_child(args.generate)))
        return 0
    if args.cluster:
        kind, path, target = args.cluster
        print(json.dumps(cluster_child(kind, path, int(target), args.child_profile)))
        return 0
    if args.measure:
        print(json.dumps(measure_child(args.measure[0], json.loads(args.measure[1]))))
        return 0

    t_start = time.perf_counter()
    code_under_test = h.load_benchmark("zorder_speed").CODE_UNDER_TEST  # the same files
    code_before = h.code_under_test(code_under_test)
    CACHE.mkdir(parents=True, exist_ok=True)
    root, info, note = prepare_inputs(args.regenerate)
    unclustered = root / "unclustered"
    total = info["unclustered_bytes"]
    target = total // N_FILES
    print(f"inputs: {note} -> {root} ({N_ROWS:,} rows, {N_FILES} files, unclustered {total / 1e6:.1f} MB)")
    rs_target, rs_attempts = calibrate_deltars(unclustered, total, root / "deltars-target.json")
    print(f"target_size: deltalite {target} bytes (total // {N_FILES}), delta-rs {rs_target} bytes (calibrated)")

    layouts: dict[str, dict[str, Any]] = {name: {} for name in LAYOUTS}
    for name in ("global-sort", "unclustered"):
        layouts[name]["path"] = str(root / name)
    for name in BUILT:
        runs: list[dict[str, Any]] = []
        measures: list[dict[str, Any]] = []
        for rep in range(args.reps):
            res, err, table = build(name, unclustered, rs_target if name == "delta-rs" else target)
            if res is None:
                layouts[name]["error"] = err
                print(f"  {name:<12} rep {rep + 1}: ERROR {err}", flush=True)
                continue
            res["load_average_1_5_15"] = [round(x, 2) for x in os.getloadavg()]
            m, merr = h.run_child(__file__, ["--measure", str(table), json.dumps(info["expected"])], CHILD_TIMEOUT_S)
            if m is None:
                layouts[name]["error"] = f"measuring failed: {merr}"
                continue
            runs.append(res)
            measures.append(m)
            print(
                f"  {name:<12} rep {rep + 1}: {res['wall_s']:.2f}s rss {res['peak_rss_mb']:.0f}MB -> "
                f"{res['files_added']} files; stats exact: {m['stats_exact']}; rows identical: {m['identical']}",
                flush=True,
            )
        if runs:
            layouts[name].update(
                path=str(WORK / name),
                target_size=runs[0]["target_size"],
                build_wall_s_median=statistics.median(r["wall_s"] for r in runs),
                build_cpu_s_median=statistics.median(r["cpu_s"] for r in runs),
                build_peak_rss_mb_max=max(r["peak_rss_mb"] for r in runs),
                builds=runs,
                measure=measures[-1],
            )
            bounds = [(m["min"], m["max"]) for m in measures]
            layouts[name]["deterministic"] = all(b == bounds[0] for b in bounds)
            if name == "delta-rs":
                layouts[name]["calibration"] = rs_attempts
    for name in ("global-sort", "unclustered"):
        m, merr = h.run_child(
            __file__, ["--measure", layouts[name]["path"], json.dumps(info["expected"])], CHILD_TIMEOUT_S
        )
        if m is None:
            layouts[name]["error"] = f"measuring failed: {merr}"
        else:
            layouts[name]["measure"] = m
    for s in layouts.values():
        if s.get("measure"):
            s["skipping"] = skipping(s["measure"], info["queries"])
            for key in ("paths", "min", "max", "num_records", "sizes"):  # keep the JSON readable: summarise
                values = s["measure"].pop(key)
                if key == "num_records":
                    s["measure"]["num_records"] = values  # per-file rows, needed for rows/file
                elif key == "sizes":
                    s["measure"]["file_bytes"] = {"total": sum(values), "min": min(values), "max": max(values)}
    targets = evaluate(layouts)
    print()
    print_table(layouts, targets, args.reps)
    for s in layouts.values():
        s.get("measure", {}).pop("num_records", None)
    report: dict[str, Any] = {
        "benchmark": "zorder_skipping",
        "description": (
            "percentage of files skipped by min/max stats for 200 point queries per column, after clustering "
            "1,000,000 rows x 4 columns into ~100 files (Delta Lake paper, figure 5)"
        ),
        "paper": PAPER,
        "input": {k: v for k, v in info.items() if k != "queries"} | {"path": str(root)},
        "query_values_sha256": hashlib.sha256(json.dumps(info["queries"]).encode()).hexdigest(),
        "target_size": {"deltalite": target, "delta-rs": rs_target},
        "targets": targets,
        "reps": args.reps,
        "machine": h.machine_info(),
        "code_under_test": code_before,
        "layouts": layouts,
        "profile": None,
        "total_runtime_s": None,
    }
    if args.profile:
        print("\n=== cProfile: deltalite Z-order (extra run, not in the timings) ===")
        res, err, _ = build("zorder", unclustered, target, profile=True)
        report["profile"] = h.profile_output(res, err)
    shutil.rmtree(WORK, ignore_errors=True)
    h.note_code_change(report, code_before, h.code_under_test(code_under_test))
    return h.finish(report, targets, RESULTS, t_start, write=not args.no_write)


if __name__ == "__main__":
    sys.exit(main())
