"""Benchmark: the cost of one log-tailing poll on a 10-commit and a 20,000-commit table, and detection latency.

Tables (generated once, cached under ``$TMPDIR/deltalite-bench/``): version 0 creates the table (protocol 1/2,
metaData with columns ``id`` long and ``v`` double) and adds one file; every later version is a blind append of one
file. The commit JSON is written directly (the engine's transaction would take minutes for 20,000 commits), every
add points at a real 100-row Parquet file with exact stats, and a checkpoint of the newest version is written by the
engine at the end, so loading the snapshot (deltalite) and opening the table (delta-rs 1.6.3) both check that the
log is a valid Delta log.

Poll cost: ``list_changes(storage, since)`` on an open table (what a sensor, trigger or ``deltalite watch`` does
every interval), for "nothing new" (``since`` = the newest version) and "one new commit" (``since`` = newest - 1),
timed with ``perf_counter_ns``, the four cases interleaved, median of ``--reps`` calls each. For reference (not a
target) the table also shows what one ``list_log(storage, since + 1)`` -- a listing from a name -- costs on each
table: on a local disk a listing reads the whole directory, which is why a poll reads the next commits by name.

Latency: a copy of the 10-commit table gets ``--commits`` appends through deltalite's transaction, each after a
random pause in [0, interval) so that commits land at every phase of the poll cycle; latency = the moment the
consumer sees the version minus the commit file's mtime (written just before the file gets its final name, so the
figure includes the commit's own fsync and is conservative).
  (a) engine: `poll_changes` (the loop behind ``deltalite watch``) in a thread, at ``--interval`` seconds;
  (b) trigger: ``NewVersionTrigger(table_uri, since=V, poll_interval=S).run()`` (the deferrable sensor's
      and the AssetWatcher's trigger), one event per commit, run on an asyncio loop in a thread.

Targets: poll on 20,000 commits <= 1.2x the poll on 10 commits (both cases); detection latency <= interval + 1 s
(every commit, both consumers).

Run:  .venv/bin/python benchmarks/tail_poll.py [--reps 3000] [--interval 1.0] [--commits 8] [--regenerate]
Results: printed table, and benchmarks/results/tail_poll.json.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import shutil
import statistics
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import _harness as h

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # run from anywhere: the package of this checkout

from airflow_provider_deltalite import DeltaTable  # noqa: E402
from airflow_provider_deltalite.engine.checkpoint_writer import write_checkpoint  # noqa: E402
from airflow_provider_deltalite.engine.data_file_writer import WriterOptions  # noqa: E402
from airflow_provider_deltalite.engine.log_segment import list_log  # noqa: E402
from airflow_provider_deltalite.engine.rewrite import TableContext, write_data_file  # noqa: E402
from airflow_provider_deltalite.engine.storage import Storage  # noqa: E402
from airflow_provider_deltalite.maintenance.changes import list_changes, poll_changes  # noqa: E402

RESULTS = HERE / "results" / "tail_poll.json"
CACHE = Path(tempfile.gettempdir()) / "deltalite-bench"
GEN_FORMAT = 1  # bump when the generator changes, to invalidate the cache
SIZES = (10, 20_000)
ROWS_PER_FILE = 100
TARGET_POLL_RATIO = 1.2
LATENCY_SLACK_S = 1.0
CODE_UNDER_TEST = (  # below airflow_provider_deltalite/
    "maintenance/changes.py",
    "maintenance/commit_kinds.py",
    "engine/log_segment.py",
    "engine/storage/table_storage.py",
    "engine/storage/s3.py",
    "engine/storage/local.py",
    "triggers/new_version.py",
    "triggers/new_data.py",
)


# -- tables ------------------------------------------------------------------------------------------------------


def _data_file() -> tuple[bytes, str]:
    """One 100-row Parquet file (reused for every add) and its stats JSON."""
    import io

    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = pa.table({"id": pa.array(range(ROWS_PER_FILE), pa.int64()), "v": pa.array([i / 8 for i in range(100)])})
    buffer = io.BytesIO()
    pq.write_table(rows, buffer)
    stats = {
        "numRecords": ROWS_PER_FILE,
        "minValues": {"id": 0, "v": 0.0},
        "maxValues": {"id": ROWS_PER_FILE - 1, "v": (ROWS_PER_FILE - 1) / 8},
        "nullCount": {"id": 0, "v": 0},
    }
    return buffer.getvalue(), json.dumps(stats, separators=(",", ":"))


def generate(path: Path, commits: int) -> dict[str, Any]:
    """Write a table of ``commits`` versions (see the module docstring); returns what was written."""
    started = time.perf_counter()
    shutil.rmtree(path, ignore_errors=True)
    log = path / "_delta_log"
    log.mkdir(parents=True)
    data, stats = _data_file()
    now = int(time.time() * 1000) - commits * 1000
    schema = {
        "type": "struct",
        "fields": [
            {"name": "id", "type": "long", "nullable": True, "metadata": {}},
            {"name": "v", "type": "double", "nullable": True, "metadata": {}},
        ],
    }
    for version in range(commits):
        name = f"part-{version:05d}-{uuid.uuid4()}-c000.snappy.parquet"
        (path / name).write_bytes(data)
        ts = now + version * 1000
        info = {
            "timestamp": ts,
            "operation": "CREATE TABLE" if version == 0 else "WRITE",
            "operationParameters": {"mode": "Append"} if version else {"partitionBy": "[]"},
            "isBlindAppend": True,
            "engineInfo": "tail_poll-benchmark",
        }
        if version:
            info["readVersion"] = version - 1
        actions: list[dict[str, Any]] = [{"commitInfo": info}]
        if version == 0:
            actions.append({"protocol": {"minReaderVersion": 1, "minWriterVersion": 2}})
            actions.append(
                {
                    "metaData": {
                        "id": str(uuid.uuid4()),
                        "format": {"provider": "parquet", "options": {}},
                        "schemaString": json.dumps(schema, separators=(",", ":")),
                        "partitionColumns": [],
                        "configuration": {},
                        "createdTime": ts,
                    }
                }
            )
        add = {"path": name, "partitionValues": {}, "size": len(data), "modificationTime": ts, "dataChange": True}
        actions.append({"add": {**add, "stats": stats}})
        body = "".join(json.dumps(a, separators=(",", ":")) + "\n" for a in actions)
        (log / f"{version:020d}.json").write_text(body)
    snapshot = DeltaTable(str(path)).snapshot()  # replays every commit: the log is valid
    assert (snapshot.version, snapshot.num_files) == (commits - 1, commits)
    write_checkpoint(snapshot)
    import deltalake

    opened = deltalake.DeltaTable(str(path))
    assert opened.version() == commits - 1 and len(opened.file_uris()) == commits
    return {"commits": commits, "files": commits, "generate_s": round(time.perf_counter() - started, 2)}


def prepare(commits: int, regenerate: bool) -> tuple[Path, dict[str, Any], str]:
    path = CACHE / f"tail-poll-{commits}-v{GEN_FORMAT}"
    marker = path / "_benchmark_input.json"  # hidden from Delta by its leading underscore
    if not regenerate and marker.exists():
        return path, json.loads(marker.read_text()), "cached"
    info = generate(path, commits)
    marker.write_text(json.dumps(info))
    return path, info, "generated"


def append_one(path: Path, start: int) -> int:
    """One blind append through deltalite's engine (a real data file, one commit); the version committed."""
    import pyarrow as pa

    table = DeltaTable(str(path))
    snapshot = table.snapshot()
    rows = pa.table({"id": pa.array(range(start, start + 10), pa.int64()), "v": pa.array([0.5] * 10)})
    add = write_data_file(TableContext.from_snapshot(snapshot), {}, [rows], WriterOptions())
    txn = table.transaction(snapshot)
    txn.add({**add, "dataChange": True})
    return txn.commit("WRITE", {"mode": "Append"}).version


