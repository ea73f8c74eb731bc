"""Partition-pruned replay (`load_snapshot(partition_filter=...)`): the files of the selected partitions, exactly as
the full replay and delta-rs see them, for corpus tables and for random histories whose removes cross partitions."""

from __future__ import annotations

import json
import random
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import deltalake
import pyarrow as pa
import pytest

from airflow_provider_deltalite.engine.checkpoint_writer import write_checkpoint
from airflow_provider_deltalite.engine.errors import DeltaLiteError, InvalidExpression, TransactionError
from airflow_provider_deltalite.engine.expressions import bind, may_match_partitions, parse_expression
from airflow_provider_deltalite.engine.partition_filter import PartitionFilter
from airflow_provider_deltalite.engine.snapshot import Snapshot, load_snapshot
from airflow_provider_deltalite.engine.snapshot_advance import advance_snapshot
from airflow_provider_deltalite.engine.snapshot_stream import stream_snapshot
from airflow_provider_deltalite.engine.storage.table_storage import Storage
from airflow_provider_deltalite.maintenance.optimize import optimize
from airflow_provider_deltalite.table import DeltaTable
from tests.conformance.corpus import corpus_tables, deltars_paths, normalise_path
from tests.helpers import tree_state


def _key(row: dict[str, Any]) -> tuple[str, str]:
    return row["path"], json.dumps(row.get("deletionVector"), sort_keys=True)


def _rows(table: pa.Table) -> list[dict[str, Any]]:
    return sorted(table.to_pylist(), key=_key)


def _selected(full: Snapshot, predicate: str) -> tuple[pa.Table, pa.Table]:
    """The full replay's live files and tombstones in the partitions ``predicate`` may select (tombstones written
    without partition values count as selected: their partition is unknown)."""
    expr = bind(parse_expression(predicate), full.arrow_schema)
    live = full.raw_files.filter(may_match_partitions(expr, full.partition_values))
    stones = full.tombstones
    keep = PartitionFilter(predicate, partition_columns_only=False).bind(full.metadata, full.table_uri)
    if stones.num_rows:
        stones = stones.filter(pa.array(keep.mask_struct(stones.column("partitionValues").combine_chunks())))
    return live, stones


def _predicates(full: Snapshot) -> list[str]:
    """Predicates over the table's first partition column: one value, its null partition, nothing, everything, and
    a value with the rest of the partitions (NOT)."""
    column = full.partition_columns[0]
    quoted = f"`{column}`" if not column.isidentifier() else column
    typed = full.partition_values.column(column)
    out = [f"{quoted} IS NULL AND {quoted} IS NOT NULL", f"{quoted} IS NULL OR {quoted} IS NOT NULL"]
    if typed.null_count:
        out.append(f"{quoted} IS NULL")
    raw_field = full.partition_physical_names[0]
    raws = [r.get(raw_field) for r in full.raw_files.column("partitionValues").to_pylist() if r]
    values = sorted({r for r in raws if r not in (None, "")})
    for value in values[:1] + values[-1:]:
        text = value.replace("'", "''")
        out += [f"{quoted} = '{text}'", f"NOT ({quoted} = '{text}')"]
    return out


def _check(storage: Storage, full: Snapshot, predicate: str, version: int | None) -> bool:
    """Compare the pruned load with the full one; False when the predicate does not bind to this column's type."""
    try:
        pruned = load_snapshot(storage, version, partition_filter=PartitionFilter(predicate))
    except InvalidExpression:
        return False
    live, stones = _selected(full, predicate)
    assert pruned.pruned_by == predicate
    assert pruned.version == full.version
    assert _rows(pruned.raw_files) == _rows(live), (storage.table_uri, predicate)
    assert _rows(pruned.tombstones) == _rows(stones), (storage.table_uri, predicate)
    assert pruned.raw_files.schema == full.raw_files.schema
    assert (pruned.metadata, pruned.app_transactions, pruned.domain_metadata) == (
        full.metadata,
        full.app_transactions,
        full.domain_metadata,
    )
    return True


