"""Benchmark: OPTIMIZE by row-group stitching against delta-rs and against copying the same bytes.

Input: a generated table (fixed numpy seed) of FILES files written by delta-rs 1.6 (snappy), each one row group of
ROWS_PER_FILE rows (``a`` int64 0..999, ``b`` int64 random, ``c`` float64, ``s`` random text): about 9 MiB a file, so
every row group is at or above the default ``min_row_group_size`` (8 MiB) and is copied. Cached under
``$TMPDIR/deltalite-bench/``; every measured run works on a fresh full copy.

Configurations, each in a fresh child process (``process_s``: the whole process, interpreter start and imports
included; ``wall_s``: the operation alone, measured inside the child), bytecode compiled first:

  deltalite            ``optimize(DeltaTable(path), target_size=1 GiB)``: row groups copied, a new footer
  deltalite/re-encode  the same with ``min_row_group_size`` = 1 TiB: every row decoded and encoded (the old path)
  delta-rs             ``DeltaTable(path).optimize.compact(target_size=1 GiB, writer_properties=snappy)``
  cp                   read every data file and write the bytes into one file: the physical floor

Each compaction is checked by a separate child: delta-rs reads the same row count and column sums as the input.
The read side: a full scan and a point query (``b == x``, pyarrow with row-group statistics) of the stitched file
and of delta-rs's output, in-process in one child.

Run:  .venv/bin/python benchmarks/optimize_stitch.py [--reps 1] [--files 24]
Results: printed table, and benchmarks/results/optimize_stitch.json.
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
RESULTS = HERE / "results" / "optimize_stitch.json"
CACHE = Path(tempfile.gettempdir()) / "deltalite-bench"
WORK = CACHE / f"optimize-stitch-work-{os.getpid()}"
GIB = 1024**3
SEED = 20261202
ROWS_PER_FILE = 300_000
CHILD_TIMEOUT_S = 900
CONFIGS = ("deltalite", "deltalite/re-encode", "delta-rs", "cp")
TARGET_VS_DELTARS = 0.4
TARGET_VS_CP = 2.5


def generate_child(dest: str, files: int) -> dict[str, Any]:
    import deltalake
    import numpy as np
    import pyarrow as pa

    bench = h.load_benchmark("optimize_compact")
    rng = np.random.default_rng(SEED)
    props = deltalake.WriterProperties(compression="SNAPPY", max_row_group_size=ROWS_PER_FILE)
    for _ in range(files):
        n = ROWS_PER_FILE
        batch = pa.table(
            {
                "a": pa.array(rng.integers(0, 1000, n), pa.int64()),
                "b": pa.array(rng.integers(0, 10**12, n), pa.int64()),
                "c": pa.array(rng.standard_normal(n), pa.float64()),
                "s": bench._strings(rng, n),
            }
        )
        deltalake.write_deltalake(dest, batch, mode="append", writer_properties=props)
    return summary_child(dest)


def summary_child(path: str) -> dict[str, Any]:
    """What delta-rs reads: rows and column sums (compared before and after a compaction)."""
    import deltalake
    import pyarrow.compute as pc

    t = deltalake.DeltaTable(path).to_pyarrow_table()
    return {
        "rows": t.num_rows,
        "sum_a": pc.sum(t["a"]).as_py(),
        "sum_b": pc.sum(t["b"]).as_py(),
        "sum_c": round(pc.sum(t["c"]).as_py(), 6),
        "chars_s": pc.sum(pc.utf8_length(t["s"])).as_py(),
        "files": len(deltalake.DeltaTable(path).file_uris()),
    }


def run_child(kind: str, path: str, out: str) -> dict[str, Any]:
    import pyarrow as pa

    pa.array([0])
    result: dict[str, Any] = {"kind": kind}
    if kind.startswith("deltalite"):
        from airflow_provider_deltalite import DeltaTable
        from airflow_provider_deltalite.executors import LocalExecutor
        from airflow_provider_deltalite.maintenance.optimize import optimize

        extra = {"min_row_group_size": 1 << 40} if kind.endswith("re-encode") else {}
        with h.Measured() as run:
            stats = optimize(DeltaTable(path), target_size=GIB, executor=LocalExecutor(2), **extra)
        result.update(
            run.record,
            files_removed=stats.num_files_removed,
            files_added=stats.num_files_added,
            files_copied=stats.num_files_copied,
            bytes_copied=stats.bytes_copied,
            bytes_added=stats.files_added.total_size,
        )
    elif kind == "delta-rs":
        import deltalake

        before = {f.name for f in h.data_files(Path(path))}
        snappy = deltalake.WriterProperties(compression="SNAPPY")
        with h.Measured() as run:
            metrics = deltalake.DeltaTable(path).optimize.compact(
                target_size=GIB, max_concurrent_tasks=2, writer_properties=snappy
            )
        result.update(
            run.record, files_removed=metrics.get("numFilesRemoved"), files_added=metrics.get("numFilesAdded")
        )
        result["bytes_added"] = sum(f.stat().st_size for f in h.data_files(Path(path)) if f.name not in before)
    elif kind == "cp":
        with h.Measured() as run, open(Path(out) / "all.bytes", "wb") as dest:
            for f in h.data_files(Path(path)):
                with open(f, "rb") as src:
                    shutil.copyfileobj(src, dest, 8 * h.MIB)
        result.update(run.record, bytes_added=(Path(out) / "all.bytes").stat().st_size)
    return result


def read_child(stitched: str, delta_rs: str, value: int) -> dict[str, Any]:
    """Full scan and point query of each compacted table's one data file, pyarrow, in-process (best of 3)."""
    import pyarrow.parquet as pq

    out: dict[str, Any] = {}
    for name, table in (("deltalite", stitched), ("delta-rs", delta_rs)):
        import deltalake

        files = [u.removeprefix("file://") for u in deltalake.DeltaTable(table).file_uris()]
        scans, points = [], []
        for _ in range(3):
            t0 = time.perf_counter()
            rows = pq.read_table(files).num_rows
            scans.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            hits = pq.read_table(files, filters=[("b", "==", value)]).num_rows
            points.append(time.perf_counter() - t0)
        meta = pq.ParquetFile(files[0]).metadata
        out[name] = {
            "rows": rows,
            "point_hits": hits,
            "scan_s": min(scans),
            "point_s": min(points),
            "row_groups": meta.num_row_groups,
        }
    return out


