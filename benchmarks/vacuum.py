"""Benchmark: VACUUM (FULL) of a 100,000-file table, deltalite (local executor) vs delta-rs 1.6.3, and its requests
on the S3 API of a moto_server.

The table (generated once, cached under $TMPDIR/deltalite-bench/): 100 partitions, 100,000 tiny data files written
directly (VACUUM never reads them): 50,000 live, 30,000 removed 30 days ago (expired tombstones) and 20,000 never
referenced, every file 30 days old; the log is two commits (the adds, then the removes) and a checkpoint of the
second that keeps the tombstones. Both engines run with the table's default retention (7 days), so each deletes the
same 50,000 files:
  deltalite: vacuum(DeltaTable(path), dry_run=...)                    (FULL, local executor)
  delta-rs:  DeltaTable(path).vacuum(dry_run=..., full=True)
Every run is a fresh subprocess on a fresh hard-linked copy of the table (link copies keep the old mtimes, and a
delete removes only the copy's link); the clock runs from opening the table to the result, pyarrow's one-time import
cost excluded for both. Reported: median wall time of ``--reps`` runs, peak RSS of the run (VmHWM, reset after imports).

S3 part: the same layout at ``--s3-files`` files, uploaded to a moto_server this script starts on 127.0.0.1; its
request log gives the number of LIST, HEAD, GET, PUT and DELETE requests of each run (DeleteObjects counts as one
request per up to 1,000 keys).

Targets (issue 6): deltalite <= 1.0x delta-rs wall time for the dry run and the real run; no per-file HEAD requests;
deletes batched (DeleteObjects) on S3.

Run:  .venv/bin/python benchmarks/vacuum.py [--reps 3] [--s3-files 10000] [--skip-s3] [--regenerate]
Results: a printed table and benchmarks/results/vacuum.json.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import _harness as h

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
RESULTS = HERE / "results" / "vacuum.json"
CACHE = Path(os.environ.get("TMPDIR", tempfile.gettempdir())) / "deltalite-bench"
GEN_FORMAT = 1
PARTITIONS = 100
LIVE, TOMBSTONED, ORPHANS = 50_000, 30_000, 20_000
DAY_MS = 86_400_000
TARGET_RATIO = 1.0
CHILD_TIMEOUT_S = 900
ENGINES = ("deltalite", "delta-rs")


# -- the table ---------------------------------------------------------------------------------------------------


def generate_table(path: Path, files: int, body: bytes = b"deltalite-bench!") -> dict[str, int]:
    """Write the table at ``files`` data files (same proportions as 100,000 = 50k/30k/20k) into ``path``; every data
    file holds ``body`` (16 bytes; nobody reads data files during VACUUM)."""
    import pyarrow as pa  # noqa: F401  (the checkpoint writer needs it; imported here to fail early)

    from airflow_provider_deltalite import DeltaTable
    from airflow_provider_deltalite.engine.checkpoint_writer import write_checkpoint

    live, tombstoned = files * LIVE // 100_000, files * TOMBSTONED // 100_000
    orphans = files - live - tombstoned
    partitions = max(1, min(PARTITIONS, files // 1000))
    now = int(time.time() * 1000)
    old = now - 30 * DAY_MS
    log = path / "_delta_log"
    log.mkdir(parents=True)
    names: list[tuple[str, str]] = []
    for i in range(files):
        part = f"p{i % partitions:03d}"
        names.append((part, f"part=%s/part-{i:06d}-{uuid.UUID(int=i)}.c000.snappy.parquet" % part))
    for part in {p for p, _ in names}:
        (path / f"part={part}").mkdir()
    for _, rel in names:
        with open(path / rel, "wb") as fh:
            fh.write(body)
    schema = {
        "type": "struct",
        "fields": [
            {"name": "id", "type": "long", "nullable": True, "metadata": {}},
            {"name": "part", "type": "string", "nullable": True, "metadata": {}},
        ],
    }
    commit0 = [
        {"commitInfo": {"timestamp": old, "operation": "WRITE", "operationParameters": {"mode": "Append"}}},
        {"protocol": {"minReaderVersion": 1, "minWriterVersion": 2}},
        {
            "metaData": {
                "id": str(uuid.UUID(int=files)),
                "format": {"provider": "parquet", "options": {}},
                "schemaString": json.dumps(schema),
                "partitionColumns": ["part"],
                "configuration": {},
                "createdTime": old,
            }
        },
    ]
    adds = []
    for part, rel in names[: live + tombstoned]:
        adds.append(
            {
                "add": {
                    "path": rel,
                    "partitionValues": {"part": part},
                    "size": len(body),
                    "modificationTime": old,
                    "dataChange": True,
                    "stats": '{"numRecords":1}',
                }
            }
        )
    (log / f"{0:020d}.json").write_text("".join(json.dumps(a) + "\n" for a in commit0 + adds))
    removes = [{"commitInfo": {"timestamp": old + 1, "operation": "DELETE", "operationParameters": {}}}]
    for part, rel in names[live : live + tombstoned]:
        removes.append(
            {
                "remove": {
                    "path": rel,
                    "deletionTimestamp": old + 1,
                    "dataChange": True,
                    "extendedFileMetadata": True,
                    "partitionValues": {"part": part},
                    "size": len(body),
                }
            }
        )
    (log / f"{1:020d}.json").write_text("".join(json.dumps(a) + "\n" for a in removes))
    # a checkpoint as of the removes' time, so that it keeps them as tombstones (written now, it would drop them)
    write_checkpoint(DeltaTable(str(path)).snapshot(), now_ms=old + 2)
    stamp = (old * 1_000_000, old * 1_000_000)
    for entry in [*(rel for _, rel in names), *(p.name for p in log.iterdir())]:
        target = path / entry if "/" in entry else log / entry
        os.utime(target, ns=stamp)
    return {"files": files, "live": live, "tombstoned": tombstoned, "orphans": orphans, "partitions": partitions}


def prepare_table(regenerate: bool) -> tuple[Path, dict[str, Any]]:
    dest = CACHE / f"vacuum-100k-f{GEN_FORMAT}"
    info_file = dest / ".complete"
    if info_file.exists() and not regenerate:
        return dest, {**json.loads(info_file.read_text()), "note": "cached"}
    shutil.rmtree(dest, ignore_errors=True)
    tmp = dest.with_name(dest.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    start = time.perf_counter()
    info = generate_table(tmp, LIVE + TOMBSTONED + ORPHANS)
    tmp.rename(dest)
    info["generate_s"] = round(time.perf_counter() - start, 1)
    info_file.write_text(json.dumps(info))
    return dest, {**info, "note": f"generated in {info['generate_s']}s"}


def link_copy(template: Path, dest: Path) -> None:
    """A copy whose files are hard links: instant, same mtimes, and deleting a link leaves the template intact."""
    subprocess.run(["cp", "-al", str(template), str(dest)], check=True)
    (dest / ".complete").unlink(missing_ok=True)


# -- children -----------------------------------------------------------------------------------------------------


def _s3_deltars_options(endpoint: str) -> dict[str, str]:
    return {
        "AWS_ENDPOINT_URL": endpoint,
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_REGION": "us-east-1",
        "AWS_ALLOW_HTTP": "true",
        "conditional_put": "etag",
    }


def _s3_fsspec_options(endpoint: str) -> dict[str, Any]:
    return {
        "key": "testing",
        "secret": "testing",
        "client_kwargs": {"endpoint_url": endpoint, "region_name": "us-east-1"},
    }


def child_vacuum(engine: str, uri: str, dry_run: bool, endpoint: str | None) -> dict[str, Any]:
    import pyarrow as pa

    pa.array([0])  # pyarrow's one-time first use (it imports pandas) stays out of the timing, for both engines
    # imports stay out of the timing and the baseline
    importlib.import_module("airflow_provider_deltalite.maintenance.vacuum" if engine == "deltalite" else "deltalake")
    baseline = h.rss_now_mb()
    # Reset the peak-RSS mark (Linux: clear_refs 5), so VmHWM afterwards is the peak of the run alone; importing
    # pyarrow's pandas integration peaks higher than either VACUUM, which hides it from ru_maxrss. No sampling thread:
    # it would compete for the GIL with deltalite's Python code, not with delta-rs' Rust.
    h.reset_peak_rss()
    result = _vacuum_once(engine, uri, dry_run, endpoint)
    return {**result, "peak_rss_mb": h.status_mb("VmHWM:"), "baseline_rss_mb": baseline}


def _vacuum_once(engine: str, uri: str, dry_run: bool, endpoint: str | None) -> dict[str, Any]:
    if engine == "deltalite":
        from airflow_provider_deltalite import DeltaTable
        from airflow_provider_deltalite.maintenance.vacuum import vacuum

        options = _s3_fsspec_options(endpoint) if endpoint else None
        start = time.perf_counter()
        stats = vacuum(DeltaTable(uri, options), dry_run=dry_run)
        wall = time.perf_counter() - start
        count = stats.num_files_to_delete if dry_run else stats.objects_deleted
    else:
        import deltalake

        options = _s3_deltars_options(endpoint) if endpoint else None
        start = time.perf_counter()
        paths = deltalake.DeltaTable(uri, storage_options=options).vacuum(dry_run=dry_run, full=True)
        wall = time.perf_counter() - start
        count = len(paths)
    return {"engine": engine, "dry_run": dry_run, "wall_s": wall, "files": count}


# -- local part ---------------------------------------------------------------------------------------------------


def _data_files(path: Path) -> int:
    return sum(1 for d in path.iterdir() if d.name.startswith("part=") for _ in d.iterdir())


def bench_local(template: Path, info: dict[str, Any], reps: int) -> dict[str, Any]:
    expected = info["tombstoned"] + info["orphans"]
    runs: dict[str, list[dict[str, Any]]] = {f"{e} {m}": [] for e in ENGINES for m in ("dry run", "real run")}
    with tempfile.TemporaryDirectory(prefix="deltalite-vacuum-", dir=CACHE) as tmp:
        for rep in range(reps):
            for engine in ENGINES if rep % 2 == 0 else tuple(reversed(ENGINES)):
                for dry in (True, False):
                    copy = Path(tmp) / f"{engine}-{rep}-{dry}"
                    link_copy(template, copy)
                    r = h.run_child_or_exit(
                        __file__, ["--child", engine, str(copy), "dry" if dry else "real"], CHILD_TIMEOUT_S
                    )
                    if r["files"] != expected:
                        raise SystemExit(f"{engine} {'dry' if dry else 'real'} run found {r['files']}, not {expected}")
                    left = _data_files(copy)
                    if left != (info["files"] if dry else info["live"]):
                        raise SystemExit(f"{engine} left {left} data files")
                    runs[f"{engine} {'dry run' if dry else 'real run'}"].append(r)
                    print(f"  rep {rep + 1} {engine:<10} {'dry ' if dry else 'real'}: {r['wall_s']:.2f} s")
                    shutil.rmtree(copy)
    summary = {
        name: {
            "wall_s_median": statistics.median(r["wall_s"] for r in rs),
            "wall_s_all": [round(r["wall_s"], 3) for r in rs],
            "peak_rss_mb_max": max(r["peak_rss_mb"] for r in rs),
            "baseline_rss_mb": statistics.median(r["baseline_rss_mb"] for r in rs),
            "files": rs[0]["files"],
        }
        for name, rs in runs.items()
    }
    ratios = {
        mode: summary[f"deltalite {mode}"]["wall_s_median"] / summary[f"delta-rs {mode}"]["wall_s_median"]
        for mode in ("dry run", "real run")
    }
    return {"runs": summary, "ratios": ratios, "pass": all(r <= TARGET_RATIO for r in ratios.values())}


# -- S3 part ------------------------------------------------------------------------------------------------------

_REQUEST = re.compile(r'"(GET|HEAD|PUT|POST|DELETE) (\S+) HTTP/[0-9.]+" (\d{3})')


def _classify(method: str, target: str) -> str:
    if method == "GET" and ("list-type=2" in target or "prefix=" in target or "delimiter=" in target):
        return "LIST"
    if method == "POST" and target.endswith("?delete"):
        return "DELETE"  # DeleteObjects: up to 1,000 keys
    return method


def _count(log: Path, offset: int) -> tuple[dict[str, int], int]:
    text = log.read_text(errors="replace")
    counts: dict[str, int] = {}
    for m in _REQUEST.finditer(text[offset:]):
        kind = _classify(m.group(1), m.group(2))
        counts[kind] = counts.get(kind, 0) + 1
    return counts, len(text)


def bench_s3(files: int) -> dict[str, Any]:
    import s3fs

    sys.path.insert(0, str(REPO))  # the tests' S3 server (moto with atomic conditional writes)
    from tests.moto_server import start_moto_server, stop_moto_server

    with tempfile.TemporaryDirectory(prefix="deltalite-vacuum-s3-") as tmp:
        log = Path(tmp) / "moto.log"
        try:
            proc, options = start_moto_server(log)
        except RuntimeError as exc:
            raise SystemExit(str(exc)) from None
        endpoint = options["endpoint_url"]
        try:
            fs = s3fs.S3FileSystem(**_s3_fsspec_options(endpoint))
            fs.call_s3("create_bucket", Bucket="bench")
            local = Path(tmp) / "table"
            info = generate_table(local, files)
            expected = info["tombstoned"] + info["orphans"]
            objects = {f"bench/t/{p.relative_to(local)}": p.read_bytes() for p in local.rglob("*") if p.is_file()}
            start = time.perf_counter()
            fs.pipe(objects)
            upload_s = round(time.perf_counter() - start, 1)
            print(f"  s3: uploaded {len(objects)} objects in {upload_s} s")
            # S3 sets LastModified to now: only a 0-hour retention makes the files old, so both engines run with it.
            # Order: both dry runs, deltalite's real run, then the table is put back as it was for delta-rs' real run.
            out: dict[str, Any] = {"files": files, "upload_s": upload_s, "runs": {}}
            _, offset = _count(log, 0)
            plan = [("deltalite", True), ("delta-rs", True), ("deltalite", False), ("delta-rs", False)]
            for engine, dry in plan:
                if engine == "delta-rs" and not dry:
                    fs.invalidate_cache()
                    now = set(fs.find("bench/t"))
                    fs.rm([k for k in now if k not in objects])  # the commits and progress file deltalite wrote
                    fs.pipe({k: v for k, v in objects.items() if k not in now})
                    _, offset = _count(log, 0)
                r = h.run_child_or_exit(
                    __file__,
                    ["--child-s3", engine, "s3://bench/t", "dry" if dry else "real", endpoint],
                    CHILD_TIMEOUT_S,
                )
                counts, offset = _count(log, offset)
                name = f"{engine} {'dry run' if dry else 'real run'}"
                out["runs"][name] = {**r, "requests": counts}
                if r["files"] != expected:
                    print(f"  s3: {name} found {r['files']} files, expected {expected}")
                print(f"  s3: {name}: {r['files']} files, {r['wall_s']:.2f} s, requests {counts}")
            out["runs"] = {f"{e} {m}": out["runs"][f"{e} {m}"] for m in ("dry run", "real run") for e in ENGINES}
            d = out["runs"]["deltalite real run"]["requests"]
            out["no_per_file_head"] = d.get("HEAD", 0) < 10
            out["deletes_batched"] = 0 < d.get("DELETE", 0) <= -(-expected // 1000)
            return out
        finally:
            stop_moto_server(proc)


def child_vacuum_s3(engine: str, uri: str, dry_run: bool, endpoint: str) -> dict[str, Any]:
    """The S3 run: retention 0 (S3 gives every upload the time of the upload)."""
    import pyarrow as pa

    pa.array([0])
    if engine == "deltalite":
        from airflow_provider_deltalite import DeltaTable
        from airflow_provider_deltalite.maintenance.vacuum import vacuum

        start = time.perf_counter()
        stats = vacuum(
            DeltaTable(uri, _s3_fsspec_options(endpoint)),
            dry_run=dry_run,
            retention_hours=0,
            enforce_retention_duration=False,
        )
        wall = time.perf_counter() - start
        count = stats.num_files_to_delete if dry_run else stats.objects_deleted
    else:
        import deltalake

        start = time.perf_counter()
        table = deltalake.DeltaTable(uri, storage_options=_s3_deltars_options(endpoint))
        paths = table.vacuum(retention_hours=0, dry_run=dry_run, enforce_retention_duration=False, full=True)
        wall = time.perf_counter() - start
        count = len(paths)
    return {"engine": engine, "dry_run": dry_run, "wall_s": wall, "files": count}


# -- parent -------------------------------------------------------------------------------------------------------


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--s3-files", type=int, default=10_000)
    parser.add_argument("--skip-s3", action="store_true")
    parser.add_argument("--regenerate", action="store_true")
    parser.add_argument("--child", nargs=3, metavar=("ENGINE", "PATH", "MODE"), help=argparse.SUPPRESS)
    parser.add_argument("--child-s3", nargs=4, metavar=("ENGINE", "URI", "MODE", "ENDPOINT"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        engine, path, mode = args.child
        print(json.dumps(child_vacuum(engine, path, mode == "dry", None)))
        return 0
    if args.child_s3:
        engine, uri, mode, endpoint = args.child_s3
        print(json.dumps(child_vacuum_s3(engine, uri, mode == "dry", endpoint)))
        return 0

    started = time.perf_counter()
    CACHE.mkdir(parents=True, exist_ok=True)
    template, info = prepare_table(args.regenerate)
    print(
        f"table: {template} ({info['note']}): {info['files']} files, {info['live']} live, {info['tombstoned']} "
        f"tombstoned, {info['orphans']} unreferenced, {info['partitions']} partitions"
    )
    local = bench_local(template, info, args.reps)
    s3 = None if args.skip_s3 else bench_s3(args.s3_files)

    print()
    print(f"{'run':<22} {'files':>7} {'wall s (median)':>16} {'peak RSS MB':>12} {'baseline MB':>12} {'ratio':>7}")
    print("-" * 81)
    for mode in ("dry run", "real run"):
        for engine in ENGINES:
            r = local["runs"][f"{engine} {mode}"]
            ratio = f"{local['ratios'][mode]:.2f}" if engine == "deltalite" else ""
            print(
                f"{engine + ' ' + mode:<22} {r['files']:>7} {r['wall_s_median']:>16.2f} "
                f"{r['peak_rss_mb_max']:>12.0f} {r['baseline_rss_mb']:>12.0f} {ratio:>7}"
            )
    verdict = "PASS" if local["pass"] else "FAIL"
    print(
        f"target: deltalite <= {TARGET_RATIO}x delta-rs wall time for both runs: {verdict} "
        "(peak RSS = VmHWM of the run, reset after imports; baseline = RSS after imports)"
    )
    if s3 is not None:
        print()
        print(f"S3 (moto_server, {s3['files']} files, retention 0):")
        print(f"{'run':<22} {'files':>7} {'wall s':>7} {'LIST':>6} {'HEAD':>6} {'GET':>6} {'PUT':>6} {'DELETE':>7}")
        print("-" * 72)
        for name, r in s3["runs"].items():
            q = r["requests"]
            print(
                f"{name:<22} {r['files']:>7} {r['wall_s']:>7.2f} {q.get('LIST', 0):>6} {q.get('HEAD', 0):>6} "
                f"{q.get('GET', 0):>6} {q.get('PUT', 0):>6} {q.get('DELETE', 0):>7}"
            )
        print(
            f"no per-file HEAD: {'PASS' if s3['no_per_file_head'] else 'FAIL'}; "
            f"deletes batched (DeleteObjects): {'PASS' if s3['deletes_batched'] else 'FAIL'}"
        )
    report = {
        "benchmark": "vacuum",
        "machine": h.machine_info(("deltalake", "pyarrow", "s3fs", "moto")),
        "table": {k: v for k, v in info.items() if k != "note"},
        "targets": {"wall_ratio_max": TARGET_RATIO},
        "local": local,
        "s3": s3,
    }
    h.write_results(RESULTS, report, started)
    ok = local["pass"] and (s3 is None or (s3["no_per_file_head"] and s3["deletes_batched"]))
    return 0 if ok else 2


if __name__ == "__main__":
    sys.exit(main())