@pytest.mark.slow  # every corpus table: scheduled first (tests/conftest.py)
def test_pruned_replay_of_every_partitioned_corpus_table_equals_the_full_replay_and_delta_rs() -> None:
    counts: Counter[str] = Counter()
    for entry in corpus_tables():
        if entry.role != "positive":
            continue
        storage = Storage(str(entry.path))
        try:
            full = load_snapshot(storage)
        except DeltaLiteError:
            continue  # refused on purpose (docs/conformance.md)
        if not full.partition_columns:
            continue
        counts["tables"] += 1
        counts["column mapping"] += full.column_mapping_mode != "none"
        counts["with a checkpoint"] += full.segment.checkpoint is not None
        for predicate in _predicates(full):
            if not _check(storage, full, predicate, None):
                counts["predicates not of the column's type"] += 1
                continue
            counts["predicates"] += 1
            counts["null partition"] += predicate.endswith("IS NULL")
        theirs = deltars_paths(entry.path)
        if theirs is not None:
            # the oracle that is not ours: delta-rs's live files, cut to one partition by the full replay's values
            predicate = _predicates(full)[-2] if len(_predicates(full)) > 3 else _predicates(full)[1]
            try:
                pruned = load_snapshot(storage, partition_filter=PartitionFilter(predicate))
            except InvalidExpression:
                continue
            live, _ = _selected(full, predicate)
            expected = {normalise_path(p, entry.path) for p in live.column("path").to_pylist()}
            assert expected <= theirs
            assert {normalise_path(p, entry.path) for p in pruned.raw_files.column("path").to_pylist()} == expected
            counts["checked against delta-rs"] += 1
    assert counts["tables"] >= 40, counts
    assert counts["column mapping"] >= 2, counts
    assert counts["with a checkpoint"] >= 10, counts
    assert counts["null partition"] >= 3, counts
    assert counts["checked against delta-rs"] >= 25, counts
    assert counts["predicates"] >= 5 * counts["tables"] - counts["predicates not of the column's type"], counts


# -- random histories --------------------------------------------------------------------------------------------

PARTS = ["a", "b", "c", "d", None]


def _add(path: str, part: str | None, ts: int) -> dict[str, Any]:
    stats = json.dumps({"numRecords": 1, "minValues": {"id": 1}, "maxValues": {"id": 1}, "nullCount": {"id": 0}})
    return {
        "add": {
            "path": path,
            "partitionValues": {"p": part},
            "size": 100 + len(path),
            "modificationTime": ts,
            "dataChange": True,
            "stats": stats,
        }
    }


def _remove(path: str, part: str | None, ts: int, with_values: bool) -> dict[str, Any]:
    action: dict[str, Any] = {"path": path, "deletionTimestamp": ts, "dataChange": True, "size": 100 + len(path)}
    if with_values:
        action["partitionValues"] = {"p": part}
        action["extendedFileMetadata"] = True
    return {"remove": action}


def _random_history(root: Path, seed: int, commits: int = 24) -> list[int]:
    """A log of ``commits`` commits adding, removing and re-adding files across partitions (removes of several
    partitions in one commit, some without partitionValues, paths re-added after removal), with checkpoints written
    by deltalite and by delta-rs along the way. Returns the checkpointed versions."""
    rng = random.Random(seed)
    log = root / "_delta_log"
    log.mkdir(parents=True)
    schema = {
        "type": "struct",
        "fields": [
            {"name": "id", "type": "long", "nullable": True, "metadata": {}},
            {"name": "p", "type": "string", "nullable": True, "metadata": {}},
        ],
    }
    meta = {
        "id": f"00000000-0000-0000-0000-{seed:012d}",
        "format": {"provider": "parquet", "options": {}},
        "schemaString": json.dumps(schema),
        "partitionColumns": ["p"],
        "configuration": {},
        "createdTime": 1_700_000_000_000,
    }
    live: dict[str, str | None] = {}
    removed: dict[str, str | None] = {}
    checkpoints = []
    counter = 0
    for version in range(commits):
        ts = 1_700_000_000_000 + version * 1000
        actions: list[dict[str, Any]] = [{"commitInfo": {"timestamp": ts, "operation": "WRITE"}}]
        if version == 0:
            actions += [{"protocol": {"minReaderVersion": 1, "minWriterVersion": 2}}, {"metaData": meta}]
        for path in rng.sample(sorted(live), min(len(live), rng.randint(0, 6))):
            actions.append(_remove(path, live[path], ts, with_values=rng.random() < 0.7))
            removed[path] = live.pop(path)
        if removed and rng.random() < 0.3:  # a path removed earlier comes back
            path = rng.choice(sorted(removed))
            actions.append(_add(path, removed[path], ts))
            live[path] = removed.pop(path)
        for _ in range(rng.randint(1, 5)):
            part = rng.choice(PARTS)
            path = f"p={part if part is not None else '__HIVE_DEFAULT_PARTITION__'}/f-{counter:04d}.parquet"
            counter += 1
            actions.append(_add(path, part, ts))
            live[path] = part
        (log / f"{version:020d}.json").write_text("\n".join(json.dumps(a) for a in actions) + "\n")
        if version in (7, 15):
            write_checkpoint(load_snapshot(Storage(str(root)), version))
            checkpoints.append(version)
        if version == 20:
            deltalake.DeltaTable(str(root), version=version).create_checkpoint()
            checkpoints.append(version)
    return checkpoints


