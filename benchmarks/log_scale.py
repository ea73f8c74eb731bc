"""Cost that should follow the work, not the table: planning one partition, and whole-table reads, on logs of
1M and 10M files, against delta-rs (issue 28).

Logs are generated, not written by an engine (a 10M-file log takes minutes this way): a table of N files in P
partitions (``p=p00000`` ...; N/P files each), as one commit per partition would leave it, checkpointed at version P
by pyarrow directly in delta-rs' layout (classic single-file checkpoint, row groups of 1,048,576 rows as delta-rs'
Parquet writer makes them, `add.partitionValues` a map, JSON stats), then three commits: (1) 20 new files in the
planned partition and 10 of its files removed, (2) 10 files removed from each of 5 other partitions, (3) 4 new files
in each of those 5. No data file exists: none of the operations reads one.

Per log, fresh processes, interleaved and rotated, medians of ``--reps``, the package bytecode-compiled first:
- plan: ``deltalite optimize T --where "p = 'p00042'" --dry-run --json`` (what a user and the operators' plan step
  run; 1,010 files considered) and the same for ``p = '<the last partition>'`` (its rows are last in the checkpoint:
  the worst case for a reader that cannot skip pages), against delta-rs 1.6.x ``DeltaTable(T)`` +
  ``file_uris([("p", "=", part)])`` (load the table, list that partition: the least it needs to plan);
- health: ``deltalite health T --json`` (no delta-rs equivalent; checked: the file count);
- maintain: ``deltalite maintain T --dry-run --json`` (the maintenance planner on the whole table: every partition
  is made of fragments, so every partition is planned; no delta-rs equivalent; checked: the health's file count);
- describe: ``deltalite describe T --json`` against ``process_cost.py``'s delta-rs describe (``DeltaTable(T)`` +
  ``get_add_actions(flatten=False)``, sizes summed); checked: files and bytes agree.
Whole-process wall and peak RSS (``wait4``), and the in-process call each child reports.

Targets (issue 28): plan on the 1M log <= 300 MiB and <= 1.0 s, on the 10M log <= 400 MiB, growth 1M -> 10M <= 1.3x;
health and maintain --dry-run of the 10M log <= 2.5 GiB and <= 60 s; describe <= 1.0x delta-rs' memory and time.

Run: ``.venv/bin/python benchmarks/log_scale.py`` (``--reps N``, ``--reps-10m N``, ``--sizes 100k 1M 10M``,
``--only plan health maintain describe``, ``--regenerate``, ``--no-write``).
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import _harness as h

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results" / "log_scale.json"
CACHE = Path(tempfile.gettempdir()) / "deltalite-bench"
LOG_FORMAT = 1
SIZES = {"100k": (100_000, 100), "1M": (1_000_000, 1_000), "10M": (10_000_000, 10_000)}
ROW_GROUP_ROWS = 1_048_576  # delta-rs' (arrow-rs') default max_row_group_size
CHUNK_ROWS = 262_144
TARGET_PARTITION = 42
CHILD_TIMEOUT_S = 3600
TARGET_RSS_1M_MB = 300
TARGET_WALL_1M_S = 1.0
TARGET_RSS_10M_MB = 400
TARGET_GROWTH = 1.3
TARGET_HEALTH_10M_MB = 2560
TARGET_HEALTH_10M_S = 60
TARGET_DESCRIBE = 1.0
CODE_UNDER_TEST = ("engine/**/*.py", "maintenance/**/*.py", "cli/*.py", "table.py")
SCHEMA_STRING = json.dumps(
    {
        "type": "struct",
        "fields": [
            {"name": "id", "type": "long", "nullable": True, "metadata": {}},
            {"name": "value", "type": "double", "nullable": True, "metadata": {}},
            {"name": "name", "type": "string", "nullable": True, "metadata": {}},
            {"name": "p", "type": "string", "nullable": True, "metadata": {}},
        ],
    }
)
BASE_TS = 1_700_000_000_000

# process_cost's runner (the `deltalite` command's `console_main`), reporting a few figures of the document: a health
# document of 10,000 partitions written whole to stderr would fill the pipe the parent reads only after the child exits
RUNNER = """
import contextlib, io, json, sys, time
t0 = time.perf_counter()
from airflow_provider_deltalite.cli import console_run
from airflow_provider_deltalite.cli.startup import end_process
t1 = time.perf_counter()
out = io.StringIO()
with contextlib.redirect_stdout(out):
    code, engine_only = console_run(sys.argv[1:])
