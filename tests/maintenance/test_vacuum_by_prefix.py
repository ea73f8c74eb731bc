"""VACUUM FULL compares one group of top-level directories at a time (`vacuum.by_prefix`): its files to delete
against delta-rs 1.6.3's own FULL vacuum (``DeltaTable.vacuum(dry_run=True, retention_hours=0,
enforce_retention_duration=False, full=True)``) on partitioned (one and two levels), unpartitioned, deletion-vector
and special-character tables, with one top-level directory per group and with the default groups.

delta-rs's list is read as the protocol's VACUUM reads a listing: it names each file under a percent-escaped
directory twice (as listed, and escaped once more; only one exists), and it lists hidden names (``.x.crc``) that
the protocol's VACUUM never lists: both are normalised away. delta-rs also deletes the deletion-vector files of live
files; those are shown to be needed (delta-rs cannot read the table without them) rather than trusted either way.
"""

from __future__ import annotations

import collections
import os
import uuid
from pathlib import Path
from urllib.parse import unquote

import deltalake
import pyarrow as pa
import pytest

from airflow_provider_deltalite import DeltaTable
from airflow_provider_deltalite.maintenance.vacuum import by_prefix, vacuum
from airflow_provider_deltalite.maintenance.vacuum.spill import KEPT, LIVE, PrefixSpill, groups, top_prefix
from tests.conformance.corpus import row_multiset
from tests.helpers import copy_table

RETAIN_NOTHING = {"retention_hours": 0, "enforce_retention_duration": False}


def _hidden(rel: str, partition_columns: tuple[str, ...]) -> bool:
    """The protocol's hidden rule (`isHiddenDirectory`), written out here independently of deltalite's."""
    for part in rel.split("/"):
        if part.startswith(("_", ".")) and not part.startswith(
            ("_change_data", "_delta_index", *(f"{c}=" for c in partition_columns))
        ):
            return True
    return False


def _delta_rs_plan(path: Path, partition_columns: tuple[str, ...] = ()) -> set[str]:
    """delta-rs's FULL dry run, as paths on disk relative to the root, hidden names left out."""
    listed = deltalake.DeltaTable(str(path)).vacuum(dry_run=True, full=True, **RETAIN_NOTHING)
    out = set()
    for rel in listed:
        on_disk = rel if (path / rel).is_file() else unquote(rel)
        assert (path / on_disk).is_file(), rel
        if not _hidden(on_disk, partition_columns):
            out.add(on_disk)
    return out


def _plans(path: Path, monkeypatch: pytest.MonkeyPatch) -> set[str]:
    """deltalite's dry run, with one top-level directory per group and with the default groups (the same)."""
    default = vacuum(DeltaTable(str(path)), dry_run=True, **RETAIN_NOTHING)
    with monkeypatch.context() as m:
        m.setattr(by_prefix, "GROUP_PATHS", 1)
        one_by_one = vacuum(DeltaTable(str(path)), dry_run=True, **RETAIN_NOTHING)
    assert one_by_one.to_dict()["filesToDelete"] == default.to_dict()["filesToDelete"]
    assert one_by_one.dirs_to_delete == default.dirs_to_delete
    assert (one_by_one.dirs_present_before_delete, one_by_one.files_and_dirs_present_before_delete) == (
        default.dirs_present_before_delete,
        default.files_and_dirs_present_before_delete,
    )
    planned = [f["path"] for f in default.files_to_delete]
    assert planned == sorted(planned)
    return set(planned)


def _visible(path: Path, partition_columns: tuple[str, ...]) -> set[str]:
    """The files on disk a listing would find, relative to the root."""
    out = set()
    for dirpath, _dirs, names in os.walk(path):
        for name in names:
            rel = os.path.relpath(os.path.join(dirpath, name), path)
            if not _hidden(rel, partition_columns):
                out.add(rel)
    return out


def _orphan(path: Path, rel: str) -> str:
    (path / rel).parent.mkdir(parents=True, exist_ok=True)
    (path / rel).write_bytes(b"never committed")
    return rel