@pytest.mark.parametrize("seed", [1, 2, 3, 4, 5])
def test_pruned_replay_of_random_histories_equals_the_full_replay(tmp_path: Path, seed: int) -> None:
    root = tmp_path / "t"
    assert _random_history(root, seed) == [7, 15, 20]
    storage = Storage(str(root))
    predicates = ["p = 'a'", "p IS NULL", "p = 'b' OR p = 'd'", "p > 'b'", "NOT (p = 'c')", "p = 'zz'"]
    compared = 0
    for version in (5, 7, 9, 15, 18, 20, 23):
        full = load_snapshot(storage, version)
        for predicate in predicates:
            assert _check(storage, full, predicate, version)
            compared += 1
    assert compared == 42
    # the latest version against delta-rs, which reads the deltalite and delta-rs checkpoints itself
    dt = deltalake.DeltaTable(str(root))
    for part in ("a", "b", "c", "d"):
        pruned = load_snapshot(storage, partition_filter=PartitionFilter(f"p = '{part}'"))
        theirs = {normalise_path(p, root) for p in dt.file_uris([("p", "=", part)])}
        assert {p for p in pruned.raw_files.column("path").to_pylist()} == theirs, part


def test_a_file_removed_after_the_checkpoint_in_a_pruned_partition_stays_removed(tmp_path: Path) -> None:
    """The superseded-key rule across the cut: a later commit removes checkpointed files of the selected partition
    and of another one, and re-adds one of them; the pruned replay holds exactly what the full one does."""
    root = tmp_path / "t"
    deltalake.write_deltalake(str(root), pa.table({"id": [1, 2, 3, 4], "p": ["x", "x", "y", "y"]}), partition_by=["p"])
    deltalake.write_deltalake(str(root), pa.table({"id": [5, 6], "p": ["x", "y"]}), partition_by=["p"], mode="append")
    deltalake.DeltaTable(str(root)).create_checkpoint()
    storage = Storage(str(root))
    before = load_snapshot(storage)
    x_files = sorted(p for p in before.raw_files.column("path").to_pylist() if p.startswith("p=x"))
    y_files = sorted(p for p in before.raw_files.column("path").to_pylist() if p.startswith("p=y"))
    assert (len(x_files), len(y_files)) == (2, 2)
    ts = 1_800_000_000_000
    commit = [
        {"commitInfo": {"timestamp": ts, "operation": "DELETE"}},
        _remove(x_files[0], "x", ts, with_values=False),
        _remove(y_files[0], "y", ts, with_values=True),
    ]
    (root / "_delta_log" / f"{before.version + 1:020d}.json").write_text("\n".join(map(json.dumps, commit)) + "\n")
    pruned = load_snapshot(storage, partition_filter=PartitionFilter("p = 'x'"))
    assert pruned.raw_files.column("path").to_pylist() == [x_files[1]]
    # the remove without partition values is kept as a tombstone of unknown partition; the other partition's is not
    assert pruned.tombstones.column("path").to_pylist() == [x_files[0]]
    assert {normalise_path(p, root) for p in deltalake.DeltaTable(str(root)).file_uris([("p", "=", "x")])} == {
        x_files[1]
    }