t2 = time.perf_counter()
doc = json.loads(out.getvalue())
keep = ("files", "numFiles", "sizeInBytes", "totalConsideredFiles", "numBins", "version")
summary = {k: doc[k] for k in keep if k in doc}
if "healthBefore" in doc:  # maintain: the health's file count and the plan's total
    summary.update(files=doc["healthBefore"]["files"], planned=doc["plan"]["total"])
sys.stderr.write(json.dumps({"import_s": t1 - t0, "call_s": t2 - t1, "code": code, "doc": summary}) + "\\n")
if engine_only:  # as `console_main` ends the process
    end_process(code)
"""

DELTARS_PLAN = """
import json, sys, time
t0 = time.perf_counter()
import deltalake
t1 = time.perf_counter()
path, part = sys.argv[1:]
files = deltalake.DeltaTable(path).file_uris([("p", "=", part)])
t2 = time.perf_counter()
sys.stderr.write(json.dumps({"import_s": t1 - t0, "call_s": t2 - t1, "code": 0,
                             "doc": {"files": len(files), "paths_hash": hash(frozenset(files)) & 0xFFFFFFFF}}) + "\\n")
"""


def part_name(k: int) -> str:
    return f"p{k:05d}"


def generate_log_child(dest: str, n_files: int, n_parts: int) -> dict[str, Any]:
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    smap = pa.map_(pa.string(), pa.string())
    add_t = pa.struct(
        [
            ("path", pa.string()),
            ("partitionValues", smap),
            ("size", pa.int64()),
            ("modificationTime", pa.int64()),
            ("dataChange", pa.bool_()),
            ("stats", pa.string()),
            ("tags", smap),
        ]
    )
    remove_t = pa.struct(
        [
            ("path", pa.string()),
            ("deletionTimestamp", pa.int64()),
            ("dataChange", pa.bool_()),
            ("extendedFileMetadata", pa.bool_()),
            ("partitionValues", smap),
            ("size", pa.int64()),
        ]
    )
    meta_t = pa.struct(
        [
            ("id", pa.string()),
            ("name", pa.string()),
            ("description", pa.string()),
            ("format", pa.struct([("provider", pa.string()), ("options", smap)])),
            ("schemaString", pa.string()),
            ("partitionColumns", pa.list_(pa.string())),
            ("createdTime", pa.int64()),
            ("configuration", smap),
        ]
    )
    proto_t = pa.struct([("minReaderVersion", pa.int32()), ("minWriterVersion", pa.int32())])
    txn_t = pa.struct([("appId", pa.string()), ("version", pa.int64()), ("lastUpdated", pa.int64())])
    schema = pa.schema(
        [("protocol", proto_t), ("metaData", meta_t), ("txn", txn_t), ("add", add_t), ("remove", remove_t)]
    )
    log = Path(dest) / "_delta_log"
    log.mkdir(parents=True)
    version = n_parts  # one commit per partition before the checkpoint (versions 0 .. n_parts - 1), then 1 more
    per_part = n_files // n_parts
    meta = {
        "id": "7d2b9d0e-2c1a-4f0e-9b43-1c0ef0a1d428",
        "name": None,
        "description": None,
        "format": {"provider": "parquet", "options": []},
        "schemaString": SCHEMA_STRING,
        "partitionColumns": ["p"],
        "createdTime": BASE_TS,
        "configuration": [],
    }
    path = log / f"{version:020d}.checkpoint.parquet"
    rng = np.random.default_rng(28)
    with pq.ParquetWriter(path, schema, compression="snappy") as writer:
        head = {
            "protocol": pa.array([{"minReaderVersion": 1, "minWriterVersion": 2}, None], proto_t),
            "metaData": pa.array([None, meta], meta_t),
            "txn": pa.nulls(2, txn_t),
            "add": pa.nulls(2, add_t),
            "remove": pa.nulls(2, remove_t),
        }
        chunks = [pa.table(head, schema=schema)]
        for start in range(0, n_files, CHUNK_ROWS):
            n = min(CHUNK_ROWS, n_files - start)
            ids = np.arange(start, start + n)
            parts = ids // per_part  # rows in commit order: a partition's files together
            paths = [
                f"p={part_name(p)}/part-{i:08d}-{i * 7919 % 1000003:07x}.snappy.parquet"
                for i, p in zip(ids.tolist(), parts.tolist())
            ]
            records = rng.integers(1_000, 50_000, n)
            stats = [
                f'{{"numRecords":{r},"minValues":{{"id":{i},"value":-{i % 997}.5,"name":"name_{i % 50000:06d}"}},'
                f'"maxValues":{{"id":{i + r},"value":{i % 991}.25,"name":"name_{50000 + i % 50000:06d}"}},'
                f'"nullCount":{{"id":0,"value":{i % 7},"name":{i % 11}}}}}'
                for i, r in zip(ids.tolist(), records.tolist())
            ]
            pv = pa.MapArray.from_arrays(
                pa.array(np.arange(n + 1, dtype=np.int32)),
                pa.array(["p"] * n),
                pa.array([part_name(p) for p in parts.tolist()]),
            )
            adds = pa.StructArray.from_arrays(
                [
                    pa.array(paths),
                    pv.cast(smap),
                    pa.array(rng.integers(100_000, 16_000_000, n), pa.int64()),
                    pa.array(np.full(n, BASE_TS, dtype=np.int64)),
                    pa.array(np.ones(n, dtype=bool)),
                    pa.array(stats),
                    pa.nulls(n, smap),
                ],
                fields=list(add_t),
            )
            cols = {"protocol": pa.nulls(n, proto_t), "metaData": pa.nulls(n, meta_t), "txn": pa.nulls(n, txn_t)}
            cols["add"] = adds
            cols["remove"] = pa.nulls(n, remove_t)
            chunks.append(pa.table(cols, schema=schema))
            rows = sum(c.num_rows for c in chunks)
            if rows >= ROW_GROUP_ROWS:
                whole = pa.concat_tables(chunks)
                writer.write_table(whole.slice(0, ROW_GROUP_ROWS), row_group_size=ROW_GROUP_ROWS)
                chunks = [whole.slice(ROW_GROUP_ROWS)]
        rest = pa.concat_tables(chunks)
        if rest.num_rows:
            writer.write_table(rest, row_group_size=ROW_GROUP_ROWS)
    (log / "_last_checkpoint").write_text(json.dumps({"version": version, "size": n_files + 2}) + "\n")

    def file_of(i: int) -> str:
        return f"p={part_name(i // per_part)}/part-{i:08d}-{i * 7919 % 1000003:07x}.snappy.parquet"

    def add(path: str, part: str, ts: int) -> dict[str, Any]:
        stats = '{"numRecords":10,"minValues":{"id":1},"maxValues":{"id":10},"nullCount":{"id":0}}'
        return {
            "add": {
                "path": path,
                "partitionValues": {"p": part},
                "size": 1_000_000,
                "modificationTime": ts,
                "dataChange": True,
                "stats": stats,
            }
        }

    def remove(i: int, ts: int) -> dict[str, Any]:
        return {
            "remove": {
                "path": file_of(i),
                "deletionTimestamp": ts,
                "dataChange": True,
                "extendedFileMetadata": True,
                "partitionValues": {"p": part_name(i // per_part)},
                "size": 1,
            }
        }

    target = TARGET_PARTITION
    others = [(target + 1 + 97 * k) % n_parts for k in range(5)]
    commits: list[list[dict[str, Any]]] = [
        [add(f"p={part_name(target)}/new-{k:02d}.parquet", part_name(target), BASE_TS + 1) for k in range(20)]
        + [remove(target * per_part + 3 * k, BASE_TS + 1) for k in range(10)],
        [remove(o * per_part + k, BASE_TS + 2) for o in others for k in range(10)],
        [add(f"p={part_name(o)}/new-{k:02d}.parquet", part_name(o), BASE_TS + 3) for o in others for k in range(4)],
    ]
    for offset, actions in enumerate(commits, start=1):
        info = {"commitInfo": {"timestamp": BASE_TS + offset, "operation": "WRITE", "operationParameters": {}}}
        lines = [json.dumps(a, separators=(",", ":")) for a in [info, *actions]]
        (log / f"{version + offset:020d}.json").write_text("\n".join(lines) + "\n")
    return {"files": n_files - 10 + 20 - 50 + 20, "version": version + 3, "partition_files": per_part + 10}


def prepare_log(label: str, regenerate: bool) -> tuple[Path, dict[str, Any], str]:
    n_files, n_parts = SIZES[label]
    root = CACHE / f"plan-partition-{label}-f{LOG_FORMAT}"
    table = root / "table"
    cached = h.cached_info(root, regenerate)
    if cached is not None:
        return table, cached, "cached"
    shutil.rmtree(root, ignore_errors=True)
    start = time.perf_counter()
    gen, err = h.run_child(__file__, ["--generate-log", str(table), str(n_files), str(n_parts)], CHILD_TIMEOUT_S)
    if gen is None:
        raise SystemExit(f"generating the {label} log failed: {err}")
    info = {**gen, "path": str(table), "generated_in_s": round(time.perf_counter() - start, 1)}
    (root / "info.json").write_text(json.dumps(info, indent=2) + "\n")
    return table, info, f"generated in {info['generated_in_s']}s"


def _configs(table: Path, info: dict[str, Any], only: list[str]) -> dict[str, tuple[list[str], Any]]:
    """Each configuration's argv and the check of what it printed (an error text, or None)."""
    pc = h.load_benchmark("process_cost")
    runner = [sys.executable, "-c", RUNNER]
    n_parts = SIZES[info["label"]][1]
    first, last = part_name(TARGET_PARTITION), part_name(n_parts - 1)
    per_part = info["partition_files"] - 10

    def considered(expected: int) -> Any:
        return lambda doc: None if doc.get("totalConsideredFiles") == expected else f"planned {doc}"

    def listed(expected: int) -> Any:
        return lambda doc: None if doc.get("files") == expected else f"listed {doc}"

    def counted(doc: dict[str, Any]) -> str | None:
        seen = doc.get("files", doc.get("numFiles"))
        return None if seen == info["files"] else f"saw {seen} files, expected {info['files']}"

    configs: dict[str, tuple[list[str], Any]] = {}
    if "plan" in only:
        where = [f"p = '{first}'", f"p = '{last}'"]
        configs["plan deltalite"] = (
            [*runner, "optimize", str(table), "--where", where[0], "--dry-run", "--json"],
            considered(info["partition_files"]),
        )
        configs["plan delta-rs"] = (
            [sys.executable, "-c", DELTARS_PLAN, str(table), first],
            listed(info["partition_files"]),
        )
        configs["plan-last deltalite"] = (
            [*runner, "optimize", str(table), "--where", where[1], "--dry-run", "--json"],
            considered(per_part),
        )
        configs["plan-last delta-rs"] = ([sys.executable, "-c", DELTARS_PLAN, str(table), last], listed(per_part))
    if "health" in only:
        configs["health deltalite"] = ([*runner, "health", str(table), "--json"], counted)
    if "maintain" in only:
        configs["maintain deltalite"] = ([*runner, "maintain", str(table), "--dry-run", "--json"], counted)
    if "describe" in only:
        configs["describe deltalite"] = ([*runner, "describe", "--json", str(table)], counted)
        configs["describe delta-rs"] = ([sys.executable, "-c", pc.DELTARS_DESCRIBE, str(table)], counted)
    return configs


