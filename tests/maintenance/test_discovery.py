"""`find_delta_tables`: the directories under a prefix that hold a ``_delta_log/``, on local disk and on moto S3.

The lake is laid out by hand and the expected tables are written down here: tables at depths 0 to 4, a table inside
a table (not a table of the lake), a hidden directory, a directory of plain files, a file named like a table's log.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import deltalake
import pyarrow as pa
import pytest
import s3fs

from airflow_provider_deltalite.engine.errors import InvalidArgument
from airflow_provider_deltalite.maintenance.discovery import find_delta_tables

LOG = '{"commitInfo":{}}\n'
# relative path -> content of every file of the lake
LAKE = {
    "events/_delta_log/00000000000000000000.json": LOG,
    "events/date=2026-11-01/part-0.parquet": "x",
    "events/nested/_delta_log/00000000000000000000.json": LOG,  # inside a table: not listed
    "sales/orders/_delta_log/00000000000000000000.json": LOG,
    "sales/refunds/_delta_log/00000000000000000000.json": LOG,
    "sales/readme.txt": "x",
    "a/b/c/_delta_log/00000000000000000000.json": LOG,  # depth 3
    "a/b/c/d/_delta_log/00000000000000000000.json": LOG,  # inside a/b/c
    "x/y/z/w/_delta_log/00000000000000000000.json": LOG,  # depth 4
    "_staging/t/_delta_log/00000000000000000000.json": LOG,  # hidden
    ".trash/t/_delta_log/00000000000000000000.json": LOG,  # hidden
    "notes/_delta_log": "a file, not a directory",
    "notes/more/text.txt": "x",
}
AT_DEPTH_3 = ["a/b/c", "events", "sales/orders", "sales/refunds"]


def _write_local(root: Path) -> None:
    for name, text in LAKE.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def test_local_lake(tmp_path: Path) -> None:
    _write_local(tmp_path)
    assert find_delta_tables(str(tmp_path)) == [f"{tmp_path}/{n}" for n in AT_DEPTH_3]
    assert find_delta_tables(str(tmp_path) + "/", max_depth=4) == [
        f"{tmp_path}/{n}" for n in sorted([*AT_DEPTH_3, "x/y/z/w"])
    ]
    assert find_delta_tables(str(tmp_path), max_depth=1) == [f"{tmp_path}/events"]
    assert find_delta_tables(str(tmp_path), max_depth=0) == []
    assert find_delta_tables(f"file://{tmp_path}/sales", max_depth=0) == []
    assert find_delta_tables(str(tmp_path / "events"), max_depth=0) == [f"{tmp_path}/events"]
    assert find_delta_tables(str(tmp_path / "missing")) == []


def test_found_tables_open_in_delta_rs(tmp_path: Path) -> None:
    for name in ("one", "two/three"):
        deltalake.write_deltalake(str(tmp_path / name), pa.table({"id": [1, 2], "v": ["a", "b"]}), partition_by=["id"])
    (tmp_path / "four").mkdir()
    found = find_delta_tables(str(tmp_path))
    assert found == [f"{tmp_path}/one", f"{tmp_path}/two/three"]
    assert [deltalake.DeltaTable(uri).version() for uri in found] == [0, 0]


@pytest.mark.parametrize("depth", [-1, 1.5, True, "2"])
def test_bad_depth_is_one_line(tmp_path: Path, depth: Any) -> None:
    with pytest.raises(InvalidArgument) as raised:
        find_delta_tables(str(tmp_path), max_depth=depth)
    assert str(raised.value) == f"table {tmp_path}: max_depth must be a whole number of at least 0, got {depth!r}"


def test_s3_lake(s3_endpoint: dict[str, Any]) -> None:
    fs = s3fs.S3FileSystem(**s3_endpoint)
    fs.call_s3("create_bucket", Bucket="discovery")
    for name, text in LAKE.items():
        fs.pipe(f"discovery/lake/{name}", text.encode())
    fs.pipe("discovery/lakeside/t/_delta_log/00000000000000000000.json", LOG.encode())  # a sibling prefix
    options = dict(s3_endpoint)
    assert find_delta_tables("s3://discovery/lake", options) == [f"s3://discovery/lake/{n}" for n in AT_DEPTH_3]
    assert find_delta_tables("s3://discovery/lake/", options, max_depth=4)[-1] == "s3://discovery/lake/x/y/z/w"
    assert find_delta_tables("s3://discovery", options, max_depth=1) == []
    assert find_delta_tables("s3://discovery", options, max_depth=2) == [
        "s3://discovery/lake/events",
        "s3://discovery/lakeside/t",
    ]
    assert find_delta_tables("s3://discovery/nothing-here", options) == []
