"""Benchmark: load the latest snapshot and materialise its file list, deltalite vs delta-rs.

Tables:
  (a) kernel-rs' "300k-add-files-100-col-partitioned" log (5 JSON commits, 300,000 adds, no checkpoint).
  (b) a generated log: 100,000 live files in 50 partitions over 2,000 commits, a classic checkpoint every 100
      versions, a remove + re-add every 10th commit. Cached under the system temp dir, never in the repository.

Each (table, engine) pair runs 3 times, each in a fresh subprocess, so peak RSS (``ru_maxrss``) belongs to one
engine and one load. Wall time spans ``DeltaTable(path)`` to the materialised Arrow file list:

  deltalite: ``DeltaTable(path).snapshot().files``                       (typed partitions + parsed stats)
  delta-rs:  ``deltalake.DeltaTable(path).get_add_actions(flatten=True)`` as a pyarrow Table (also parses stats)

Run:  .venv/bin/python benchmarks/snapshot_load.py [--reps 3] [--only a|b] [--profile]
Results: printed table, and benchmarks/results/snapshot_load.json.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import _harness as h

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results" / "snapshot_load.json"
CORPUS = Path(os.environ.get("DELTALITE_CORPUS", Path(__file__).resolve().parents[2] / "shared" / "corpus"))
ARCHIVE = CORPUS / "kernel-rs-archives" / "300k-add-files-100-col-partitioned.tar.zst"
CACHE = Path(tempfile.gettempdir()) / "deltalite-bench"

TARGET_WALL = 1.5  # deltalite wall time at most 1.5x delta-rs
TARGET_RSS = 2.0  # deltalite peak RSS at most 2x delta-rs
ENGINES = ("deltalite", "delta-rs")
CHILD_TIMEOUT_S = 300

# -- generated table (b) ----------------------------------------------------------------------------------
GEN_FORMAT = 1  # bump when the generator changes, to invalidate the cache
SEED = 20240611
N_COMMITS = 2_000
N_PARTITIONS = 50
FILES_PER_COMMIT = 50  # one file per partition per commit
REPLACE_EVERY = 10  # every 10th commit (not 0) removes REPLACE_COUNT earlier live files and adds as many replacements
REPLACE_COUNT = 5
CHECKPOINT_EVERY = 100
EXPECTED_B = N_COMMITS * FILES_PER_COMMIT  # replacements are net zero
BASE_TS = 1_700_000_000_000  # ms; one commit per minute
assert FILES_PER_COMMIT == N_PARTITIONS
assert EXPECTED_B == 100_000


# -- child: one measured load -----------------------------------------------------------------------------


def child(engine: str, path: str, profile: bool) -> None:
    import pyarrow as pa

    if engine == "deltalite":
        from airflow_provider_deltalite import DeltaTable

        def load() -> pa.Table:
            return DeltaTable(path).snapshot().files

    elif engine == "delta-rs":
        import deltalake

        def load() -> pa.Table:
            table = deltalake.DeltaTable(path).get_add_actions(flatten=True)
            if isinstance(table, pa.Table):
                return table
            # arro3 -> pyarrow through the C stream interface (zero-copy); pa.table() would import pandas
            return pa.RecordBatchReader.from_stream(table).read_all()

    else:
        raise SystemExit(f"unknown engine {engine}")

    # pyarrow imports pandas (when installed; pyspark-client requires it) on its first array built from Python
    # objects: a one-time cost per process of ~0.3 s and ~50 MB, paid by any program that uses pyarrow. Both engines
    # pay it here, before the clock starts, and it is reported as pyarrow_first_use_s.
    first_use = time.perf_counter()
    pa.array([0])
    pyarrow_first_use_s = time.perf_counter() - first_use
    pandas_before = "pandas" in sys.modules
    baseline = {"baseline_rss_mb": h.rss_now_mb(), "baseline_maxrss_mb": h.maxrss_mb()}
    cpu0 = os.times()
    if profile:
        import cProfile
        import io
        import pstats

        prof = cProfile.Profile()
        start = time.perf_counter()
        prof.enable()
        files = load()
        prof.disable()
        wall = time.perf_counter() - start
        for key in ("tottime", "cumulative"):
            out = io.StringIO()
            pstats.Stats(prof, stream=out).sort_stats(key).print_stats(25)
            text = out.getvalue()
            print(f"--- cProfile of {engine} on {path}, sorted by {key} (wall {wall:.2f}s) ---", file=sys.stderr)
            print(text[text.find("   ncalls") :], file=sys.stderr)
    else:
        start = time.perf_counter()
        files = load()
        wall = time.perf_counter() - start
    cpu1 = os.times()
    result = {
        "engine": engine,
        "files": files.num_rows,
        "columns": files.num_columns,
        "wall_s": wall,
        "cpu_s": (cpu1.user - cpu0.user) + (cpu1.system - cpu0.system),
        "peak_rss_mb": h.maxrss_mb(),
        "arrow_bytes_mb": files.nbytes / 2**20,
        "pyarrow_first_use_s": pyarrow_first_use_s,
        "pandas_imported_during_load": not pandas_before and "pandas" in sys.modules,
        **baseline,
    }
    print(json.dumps(result))


def verify_child(path: str, expected: int) -> None:
    """Open the table in both engines; exit non-zero when either does not see ``expected`` files."""
    problems = []
    import deltalake

    n = len(deltalake.DeltaTable(path).file_uris())
    if n != expected:
        problems.append(f"delta-rs sees {n} files, expected {expected}")
    try:
        from airflow_provider_deltalite import DeltaTable

        m = DeltaTable(path).snapshot().files.num_rows
        if m != expected:
            problems.append(f"deltalite sees {m} files, expected {expected}")
    except Exception as exc:  # an engine failure is reported, the generator is checked by delta-rs above
        problems.append(f"deltalite failed: {type(exc).__name__}: {exc}")
    print(json.dumps({"delta_rs_files": n, "problems": problems}))


# -- table (a): extract the archive -----------------------------------------------------------------------


def _zstd_method() -> str | None:
    with contextlib.suppress(ImportError):
        import zstandard  # noqa: F401

        return "zstandard"
    if shutil.which("tar") and shutil.which("zstd"):
        help_text = subprocess.run(["tar", "--help"], capture_output=True, text=True).stdout
        if "--zstd" in help_text:
            return "tar --zstd"
    if shutil.which("zstd"):
        return "zstd -dc"
    return None


def _find_table_root(tree: Path) -> Path | None:
    roots = sorted((p.parent for p in tree.rglob("_delta_log") if p.is_dir()), key=lambda p: len(p.parts))
    return roots[0] if roots else None


def prepare_archive_table() -> tuple[Path | None, str]:
    """Extract table (a) once into the cache; return (table root or None, note)."""
    if not ARCHIVE.exists():
        return None, f"archive {ARCHIVE} not found"
    stat = ARCHIVE.stat()
    dest = CACHE / f"300k-add-{stat.st_size}-{int(stat.st_mtime)}"
    if (dest / ".complete").exists():
        root = _find_table_root(dest)
        if root is not None:
            return root, "cached extraction"
    method = _zstd_method()
    if method is None:
        return None, (
            "cannot extract the .tar.zst: neither the `zstandard` Python package nor a `zstd` binary is available "
            "(install zstd, e.g. `apt-get install zstd`, then rerun); table (a) skipped"
        )
    shutil.rmtree(dest, ignore_errors=True)
    dest.mkdir(parents=True)
    if method == "zstandard":
        import zstandard

        with (
            open(ARCHIVE, "rb") as fh,
            zstandard.ZstdDecompressor().stream_reader(fh) as reader,
            tarfile.open(fileobj=reader, mode="r|") as tar,
        ):
            tar.extractall(dest, filter="data")
    elif method == "tar --zstd":
        subprocess.run(["tar", "--zstd", "-xf", str(ARCHIVE), "-C", str(dest)], check=True)
    else:
        with subprocess.Popen(["zstd", "-dc", str(ARCHIVE)], stdout=subprocess.PIPE) as proc:
            assert proc.stdout is not None
            with tarfile.open(fileobj=proc.stdout, mode="r|") as tar:
                tar.extractall(dest, filter="data")
        if proc.returncode:
            raise RuntimeError(f"zstd exited with {proc.returncode}")
    root = _find_table_root(dest)
    if root is None:
        return None, f"no _delta_log directory inside {ARCHIVE.name}"
    (dest / ".complete").write_text("ok\n")
    return root, f"extracted with {method}"


# -- table (b): generate the log --------------------------------------------------------------------------

SCHEMA_STRING = json.dumps(
    {
        "type": "struct",
        "fields": [
            {"name": n, "type": t, "nullable": True, "metadata": {}}
            for n, t in (("id", "long"), ("value", "double"), ("name", "string"), ("part", "string"))
        ],
    },
    separators=(",", ":"),
)


def _checkpoint_schema():
    import pyarrow as pa

    smap = pa.map_(pa.string(), pa.string())
    return pa.schema(
        [
            ("txn", pa.struct([("appId", pa.string()), ("version", pa.int64()), ("lastUpdated", pa.int64())])),
            (
                "add",
                pa.struct(
                    [
                        ("path", pa.string()),
                        ("partitionValues", smap),
                        ("size", pa.int64()),
                        ("modificationTime", pa.int64()),
                        ("dataChange", pa.bool_()),
                        ("stats", pa.string()),
                        ("tags", smap),
                    ]
                ),
            ),
            (
                "remove",
                pa.struct(
                    [
                        ("path", pa.string()),
                        ("deletionTimestamp", pa.int64()),
                        ("dataChange", pa.bool_()),
                        ("extendedFileMetadata", pa.bool_()),
                        ("partitionValues", smap),
                        ("size", pa.int64()),
                        ("tags", smap),
                    ]
                ),
            ),
            (
                "metaData",
                pa.struct(
                    [
                        ("id", pa.string()),
                        ("name", pa.string()),
                        ("description", pa.string()),
                        ("format", pa.struct([("provider", pa.string()), ("options", smap)])),
                        ("schemaString", pa.string()),
                        ("partitionColumns", pa.list_(pa.string())),
                        ("configuration", smap),
                        ("createdTime", pa.int64()),
                    ]
                ),
            ),
            ("protocol", pa.struct([("minReaderVersion", pa.int32()), ("minWriterVersion", pa.int32())])),
        ]
    )


def _as_map(d: dict[str, str] | None) -> list[tuple[str, str]] | None:
    return None if d is None else list(d.items())


def _write_checkpoint(log: Path, version: int, protocol, meta, live: dict[str, dict], tombstones: list[dict]) -> dict:
    import pyarrow as pa
    import pyarrow.parquet as pq

    schema = _checkpoint_schema()
    adds = list(live.values())
    n = 2 + len(adds) + len(tombstones)
    rows: dict[str, list] = {name: [None] * n for name in schema.names}
    rows["protocol"][0] = protocol
    rows["metaData"][1] = {
        **meta,
        "format": {"provider": meta["format"]["provider"], "options": _as_map(meta["format"]["options"])},
        "configuration": _as_map(meta["configuration"]),
    }
    for i, a in enumerate(adds, start=2):
        rows["add"][i] = {**a, "partitionValues": _as_map(a["partitionValues"]), "tags": None}
    for i, r in enumerate(tombstones, start=2 + len(adds)):
        rows["remove"][i] = {**r, "partitionValues": _as_map(r["partitionValues"]), "tags": None}
    table = pa.table({name: pa.array(rows[name], type=schema.field(name).type) for name in schema.names})
    path = log / f"{version:020d}.checkpoint.parquet"
    pq.write_table(table, path, compression="snappy")
    return {"version": version, "size": n, "sizeInBytes": path.stat().st_size, "numOfAddFiles": len(adds)}


def generate_table(dest: Path) -> None:
    """Write table (b)'s log into ``dest`` (data files are not written)."""
    rng = random.Random(SEED)
    log = dest / "_delta_log"
    log.mkdir(parents=True)
    dumps = json.JSONEncoder(separators=(",", ":")).encode
    protocol = {"minReaderVersion": 1, "minWriterVersion": 2}
    meta = {
        "id": str(uuid.UUID(int=rng.getrandbits(128), version=4)),
        "name": "generated_100k",
        "description": "deltalite snapshot-load benchmark table",
        "format": {"provider": "parquet", "options": {}},
        "schemaString": SCHEMA_STRING,
        "partitionColumns": ["part"],
        "configuration": {},
        "createdTime": BASE_TS,
    }
    live: dict[str, dict] = {}
    live_paths: list[str] = []  # for O(1) random choice / removal
    live_index: dict[str, int] = {}
    tombstones: list[dict] = []
    next_id = 0
    last_checkpoint = None

    def new_add(k: int, ts: int) -> dict:
        nonlocal next_id
        num = rng.randint(1_000, 50_000)
        lo_v = round(rng.uniform(-1000.0, 0.0), 6)
        stats = {
            "numRecords": num,
            "minValues": {"id": next_id, "value": lo_v, "name": f"name_{rng.randint(0, 49_999):06d}"},
            "maxValues": {
                "id": next_id + num - 1,
                "value": round(lo_v + rng.uniform(1.0, 2000.0), 6),
                "name": f"name_{rng.randint(50_000, 99_999):06d}",
            },
            "nullCount": {"id": 0, "value": rng.randint(0, 20), "name": rng.randint(0, 200)},
        }
        next_id += num
        return {
            "path": f"part=p{k}/part-{uuid.UUID(int=rng.getrandbits(128), version=4)}.snappy.parquet",
            "partitionValues": {"part": f"p{k}"},
            "size": rng.randint(100_000, 16_000_000),
            "modificationTime": ts,
            "dataChange": True,
            "stats": dumps(stats),
        }

    def put(add: dict) -> None:
        live[add["path"]] = add
        live_index[add["path"]] = len(live_paths)
        live_paths.append(add["path"])

    def take(path: str) -> dict:
        i = live_index.pop(path)
        last = live_paths.pop()
        if last != path:
            live_paths[i] = last
            live_index[last] = i
        return live.pop(path)

    for v in range(N_COMMITS):
        ts = BASE_TS + v * 60_000
        lines: list[str] = []
        removes: list[dict] = []
        replacing = v > 0 and v % REPLACE_EVERY == 0
        if replacing:
            for path in rng.sample(live_paths, REPLACE_COUNT):
                old = take(path)
                removes.append(
                    {
                        "path": path,
                        "deletionTimestamp": ts,
                        "dataChange": True,
                        "extendedFileMetadata": True,
                        "partitionValues": old["partitionValues"],
                        "size": old["size"],
                    }
                )
        adds = [new_add(k, ts) for k in range(N_PARTITIONS)]
        adds += [new_add(int(r["partitionValues"]["part"][1:]), ts) for r in removes]
        lines.append(
            dumps(
                {
                    "commitInfo": {
                        "timestamp": ts,
                        "operation": "WRITE",
                        "operationParameters": {"mode": "Append", "partitionBy": '["part"]'},
                        "readVersion": v - 1 if v else None,
                        "isBlindAppend": not replacing,
                        "operationMetrics": {
                            "numFiles": str(len(adds)),
                            "numRemovedFiles": str(len(removes)),
                            "numOutputRows": str(sum(json.loads(a["stats"])["numRecords"] for a in adds)),
                        },
                        "engineInfo": "deltalite-benchmark-generator",
                    }
                }
            )
        )
        if v == 0:
            lines.append(dumps({"protocol": protocol}))
            lines.append(dumps({"metaData": meta}))
        lines.extend(dumps({"remove": r}) for r in removes)
        lines.extend(dumps({"add": a}) for a in adds)
        (log / f"{v:020d}.json").write_text("\n".join(lines) + "\n")
        for a in adds:
            put(a)
        tombstones.extend(removes)
        if v > 0 and v % CHECKPOINT_EVERY == 0:
            last_checkpoint = _write_checkpoint(log, v, protocol, meta, live, tombstones)
    if len(live) != EXPECTED_B:
        raise AssertionError(f"generator produced {len(live)} live files, expected {EXPECTED_B}")
    assert last_checkpoint is not None
    (log / "_last_checkpoint").write_text(dumps(last_checkpoint) + "\n")