def bench(label: str, table: Path, info: dict[str, Any], reps: int, only: list[str]) -> dict[str, Any]:
    pc = h.load_benchmark("process_cost")
    configs = _configs(table, {**info, "label": label}, only)
    runs: dict[str, list[dict[str, Any]]] = {c: [] for c in configs}
    for rep in range(reps):
        for config in h.rotated(list(configs), rep):
            argv, check = configs[config]
            r = pc.run_process(argv, pc.child_env())
            if "error" not in r:
                problem = check(r["doc"])
                if problem:
                    r["error"] = problem
            runs[config].append(r)
            pc.show(label, config, rep, r)
    summary = {c: pc.summarise(rs) for c, rs in runs.items()}
    dl, rs = summary.get("describe deltalite", {}), summary.get("describe delta-rs", {})
    if dl.get("ok") and rs.get("ok"):
        a, b = dl["runs"][0]["doc"], rs["runs"][0]["doc"]
        if a["sizeInBytes"] != b["sizeInBytes"]:
            dl["ok"], dl["error"] = False, f"sizeInBytes {a['sizeInBytes']} vs delta-rs {b['sizeInBytes']}"
    return summary


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "--generate-log":
        print(json.dumps(generate_log_child(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))))
        return 0
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reps", type=int, default=3)
    # a whole-table run of the 10M log takes minutes (delta-rs' load alone, half a minute): fewer repetitions there
    parser.add_argument("--reps-10m", type=int, default=None, help="repetitions on the 10M log (default: --reps)")
    parser.add_argument("--sizes", nargs="+", default=["1M", "10M"], choices=list(SIZES))
    parser.add_argument(
        "--only",
        nargs="+",
        default=["plan", "health", "maintain", "describe"],
        choices=["plan", "health", "maintain", "describe"],
    )
    parser.add_argument("--regenerate", action="store_true")
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args()
    started = time.perf_counter()
    h.compile_bytecode()
    pc = h.load_benchmark("process_cost")
    report: dict[str, Any] = {"machine": h.machine_info(), "code": h.code_under_test(CODE_UNDER_TEST), "logs": {}}
    summaries: dict[str, dict[str, Any]] = {}
    for label in args.sizes:
        table, info, how = prepare_log(label, args.regenerate)
        print(f"{label}: {info['files']:,} files, version {info['version']} ({how})", flush=True)
        reps = args.reps_10m if label == "10M" and args.reps_10m is not None else args.reps
        summaries[label] = bench(label, table, info, reps, args.only)
        report["logs"][label] = {"info": info, "summary": summaries[label]}
        pc.print_rows(f"the {label} log (one partition: {info['partition_files']} files)", summaries[label])
    targets = []

    def med(label: str, config: str, key: str) -> float | None:
        return summaries.get(label, {}).get(config, {}).get(key)

    rss, wall = "process_peak_rss_mb", "process_wall_s"
    for config in ("plan deltalite", "plan-last deltalite"):
        if med("1M", config, rss) is not None:
            targets.append(h.target(f"1M {config}: peak RSS MiB", med("1M", config, rss), TARGET_RSS_1M_MB))
            targets.append(h.target(f"1M {config}: wall s", med("1M", config, wall), TARGET_WALL_1M_S))
        if med("10M", config, rss) is not None:
            targets.append(h.target(f"10M {config}: peak RSS MiB", med("10M", config, rss), TARGET_RSS_10M_MB))
        growth = h.ratio(med("10M", config, rss), med("1M", config, rss))
        if growth is not None:
            targets.append(h.target(f"{config}: RSS growth 1M -> 10M", growth, TARGET_GROWTH))
    for what in ("health", "maintain"):
        config = f"{what} deltalite"
        if med("10M", config, rss) is not None:
            targets.append(h.target(f"10M {what}: peak RSS MiB", med("10M", config, rss), TARGET_HEALTH_10M_MB))
            targets.append(h.target(f"10M {what}: wall s", med("10M", config, wall), TARGET_HEALTH_10M_S))
    for label in args.sizes:
        for key, what in ((rss, "memory"), (wall, "time")):
            r = h.ratio(med(label, "describe deltalite", key), med(label, "describe delta-rs", key))
            if r is not None:
                targets.append(h.target(f"{label} describe: {what} / delta-rs", r, TARGET_DESCRIBE))
    report["targets"] = targets
    h.print_targets(targets)
    return h.finish(report, targets, RESULTS, started, not args.no_write)


if __name__ == "__main__":
    raise SystemExit(main())