# -- what a pruned snapshot may not do, and bad input --------------------------------------------------------------


def test_a_pruned_snapshot_is_never_checkpointed_or_advanced(tmp_path: Path) -> None:
    root = tmp_path / "t"
    for i in range(3):
        deltalake.write_deltalake(str(root), pa.table({"id": [i], "p": [f"v{i}"]}), partition_by=["p"], mode="append")
    storage = Storage(str(root))
    pruned = load_snapshot(storage, partition_filter=PartitionFilter("p = 'v1'"))
    assert pruned.num_files == 1
    with pytest.raises(TransactionError, match="cannot be checkpointed"):
        write_checkpoint(pruned)
    assert advance_snapshot(pruned, pruned.version) is None
    assert not list((root / "_delta_log").glob("*.checkpoint*"))


def test_optimize_of_one_partition_that_lands_on_a_checkpoint_interval_checkpoints_every_file(tmp_path: Path) -> None:
    """The commit of a pruned OPTIMIZE at the checkpoint interval writes a checkpoint of the whole table (not of the
    partition it planned): delta-rs reads every file of every partition from it."""
    root = tmp_path / "t"
    deltalake.write_deltalake(
        str(root),
        pa.table({"id": [0], "p": ["a"]}),
        partition_by=["p"],
        configuration={"delta.checkpointInterval": "10"},
    )
    for i in range(1, 9):
        deltalake.write_deltalake(
            str(root), pa.table({"id": [i], "p": ["a" if i % 2 else "b"]}), partition_by=["p"], mode="append"
        )
    # version 8; OPTIMIZE of p = 'a' commits version 9: no checkpoint; one more append and OPTIMIZE of b: version 11
    table = DeltaTable(str(root))
    stats = optimize(table, where="p = 'a'")
    assert (stats.committed_version, stats.num_files_removed, stats.num_files_added) == (9, 5, 1)
    deltalake.write_deltalake(str(root), pa.table({"id": [9], "p": ["b"]}), partition_by=["p"], mode="append")
    stats = optimize(table, where="p = 'b'")
    assert (stats.committed_version, stats.num_files_removed) == (11, 5)
    assert not (root / "_delta_log" / f"{10:020d}.checkpoint.parquet").exists()
    # checkpointInterval 10: version 10 was the append (delta-rs checkpoints only on request), so write one at 20
    for i in range(8):
        deltalake.write_deltalake(str(root), pa.table({"id": [100 + i], "p": ["c"]}), partition_by=["p"], mode="append")
    stats = optimize(table, where="p = 'c'")
    assert stats.committed_version == 20
    assert (root / "_delta_log" / f"{20:020d}.checkpoint.parquet").exists()
    for log in (root / "_delta_log").glob("0000000000000000001[0-9].json"):
        log.unlink()  # readers now need the checkpoint for every partition
    dt = deltalake.DeltaTable(str(root))
    assert dt.version() == 20
    assert sorted(dt.to_pyarrow_table().column("id").to_pylist()) == list(range(10)) + list(range(100, 108))
    partitions = Counter(normalise_path(p, root).split("/")[0] for p in dt.file_uris())
    assert partitions == Counter({"p=a": 1, "p=b": 1, "p=c": 1})


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "airflow_provider_deltalite", *args], capture_output=True, text=True, timeout=120
    )


def test_a_malformed_where_is_one_line_exit_2_and_nothing_written(tmp_path: Path) -> None:
    root = tmp_path / "t"
    deltalake.write_deltalake(str(root), pa.table({"id": [1, 2], "p": ["x", "y"]}), partition_by=["p"])
    deltalake.write_deltalake(str(root), pa.table({"id": [3], "p": ["x"]}), partition_by=["p"], mode="append")
    before = tree_state(root)
    for where, problem in (
        ("p = ", "where"),
        ("id = 1", "where may only reference partition columns; 'id' is not one (partition columns: p)"),
        ("nope = 'x'", "nope"),
    ):
        done = _cli("optimize", str(root), "--where", where, "--json")
        assert done.returncode == 2, done
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 1 and problem in lines[0] and "Traceback" not in done.stderr, done.stderr
        assert done.stdout == ""
    assert tree_state(root) == before


