"""VACUUM from an inventory (`maintenance/vacuum/inventory.py`): inventories the tests write (CSV, Parquet, an S3
Inventory report on moto S3), checked against delta-rs 1.6.3's own VACUUM of the same table and against what the
tests compute from the table's files; a stale inventory (a listed file already gone, files written after it); the
safety rules (outside the root, hidden names, the horizon, live files); bad inventories (one line, exit 2, nothing
deleted)."""

from __future__ import annotations

import gzip
import json
import os
import time
from pathlib import Path
from typing import Any
from urllib.parse import quote_plus

import deltalake
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import s3fs

from airflow_provider_deltalite import DeltaTable
from airflow_provider_deltalite.engine.errors import InvalidArgument, InvalidInventory
from airflow_provider_deltalite.maintenance.vacuum import vacuum
from tests.helpers import changed_entries, cli_failure, tree_state
from tests.moto_server import deltars_s3_options

DAY_MS = 24 * 3_600_000
OLD_MS = int(time.time() * 1000) - 30 * DAY_MS


def _table(path: Path) -> Path:
    """Three overwrites (one live file, two removed), an unreferenced file, hidden files; everything 30 days old."""
    for k in range(3):
        deltalake.write_deltalake(str(path), pa.table({"id": [k], "p": ["a"]}), mode="overwrite", partition_by=["p"])
    (path / "p=a" / "orphan.parquet").write_bytes(b"orphan")
    (path / "_tmp").mkdir()
    (path / "_tmp" / "hidden.parquet").write_bytes(b"hidden")
    (path / "p=a" / ".hidden.crc").write_bytes(b"crc")
    for log in (path / "_delta_log").glob("*.json"):
        actions = [json.loads(line) for line in log.read_text().splitlines() if line.strip()]
        for a in actions:
            if "remove" in a:
                a["remove"]["deletionTimestamp"] = OLD_MS
            if "commitInfo" in a:
                a["commitInfo"]["timestamp"] = OLD_MS
        log.write_text("".join(json.dumps(a) + "\n" for a in actions))
    for dirpath, dirs, names in os.walk(path):
        for name in dirs + names:
            os.utime(Path(dirpath) / name, ns=(OLD_MS * 1_000_000,) * 2)
    return path


def _inventory_rows(root: Path, *, uri: bool = True) -> list[dict[str, Any]]:
    """Every file and directory under ``root`` as Delta's inventory rows (what a storage inventory would hold)."""
    rows = []
    for dirpath, dirs, names in os.walk(root):
        for name in dirs + names:
            full = Path(dirpath) / name
            st = full.stat()
            rows.append(
                {
                    "path": f"file://{full}" if uri else str(full),
                    "length": 0 if full.is_dir() else st.st_size,
                    "isDir": full.is_dir(),
                    "modificationTime": st.st_mtime_ns // 1_000_000,
                }
            )
    return rows


def _write(rows: list[dict[str, Any]], dest: Path) -> Path:
    schema = pa.schema(
        [("path", pa.string()), ("length", pa.int64()), ("isDir", pa.bool_()), ("modificationTime", pa.int64())]
    )
    table = pa.Table.from_pylist(rows, schema=schema)
    if dest.suffix == ".parquet":
        pq.write_table(table, dest)
    else:
        import pyarrow.csv as pcsv

        pcsv.write_csv(table, dest)
    return dest


def _data_files(root: Path) -> set[str]:
    return {
        str((Path(d) / n).relative_to(root))
        for d, _, names in os.walk(root)
        for n in names
        if not str(Path(d).relative_to(root)).startswith("_delta_log")
    }


def test_a_complete_inventory_deletes_what_delta_rs_deletes(tmp_path: Path) -> None:
    path = _table(tmp_path / "t")
    # delta-rs with the default 7-day retention, minus the hidden file it deletes and the reference keeps
    # (`isHiddenDirectory` on every name; delta-rs deletes `p=a/.hidden.crc`)
    deltars = set(deltalake.DeltaTable(str(path)).vacuum(dry_run=True, full=True))
    expected = deltars - {"p=a/.hidden.crc"}
    assert len(expected) == 3 and "p=a/orphan.parquet" in expected  # two removed files and the orphan
    outside = tmp_path / "t2"  # shares the root's name as a prefix: not under the root
    outside.mkdir()
    (outside / "x.parquet").write_bytes(b"x")
    rows = _inventory_rows(path) + _inventory_rows(outside) + _inventory_rows(tmp_path / "t" / "_delta_log", uri=False)
    rows.append({"path": f"{path}/../t2/x.parquet", "length": 1, "isDir": False, "modificationTime": OLD_MS})
    csv = _write(rows, tmp_path / "inventory.csv")

    dry = vacuum(DeltaTable(str(path)), dry_run=True, inventory=str(csv))
    assert {f["path"] for f in dry.files_to_delete or []} == expected
    before = _data_files(path)
    stats = DeltaTable(str(path)).vacuum(inventory=str(_write(rows, tmp_path / "inventory.parquet")))
    assert (stats.objects_deleted, stats.files_already_gone) == (3, 0)
    assert _data_files(path) == before - expected
    assert (outside / "x.parquet").exists() and (path / "_tmp" / "hidden.parquet").exists()
    assert deltalake.DeltaTable(str(path)).to_pyarrow_table().to_pydict() == {"id": [2], "p": ["a"]}


