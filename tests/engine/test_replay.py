"""Replay details: map lookups on checkpoint columns, the checkpoint projection, and reconciling commits that follow
a checkpoint (checked against delta-rs, which writes the tables here)."""

from __future__ import annotations

import io
import subprocess
import sys
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from airflow_provider_deltalite import DeltaTable
from airflow_provider_deltalite.engine.checkpoint_reader import _read_parquet_actions, map_lookup_many

STRING_MAP = pa.map_(pa.string(), pa.string())

maps = st.lists(
    st.one_of(
        st.none(),
        st.lists(st.tuples(st.sampled_from(["a", "b", "c"]), st.one_of(st.none(), st.text(max_size=3))), max_size=4),
    ),
    max_size=30,
)


@settings(max_examples=200, deadline=None)
@given(rows=maps, start=st.integers(0, 5), length=st.integers(0, 30))
def test_map_lookup_many_equals_pyarrow_map_lookup(rows: list, start: int, length: int) -> None:
    column = pa.array(rows, STRING_MAP).slice(min(start, len(rows)), length)
    got = map_lookup_many(column, ["a", "b", "c", "missing"])
    for key, values in zip(["a", "b", "c", "missing"], got, strict=True):
        assert values.to_pylist() == pc.map_lookup(column, pa.scalar(key), "first").to_pylist()


def _checkpoint_bytes(stats: list[str | None], stats_parsed: list[dict | None]) -> bytes:
    add_type = pa.struct(
        [
            ("path", pa.string()),
            ("size", pa.int64()),
            ("stats", pa.string()),
            ("stats_parsed", pa.struct([("numRecords", pa.int64())])),
            ("partitionValues_parsed", pa.struct([("p", pa.int32())])),
        ]
    )
    adds = pa.array(
        [
            {"path": f"f{i}.parquet", "size": 10, "stats": s, "stats_parsed": sp, "partitionValues_parsed": {"p": 1}}
            for i, (s, sp) in enumerate(zip(stats, stats_parsed, strict=True))
        ],
        add_type,
    )
    buffer = io.BytesIO()
    pq.write_table(pa.table({"add": adds}), buffer)
    return buffer.getvalue()


def test_checkpoint_projection_skips_parsed_columns_when_json_stats_exist() -> None:
    table = _read_parquet_actions(_checkpoint_bytes(['{"numRecords":3}'], [{"numRecords": 3}]))
    assert table.schema.field("add").type.names == ["path", "size", "stats"]


def test_checkpoint_projection_reads_stats_parsed_when_json_stats_are_all_null() -> None:
    table = _read_parquet_actions(_checkpoint_bytes([None, None], [{"numRecords": 3}, {"numRecords": 4}]))
    assert table.schema.field("add").type.names == ["path", "size", "stats", "stats_parsed"]


@pytest.fixture(scope="module")
def deltalake() -> Any:
    import deltalake

    return deltalake


def _oracle_paths(deltalake: Any, path: Path, version: int | None = None) -> list[str]:
    table = deltalake.DeltaTable(str(path), version=version)
    return sorted(pa.table(table.get_add_actions(flatten=True)).column("path").to_pylist())


def test_commits_after_a_checkpoint_override_its_files(deltalake: Any, tmp_path: Path) -> None:
    """Files of a checkpoint that later commits remove, rewrite or re-add: the live set matches delta-rs at every
    version, and the tombstones of the checkpoint's files that were removed afterwards are kept."""
    path = tmp_path / "t"
    for i in range(4):
        data = pa.table({"id": pa.array(range(i * 10, i * 10 + 10), pa.int64()), "part": pa.array(["x", "y"] * 5)})
        deltalake.write_deltalake(str(path), data, partition_by=["part"], mode="append")
    deltalake.DeltaTable(str(path)).create_checkpoint()  # checkpoint at version 3 with 8 files
    dt = deltalake.DeltaTable(str(path))
    dt.delete("id < 15")  # version 4: rewrites files that live in the checkpoint
    deltalake.write_deltalake(
        str(path), pa.table({"id": pa.array([100], pa.int64()), "part": ["z"]}), partition_by=["part"], mode="append"
    )  # version 5
    deltalake.DeltaTable(str(path)).optimize.compact()  # version 6: removes most files, adds compacted ones
    ours = DeltaTable(str(path))
    for version in range(3, 7):
        snap = ours.snapshot(version=version)
        assert sorted(snap.files.column("path").to_pylist()) == _oracle_paths(deltalake, path, version), version
    latest = ours.snapshot()
    assert latest.version == 6
    removed_after_checkpoint = set(_oracle_paths(deltalake, path, 3)) - set(_oracle_paths(deltalake, path, 6))
    assert removed_after_checkpoint
    assert removed_after_checkpoint <= set(latest.tombstones.column("path").to_pylist())
    oracle = pa.table(deltalake.DeltaTable(str(path)).get_add_actions(flatten=True))
    expected = sorted(zip(oracle.column("path").to_pylist(), oracle.column("num_records").to_pylist(), strict=True))
    got = sorted(
        zip(latest.files.column("path").to_pylist(), latest.files.column("numRecords").to_pylist(), strict=True)
    )
    assert got == expected


def test_engine_imports_neither_airflow_nor_spark() -> None:
    """The layering rule: the format engine stands alone (it also runs inside Spark executors without Airflow)."""
    code = (
        "import sys\n"
        "import airflow_provider_deltalite.engine as e\n"
        "from airflow_provider_deltalite.engine import scan, snapshot, replay, stats_parse, expressions\n"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('airflow', 'pyspark', 'py4j'))\n"
        "print(','.join(bad))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


def test_stats_rebuilt_from_stats_parsed_keep_decimals_exact() -> None:
    """A checkpoint with only stats_parsed: the JSON stats rebuilt from it must not round 38-digit decimals."""
    from decimal import Decimal

    from airflow_provider_deltalite.engine.checkpoint_reader import _stats_from_parsed

    value = Decimal("12345678901234567890.123456789012345678")
    parsed = pa.array(
        [{"numRecords": 2, "minValues": {"d": value}, "maxValues": {"d": value}, "nullCount": {"d": 0}}, None],
        pa.struct(
            [
                ("numRecords", pa.int64()),
                ("minValues", pa.struct([("d", pa.decimal128(38, 18))])),
                ("maxValues", pa.struct([("d", pa.decimal128(38, 18))])),
                ("nullCount", pa.struct([("d", pa.int64())])),
            ]
        ),
    )
    assert _stats_from_parsed(parsed).to_pylist() == [
        '{"numRecords":2,"minValues":{"d":12345678901234567890.123456789012345678},'
        '"maxValues":{"d":12345678901234567890.123456789012345678},"nullCount":{"d":0}}',
        None,
    ]
