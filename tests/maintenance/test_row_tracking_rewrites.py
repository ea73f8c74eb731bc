"""Rewrites keep every row's id and commit version on tables with row tracking enabled: OPTIMIZE, Z-order and DV purge,
with deletion vectors, materialised columns partly filled (as after an UPDATE), column mapping, and the corpus's
row-tracking table; bad row-tracking state is refused with one line and nothing written.

The proof is `tests/row_tracking_oracle.py`: (row id, row commit version) of every live row computed from the log
JSON and the Parquet files with pyarrow and pyroaring, before and after; rows are also read with delta-kernel-rs.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from airflow_provider_deltalite import DeltaTable
from airflow_provider_deltalite.engine.errors import RowTrackingError
from airflow_provider_deltalite.maintenance.clustering.zorder import zorder
from airflow_provider_deltalite.maintenance.optimize import optimize
from tests.helpers import CORPUS, cli_failure, copy_table, tree_state
from tests.row_tracking_oracle import (
    BUILT_IDENTITIES,
    ROW_ID_COL,
    ROW_ID_PROP,
    VERSION_COL,
    VERSION_PROP,
    build_table,
    commit_lines,
    high_water_mark,
    identities_by_id,
    mark_action,
    replay,
    row_identities,
    write_commit,
    write_file,
)

# rows of `build_table` that are live: 8 of A, 9 of C, 5 of D; 22 physical rows once the deletion vectors are purged
LIVE_ROWS = 22


def kernel_rows(table: Path) -> list[tuple[Any, ...]]:
    """The table's rows as delta-kernel-rs reads them (logical columns), sorted."""
    import delta_kernel_rust_sharing_wrapper as k

    url = f"file://{table}/"
    interface = k.PythonInterface(url)
    snapshot = k.Table(url).snapshot(interface)
    data = pa.Table.from_batches(list(k.ScanBuilder(snapshot).build().execute(interface)))
    return sorted(zip(*(data.column(c).to_pylist() for c in sorted(data.column_names)), strict=True))


def new_adds(table: Path, version: int) -> list[dict[str, Any]]:
    return [line["add"] for line in commit_lines(table, version) if "add" in line]


def assert_rewrite_kept_row_tracking(table: Path, version: int, first_base_row_id: int) -> None:
    """The commit at ``version``: the preserved tag, fresh consecutive baseRowIds from ``first_base_row_id``, the
    materialised columns in every new file (without stats), the mark moved past the new files' rows."""
    config = replay(table)[0]["configuration"]
    hidden = [config[ROW_ID_PROP], config[VERSION_PROP]]
    lines = commit_lines(table, version)
    assert lines[0]["commitInfo"]["tags"] == {"delta.rowTracking.preserved": "true"}
    base = first_base_row_id
    for add in new_adds(table, version):
        stats = json.loads(add["stats"])
        assert (add["baseRowId"], add["defaultRowCommitVersion"], add["dataChange"]) == (base, version, False)
        names = pq.read_schema(table / add["path"]).names
        assert names[-2:] == hidden
        assert not any(name in json.dumps(stats) for name in hidden)
        base += stats["numRecords"]
    assert high_water_mark(table) == base - 1
    (domain,) = [line["domainMetadata"] for line in lines if "domainMetadata" in line]
    assert json.loads(domain["configuration"]) == {"rowIdHighWaterMark": base - 1}


@pytest.mark.parametrize("column_mapping", ["none", "name", "id"])
def test_optimize_keeps_row_ids_and_versions_through_dvs_and_partly_materialised_columns(
    tmp_path: Path, column_mapping: str
) -> None:
    table = build_table(tmp_path / "t", column_mapping=column_mapping)
    before = row_identities(table)
    assert identities_by_id(before) == BUILT_IDENTITIES
    rows_before = kernel_rows(table)
    result = optimize(DeltaTable(str(table)))
    assert (result.committed_version, result.num_files_removed, result.num_files_added) == (3, 3, 1)
    assert result.num_deletion_vectors_removed == 2
    assert row_identities(table) == before
    assert_rewrite_kept_row_tracking(table, 3, first_base_row_id=35)
    (add,) = new_adds(table, 3)
    assert json.loads(add["stats"])["numRecords"] == LIVE_ROWS
    written = pq.read_table(table / add["path"])
    data_names = ["col-7a1", "col-7b2"] if column_mapping != "none" else ["id", "value"]
    assert written.column_names == [*data_names, ROW_ID_COL, VERSION_COL]
    # row ids are delta-encoded (a few bits per row while they ascend), and so are their versions: few, and close
    # enough together that their differences take no more than a bit over a dictionary's indexes
    meta = pq.ParquetFile(table / add["path"]).metadata.row_group(0)
    assert [set(meta.column(i).encodings) for i in (2, 3)] == [{"RLE", "DELTA_BINARY_PACKED"}] * 2
    # field ids in id mode for the table's columns only: the hidden columns are not in the schema
    ids = [(f.metadata or {}).get(b"PARQUET:field_id") for f in written.schema]
    assert ids == ([b"1", b"2", None, None] if column_mapping == "id" else [None] * 4)
    # every row's id and version is now materialised: the new file's own baseRowId is never needed
    assert written.column(ROW_ID_COL).null_count == written.column(VERSION_COL).null_count == 0
    assert kernel_rows(table) == rows_before