def test_a_stale_inventory_deletes_only_what_is_safe(tmp_path: Path) -> None:
    path = _table(tmp_path / "t")
    unreferenced = set(deltalake.DeltaTable(str(path)).vacuum(dry_run=True, full=True))
    removed = sorted(unreferenced - {"p=a/orphan.parquet", "p=a/.hidden.crc"})
    assert len(removed) == 2
    rows = _inventory_rows(path)
    young = {
        "path": f"file://{path}/p=a/young.parquet",
        "length": 5,
        "isDir": False,
        "modificationTime": int(time.time() * 1000),
    }
    csv = _write([*rows, young], tmp_path / "inventory.csv")
    (path / "p=a" / "young.parquet").write_bytes(b"young")  # young by the inventory: kept (the horizon)
    (path / "p=a" / "orphan.parquet").unlink()  # listed, already gone: deleted idempotently, counted
    late = path / "p=a" / "late-orphan.parquet"  # written after the inventory: not a candidate
    late.write_bytes(b"late")
    os.utime(late, ns=(OLD_MS * 1_000_000,) * 2)
    # a commit after the inventory: its file is live and not in the inventory (no refusal); and a removed file the
    # inventory lists as an old orphan is live again (re-added): protected whatever the inventory says
    deltalake.write_deltalake(str(path), pa.table({"id": [9], "p": ["a"]}), mode="append", partition_by=["p"])
    version = deltalake.DeltaTable(str(path)).version() + 1
    readd = {
        "path": removed[0],
        "partitionValues": {"p": "a"},
        "size": 1,
        "modificationTime": OLD_MS,
        "dataChange": True,
    }
    commit = [{"commitInfo": {"timestamp": int(time.time() * 1000), "operation": "WRITE"}}, {"add": readd}]
    (path / "_delta_log" / f"{version:020d}.json").write_text("".join(json.dumps(a) + "\n" for a in commit))

    stats = vacuum(DeltaTable(str(path)), inventory=str(csv))
    assert stats.files_already_gone == 1
    assert stats.objects_deleted == 1  # the other removed file; the re-added one stays
    assert not (path / removed[1]).exists() and (path / removed[0]).exists()
    assert late.exists() and (path / "p=a" / "young.parquet").exists()
    live = {f.rsplit("/t/", 1)[1] for f in deltalake.DeltaTable(str(path)).file_uris()}
    assert len(live) == 3 and all((path / f).exists() for f in live)


def test_bad_inventories_are_one_line_exit_2_and_delete_nothing(tmp_path: Path) -> None:
    path = _table(tmp_path / "t")
    state = tree_state(path)
    no_column = tmp_path / "no-column.csv"
    no_column.write_text("path,length,isDir\nfile:///x,1,false\n")
    wrong_type = tmp_path / "wrong-type.csv"
    wrong_type.write_text(f"path,length,isDir,modificationTime\nfile://{path}/p=a/orphan.parquet,big,false,1\n")
    garbage = tmp_path / "garbage.parquet"
    garbage.write_bytes(b"not parquet at all")
    line = cli_failure("vacuum", path, "--inventory", no_column)
    assert "no column modificationTime" in line and str(path) in line, line
    line = cli_failure("vacuum", path, "--inventory", wrong_type)
    assert "column length must be int64, got 'big'" in line, line
    line = cli_failure("vacuum", path, "--inventory", garbage)
    assert "cannot read the inventory" in line, line
    assert tree_state(path) == state, changed_entries(state, tree_state(path))
    with pytest.raises(InvalidInventory, match="cannot read the inventory"):
        vacuum(DeltaTable(str(path)), inventory=str(tmp_path / "absent.csv"))
    with pytest.raises(InvalidInventory, match="cannot tell the format"):
        vacuum(DeltaTable(str(path)), inventory=str(tmp_path / "inventory.txt"))
    with pytest.raises(InvalidArgument, match="cannot be used with mode 'lite'"):
        vacuum(DeltaTable(str(path)), inventory=str(no_column), mode="lite")
    assert tree_state(path) == state, changed_entries(state, tree_state(path))


