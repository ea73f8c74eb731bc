"""Benchmark: VACUUM (FULL) on S3 (a moto_server on 127.0.0.1), deltalite vs delta-rs 1.6.3, side by side in one run.

The table is the issue-6 benchmark table of benchmarks/vacuum.py (`generate_table`) at ``--files`` data files (10,000:
5,000 live, 3,000 removed long ago, 2,000 never referenced, 10 partitions), uploaded once. S3 gives every upload the
time of the upload, so both engines run with retention 0 (``enforce_retention_duration`` off) and delete the same
5,000 files. Four measurements per engine and rep, interleaved (A,B,A,B, the order alternating by rep):

  in-process, dry run and real run: a child process imports everything first (for deltalite s3fs as well, which it
      otherwise imports on first use), then times ``vacuum(DeltaTable(uri, options), dry_run=...)`` against
      ``deltalake.DeltaTable(uri, storage_options=...).vacuum(dry_run=..., full=True)``;
  whole process, dry run and real run: the wall of ``deltalite vacuum URI --json ...`` (the console script) against
      ``python -c "import deltalake; ... .vacuum(...)"``, interpreter start and imports included.

After a real run the table is put back as it was (the deleted objects uploaded again, the commits and progress file
the run wrote removed), so every run sees the same table. Requests by type (LIST, HEAD, GET, PUT, DELETE =
DeleteObjects of up to 1,000 keys) come from the moto_server's request log, per run, the same way for both engines.
The package and its dependencies are bytecode compiled first (`_harness.compile_bytecode`), as pip installs them.

Target (issue 19): deltalite <= 0.8x delta-rs wall, median over the reps, for the dry run and the real run, whole
process and in-process.

The server's floor: every full VACUUM has to list every object under the table, and on moto the server's time to
answer those listings is most of either engine's wall. So each rep also times a child that sends only those listings
(ListObjectsV2 of 1,000 keys, unsigned, over plain ``http.client``, the XML not parsed beyond its continuation token),
once over the whole table prefix and once per partition prefix on 4 threads; the faster of the two is the floor. No
VACUUM through this server can take less, so a floor above 0.8x delta-rs's in-process dry run makes the target
unreachable here, whatever the client does.

The machine is shared (2 cores, other agents): the load average is recorded with the result.

Run:  .venv/bin/python benchmarks/vacuum_s3.py [--reps 3] [--files 10000] [--profile]
Results: a printed table and benchmarks/results/vacuum_s3.json.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import _harness as h

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results" / "vacuum_s3.json"
TARGET_RATIO = 0.8
CHILD_TIMEOUT_S = 600
ENGINES = ("deltalite", "delta-rs")
BUCKET, PREFIX = "bench", "t"
URI = f"s3://{BUCKET}/{PREFIX}"


def _fsspec_options(endpoint: str) -> dict[str, Any]:
    return {"key": "testing", "secret": "testing", "endpoint_url": endpoint}


def _deltars_options(endpoint: str) -> dict[str, str]:
    return {
        "AWS_ENDPOINT_URL": endpoint,
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_REGION": "us-east-1",
        "AWS_ALLOW_HTTP": "true",
        "conditional_put": "etag",
    }


# -- children -----------------------------------------------------------------------------------------------------


def child_in_process(engine: str, dry_run: bool, endpoint: str, profile: bool) -> dict[str, Any]:
    """One timed VACUUM with every import done before the clock starts."""
    import pyarrow as pa

    pa.array([0])
    if engine == "deltalite":
        import s3fs  # noqa: F401  (imported on first use otherwise; an import, so outside the clock)

        from airflow_provider_deltalite import DeltaTable
        from airflow_provider_deltalite.maintenance.vacuum import vacuum

        def run() -> int:
            stats = vacuum(
                DeltaTable(URI, _fsspec_options(endpoint)),
                dry_run=dry_run,
                retention_hours=0,
                enforce_retention_duration=False,
            )
            return stats.num_files_to_delete if dry_run else stats.objects_deleted
    else:
        import deltalake

        def run() -> int:
            table = deltalake.DeltaTable(URI, storage_options=_deltars_options(endpoint))
            return len(table.vacuum(retention_hours=0, dry_run=dry_run, enforce_retention_duration=False, full=True))

    prof = None
    if profile:
        import cProfile

        prof = cProfile.Profile()
        prof.enable()
    start = time.perf_counter()
    files = run()
    wall = time.perf_counter() - start
    out: dict[str, Any] = {"wall_s": wall, "files": files}
    if prof is not None:
        import io
        import pstats

        prof.disable()
        buf = io.StringIO()
        pstats.Stats(prof, stream=buf).sort_stats("cumulative").print_stats(30)
        out["profile"] = buf.getvalue()
    return out


LISTING_FLOOR = r"""
import http.client, json, re, sys, time, urllib.parse
from concurrent.futures import ThreadPoolExecutor