def test_zorder_after_optimize_keeps_row_ids(tmp_path: Path) -> None:
    table = build_table(tmp_path / "t")
    before = row_identities(table)
    rows_before = kernel_rows(table)
    by_zorder = zorder(DeltaTable(str(table)), ["value", "id"], target_size=900)
    assert (by_zorder.committed_version, by_zorder.num_files_removed, by_zorder.num_files_added) == (3, 3, 4)
    assert row_identities(table) == before
    assert_rewrite_kept_row_tracking(table, 3, first_base_row_id=35)
    # a second rewrite reads the materialised columns written by the first
    again = optimize(DeltaTable(str(table)))
    assert again.committed_version == 4
    assert row_identities(table) == before
    assert_rewrite_kept_row_tracking(table, 4, first_base_row_id=35 + LIVE_ROWS)
    assert kernel_rows(table) == rows_before


def test_dv_purge_rewrites_only_the_files_with_deletion_vectors_and_keeps_their_row_ids(tmp_path: Path) -> None:
    table = build_table(tmp_path / "t")
    before = row_identities(table)
    result = optimize(DeltaTable(str(table)), min_file_size=1, max_deleted_rows_ratio=0.05)
    assert (result.num_files_removed, result.num_files_added, result.num_deletion_vectors_removed) == (2, 1, 2)
    removed = {line["remove"]["path"] for line in commit_lines(table, 3) if "remove" in line}
    assert removed == {"a.parquet", "c.parquet"}
    assert row_identities(table) == before
    assert_rewrite_kept_row_tracking(table, 3, first_base_row_id=35)
    assert {a["path"] for a in replay(table)[2]} - {a["path"] for a in new_adds(table, 3)} == {"d.parquet"}


def test_corpus_row_tracking_table_keeps_row_ids(tmp_path: Path) -> None:
    # Databricks wrote it (CTAS, row tracking enabled, ten one-row files with baseRowIds 0-9, mark 9; clustered by the
    # preview `liquid` feature): every row's id comes from its file's baseRowId, none is materialised yet
    table = copy_table("delta-rs/table_with_liquid_clustering", tmp_path / "t")
    domains = replay(table)[3]
    before = row_identities(table)
    assert [(r, v) for r, v, _ in before] == [(i, 0) for i in range(10)]
    rows_before = kernel_rows(table)
    mark = json.loads(domains["delta.rowTracking"]["configuration"])["rowIdHighWaterMark"]
    assert mark == 9
    result = optimize(DeltaTable(str(table)))
    version = result.committed_version
    assert version == 1 and result.num_files_removed == 10
    assert row_identities(table) == before
    assert_rewrite_kept_row_tracking(table, version, first_base_row_id=10)
    assert kernel_rows(table) == rows_before


# -- bad input ------------------------------------------------------------------------------------------------------


def test_a_high_water_mark_below_a_used_row_id_is_refused_with_nothing_written(tmp_path: Path) -> None:
    table = build_table(tmp_path / "t")
    write_commit(table, 3, [mark_action(25)])  # C's rows use ids 20-29 and D's 30-34
    before = tree_state(table)
    with pytest.raises(RowTrackingError) as err:
        optimize(DeltaTable(str(table)))
    assert err.value.problem == (
        "the row id high-water mark 25 is below row ids in use: data file d.parquet uses ids up to 34 (baseRowId 30, "
        "5 rows)"
    )
    line = cli_failure("optimize", table)
    assert line == f"deltalite: error: table {table}: {err.value.problem}"
    assert cli_failure("zorder", "--columns", "id", table) == line
    assert tree_state(table) == before