# -- poll cost ---------------------------------------------------------------------------------------------------


def measure_polls(tables: dict[int, Path], reps: int) -> dict[str, Any]:
    """Median ns of one poll per (table, case), the cases interleaved against drift."""
    storages = {n: Storage(str(p)) for n, p in tables.items()}
    latest = {n: DeltaTable(str(p)).latest_version() for n, p in tables.items()}
    cases = {"nothing new": 0, "one new commit": 1}
    for n, storage in storages.items():  # correctness of what is timed, and a warm-up
        assert list_changes(storage, latest[n]).changes == ()
        (one,) = list_changes(storage, latest[n] - 1).changes
        assert (one.version, one.kind, one.added_rows) == (latest[n], "data", ROWS_PER_FILE)
    samples: dict[tuple[int, str], list[int]] = {(n, c): [] for n in tables for c in cases}
    keys = list(samples)
    clock = time.perf_counter_ns
    for rep in range(reps):
        order = keys[rep % len(keys) :] + keys[: rep % len(keys)]
        for n, case in order:
            since = latest[n] - cases[case]
            storage = storages[n]
            t0 = clock()
            list_changes(storage, since)
            samples[(n, case)].append(clock() - t0)
    listing: dict[int, list[int]] = {n: [] for n in tables}
    for _ in range(max(5, reps // 100)):
        for n, storage in storages.items():
            t0 = clock()
            list_log(storage, latest[n])
            listing[n].append(clock() - t0)
    out: dict[str, Any] = {}
    for case in cases:
        small, big = (statistics.median(samples[(n, case)]) / 1000 for n in SIZES)
        out[case] = {
            "median_us_10": round(small, 1),
            "median_us_20000": round(big, 1),
            "p90_us_10": round(_percentile(samples[(SIZES[0], case)], 0.9) / 1000, 1),
            "p90_us_20000": round(_percentile(samples[(SIZES[1], case)], 0.9) / 1000, 1),
            "ratio": round(big / small, 3),
        }
    small, big = (statistics.median(listing[n]) / 1000 for n in SIZES)
    out["reference: list_log from since+1"] = {
        "median_us_10": round(small, 1),
        "median_us_20000": round(big, 1),
        "ratio": round(big / small, 3),
        "reps": len(listing[SIZES[0]]),
    }
    return out


def _percentile(values: list[int], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


# -- latency -----------------------------------------------------------------------------------------------------


def _commit_landed_ns(path: Path, version: int) -> int:
    return (path / "_delta_log" / f"{version:020d}.json").stat().st_mtime_ns


def latency_engine(path: Path, interval: float, commits: int, rng: random.Random) -> list[float]:
    """Seconds from each commit landing to `poll_changes` yielding it."""
    storage = Storage(str(path))
    seen: dict[int, int] = {}
    arrived = threading.Condition()
    stop = threading.Event()

    class Stopped(Exception):
        pass

    def sleep(seconds: float) -> None:
        if stop.wait(seconds):
            raise Stopped  # ends the poll loop inside its sleep, as Ctrl-C ends `deltalite watch`

    def consume() -> None:
        with contextlib.suppress(Stopped):
            for changes in poll_changes(
                storage, DeltaTable(str(path)).latest_version(), interval=interval, sleep=sleep
            ):
                now = time.time_ns()
                with arrived:
                    for change in changes.changes:
                        seen.setdefault(change.version, now)
                    arrived.notify_all()

    worker = threading.Thread(target=consume, daemon=True)
    worker.start()
    latencies = []
    try:
        for i in range(commits):
            time.sleep(rng.uniform(0, interval))
            version = append_one(path, 1_000_000 + i * 10)
            with arrived:
                if not arrived.wait_for(lambda v=version: v in seen, timeout=interval + 10):
                    raise RuntimeError(f"version {version} was not seen within {interval + 10} s")
            latencies.append((seen[version] - _commit_landed_ns(path, version)) / 1e9)
    finally:
        stop.set()
        worker.join(timeout=interval + 5)
        if worker.is_alive():
            raise RuntimeError("the poll loop did not stop")
    return latencies


def latency_trigger(path: Path, interval: float, commits: int, rng: random.Random) -> list[float] | str:
    """Seconds from each commit landing to `NewVersionTrigger.run()` yielding its event; or why it cannot run."""
    os.environ.setdefault("AIRFLOW_HOME", str(CACHE / "tail-poll-airflow-home"))
    try:
        from airflow_provider_deltalite.triggers.new_version import NewVersionTrigger
    except ImportError as exc:
        return f"not available ({exc})"
    latencies = []
    for i in range(commits):
        baseline = DeltaTable(str(path)).latest_version()
        trigger = NewVersionTrigger(table_uri=str(path), since=baseline, poll_interval=interval)
        result: dict[str, Any] = {}

        async def first_event(trigger: Any = trigger, result: dict[str, Any] = result) -> None:
            async for event in trigger.run():
                result["ns"] = time.time_ns()
                result["payload"] = event.payload
                return

        runner = threading.Thread(target=asyncio.run, args=(first_event(),), daemon=True)
        runner.start()
        time.sleep(rng.uniform(0, interval))
        version = append_one(path, 2_000_000 + i * 10)
        runner.join(timeout=interval + 10)
        if "ns" not in result:
            raise RuntimeError(f"the trigger sent no event for version {version} within {interval + 10} s")
        payload = result["payload"]
        if payload.get("status") != "success" or payload.get("version") != version:
            raise RuntimeError(f"unexpected trigger event for version {version}: {payload}")
        latencies.append((result["ns"] - _commit_landed_ns(path, version)) / 1e9)
    return latencies


def _latency_summary(values: list[float] | str, interval: float) -> dict[str, Any]:
    if isinstance(values, str):
        return {"error": values}
    return {
        "interval_s": interval,
        "n": len(values),
        "median_s": round(statistics.median(values), 3),
        "max_s": round(max(values), 3),
        "all_s": [round(v, 3) for v in values],
    }


# -- report --------------------------------------------------------------------------------------------------------


def evaluate(polls: dict[str, Any], latency: dict[str, dict[str, Any]], interval: float) -> list[dict[str, Any]]:
    targets = []

    def add(name: str, value: float | None, limit: float) -> None:
        targets.append(h.target(name, value, float(f"{limit:g}")))

    for case in ("nothing new", "one new commit"):
        add(f"poll ({case}): 20,000 commits / 10 commits", polls[case]["ratio"], TARGET_POLL_RATIO)
    for consumer, result in latency.items():
        add(f"latency ({consumer}), max over commits, s", result.get("max_s"), interval + LATENCY_SLACK_S)
    return targets


def print_report(
    polls: dict[str, Any], latency: dict[str, dict[str, Any]], targets: list[dict[str, Any]], reps: int
) -> None:
    head = f"{'one poll (median of ' + str(reps) + ')':<36} {'10 commits':>12} {'20,000 commits':>15} {'ratio':>7}"
    print(head)
    print("-" * len(head))
    for case, r in polls.items():
        print(f"{case:<36} {r['median_us_10']:>9.1f} us {r['median_us_20000']:>12.1f} us {r['ratio']:>7.2f}")
    print(
        "poll = list_changes(storage, since) on an open table; the reference row is one listing from a name, which on "
        "a local disk reads the whole directory\n"
    )
    head = f"{'detection latency':<36} {'interval':>9} {'n':>3} {'median':>8} {'max':>8}"
    print(head)
    print("-" * len(head))
    for consumer, r in latency.items():
        if "error" in r:
            print(f"{consumer:<36} {r['error']}")
            continue
        print(f"{consumer:<36} {r['interval_s']:>7.2f} s {r['n']:>3} {r['median_s']:>6.3f} s {r['max_s']:>6.3f} s")
    print("latency = seen by the consumer - commit file mtime (includes the commit's fsync)\n")
    h.print_targets(targets, width=58, value_format="{:.3f}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--reps", type=int, default=3000, help="polls timed per table and case")
    parser.add_argument("--interval", type=float, default=1.0, help="poll interval of the latency runs (s)")
    parser.add_argument("--commits", type=int, default=8, help="commits per latency run")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--regenerate", action="store_true", help="rebuild the generated tables")
    parser.add_argument("--no-write", action="store_true", help="do not write the JSON results file")
    args = parser.parse_args()

    started = time.perf_counter()
    code_start = h.code_hashes(CODE_UNDER_TEST)
    CACHE.mkdir(parents=True, exist_ok=True)
    tables: dict[int, Path] = {}
    inputs: dict[str, Any] = {}
    for n in SIZES:
        path, info, note = prepare(n, args.regenerate)
        tables[n] = path
        inputs[str(n)] = info
        print(f"table: {note} -> {path} ({info['commits']:,} commits)", flush=True)

    polls = measure_polls(tables, args.reps)

    rng = random.Random(args.seed)
    work = CACHE / f"tail-poll-latency-{os.getpid()}"
    latency: dict[str, dict[str, Any]] = {}
    try:
        for consumer, run in (("engine poll loop", latency_engine), ("NewVersionTrigger.run()", latency_trigger)):
            shutil.rmtree(work, ignore_errors=True)
            shutil.copytree(tables[SIZES[0]], work)
            latency[consumer] = _latency_summary(run(work, args.interval, args.commits, rng), args.interval)
            print(f"latency: {consumer} done", flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)

    targets = evaluate(polls, latency, args.interval)
    code_end = h.code_hashes(CODE_UNDER_TEST)
    changed = sorted(f for f in code_start.keys() | code_end.keys() if code_start.get(f) != code_end.get(f))
    if changed:
        print(f"\nWARNING: the code under test changed while the benchmark ran ({', '.join(changed)}); rerun")
    print()
    print_report(polls, latency, targets, args.reps)
    report = {
        "benchmark": "tail_poll",
        "description": (
            "one log-tailing poll (list_changes) on a 10-commit and a 20,000-commit local table, nothing new and one "
            "new commit; detection latency from a commit landing to the engine poll loop and NewVersionTrigger"
        ),
        "targets": targets,
        "reps": args.reps,
        "interval_s": args.interval,
        "machine": h.machine_info(("pyarrow", "deltalake", "numpy", "apache-airflow")),
        "code_under_test": {"at_start": code_start, "at_end": code_end, "changed_files": changed},
        "input": inputs,
        "poll": polls,
        "latency": latency,
        "total_runtime_s": round(time.perf_counter() - started, 1),
    }
    return h.finish(report, targets, RESULTS, started, write=not args.no_write)


if __name__ == "__main__":
    raise SystemExit(main())