port, bucket, prefix, partitions = int(sys.argv[1]), sys.argv[2], sys.argv[3], json.loads(sys.argv[4])


def list_prefix(key_prefix):
    conn = http.client.HTTPConnection("127.0.0.1", port)
    token, keys, requests = None, 0, 0
    while True:
        query = {"list-type": "2", "prefix": key_prefix, "max-keys": "1000"}
        if token:
            query["continuation-token"] = token
        conn.request("GET", f"/{bucket}?" + urllib.parse.urlencode(query))
        body = conn.getresponse().read()
        requests += 1
        keys += body.count(b"<Key>")
        more = re.search(rb"<NextContinuationToken>([^<]+)</NextContinuationToken>", body)
        if not more:
            return keys, requests
        token = more.group(1).decode()


out = {}
start = time.perf_counter()
keys, requests = list_prefix(prefix + "/")
out["whole prefix"] = {"wall_s": time.perf_counter() - start, "keys": keys, "requests": requests}
start = time.perf_counter()
with ThreadPoolExecutor(4) as pool:
    done = list(pool.map(list_prefix, [f"{prefix}/{p}/" for p in partitions]))
out["by partition"] = {
    "wall_s": time.perf_counter() - start,
    "keys": sum(k for k, _ in done),
    "requests": sum(r for _, r in done),
}
print(json.dumps(out))
"""


def run_listing_floor(endpoint: str, partitions: list[str], objects: int) -> dict[str, Any]:
    """The moto server's time to answer the listings a full VACUUM needs, and nothing else (see the docstring); both
    ways must have listed all ``objects`` keys of the table, or the floor would flatter."""
    port = endpoint.rsplit(":", 1)[1]
    cmd = [sys.executable, "-c", LISTING_FLOOR, port, BUCKET, PREFIX, json.dumps(partitions)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=CHILD_TIMEOUT_S)
    if proc.returncode != 0:
        raise SystemExit(f"listing floor failed: {proc.stderr.strip().splitlines()[-1:]}")
    ways = json.loads(proc.stdout)
    if any(way["keys"] != objects for way in ways.values()):
        raise SystemExit(f"listing floor saw {ways}, not {objects} keys each way")
    best = min(ways, key=lambda way: ways[way]["wall_s"])
    return {"wall_s": ways[best]["wall_s"], "files": None, "best": best, "ways": ways}


def whole_process_command(engine: str, dry_run: bool, endpoint: str) -> list[str]:
    if engine == "deltalite":
        cli = str(Path(sys.executable).with_name("deltalite"))
        cmd = [cli, "vacuum", URI, "--json", "--retention-hours", "0", "--no-enforce-retention-duration"]
        for key, value in _fsspec_options(endpoint).items():
            cmd += ["--storage-option", f"{key}={value}"]
        return cmd + (["--dry-run"] if dry_run else [])
    code = (
        "import deltalake, json, sys; "
        f"t = deltalake.DeltaTable({URI!r}, storage_options={_deltars_options(endpoint)!r}); "
        f"print(json.dumps({{'files': len(t.vacuum(retention_hours=0, dry_run={dry_run}, "
        "enforce_retention_duration=False, full=True))}))"
    )
    return [sys.executable, "-c", code]


def run_whole_process(engine: str, dry_run: bool, endpoint: str) -> dict[str, Any]:
    cmd = whole_process_command(engine, dry_run, endpoint)
    start = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=CHILD_TIMEOUT_S, cwd=h.REPO)
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"{engine} whole process failed: {proc.stderr.strip().splitlines()[-1:]}")
    doc = json.loads(proc.stdout.strip().splitlines()[-1])
    files = doc["files"] if engine == "delta-rs" else doc["numFilesToDelete" if dry_run else "objectsDeleted"]
    return {"wall_s": wall, "files": files}


# -- the request log ------------------------------------------------------------------------------------------------


class RequestLog:
    """Counts the moto_server's requests by type from its log, from a mark on."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.offset = 0
        self.vacuum = h.load_benchmark("vacuum")

    def mark(self) -> None:
        self.offset = len(self.path.read_text(errors="replace"))

    def since_mark(self) -> dict[str, int]:
        counts, self.offset = self.vacuum._count(self.path, self.offset)
        return counts