def _rows(path: Path) -> collections.Counter:
    table = deltalake.QueryBuilder().register("t", deltalake.DeltaTable(str(path))).execute("select * from t")
    table = pa.table(table.read_all())
    return row_multiset(table, table.column_names)


def _history(path: Path, partition_by: list[str] | None, values: list[dict[str, object]]) -> None:
    """Two appends per partition value, then an overwrite of the first: live files, tombstones, untouched files."""
    for round_ in range(2):
        for k, value in enumerate(values):
            data = pa.table({"id": pa.array([k + 10 * round_], pa.int64()), **{c: [v] for c, v in value.items()}})
            deltalake.write_deltalake(str(path), data, mode="append", partition_by=partition_by)
    first = values[0]
    predicate = " AND ".join(f"{c} = '{v}'" for c, v in first.items()) if partition_by else None
    data = pa.table({"id": pa.array([99], pa.int64()), **{c: [v] for c, v in first.items()}})
    deltalake.write_deltalake(str(path), data, mode="overwrite", partition_by=partition_by, predicate=predicate)


def test_one_level_of_partitions(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "t"
    _history(path, ["p"], [{"p": v} for v in ("a", "b", "c")])
    orphans = {_orphan(path, "p=b/orphan.parquet"), _orphan(path, "root-orphan.parquet")}
    orphans.add(_orphan(path, "p=new/never.parquet"))  # a directory no commit names
    theirs = _delta_rs_plan(path, ("p",))
    assert orphans < theirs and len(theirs) == 5  # and the two overwritten files of p=a
    assert _plans(path, monkeypatch) == theirs


def test_two_levels_of_partitions(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "t"
    _history(path, ["p", "q"], [{"p": p, "q": q} for p in ("a", "b") for q in ("x", "y")])
    orphans = {_orphan(path, "p=a/q=y/orphan.parquet"), _orphan(path, "p=b/orphan.parquet")}
    theirs = _delta_rs_plan(path, ("p", "q"))
    assert orphans < theirs and len(theirs) == 4
    assert _plans(path, monkeypatch) == theirs
    with monkeypatch.context() as m:
        m.setattr(by_prefix, "GROUP_PATHS", 1)
        vacuum(DeltaTable(str(path)), **RETAIN_NOTHING)
    live = {u[len(str(path)) + 1 :] for u in deltalake.DeltaTable(str(path)).file_uris()}
    assert _visible(path, ("p", "q")) == live and len(live) == 7


def test_unpartitioned(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "t"
    _history(path, None, [{"p": "a"}, {"p": "b"}])
    orphans = {_orphan(path, "orphan.parquet"), _orphan(path, "sub/dir/orphan.parquet")}
    theirs = _delta_rs_plan(path)
    assert orphans < theirs and len(theirs) == 6  # the four files the overwrite removed
    assert _plans(path, monkeypatch) == theirs


def test_special_characters(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "t"
    _history(path, ["p"], [{"p": v} for v in ("a b", "a%b", "a=b", "ü/x", "a&b", "%25")])
    orphan = _orphan(path, "p=a%20b/orphan.parquet")  # the directory as written: escaped once
    theirs = _delta_rs_plan(path, ("p",))
    assert orphan in theirs and len(theirs) == 3
    assert _plans(path, monkeypatch) == theirs


@pytest.mark.parametrize(
    "table", ["delta-golden/dv-partitioned-with-checkpoint", "delta-kernel-defaults/basic-dv-with-checkpoint"]
)
def test_deletion_vectors(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, table: str) -> None:
    path = copy_table(table, tmp_path / "t")
    orphans = {_orphan(path, "orphan.parquet"), _orphan(path, f"deletion_vector_{uuid.uuid4()}.bin")}
    theirs = _delta_rs_plan(path, ("part",))
    mine = _plans(path, monkeypatch)
    assert orphans <= mine < theirs
    kept = theirs - mine
    assert kept and all(p.startswith("deletion_vector_") and p.endswith(".bin") for p in kept)
    rows = _rows(path)
    vacuum(DeltaTable(str(path)), **RETAIN_NOTHING)
    assert _rows(path) == rows and not any((path / p).exists() for p in mine)
    # what delta-rs would also delete is the live files' deletion vectors: without one, delta-rs reads no more
    (path / sorted(kept)[0]).unlink()
    with pytest.raises(Exception, match=r"(?i)not found|no such file"):
        _rows(path)


def test_a_live_file_and_an_orphan_of_another_directory_share_a_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "t"
    for v in ("a", "b"):
        deltalake.write_deltalake(str(path), pa.table({"id": [1], "p": [v]}), mode="append", partition_by=["p"])
    (live,) = os.listdir(path / "p=a")
    orphans = {_orphan(path, f"p=b/{live}"), _orphan(path, live)}  # the same name in p=b and at the root
    theirs = _delta_rs_plan(path, ("p",))
    assert theirs == orphans
    assert _plans(path, monkeypatch) == theirs
    vacuum(DeltaTable(str(path)), **RETAIN_NOTHING)
    assert (path / "p=a" / live).exists() and not any((path / p).exists() for p in orphans)


def test_the_spill_reads_back_each_prefix() -> None:
    assert top_prefix(pa.array(["a/b/c.parquet", "c.parquet", "p=x y/z", "a/d"])).to_pylist() == [
        "a",
        "",
        "p=x y",
        "a",
    ]
    with PrefixSpill() as spill:
        spill.add(pa.array(["b/1", "a/1", "x", "b/2"]), LIVE)
        spill.add(pa.array(["a/2", "a/1"]), KEPT)
        spill.add(pa.array([], pa.string()), LIVE)
        spill.finish()
        a = spill.read(["a"])
        assert (a.protected, a.live) == (frozenset({"a/1", "a/2"}), frozenset({"a/1"}))
        both = spill.read(["b", ""])
        assert (both.protected, both.live) == (frozenset({"b/1", "b/2", "x"}),) * 2
        assert spill.read(["absent"]).protected == frozenset()
        assert [spill.count(p) for p in ("a", "b", "", "absent")] == [3, 2, 1, 0]
    counts = {"a": 3, "b": 2, "c": 9, "d": 1, "e": 1}.get
    items = [(p, 0) for p in "abcde"]
    assert [[p for p, _ in g] for g in groups(items, lambda p: counts(p) or 0, 5, 2)] == [
        ["a", "b"],
        ["c"],
        ["d", "e"],
    ]


def test_a_snapshot_without_every_file_still_protects_every_file(tmp_path: Path) -> None:
    """A partition-pruned snapshot (or the CLI's streamed one, which holds no file) passed in is read as the version
    it names, whole: its missing files are not orphans."""
    path = tmp_path / "t"
    _history(path, ["p"], [{"p": v} for v in ("a", "b")])
    orphan = _orphan(path, "p=b/orphan.parquet")
    theirs = _delta_rs_plan(path, ("p",))
    assert orphan in theirs and len(theirs) == 3
    table = DeltaTable(str(path))
    for snapshot in (table.snapshot_for_partitions("p = 'a'"), table.snapshot(file_fields=("size",))):
        for mode in ("full", "lite"):
            stats = vacuum(table, snapshot=snapshot, mode=mode, dry_run=True, **RETAIN_NOTHING)
            planned = {f["path"] for f in stats.files_to_delete}
            assert planned == (theirs if mode == "full" else theirs - {orphan}), (snapshot.pruned_by, mode)


def test_planned_files_merge_sorted_runs_and_compare_as_pairs() -> None:
    from array import array

    from airflow_provider_deltalite.maintenance.vacuum.plan import PlannedFiles

    runs = [(("a.parquet", 1), ("b/x", 2)), (("a/z", 3),), ()]
    files = PlannedFiles.merged(runs)
    assert files == (("a.parquet", 1), ("a/z", 3), ("b/x", 2))
    assert files == [["a.parquet", 1], ["a/z", 3], ["b/x", 2]]
    assert files != (("a.parquet", 1),) and len(files) == 3 and files[1] == ("a/z", 3)
    assert files[1:] == (("a/z", 3), ("b/x", 2)) and list(files) == [("a.parquet", 1), ("a/z", 3), ("b/x", 2)]
    assert (files.paths, files.sizes) == (["a.parquet", "a/z", "b/x"], array("q", [1, 3, 2]))