def test_a_corrupt_checkpoint_part_is_one_line_naming_it_exit_2_and_nothing_written(tmp_path: Path) -> None:
    root = tmp_path / "t"
    for i in range(3):
        deltalake.write_deltalake(str(root), pa.table({"id": [i], "p": ["x"]}), partition_by=["p"], mode="append")
    deltalake.DeltaTable(str(root)).create_checkpoint()
    deltalake.write_deltalake(str(root), pa.table({"id": [3], "p": ["x"]}), partition_by=["p"], mode="append")
    log = root / "_delta_log"
    for v in range(3):
        (log / f"{v:020d}.json").unlink()  # no older state can replace the checkpoint
    checkpoint = log / f"{2:020d}.checkpoint.parquet"
    checkpoint.write_bytes(checkpoint.read_bytes()[:-40] + b"\0" * 40)  # a damaged footer
    before = tree_state(root)
    done = _cli("optimize", str(root), "--where", "p = 'x'", "--json")
    assert done.returncode == 2, done
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    assert f"checkpoint 2 file {checkpoint.name} is unreadable" in lines[0], lines[0]
    assert tree_state(root) == before


# -- snapshots of some file fields (describe, VACUUM) --------------------------------------------------------------


@pytest.mark.slow  # every corpus table: scheduled first (tests/conftest.py)
def test_describe_and_vacuum_fields_give_what_the_whole_snapshot_gives_on_every_corpus_table() -> None:
    """A snapshot of the sizes (describe) or of what VACUUM reads gives the same describe document and the same
    protected files as the whole snapshot, on every readable corpus table; and never its statistics."""
    from airflow_provider_deltalite.cli.documents import DESCRIBE_FILE_FIELDS, describe_document
    from airflow_provider_deltalite.engine.errors import InvalidArgument
    from airflow_provider_deltalite.maintenance.vacuum.paths import VACUUM_FILE_FIELDS, protected_files

    compared = 0
    for entry in corpus_tables():
        if entry.role != "positive":
            continue
        storage = Storage(str(entry.path))
        try:
            full = load_snapshot(storage)
        except DeltaLiteError:
            continue
        sizes = load_snapshot(storage, file_fields=DESCRIBE_FILE_FIELDS)
        assert describe_document(sizes) == describe_document(full), entry.name
        # what the CLI prints: the sizes summed a batch at a time
        streamed = stream_snapshot(storage, file_fields=DESCRIBE_FILE_FIELDS)
        assert describe_document(streamed) == describe_document(full), entry.name
        vacuum_view = load_snapshot(storage, file_fields=VACUUM_FILE_FIELDS)
        for horizon in (0, full.timestamp + 1):
            mine, theirs = protected_files(vacuum_view, horizon), protected_files(full, horizon)
            assert (mine.paths, mine.live, mine.tombstones_expired) == (
                theirs.paths,
                theirs.live,
                theirs.tombstones_expired,
            ), entry.name
        if full.num_files:
            with pytest.raises(InvalidArgument, match="without the files' stats"):
                sizes.stats  # noqa: B018
            with pytest.raises(TransactionError, match="cannot be checkpointed"):
                write_checkpoint(sizes)
            assert advance_snapshot(sizes, sizes.version) is None
        compared += 1
    assert compared >= 250


# -- the table as a stream (health) --------------------------------------------------------------------------------