# -- parent ---------------------------------------------------------------------------------------------------------


def upload(fs: Any, local: Path) -> dict[str, bytes]:
    objects = {f"{BUCKET}/{PREFIX}/{p.relative_to(local)}": p.read_bytes() for p in local.rglob("*") if p.is_file()}
    fs.pipe(objects)
    return objects


def restore(fs: Any, objects: dict[str, bytes]) -> None:
    """Put the table back as uploaded: remove what a run wrote, upload what it deleted."""
    fs.invalidate_cache()
    now = set(fs.find(f"{BUCKET}/{PREFIX}"))
    extra = [k for k in now if k not in objects]
    if extra:
        fs.rm(extra)
    missing = {k: v for k, v in objects.items() if k not in now}
    if missing:
        fs.pipe(missing)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--files", type=int, default=10_000)
    parser.add_argument("--profile", action="store_true", help="print a cProfile of one in-process deltalite dry run")
    parser.add_argument("--no-write", action="store_true", help="do not write the results file")
    parser.add_argument("--child", nargs=4, metavar=("ENGINE", "MODE", "ENDPOINT", "PROFILE"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        engine, mode, endpoint, profile = args.child
        print(json.dumps(child_in_process(engine, mode == "dry", endpoint, profile == "1")))
        return 0

    import s3fs

    started = time.perf_counter()
    h.compile_bytecode()
    sys.path.insert(0, str(h.REPO))  # the tests' S3 server (moto with atomic conditional writes)
    from tests.moto_server import start_moto_server, stop_moto_server

    generate_table = h.load_benchmark("vacuum").generate_table
    with tempfile.TemporaryDirectory(prefix="deltalite-vacuum-s3-") as tmp:
        log_path = Path(tmp) / "moto.log"
        try:
            proc, options = start_moto_server(log_path)
        except RuntimeError as exc:
            raise SystemExit(str(exc)) from None
        endpoint = options["endpoint_url"]
        try:
            fs = s3fs.S3FileSystem(**_fsspec_options(endpoint))
            fs.call_s3("create_bucket", Bucket=BUCKET)
            info = generate_table(Path(tmp) / "table", args.files)
            expected = info["tombstoned"] + info["orphans"]
            t0 = time.perf_counter()
            objects = upload(fs, Path(tmp) / "table")
            print(f"table: {len(objects)} objects uploaded in {time.perf_counter() - t0:.1f} s; {info}")
            log = RequestLog(log_path)
            partitions = sorted({p.relative_to(Path(tmp) / "table").parts[0] for p in (Path(tmp) / "table").rglob("*")})
            if args.profile:
                r = h.run_child_or_exit(__file__, ["--child", "deltalite", "dry", endpoint, "1"], CHILD_TIMEOUT_S)
                print(r["profile"])
            runs: dict[str, list[dict[str, Any]]] = {}
            for rep in range(args.reps):
                order = ENGINES if rep % 2 == 0 else tuple(reversed(ENGINES))
                log.mark()
                r = run_listing_floor(endpoint, partitions, len(objects))
                r["requests"] = log.since_mark()
                r["load_1m"] = os.getloadavg()[0]
                runs.setdefault("server floor: listing only", []).append(r)
                print(f"  rep {rep + 1} {'server floor: listing only':<36} {r['wall_s']:6.2f} s  {r['ways']}")
                for how in ("in-process", "whole process"):
                    for dry in (True, False):
                        for engine in order:
                            log.mark()
                            if how == "in-process":
                                mode = "dry" if dry else "real"
                                r = h.run_child_or_exit(__file__, ["--child", engine, mode, endpoint, "0"], 600)
                            else:
                                r = run_whole_process(engine, dry, endpoint)
                            r["requests"] = log.since_mark()
                            r["load_1m"] = os.getloadavg()[0]
                            if r["files"] != expected:
                                raise SystemExit(f"{engine} {how} found {r['files']} files, not {expected}")
                            name = f"{engine} {how} {'dry run' if dry else 'real run'}"
                            runs.setdefault(name, []).append(r)
                            print(f"  rep {rep + 1} {name:<36} {r['wall_s']:6.2f} s  {r['requests']}")
                            if not dry:
                                restore(fs, objects)
        finally:
            stop_moto_server(proc)

    summary: dict[str, Any] = {}
    for name, rs in runs.items():
        summary[name] = {
            "wall_s_median": statistics.median(r["wall_s"] for r in rs),
            "wall_s_all": [round(r["wall_s"], 3) for r in rs],
            "requests": rs[-1]["requests"],
            "load_1m": [round(r["load_1m"], 2) for r in rs],
            "files": rs[0]["files"],
        }
    targets = []
    floor = summary["server floor: listing only"]["wall_s_median"]
    peer_dry = summary["delta-rs in-process dry run"]["wall_s_median"]
    floor_info = {"name": "server floor (listing only) / delta-rs in-process dry run", "value": floor / peer_dry}
    print()
    print(f"{'run':<40} {'wall s':>7} {'LIST':>5} {'HEAD':>5} {'GET':>5} {'PUT':>5} {'DELETE':>7} {'ratio':>6}")
    print("-" * 82)
    for how in ("in-process", "whole process"):
        for mode in ("dry run", "real run"):
            ours, peer = summary[f"deltalite {how} {mode}"], summary[f"delta-rs {how} {mode}"]
            ratio = ours["wall_s_median"] / peer["wall_s_median"]
            targets.append(
                {"name": f"{how} {mode}: deltalite / delta-rs wall", "value": ratio, "max": TARGET_RATIO}
                | {"pass": ratio <= TARGET_RATIO}
            )
            for engine, r in (("deltalite", ours), ("delta-rs", peer)):
                q = r["requests"]
                shown = f"{ratio:.2f}" if engine == "deltalite" else ""
                print(
                    f"{engine + ' ' + how + ' ' + mode:<40} {r['wall_s_median']:>7.2f} {q.get('LIST', 0):>5} "
                    f"{q.get('HEAD', 0):>5} {q.get('GET', 0):>5} {q.get('PUT', 0):>5} {q.get('DELETE', 0):>7} "
                    f"{shown:>6}"
                )
    q = summary["server floor: listing only"]["requests"]
    # the LIST count is of both ways together; each way alone sends what delta-rs's listing sends
    print(f"{'server floor: listing only, both ways':<40} {floor:>7.2f} {q.get('LIST', 0):>5}")
    print()
    for t in targets:
        print(f"{t['name']:<52} {t['value']:.2f} (<= {TARGET_RATIO}) {'PASS' if t['pass'] else 'FAIL'}")
    print(f"{floor_info['name']:<52} {floor_info['value']:.2f} (info: no VACUUM here can go below it)")
    report = {
        "benchmark": "vacuum_s3",
        "machine": h.machine_info(("deltalake", "pyarrow", "s3fs", "moto")),
        "table": info,
        "reps": args.reps,
        "runs": summary,
        "targets": targets,
        "floor": floor_info,
    }
    if not args.no_write:
        h.write_results(RESULTS, report, started)
    return 0 if all(t["pass"] for t in targets) else 2


if __name__ == "__main__":
    sys.exit(main())