def test_row_ids_without_a_high_water_mark_are_refused_with_nothing_written(tmp_path: Path) -> None:
    table = build_table(tmp_path / "t")
    write_commit(table, 3, [{"domainMetadata": {"domain": "delta.rowTracking", "configuration": "", "removed": True}}])
    before = tree_state(table)
    problem = (
        "the table has no row id high-water mark (domain delta.rowTracking) but row ids are in use: data file "
        "d.parquet uses ids up to 34 (baseRowId 30, 5 rows)"
    )
    assert cli_failure("optimize", table) == f"deltalite: error: table {table}: {problem}"
    assert tree_state(table) == before


def test_row_ids_without_num_records_are_refused_with_nothing_written(tmp_path: Path) -> None:
    table = build_table(tmp_path / "t")
    e = write_file(table, "e.parquet", [200, 201], names=("id", "value"), base_row_id=35, version=3, stats=False)
    write_commit(table, 3, [{"add": e}, mark_action(36)])
    before = tree_state(table)
    with pytest.raises(RowTrackingError) as err:
        optimize(DeltaTable(str(table)))
    assert err.value.problem == (
        "data file e.parquet has a baseRowId but its stats have no numRecords: the row ids it uses are unknown"
    )
    assert cli_failure("optimize", table) == f"deltalite: error: table {table}: {err.value.problem}"
    assert tree_state(table) == before


@pytest.mark.parametrize(
    ("config", "problem"),
    [
        (
            {"delta.rowTrackingSuspended": "true"},
            "delta.enableRowTracking and delta.rowTrackingSuspended are both true: row ids cannot be preserved and "
            "suspended at once",
        ),
        (
            {"delta.rowTracking.materializedRowIdColumnName": ""},
            "row tracking is enabled but delta.rowTracking.materializedRowIdColumnName is not set: the materialised "
            "row-tracking column is unknown",
        ),
    ],
)
def test_contradicting_row_tracking_properties_are_refused(
    tmp_path: Path, config: dict[str, str], problem: str
) -> None:
    table = build_table(tmp_path / "t", extra_config=config)
    before = tree_state(table)
    with pytest.raises(RowTrackingError) as err:
        optimize(DeltaTable(str(table)))
    assert err.value.problem == problem
    assert cli_failure("optimize", table) == f"deltalite: error: table {table}: {problem}"
    assert tree_state(table) == before


def test_an_enabled_table_with_a_file_lacking_row_ids_is_refused(tmp_path: Path) -> None:
    table = build_table(tmp_path / "t")
    e = write_file(table, "e.parquet", [200], names=("id", "value"), base_row_id=None, version=None)
    write_commit(table, 3, [{"add": e}])
    before = tree_state(table)
    with pytest.raises(RowTrackingError) as err:
        optimize(DeltaTable(str(table)))
    assert (
        err.value.problem
        == "row tracking is enabled but data file e.parquet has no baseRowId: its rows' ids are unknown"
    )
    assert tree_state(table) == before


def _corpus_row_tracking_tables() -> dict[str, tuple[int, int]]:
    """Positive corpus tables whose protocol has rowTracking: (live files, live files missing on disk)."""
    summary = json.loads((CORPUS / "summary.json").read_text())
    return {
        t["staged_path"]: (t["live_files"], t["live_files_missing_on_disk"])
        for t in summary
        if t["test_role"] == "positive" and "rowTracking" in ((t.get("protocol") or {}).get("writerFeatures") or [])
    }


def test_every_corpus_row_tracking_table_with_data_keeps_its_row_ids(tmp_path: Path) -> None:
    tables = _corpus_row_tracking_tables()
    # the log-only table is covered at commit level (tests/engine/test_row_tracking.py), crc-full has no file
    assert tables == {
        "delta-rs/table-with-domain-metadata": (109, 109),
        "delta-rs/table_with_liquid_clustering": (10, 0),
        "kernel-rs-data/crc-full": (0, 0),
    }
    for name, (live, missing) in tables.items():
        table = copy_table(name, tmp_path / name.replace("/", "_"))
        if live == 0 or missing:
            continue
        before = row_identities(table)
        assert before and len({r for r, _, _ in before}) == len(before)  # row ids are unique
        rows_before = kernel_rows(table)
        version = optimize(DeltaTable(str(table))).committed_version
        assert row_identities(table) == before, name
        assert kernel_rows(table) == rows_before, name
        assert commit_lines(table, version)[0]["commitInfo"]["tags"] == {"delta.rowTracking.preserved": "true"}
    crc_full = tmp_path / "kernel-rs-data_crc-full"
    assert optimize(DeltaTable(str(crc_full))).committed_version is None