@pytest.mark.slow  # every corpus table: scheduled first (tests/conftest.py)
def test_health_read_as_a_stream_equals_health_of_the_whole_snapshot_on_every_corpus_table(monkeypatch) -> None:
    """`table_health` without a snapshot reads the table as a stream, checkpoint batches of 3 rows here (so partitions,
    re-added paths and clustering bounds span batches); with the whole snapshot it sums one batch. Every figure of
    every readable corpus table agrees, on its clustering columns and on its first data column."""
    from airflow_provider_deltalite.engine import checkpoint_stream
    from airflow_provider_deltalite.maintenance.health.compute import table_health

    monkeypatch.setattr(checkpoint_stream, "BATCH_ROWS", 3)
    compared = Counter()
    for entry in corpus_tables():
        if entry.role != "positive":
            continue
        table = DeltaTable(str(entry.path))
        try:
            whole = table.snapshot()
        except DeltaLiteError:
            continue
        data_columns = [f["name"] for f in whole.schema["fields"] if f["name"] not in whole.partition_columns]
        for columns in (None, data_columns[:1] or None):
            try:
                expected = table_health(table, snapshot=whole, columns=columns, now=1_800_000_000_000)
            except DeltaLiteError:
                compared["refused"] += 1
                continue
            streamed = table_health(table, columns=columns, now=1_800_000_000_000)
            assert streamed.to_dict() == expected.to_dict(), entry.name
            compared["tables"] += 1
            compared["with a checkpoint"] += whole.segment.checkpoint is not None
            compared["partitioned"] += bool(whole.partition_columns)
            compared["with tombstones"] += expected.tombstones.files > 0
            compared["with clustering figures"] += bool(expected.clustering)
    assert compared["tables"] >= 400, compared
    assert compared["with a checkpoint"] >= 50, compared
    assert compared["partitioned"] >= 80, compared
    assert compared["with tombstones"] >= 40, compared
    assert compared["with clustering figures"] >= 150, compared


def test_row_groups_of_other_partitions_are_skipped_on_their_parsed_partition_values(
    tmp_path: Path, monkeypatch
) -> None:
    """A checkpoint with `add.partitionValues_parsed` (deltalite's writer, as Spark's, writes it with
    `delta.checkpoint.writeStatsAsStruct`) rewritten in row
    groups of 3 rows: planning one partition decodes the partition values of the row groups that may hold it only,
    and the result is the full replay's and delta-rs's, a remove after the checkpoint included."""
    import pyarrow.parquet as pq

    from airflow_provider_deltalite.engine import checkpoint_stream

    root = tmp_path / "t"
    struct_stats = {"delta.checkpoint.writeStatsAsStruct": "true"}
    for part in "abcdef":
        for i in range(3):
            data = pa.table({"id": [i], "p": [part]})
            deltalake.write_deltalake(str(root), data, partition_by=["p"], mode="append", configuration=struct_stats)
    write_checkpoint(load_snapshot(Storage(str(root))))
    checkpoint = root / "_delta_log" / f"{17:020d}.checkpoint.parquet"
    rows = pq.read_table(checkpoint)
    assert "partitionValues_parsed" in rows.schema.field("add").type.names
    pq.write_table(rows, checkpoint, row_group_size=3)
    assert pq.ParquetFile(checkpoint).num_row_groups == 7  # 18 adds, protocol and metaData
    storage = Storage(str(root))
    full = load_snapshot(storage)
    c_file = next(p for p in full.raw_files.column("path").to_pylist() if p.startswith("p=c"))
    commit = [{"commitInfo": {"timestamp": 1_800_000_000_000}}, _remove(c_file, "c", 1_800_000_000_000, True)]
    (root / "_delta_log" / f"{18:020d}.json").write_text("\n".join(map(json.dumps, commit)) + "\n")
    full = load_snapshot(storage)
    decoded: list[int] = []
    real = checkpoint_stream.selected_rows

    def counting(pf, rg, kinds, keep, *read):
        decoded.append(rg)
        return real(pf, rg, kinds, keep, *read)

    monkeypatch.setattr(checkpoint_stream, "selected_rows", counting)
    # no partition is null: no row group's values are decoded for IS NULL
    for predicate, least, most in (
        ("p = 'c'", 1, 2),
        ("p = 'a' OR p = 'f'", 2, 4),
        ("p > 'd'", 1, 3),
        ("p IS NULL", 0, 0),
    ):
        decoded.clear()
        assert _check(storage, full, predicate, None)
        assert least <= len(decoded) <= most, (predicate, decoded)
    pruned = load_snapshot(storage, partition_filter=PartitionFilter("p = 'c'"))
    assert sorted(pruned.raw_files.column("path").to_pylist()) == sorted(
        normalise_path(p, root) for p in deltalake.DeltaTable(str(root)).file_uris([("p", "=", "c")])
    )
    assert len(pruned.raw_files) == 2