def read_cost_child(pristine: str) -> dict[str, Any]:
    """Full-scan cost of the same rows in row groups of different sizes (pyarrow, one file, best of 5): what a
    row group costs a reader, for choosing ``min_row_group_size``."""
    import io

    import pyarrow.parquet as pq

    rows = pq.read_table([str(f) for f in h.data_files(Path(pristine))[:12]])
    out: dict[str, Any] = {}
    for group_rows in (4_096, 16_384, 32_768, 65_536, 131_072, 262_144, 524_288, 1_048_576):
        buf = io.BytesIO()
        pq.write_table(rows, buf, row_group_size=group_rows, compression="snappy")
        data = buf.getvalue()
        meta = pq.ParquetFile(io.BytesIO(data)).metadata
        times = []
        for _ in range(5):
            t0 = time.perf_counter()
            pq.read_table(io.BytesIO(data))
            times.append(time.perf_counter() - t0)
        out[str(group_rows)] = {
            "row_groups": meta.num_row_groups,
            "mib_per_group": len(data) / meta.num_row_groups / h.MIB,
            "scan_s": min(times),
        }
    return out


def print_read_cost(cost: dict[str, Any]) -> None:
    base = min(c["scan_s"] for c in cost.values())
    print(f"{'rows/group':>11s}{'MiB/group':>11s}{'groups':>8s}{'scan s':>9s}{'x best':>8s}")
    for rows, c in cost.items():
        print(
            f"{rows:>11s}{c['mib_per_group']:>11.2f}{c['row_groups']:>8d}{c['scan_s']:>9.3f}{c['scan_s'] / base:>8.2f}"
        )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--reps", type=int, default=1)
    parser.add_argument("--files", type=int, default=24)
    parser.add_argument("--no-write", action="store_true")
    parser.add_argument("--read-cost", action="store_true", help="only measure the full-scan cost per row-group size")
    args = parser.parse_args()
    started = time.perf_counter()
    h.compile_bytecode()
    h.become_subreaper()
    root = CACHE / f"optimize-stitch-s{SEED}-n{args.files}"
    pristine = root / "pristine"
    info = h.cached_info(root, False)
    if info is None:
        info = h.run_child_or_exit(__file__, ["--generate", str(pristine), str(args.files)], CHILD_TIMEOUT_S)
        (root / "info.json").write_text(json.dumps(info))
    input_bytes = sum(f.stat().st_size for f in h.data_files(pristine))
    if args.read_cost:
        print_read_cost(h.run_child_or_exit(__file__, ["--read-cost-child", str(pristine)], CHILD_TIMEOUT_S))
        return 0
    print(f"table: {info['files']} files, {info['rows']} rows, {input_bytes / h.MIB:.0f} MiB (one row group a file)")
    runs: dict[str, list[dict[str, Any]]] = {c: [] for c in CONFIGS}
    kept: dict[str, Path] = {}
    for rep in range(args.reps):
        for config in h.rotated(list(CONFIGS), rep):
            table = h.fresh_copy(pristine, WORK / config.replace("/", "-"))
            out = WORK / f"out-{config.replace('/', '-')}"
            shutil.rmtree(out, ignore_errors=True)
            out.mkdir(parents=True)
            res, err, tree = h.run_measured(__file__, ["--child", config, str(table), str(out)], CHILD_TIMEOUT_S)
            run = {"config": config, "load_average_1_5_15": [round(x, 2) for x in os.getloadavg()], **tree}
            if res is None:
                run["error"] = err
            else:
                run.update(res)
                if config != "cp":
                    after = h.run_child_or_exit(__file__, ["--summary", str(table)], CHILD_TIMEOUT_S)
                    run["identical"] = {k: v for k, v in after.items() if k != "files"} == {
                        k: v for k, v in info.items() if k != "files"
                    }
                    run["files_after"] = after["files"]
                    kept[config] = table
            runs[config].append(run)
            wall = f"{run['wall_s']:.2f}s" if "wall_s" in run else run.get("error")
            print(
                f"  {config:20s} rep {rep}: process {run['process_s']:.2f}s, in-process {wall}, "
                f"others' cpu {run['others_cpu_s']:.1f}s, load {run['load_average_1_5_15'][0]}"
            )
    med = {
        c: {
            "process_s": h.median(r["process_s"] for r in runs[c]),
            "wall_s": h.median(r.get("wall_s") for r in runs[c]),
            "peak_rss_mb": h.median(r.get("child_maxrss_mb") for r in runs[c]),
            "bytes_added": runs[c][-1].get("bytes_added"),
        }
        for c in CONFIGS
    }
    print()
    header = f"{'config':22s}{'process s':>11s}{'in-process s':>14s}{'x delta-rs':>12s}{'x cp':>8s}"
    print(f"{header}{'RSS MB':>9s}{'MiB out':>9s}")
    for c in CONFIGS:
        m = med[c]
        vs_rs = h.ratio(m["process_s"], med["delta-rs"]["process_s"])
        vs_cp = h.ratio(m["process_s"], med["cp"]["process_s"])
        out_mib = (m["bytes_added"] or 0) / h.MIB
        print(
            f"{c:22s}{m['process_s']:>11.2f}{(m['wall_s'] or 0):>14.2f}{(vs_rs or 0):>12.2f}{(vs_cp or 0):>8.2f}"
            f"{(m['peak_rss_mb'] or 0):>9.0f}{out_mib:>9.1f}"
        )
    reads = h.run_child_or_exit(
        __file__, ["--read", str(kept["deltalite"]), str(kept["delta-rs"]), "123456789"], CHILD_TIMEOUT_S
    )
    print()
    print(f"{'read (pyarrow, best of 3)':28s}{'scan s':>9s}{'point s':>9s}{'row groups':>12s}")
    for name, r in reads.items():
        print(f"{name:28s}{r['scan_s']:>9.3f}{r['point_s']:>9.3f}{r['row_groups']:>12d}")
    process = {c: med[c]["process_s"] for c in CONFIGS}
    targets = [
        h.target(
            "deltalite / delta-rs (whole process)",
            h.ratio(process["deltalite"], process["delta-rs"]),
            TARGET_VS_DELTARS,
        ),
        h.target("deltalite / cp (whole process)", h.ratio(process["deltalite"], process["cp"]), TARGET_VS_CP),
        h.check(
            "identical rows (delta-rs reads them)",
            all(r.get("identical") for c in CONFIGS if c != "cp" for r in runs[c]),
        ),
    ]
    print()
    h.print_targets(targets)
    report = {
        "machine": h.machine_info(),
        "code": h.code_under_test(
            ["airflow_provider_deltalite/engine/parquet/*.py", "airflow_provider_deltalite/engine/rewrite*.py"]
        ),
        "table": {**info, "bytes": input_bytes},
        "runs": runs,
        "medians": med,
        "reads": reads,
        "targets": targets,
        "note": "shared 2-core machine with other work running: timings are noisy; compare ratios within one run",
    }
    shutil.rmtree(WORK, ignore_errors=True)
    return h.finish(report, targets, RESULTS, started, not args.no_write)


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--generate":
        print(json.dumps(generate_child(sys.argv[2], int(sys.argv[3]))))
    elif len(sys.argv) > 1 and sys.argv[1] == "--summary":
        print(json.dumps(summary_child(sys.argv[2])))
    elif len(sys.argv) > 1 and sys.argv[1] == "--child":
        print(json.dumps(run_child(sys.argv[2], sys.argv[3], sys.argv[4])))
    elif len(sys.argv) > 1 and sys.argv[1] == "--read-cost-child":
        print(json.dumps(read_cost_child(sys.argv[2])))
    elif len(sys.argv) > 1 and sys.argv[1] == "--read":
        print(json.dumps(read_child(sys.argv[2], sys.argv[3], int(sys.argv[4]))))
    else:
        sys.exit(main())