def prepare_generated_table(regenerate: bool) -> tuple[Path, str]:
    dest = CACHE / f"generated-100k-f{GEN_FORMAT}-s{SEED}"
    if (dest / ".complete").exists() and not regenerate:
        return dest, "cached"
    shutil.rmtree(dest, ignore_errors=True)
    tmp = dest.with_name(dest.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    start = time.perf_counter()
    generate_table(tmp)
    tmp.rename(dest)
    (dest / ".complete").write_text("ok\n")
    return dest, f"generated in {time.perf_counter() - start:.1f}s"


# -- parent: run, summarise, report -----------------------------------------------------------------------


def summarise(runs: list[dict], errors: list[str]) -> dict[str, Any]:
    if not runs:
        return {"ok": False, "error": errors[0] if errors else "no run", "runs": []}
    return {
        "ok": not errors,
        "error": errors[0] if errors else None,
        "files": runs[0]["files"],
        "columns": runs[0]["columns"],
        "wall_s_median": statistics.median(r["wall_s"] for r in runs),
        "wall_s_all": [round(r["wall_s"], 4) for r in runs],
        "cpu_s_median": statistics.median(r["cpu_s"] for r in runs),
        "peak_rss_mb_max": max(r["peak_rss_mb"] for r in runs),
        "baseline_rss_mb": statistics.median(r["baseline_rss_mb"] for r in runs),
        "arrow_bytes_mb": runs[0]["arrow_bytes_mb"],
        "pyarrow_first_use_s_median": statistics.median(r["pyarrow_first_use_s"] for r in runs),
        "pandas_imported_during_load": runs[0]["pandas_imported_during_load"],
        "runs": runs,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--only", choices=["a", "b"], help="run one table only")
    parser.add_argument("--regenerate", action="store_true", help="rebuild the generated table (b)")
    parser.add_argument("--profile", action="store_true", help="also cProfile one deltalite load per table")
    parser.add_argument("--no-write", action="store_true", help="do not write the JSON results file")
    parser.add_argument("--child", nargs=2, metavar=("ENGINE", "PATH"), help=argparse.SUPPRESS)
    parser.add_argument("--child-profile", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--verify", nargs=2, metavar=("PATH", "EXPECTED"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child[0], args.child[1], args.child_profile)
        return 0
    if args.verify:
        verify_child(args.verify[0], int(args.verify[1]))
        return 0

    t_start = time.perf_counter()
    CACHE.mkdir(parents=True, exist_ok=True)
    tables: list[tuple[str, Path, int | None]] = []
    notes: dict[str, str] = {}
    if args.only in (None, "a"):
        root, note = prepare_archive_table()
        notes["300k-add (a)"] = note
        print(f"table (a): {note}" + (f" -> {root}" if root else ""))
        if root is not None:
            tables.append(("300k-add (a)", root, None))
    if args.only in (None, "b"):
        path, note = prepare_generated_table(args.regenerate)
        print(f"table (b): {note} -> {path}")
        check, err = h.run_child(__file__, ["--verify", str(path), str(EXPECTED_B)], CHILD_TIMEOUT_S)
        if check is None:
            print(f"table (b): verification crashed: {err}")
            return 1
        if check["delta_rs_files"] != EXPECTED_B:
            print(f"table (b): generated table is wrong: {check['problems']}")
            return 1
        note += "; verified: delta-rs sees 100000 files"
        if check["problems"]:
            note += f"; deltalite: {'; '.join(check['problems'])}"
            print(f"table (b): WARNING {check['problems']}")
        else:
            note += ", deltalite sees 100000 files"
        notes["generated-100k (b)"] = note
        tables.append(("generated-100k (b)", path, EXPECTED_B))

    results: list[dict[str, Any]] = []
    for label, path, expected in tables:
        runs: dict[str, list[dict]] = {e: [] for e in ENGINES}
        errors: dict[str, list[str]] = {e: [] for e in ENGINES}
        for rep in range(args.reps):
            for engine in ENGINES if rep % 2 == 0 else ENGINES[::-1]:  # alternate order against drift
                res, err = h.run_child(__file__, ["--child", engine, str(path)], CHILD_TIMEOUT_S)
                if res is None:
                    errors[engine].append(err)
                elif expected is not None and res["files"] != expected:
                    errors[engine].append(f"{res['files']} files, expected {expected}")
                else:
                    runs[engine].append(res)
                status = f"{res['wall_s']:.2f}s {res['peak_rss_mb']:.0f}MB" if res else f"ERROR {err}"
                print(f"  {label:<20} {engine:<10} rep {rep + 1}: {status}", flush=True)
        summary = {e: summarise(runs[e], errors[e]) for e in ENGINES}
        dl, rs = summary["deltalite"], summary["delta-rs"]
        cmp: dict[str, Any] = {"ratio_wall": None, "ratio_rss": None, "wall_pass": None, "rss_pass": None}
        if dl.get("runs") and rs.get("runs"):
            if dl["files"] != rs["files"]:
                dl["error"] = f"file count differs: deltalite {dl['files']} vs delta-rs {rs['files']}"
                dl["ok"] = False
            cmp["ratio_wall"] = dl["wall_s_median"] / rs["wall_s_median"]
            cmp["ratio_rss"] = dl["peak_rss_mb_max"] / rs["peak_rss_mb_max"]
            cmp["wall_pass"] = cmp["ratio_wall"] <= TARGET_WALL and dl["ok"]
            cmp["rss_pass"] = cmp["ratio_rss"] <= TARGET_RSS and dl["ok"]
        results.append({"table": label, "path": str(path), "note": notes.get(label), "engines": summary, **cmp})

    print()
    print_table(results, args.reps)
    report = {
        "benchmark": "snapshot_load",
        "description": "load latest snapshot + materialise file list (Arrow); fresh subprocess per run",
        "targets": {"wall_ratio_max": TARGET_WALL, "rss_ratio_max": TARGET_RSS},
        "reps": args.reps,
        "machine": h.machine_info(("pyarrow", "deltalake", "numpy", "fsspec")),
        "results": results,
        "total_runtime_s": None,
    }
    if args.profile:
        for label, path, _ in tables:
            print(f"\n=== cProfile: deltalite on {label} ===")
            res, err = h.run_child(__file__, ["--child", "deltalite", str(path), "--child-profile"], CHILD_TIMEOUT_S)
            print(err if res is not None else f"ERROR {err}")
    report["total_runtime_s"] = round(time.perf_counter() - t_start, 1)
    if not args.no_write:
        h.write_results(RESULTS, report, t_start)
    return 0 if all(r["wall_pass"] and r["rss_pass"] for r in results) else 2


def print_table(results: list[dict[str, Any]], reps: int) -> None:
    wall_head = f"wall_s (median of {reps})"
    head = (
        f"{'table':<21} {'engine':<11} {'files':>7}   {wall_head:<22} {'cpu_s':>6}   "
        f"{'peak_rss_MB':>11}   {'base_rss_MB':>11}   {'pa_init_s':>9}   {'ratio_wall':<16} {'ratio_rss':<16}"
    )
    print(head)
    print("-" * len(head))
    for r in results:
        for engine in ENGINES:
            s = r["engines"][engine]
            if not s.get("runs"):
                print(f"{r['table']:<21} {engine:<11} {'-':>7}   ERROR: {s['error']}")
                continue
            ratio_wall = ratio_rss = ""
            if engine == "deltalite" and r["ratio_wall"] is not None:
                ratio_wall = f"{r['ratio_wall']:.2f} {'PASS' if r['wall_pass'] else 'FAIL'}"
                ratio_rss = f"{r['ratio_rss']:.2f} {'PASS' if r['rss_pass'] else 'FAIL'}"
            print(
                f"{r['table']:<21} {engine:<11} {s['files']:>7}   {s['wall_s_median']:<22.3f} "
                f"{s['cpu_s_median']:>6.2f}   {s['peak_rss_mb_max']:>11.0f}   {s['baseline_rss_mb']:>11.0f}   "
                f"{s['pyarrow_first_use_s_median']:>9.2f}   {ratio_wall:<16} {ratio_rss:<16}"
            )
            if s.get("error"):
                print(f"{'':<21} {'':<11} note: {s['error']}")
    print(
        f"targets: deltalite wall <= {TARGET_WALL}x delta-rs, peak RSS <= {TARGET_RSS}x delta-rs "
        "(ratios deltalite/delta-rs; peak RSS = ru_maxrss of the child, baseline = RSS after imports;\n"
        "cpu_s = median user+sys CPU seconds of the load, a check on wall times when the machine is shared;\n"
        "pa_init_s = pyarrow's one-time first use in each child (it imports pandas), before the clock starts)"
    )


if __name__ == "__main__":
    sys.exit(main())