@pytest.mark.s3
@pytest.mark.parametrize("fmt", ["csv", "parquet"])
def test_an_s3_inventory_report_on_moto(s3_endpoint: dict[str, Any], tmp_path: Path, fmt: str) -> None:
    fs = s3fs.S3FileSystem(**s3_endpoint)
    bucket = f"inv-{fmt}"
    fs.call_s3("create_bucket", Bucket=bucket)
    local = _table(tmp_path / "t")
    (local / "p=a" / "a b+c.parquet").write_bytes(b"odd name")  # S3 Inventory CSV keys are URL-encoded
    fs.put(str(local), f"{bucket}/t", recursive=True)
    uri = f"s3://{bucket}/t"
    live = {
        f.rsplit("/t/", 1)[1]
        for f in deltalake.DeltaTable(uri, storage_options=deltars_s3_options(s3_endpoint)).file_uris()
    }
    keys = [k.split("/", 1)[1] for k in fs.find(f"{bucket}/t")]
    # the oracle: with retention 0 every unreferenced, visible data file goes
    rels = [k[len("t/") :] for k in keys]
    expected = {r for r in rels if not any(part.startswith(("_", ".")) for part in r.split("/"))} - live
    assert len(expected) == 4 and {"p=a/orphan.parquet", "p=a/a b+c.parquet"} <= expected
    stamp = "2020-01-01T00:00:00.000Z"
    rows = [(bucket, k, fs.size(f"{bucket}/{k}"), stamp) for k in keys] + [(bucket, "elsewhere/x.parquet", 1, stamp)]
    if fmt == "csv":
        body = "".join(f'"{b}","{quote_plus(k, safe="/")}","{s}","{m}"\n' for b, k, s, m in rows).encode()
        data_key, data = "inv/data/part-0.csv.gz", gzip.compress(body)
        schema = "Bucket, Key, Size, LastModifiedDate"
    else:
        table = pa.table(
            {
                "bucket": [r[0] for r in rows],
                "key": [r[1] for r in rows],
                "size": pa.array([r[2] for r in rows], pa.int64()),
                "last_modified_date": pa.array([1577836800000] * len(rows), pa.timestamp("ms")),
            }
        )
        sink = pa.BufferOutputStream()
        pq.write_table(table, sink)
        data_key, data, schema = "inv/data/part-0.parquet", sink.getvalue().to_pybytes(), "message s3.inventory {}"
    fs.pipe(f"{bucket}/{data_key}", data)
    manifest = {
        "sourceBucket": bucket,
        "destinationBucket": f"arn:aws:s3:::{bucket}",
        "version": "2016-11-30",
        "fileFormat": fmt.upper() if fmt == "csv" else "Parquet",
        "fileSchema": schema,
        "files": [{"key": data_key, "size": len(data), "MD5checksum": "0"}],
    }
    fs.pipe(f"{bucket}/inv/manifest.json", json.dumps(manifest).encode())
    stats = vacuum(
        DeltaTable(uri, s3_endpoint),
        inventory=f"s3://{bucket}/inv/manifest.json",
        retention_hours=0,
        enforce_retention_duration=False,
    )
    assert stats.objects_deleted == len(expected)
    fs.invalidate_cache()
    left = {k.split("/", 2)[2] for k in fs.find(f"{bucket}/t")}
    assert not (left & expected) and live <= left


def test_inventory_options_from_text_and_json() -> None:
    from airflow_provider_deltalite.maintenance.options import VacuumOptions

    opts = VacuumOptions.from_text({"inventory": " s3://b/inv/manifest.json ", "inventory_format": "S3-Inventory"})
    assert (opts.inventory, opts.inventory_format) == ("s3://b/inv/manifest.json", "s3-inventory")
    assert VacuumOptions.from_json(opts.to_json()) == opts
    assert VacuumOptions.from_text({"inventory": "None", "inventory_format": ""}).inventory is None
    with pytest.raises(InvalidArgument, match="inventory_format must be 'csv' or 'parquet' or 's3-inventory'"):
        VacuumOptions(inventory="x.csv", inventory_format="orc")
