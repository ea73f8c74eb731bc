"""Row tracking in commits: fresh row ids above the high-water mark for new files, recomputed on retry; re-adds keep
theirs; suspended tables get none; the `delta.rowTracking` domain is resolved, not a conflict.

Expected values are computed by hand from the log each test writes, and rows are read back with delta-rs, the
delta-kernel-rs wrapper and `tests/row_tracking_oracle.py` (pyarrow + the log JSON), never with the engine.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from airflow_provider_deltalite import DeltaTable
from airflow_provider_deltalite.engine.conflicts import OwnChanges, ReadSet, check_winning_commit, parse_winning_commit
from airflow_provider_deltalite.engine.errors import MetadataChanged, RowTrackingError
from airflow_provider_deltalite.engine.transaction import RetryPolicy
from airflow_provider_deltalite.maintenance.clustering.zorder import zorder
from airflow_provider_deltalite.maintenance.optimize import optimize
from tests.helpers import copy_table, tree_state
from tests.row_tracking_oracle import (
    ROW_ID_COL,
    VERSION_COL,
    build_table,
    commit_lines,
    high_water_mark,
    mark_action,
    row_identities,
    write_commit,
    write_file,
)

FAST = RetryPolicy(max_attempts=5, base_delay_s=0.0, max_delay_s=0.0)
NAMES = ("id", "value")


def plain_table(path: Path, *, enabled: bool = False, suspended: bool = False) -> Path:
    """Row tracking supported (enabled or not), no deletion vectors, so delta-rs can read it: files of ids 0-9 and
    10-19 with baseRowIds 0 and 10, mark 19."""
    path.mkdir(parents=True)
    config = {"delta.enableRowTracking": "true" if enabled else "false"}
    if enabled:
        config.update(
            {
                "delta.rowTracking.materializedRowIdColumnName": ROW_ID_COL,
                "delta.rowTracking.materializedRowCommitVersionColumnName": VERSION_COL,
            }
        )
    if suspended:
        config["delta.rowTrackingSuspended"] = "true"
    fields = [
        {"name": "id", "type": "long", "nullable": True, "metadata": {}},
        {"name": "value", "type": "string", "nullable": True, "metadata": {}},
    ]
    metadata = {
        "id": "0c0ffee0-0000-4000-8000-000000000001",
        "format": {"provider": "parquet", "options": {}},
        "schemaString": json.dumps({"type": "struct", "fields": fields}),
        "partitionColumns": [],
        "configuration": config,
        "createdTime": 1_700_000_000_000,
    }
    protocol = {"minReaderVersion": 1, "minWriterVersion": 7, "writerFeatures": ["domainMetadata", "rowTracking"]}
    a = write_file(path, "a.parquet", list(range(10)), names=NAMES, base_row_id=0, version=0)
    b = write_file(path, "b.parquet", list(range(10, 20)), names=NAMES, base_row_id=10, version=0)
    write_commit(path, 0, [{"protocol": protocol}, {"metaData": metadata}, {"add": a}, {"add": b}, mark_action(19)])
    return path


def adds_of(table: Path, version: int) -> list[dict[str, Any]]:
    return [line["add"] for line in commit_lines(table, version) if "add" in line]


def domains_of(table: Path, version: int) -> list[dict[str, Any]]:
    return [line["domainMetadata"] for line in commit_lines(table, version) if "domainMetadata" in line]


def kernel_ids(table: Path) -> list[int]:
    import delta_kernel_rust_sharing_wrapper as k

    url = f"file://{table}/"
    interface = k.PythonInterface(url)
    snapshot = k.Table(url).snapshot(interface)
    batches = list(k.ScanBuilder(snapshot).build().execute(interface))
    return sorted(pa.Table.from_batches(batches).column("id").to_pylist())


def delta_rs_ids(table: Path) -> list[int]:
    import deltalake

    return sorted(deltalake.DeltaTable(str(table)).to_pyarrow_table().column("id").to_pylist())


def test_new_files_on_a_supported_table_get_row_ids_above_the_mark(tmp_path: Path) -> None:
    table = plain_table(tmp_path / "t")
    txn = DeltaTable(str(table)).transaction()
    txn.add(write_file(table, "new.parquet", [40, 41, 42], names=NAMES, base_row_id=None, version=None))
    assert txn.commit("WRITE").version == 1
    (add,) = adds_of(table, 1)
    assert (add["baseRowId"], add["defaultRowCommitVersion"]) == (20, 1)
    assert domains_of(table, 1) == [
        {"domain": "delta.rowTracking", "configuration": '{"rowIdHighWaterMark":22}', "removed": False}
    ]
    # not enabled: the commit makes no claim about preserved row ids
    assert "tags" not in commit_lines(table, 1)[0]["commitInfo"]
    assert [(r, v) for r, v, _ in row_identities(table)] == [(i, 0) for i in range(20)] + [(20, 1), (21, 1), (22, 1)]
    assert delta_rs_ids(table) == kernel_ids(table) == [*range(20), 40, 41, 42]


def test_optimize_on_a_supported_but_disabled_table_assigns_fresh_ids_and_writes_no_materialised_columns(
    tmp_path: Path,
) -> None:
    table = plain_table(tmp_path / "t")
    before = delta_rs_ids(table)
    result = optimize(DeltaTable(str(table)))
    assert (result.committed_version, result.num_files_added, result.num_files_removed) == (1, 1, 2)
    (add,) = adds_of(table, 1)
    assert (add["baseRowId"], add["defaultRowCommitVersion"]) == (20, 1)
    assert high_water_mark(table) == 39
    assert pq.read_schema(table / add["path"]).names == ["id", "value"]
    assert "tags" not in commit_lines(table, 1)[0]["commitInfo"]
    # rows are not tracked across rewrites when row tracking is only supported: they get the new file's ids
    files_rows = pq.read_table(table / add["path"]).column("id").to_pylist()
    assert row_identities(table) == sorted(
        (20 + i, 1, json.dumps({"id": v, "value": f"v{v}"}, sort_keys=True)) for i, v in enumerate(files_rows)
    )
    assert delta_rs_ids(table) == kernel_ids(table) == before


def test_a_retry_at_a_later_version_recomputes_row_ids_against_the_winners_mark(tmp_path: Path) -> None:
    table = plain_table(tmp_path / "t")
    dt = DeltaTable(str(table))
    ours = dt.transaction(retry=FAST)
    ours.add(write_file(table, "ours.parquet", [70, 71, 72], names=NAMES, base_row_id=None, version=None))
    # two winners as another engine writes them: an append that moves the mark, then a commit that does not
    theirs = write_file(table, "theirs.parquet", [80, 81, 82, 83], names=NAMES, base_row_id=20, version=1)
    write_commit(table, 1, [{"add": theirs}, mark_action(23)])
    write_commit(table, 2, [{"txn": {"appId": "other", "version": 1}}])
    result = ours.commit("WRITE")
    assert (result.version, result.attempts, result.winning_commits) == (3, 2, (1, 2))
    (add,) = adds_of(table, 3)
    assert (add["baseRowId"], add["defaultRowCommitVersion"]) == (24, 3)
    assert domains_of(table, 3) == [
        {"domain": "delta.rowTracking", "configuration": '{"rowIdHighWaterMark":26}', "removed": False}
    ]
    ids = [(r, v) for r, v, _ in row_identities(table)]
    assert ids == [(i, 0) for i in range(20)] + [(20 + k, 1) for k in range(4)] + [(24, 3), (25, 3), (26, 3)]
    assert delta_rs_ids(table) == kernel_ids(table) == [*range(20), 70, 71, 72, 80, 81, 82, 83]


def test_batches_of_one_optimize_get_consecutive_ids(tmp_path: Path) -> None:
    # each batch commits from the same read snapshot: the second one loses the race to the first and recomputes
    table = plain_table(tmp_path / "t")
    for k, start in enumerate((100, 200, 300, 400)):
        add = write_file(
            table, f"x{k}.parquet", list(range(start, start + 5)), names=NAMES, base_row_id=None, version=None
        )
        txn = DeltaTable(str(table)).transaction()
        txn.add(add)
        txn.commit("WRITE")
    assert high_water_mark(table) == 39
    result = optimize(DeltaTable(str(table)), target_size=1700, batch_size=1)
    assert result.committed_versions == (5, 6, 7)
    got = []
    for version in result.committed_versions:
        (add,) = adds_of(table, version)
        got.append((add["defaultRowCommitVersion"], add["baseRowId"], json.loads(add["stats"])["numRecords"]))
    first = 40
    expected = []
    for version, _base, n in got:
        expected.append((version, first, n))
        first += n
    assert got == expected
    assert high_water_mark(table) == first - 1 == 79


def test_a_re_added_live_file_keeps_its_row_ids(tmp_path: Path) -> None:
    table = plain_table(tmp_path / "t")
    txn = DeltaTable(str(table)).transaction()
    live = next(a for a in adds_of(table, 0) if a["path"] == "b.parquet")
    readd = {k: v for k, v in live.items() if k not in ("baseRowId", "defaultRowCommitVersion")}
    txn.add({**readd, "dataChange": False, "tags": {"note": "stats refreshed"}})
    assert txn.commit("COMPUTE STATS").version == 1
    (add,) = adds_of(table, 1)
    assert (add["baseRowId"], add["defaultRowCommitVersion"]) == (10, 0)
    assert domains_of(table, 1) == []
    assert high_water_mark(table) == 19


def test_suspended_tables_get_no_row_ids(tmp_path: Path) -> None:
    table = plain_table(tmp_path / "t", suspended=True)
    txn = DeltaTable(str(table)).transaction()
    txn.add(write_file(table, "new.parquet", [40], names=NAMES, base_row_id=None, version=None))
    txn.commit("WRITE")
    (add,) = adds_of(table, 1)
    assert "baseRowId" not in add and "defaultRowCommitVersion" not in add
    assert domains_of(table, 1) == []
    result = optimize(DeltaTable(str(table)))
    (add,) = adds_of(table, result.committed_version)
    assert "baseRowId" not in add and "defaultRowCommitVersion" not in add
    assert pq.read_schema(table / add["path"]).names == ["id", "value"]
    assert domains_of(table, result.committed_version) == []
    assert delta_rs_ids(table) == kernel_ids(table) == [*range(20), 40]


def test_enabled_tables_tag_every_commit_as_preserving_row_ids(tmp_path: Path) -> None:
    table = plain_table(tmp_path / "t", enabled=True)
    txn = DeltaTable(str(table)).transaction()
    txn.add(write_file(table, "new.parquet", [40], names=NAMES, base_row_id=None, version=None))
    txn.commit("WRITE")
    assert commit_lines(table, 1)[0]["commitInfo"]["tags"] == {"delta.rowTracking.preserved": "true"}
    (add,) = adds_of(table, 1)
    assert (add["baseRowId"], add["defaultRowCommitVersion"]) == (20, 1)


def test_a_winners_row_tracking_domain_is_not_a_conflict() -> None:
    winner = parse_winning_commit(
        4, (json.dumps(mark_action(99)) + "\n" + json.dumps({"add": {"path": "x", "size": 1}}) + "\n").encode(), None
    )
    assert winner.row_id_high_water_mark == 99
    own = OwnChanges("Serializable", True, set(), False, False, set(), {"delta.rowTracking", "mine"})
    check_winning_commit(ReadSet(), own, winner, str, None)


def test_a_corpus_table_with_a_row_tracking_domain_gets_ids_above_its_mark(tmp_path: Path) -> None:
    # delta-rs's table-with-domain-metadata: rowTracking supported and a mark from a checkpoint; log only
    table = copy_table("delta-rs/table-with-domain-metadata", tmp_path / "t")
    mark = DeltaTable(str(table)).snapshot().domain_metadata["delta.rowTracking"]["configuration"]
    start = json.loads(mark)["rowIdHighWaterMark"]
    snapshot_version = DeltaTable(str(table)).snapshot().version
    txn = DeltaTable(str(table)).transaction()
    fields = json.loads(DeltaTable(str(table)).snapshot().metadata["schemaString"])["fields"]
    assert [f["name"] for f in fields][:1] == ["id"]
    rows = pa.table({f["name"]: pa.nulls(2, pa.int64() if f["type"] == "long" else pa.string()) for f in fields})
    rows = rows.set_column(0, "id", pa.array([1, 2], rows.schema.field("id").type))
    pq.write_table(rows, table / "extra.parquet")
    txn.add(
        {
            "path": "extra.parquet",
            "size": (table / "extra.parquet").stat().st_size,
            "partitionValues": {},
            "stats": json.dumps({"numRecords": 2}),
        }
    )
    version = txn.commit("WRITE").version
    assert version == snapshot_version + 1
    (add,) = adds_of(table, version)
    assert (add["baseRowId"], add["defaultRowCommitVersion"]) == (start + 1, version)
    assert json.loads(domains_of(table, version)[0]["configuration"]) == {"rowIdHighWaterMark": start + 2}


def test_a_new_file_without_num_records_is_refused_before_writing(tmp_path: Path) -> None:
    table = plain_table(tmp_path / "t")
    txn = DeltaTable(str(table)).transaction()
    txn.add(write_file(table, "new.parquet", [40], names=NAMES, base_row_id=None, version=None, stats=False))
    before = tree_state(table)
    with pytest.raises(RowTrackingError) as err:
        txn.commit("WRITE")
    assert err.value.problem == "cannot assign row ids to new.parquet: its stats have no numRecords"
    assert tree_state(table) == before


def test_the_built_table_matches_its_hand_written_identities(tmp_path: Path) -> None:
    # the oracle itself, on the history `build_table` writes (checked once here; the rewrite tests rely on it)
    from tests.row_tracking_oracle import BUILT_IDENTITIES, identities_by_id

    assert identities_by_id(row_identities(build_table(tmp_path / "t"))) == BUILT_IDENTITIES


def test_delta_rs_and_kernel_read_a_rewrite_that_materialised_row_ids(tmp_path: Path) -> None:
    # enabled, no deletion vectors: delta-rs can open it, and must ignore the hidden columns as the protocol says
    table = plain_table(tmp_path / "t", enabled=True)
    before = row_identities(table)
    result = optimize(DeltaTable(str(table)))
    (add,) = adds_of(table, result.committed_version)
    assert pq.read_schema(table / add["path"]).names == ["id", "value", ROW_ID_COL, VERSION_COL]
    assert (
        row_identities(table)
        == before
        == [(i, 0, json.dumps({"id": i, "value": f"v{i}"}, sort_keys=True)) for i in range(20)]
    )
    assert delta_rs_ids(table) == kernel_ids(table) == list(range(20))


def test_optimize_does_not_rebase_across_an_enablement_of_row_tracking(tmp_path: Path) -> None:
    # the new files were written without the materialised columns: committing them on the newly enabled table would
    # give their rows new ids, so the rewrite gives up (its files are left for VACUUM) instead of retrying
    table = plain_table(tmp_path / "t")
    metadata = json.loads((table / "_delta_log" / f"{0:020d}.json").read_text().splitlines()[2])["metaData"]
    metadata["configuration"] = {
        "delta.enableRowTracking": "true",
        "delta.rowTracking.materializedRowIdColumnName": ROW_ID_COL,
        "delta.rowTracking.materializedRowCommitVersionColumnName": VERSION_COL,
    }

    def enable(_event: Any) -> None:
        write_commit(table, 1, [{"metaData": metadata}])

    with pytest.raises(MetadataChanged) as err:
        optimize(DeltaTable(str(table)), progress=enable)
    assert err.value.winning_version == 1
    assert "the commit failed: 1 new files (" in str(err.value)
    assert not (table / "_delta_log" / f"{2:020d}.json").exists()
    assert delta_rs_ids(table) == list(range(20))


def test_zorder_of_a_partitioned_table_keeps_row_ids_per_partition(tmp_path: Path) -> None:
    table = tmp_path / "t"
    for part in ("a", "b"):
        (table / f"p={part}").mkdir(parents=True)
    fields = [
        {"name": "id", "type": "long", "nullable": True, "metadata": {}},
        {"name": "value", "type": "string", "nullable": True, "metadata": {}},
        {"name": "p", "type": "string", "nullable": True, "metadata": {}},
    ]
    config = {
        "delta.enableRowTracking": "true",
        "delta.rowTracking.materializedRowIdColumnName": ROW_ID_COL,
        "delta.rowTracking.materializedRowCommitVersionColumnName": VERSION_COL,
    }
    metadata = {
        "id": "0c0ffee0-0000-4000-8000-000000000002",
        "format": {"provider": "parquet", "options": {}},
        "schemaString": json.dumps({"type": "struct", "fields": fields}),
        "partitionColumns": ["p"],
        "configuration": config,
        "createdTime": 1_700_000_000_000,
    }
    protocol = {"minReaderVersion": 1, "minWriterVersion": 7, "writerFeatures": ["domainMetadata", "rowTracking"]}
    for k in range(4):  # one commit per file: ids 0-39, ten per file, files 0 and 2 in p=a, half of each materialised
        ids = list(range(10 * k, 10 * k + 10))
        materialised = [None] * 5 + [1000 + i for i in ids[5:]]
        name = f"p={'ab'[k % 2]}/f{k}.parquet"
        add = write_file(table, name, ids, names=NAMES, base_row_id=10 * k, version=k, row_ids=materialised)
        first = [{"protocol": protocol}, {"metaData": metadata}] if k == 0 else []
        add["partitionValues"] = {"p": "ab"[k % 2]}
        write_commit(table, k, [*first, {"add": add}, mark_action(10 * k + 9)])
    before = row_identities(table)
    expected = [
        (10 * (i // 10) + i % 10 if i % 10 < 5 else 1000 + i, i // 10, i, "ab"[(i // 10) % 2]) for i in range(40)
    ]
    got = [(r, v, json.loads(row)["id"], json.loads(row)["p"]) for r, v, row in before]
    assert sorted(got) == sorted(expected)
    result = zorder(DeltaTable(str(table)), ["value", "id"])
    assert (result.committed_version, result.num_files_removed, result.num_files_added) == (4, 4, 2)
    assert row_identities(table) == before
    news = adds_of(table, 4)
    assert sorted((a["partitionValues"]["p"], a["defaultRowCommitVersion"]) for a in news) == [("a", 4), ("b", 4)]
    assert sorted(a["baseRowId"] for a in news) == [40, 60]
    assert high_water_mark(table) == 79
    assert delta_rs_ids(table) == kernel_ids(table) == list(range(40))
