"""Adversarial tables (issue 9, item 3): tables a production user could meet damaged, hostile or odd, each opened and
maintained with every operation that applies.

Every table is generated here: JSON commits and Parquet files written by hand, a few written by delta-rs 1.6.3 or by
deltalite's checkpoint writer and then tampered with. The table is ``tmp_path/t``; beside it lies a sentinel tree
``tmp_path/outside`` that links and paths in the table point at. For each (table, operation) the test asserts exactly
one of: the typed error (its exact class and a message fragment) with nothing written anywhere under ``tmp_path``, or
the documented safe outcome (the exact rows, files, checkpoint, or what VACUUM deleted). Whatever happens, the outside
tree stays byte for byte as it was. docs/adversarial_tables.md lists every case with its behaviour.
"""

from __future__ import annotations

import json
import os
import posixpath
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote

import deltalake
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from airflow_provider_deltalite import DeltaTable
from airflow_provider_deltalite.cli import describe_document
from airflow_provider_deltalite.engine.checkpoint_writer import write_checkpoint
from airflow_provider_deltalite.engine.errors import (
    CorruptLog,
    DeltaLiteError,
    LogGap,
    ProtocolNotSupported,
    SchemaError,
    StorageError,
    VacuumRefused,
)
from airflow_provider_deltalite.engine.features import ensure_writable
from airflow_provider_deltalite.engine.scan import scan
from airflow_provider_deltalite.maintenance.vacuum import vacuum
from tests.helpers import cli_failure, tree_state

ROOT = Path(__file__).resolve().parents[2]
T0 = 1_700_000_000_000
OLD_NS = time.time_ns() - 30 * 24 * 3_600 * 10**9
RETAIN_NOTHING = {"retention_hours": 0, "enforce_retention_duration": False}
ID = {"name": "id", "type": "long", "nullable": True, "metadata": {}}
P = {"name": "p", "type": "string", "nullable": True, "metadata": {}}


# -- writing tables by hand ------------------------------------------------------------------------------------------


def protocol(
    reader: int = 1, writer: int = 2, reader_features: list | None = None, writer_features: list | None = None
) -> dict:
    action: dict[str, Any] = {"minReaderVersion": reader, "minWriterVersion": writer}
    if reader_features is not None:
        action["readerFeatures"] = reader_features
    if writer_features is not None:
        action["writerFeatures"] = writer_features
    return {"protocol": action}


def metadata(
    fields: Sequence[dict] = (ID,),
    partition_columns: Sequence[str] = (),
    schema_string: str | None = None,
    configuration: dict | None = None,
) -> dict:
    schema = schema_string if schema_string is not None else json.dumps({"type": "struct", "fields": list(fields)})
    return {
        "metaData": {
            "id": "00000000-0000-0000-0000-0000000000aa",
            "format": {"provider": "parquet", "options": {}},
            "schemaString": schema,
            "partitionColumns": list(partition_columns),
            "configuration": configuration or {},
            "createdTime": T0,
        }
    }


def info(operation: str = "WRITE") -> dict:
    return {"commitInfo": {"timestamp": T0, "operation": operation, "operationParameters": {}}}


def add(path: str, size: int = 10, partition: dict | None = None, stats: str | None = None) -> dict:
    action: dict[str, Any] = {
        "path": path,
        "partitionValues": partition or {},
        "size": size,
        "modificationTime": T0,
        "dataChange": True,
    }
    if stats is not None:
        action["stats"] = stats
    return {"add": action}


def remove(path: str) -> dict:
    return {"remove": {"path": path, "deletionTimestamp": T0, "dataChange": True, "size": 10}}


def id_stats(ids: Sequence[int]) -> str:
    return json.dumps({"numRecords": len(ids), "minValues": {"id": min(ids)}, "maxValues": {"id": max(ids)}})


@dataclass
class Table:
    """A table written by hand at ``tmp_path/t``, with the sentinel tree ``tmp_path/outside`` beside it.

    ``notes`` carries what a build learned for its checks (an oracle's answer, generated file names).
    """

    tmp: Path
    notes: dict[str, Any] = field(default_factory=dict)

    @property
    def root(self) -> Path:
        return self.tmp / "t"

    @property
    def outside(self) -> Path:
        return self.tmp / "outside"

    @property
    def log(self) -> Path:
        return self.root / "_delta_log"

    def data(self, rel: str, ids: Sequence[int], *, path: str | None = None, partition: dict | None = None) -> dict:
        """Write a Parquet file of ``ids`` at ``rel`` (on disk); its add action, logged as ``path`` (default: ``rel``
        URI-encoded as writers do)."""
        full = self.root / rel
        full.parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(pa.table({"id": pa.array(ids, pa.int64())}), full)
        logged = path if path is not None else quote(rel, safe="/=")
        return add(logged, full.stat().st_size, partition, id_stats(ids))

    def commit(self, version: int, *actions: dict, raw: bytes | None = None) -> Path:
        self.log.mkdir(parents=True, exist_ok=True)
        target = self.log / f"{version:020d}.json"
        target.write_bytes(raw if raw is not None else "".join(json.dumps(a) + "\n" for a in actions).encode())
        return target

    def base(self, *, protocol_action: dict | None = None, meta: dict | None = None) -> None:
        """v0: protocol, metaData, part-0 (ids 0, 1); v1: part-1 (ids 2, 3)."""
        self.commit(0, protocol_action or protocol(), meta or metadata(), self.data("part-0.parquet", [0, 1]), info())
        self.commit(1, self.data("part-1.parquet", [2, 3]), info())


def _sentinel(outside: Path) -> None:
    (outside / "dir").mkdir(parents=True)
    pq.write_table(pa.table({"id": pa.array([100, 101], pa.int64())}), outside / "part-out.parquet")
    pq.write_table(pa.table({"id": pa.array([200], pa.int64())}), outside / "dir" / "part-0.parquet")
    (outside / "sentinel.txt").write_text("do not touch\n")


def _age(root: Path) -> None:
    """Every entry of the table 30 days old (links themselves, never their targets)."""
    for dirpath, dirs, names in os.walk(root):
        for name in dirs + names:
            os.utime(Path(dirpath) / name, ns=(OLD_NS, OLD_NS), follow_symlinks=False)


def _entries(root: Path) -> set[str]:
    """Every file, link and directory below ``root`` outside `_delta_log`, relative (links are not followed)."""
    out = set()
    for dirpath, dirs, names in os.walk(root):
        for name in dirs + names:
            rel = str((Path(dirpath) / name).relative_to(root))
            if rel != "_delta_log" and not rel.startswith("_delta_log/"):
                out.add(rel)
    return out


# -- the operations --------------------------------------------------------------------------------------------------


def _rows(table: DeltaTable) -> list[tuple]:
    rows, _ = scan(table.snapshot())
    return sorted((tuple(r.values()) for r in rows.to_pylist()), key=repr)


def _rewrite(table: DeltaTable, stats: Any) -> tuple:
    """(committed version, files removed, files added), the rows afterwards, and the directories of the new files."""
    version = stats.committed_version
    new_dirs: set[str] = set()
    if version is not None:
        commit = Path(table.uri) / "_delta_log" / f"{version:020d}.json"
        for line in commit.read_text().splitlines():
            action = json.loads(line)
            if "add" in action:
                new_dirs.add(posixpath.dirname(unquote(action["add"]["path"])) or ".")
    return (version, stats.num_files_removed, stats.num_files_added), _rows(table), sorted(new_dirs)


def _vacuum(table: DeltaTable, **options: Any) -> tuple[list[str], tuple[int, ...]]:
    """What a real VACUUM deleted (found by listing before and after) and the versions it committed."""
    before = _entries(Path(table.uri))
    stats = vacuum(table, **RETAIN_NOTHING, **options)
    gone = sorted(before - _entries(Path(table.uri)))
    assert stats.objects_deleted == len(gone)
    return gone, tuple(stats.committed_versions)


def _vacuum_dry(table: DeltaTable, **options: Any) -> list[str]:
    stats = vacuum(table, dry_run=True, **RETAIN_NOTHING, **options)
    return sorted(f["path"] for f in stats.files_to_delete)


def _checkpoint(table: DeltaTable) -> tuple:
    """As `deltalite checkpoint` does; then the version, whether `_last_checkpoint` moved, the checkpoint a fresh
    reader starts from, and the live paths it reads."""
    snap = table.snapshot()
    ensure_writable(snap.protocol, snap.table_uri)
    written = write_checkpoint(snap)
    again = DeltaTable(table.uri).snapshot()
    start = again.segment.checkpoint.version if again.segment.checkpoint else None
    return written.version, written.last_checkpoint_updated, start, sorted(again.raw_files.column("path").to_pylist())


def _describe(table: DeltaTable) -> tuple:
    doc = describe_document(table.snapshot())
    return doc["version"], doc["numFiles"], doc["partitionColumns"], [f["name"] for f in doc["schema"]["fields"]]


OPS: dict[str, Callable[[DeltaTable], Any]] = {
    "load": lambda t: (lambda s: (s.version, sorted(s.raw_files.column("path").to_pylist())))(t.snapshot()),
    "describe": _describe,
    "scan": _rows,
    "optimize": lambda t: _rewrite(t, t.optimize()),
    "zorder": lambda t: _rewrite(t, t.zorder(["id"])),
    "vacuum_dry": _vacuum_dry,
    "vacuum": _vacuum,
    "lite_dry": lambda t: _vacuum_dry(t, mode="lite"),
    "lite": lambda t: _vacuum(t, mode="lite"),
    "checkpoint": _checkpoint,
    "changes": lambda t: [(c.version, c.kind) for c in t.changes(since=-1).changes],
    # only for tables whose stats are damaged: a file whose stats cannot be read is never skipped
    "scan_id_3": lambda t: sorted(tuple(r.values()) for r in scan(t.snapshot(), filter="id = 3")[0].to_pylist()),
}
EVERY = ("load", "describe", "scan", "optimize", "zorder", "vacuum_dry", "vacuum", "checkpoint", "changes")
WITH_LITE = (*EVERY, "lite_dry", "lite")
WRITES = ("optimize", "zorder", "vacuum_dry", "vacuum", "lite_dry", "lite", "checkpoint")


# -- expectations ----------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Raises:
    """The operation raises exactly ``error`` with ``fragment`` in its message, and writes nothing."""

    error: type[DeltaLiteError]
    fragment: str


@dataclass(frozen=True)
class Gives:
    """The operation returns ``value`` (or ``value(result, table)`` asserts what it returned)."""

    value: Any


Expect = Raises | Gives


def every(expect: Expect, ops: Sequence[str] = WITH_LITE) -> dict[str, Expect]:
    return dict.fromkeys(ops, expect)


BASE_ROWS = [(0,), (1,), (2,), (3,)]
BASE_FILES = ["part-0.parquet", "part-1.parquet"]


def normal(
    version: int,
    live: Sequence[str],
    rows: list[tuple],
    *,
    columns: Sequence[str] = ("id",),
    partition_columns: Sequence[str] = (),
    compacted: tuple[int, int] | None = None,
    clustered: tuple[int, int] | None = None,
    new_dirs: Sequence[str] = (".",),
    clustered_dirs: Sequence[str] | None = None,
    vacuumed: Sequence[str] = (),
    lite: Sequence[str] = (),
    changes: list[tuple[int, str]] | None = None,
) -> dict[str, Expect]:
    """What each operation gives on a table that reads normally at ``version`` with ``live`` files and ``rows``.

    OPTIMIZE and Z-order commit ``version + 1`` (``compacted``/``clustered``: files removed and added, default all
    into one; ``new_dirs``/``clustered_dirs``: where the new files are, decoded), VACUUM commits START and END after
    ``version`` and deletes exactly ``vacuumed`` (LITE: ``lite``).
    """
    following = version + 1
    compacted = compacted or (len(live), 1)
    return {
        "load": Gives((version, sorted(live))),
        "describe": Gives((version, len(live), list(partition_columns), list(columns))),
        "scan": Gives(rows),
        "optimize": Gives(((following, *compacted), rows, list(new_dirs))),
        "zorder": Gives(((following, *(clustered or compacted)), rows, list(clustered_dirs or new_dirs))),
        "vacuum_dry": Gives(sorted(vacuumed)),
        "vacuum": Gives((sorted(vacuumed), (following, following + 1))),
        "lite_dry": Gives(sorted(lite)),
        "lite": Gives((sorted(lite), (following, following + 1))),
        "checkpoint": Gives((version, True, version, sorted(live))),
        "changes": Gives(changes if changes is not None else [(v, "data") for v in range(version + 1)]),
    }


@dataclass(frozen=True)
class Case:
    """One adversarial table: how to build it, the operations that apply, and what each must do (``expect`` may be a
    function of the built table when the answer names its temporary path)."""

    id: str
    build: Callable[[Table], None]
    expect: dict[str, Expect] | Callable[[Table], dict[str, Expect]]
    ops: Sequence[str] = EVERY
    watch: Sequence[str] = ()  # files outside tmp_path that must stay untouched too

    def expectations(self, table: Table) -> dict[str, Expect]:
        return self.expect(table) if callable(self.expect) else self.expect


CASES: list[Case] = []


def case(
    id: str,
    expect: dict[str, Expect] | Callable[[Table], dict[str, Expect]],
    *,
    ops: Sequence[str] = EVERY,
    watch: Sequence[str] = (),
) -> Callable[[Callable[[Table], None]], Callable[[Table], None]]:
    def register(build: Callable[[Table], None]) -> Callable[[Table], None]:
        CASES.append(Case(id, build, expect, ops, watch))
        return build

    return register


# -- paths that leave the root, or name another store ----------------------------------------------------------------

OUTSIDE_ROWS = sorted([*BASE_ROWS, (100,), (101,)], key=repr)


@case("path-dotdot-add-outside", normal(2, [*BASE_FILES, "../outside/part-out.parquet"], OUTSIDE_ROWS))
def _(t: Table) -> None:
    # RFC 3986 (and Spark) resolve it to a file outside the root: read like an absolute path, never deleted
    t.base()
    t.commit(2, add("../outside/part-out.parquet", (t.outside / "part-out.parquet").stat().st_size), info())


@case("path-dotdot-remove-outside", normal(2, BASE_FILES, BASE_ROWS), ops=WITH_LITE)
def _(t: Table) -> None:
    t.base()
    t.commit(2, remove("../outside/part-out.parquet"), remove("../outside/sentinel.txt"), remove("a/../../x"), info())


@case("path-dotdot-back-into-root", normal(1, ["../t/part-0.parquet", "part-1.parquet"], BASE_ROWS), ops=WITH_LITE)
def _(t: Table) -> None:
    # `../t/part-0.parquet` is part-0.parquet itself: VACUUM must protect it (FULL deleted it before the fix)
    t.commit(0, protocol(), metadata(), t.data("part-0.parquet", [0, 1], path="../t/part-0.parquet"), info())
    t.commit(1, t.data("part-1.parquet", [2, 3]), info())


@case(
    "path-absolute-through-dotdot",
    lambda t: normal(1, [f"{t.root}/../t/part-0.parquet", "part-1.parquet"], BASE_ROWS),
    ops=WITH_LITE,
)
def _(t: Table) -> None:
    t.commit(0, protocol(), metadata(), t.data("part-0.parquet", [0, 1], path=f"{t.root}/../t/part-0.parquet"), info())
    t.commit(1, t.data("part-1.parquet", [2, 3]), info())


@case(
    "path-absolute-etc-passwd",
    normal(2, ["/etc/passwd", *BASE_FILES], BASE_ROWS)
    | every(Raises(StorageError, "data file /etc/passwd is unreadable"), ("scan", "optimize", "zorder")),
    ops=WITH_LITE,
    watch=("/etc/passwd", "/etc/group"),
)
def _(t: Table) -> None:
    t.base()
    t.commit(2, add("/etc/passwd"), remove("/etc/group"), info())


@case(
    "path-file-uri-outside",
    lambda t: normal(2, [f"file://{quote(str(t.outside))}/part-out.parquet", *BASE_FILES], OUTSIDE_ROWS),
    ops=WITH_LITE,
)
def _(t: Table) -> None:
    t.base()
    uri = f"file://{quote(str(t.outside))}/part-out.parquet"
    t.commit(2, add(uri, (t.outside / "part-out.parquet").stat().st_size), remove(f"file://{t.outside}/dir"), info())


@case(
    "path-other-store-uri",
    normal(2, [*BASE_FILES, "s3://other-bucket/t/part-0.parquet"], BASE_ROWS)
    | every(
        Raises(StorageError, "data file s3://other-bucket/t/part-0.parquet is on another store (s3) than the table"),
        ("scan", "optimize", "zorder"),
    ),
    ops=WITH_LITE,
)
def _(t: Table) -> None:
    t.base()
    t.commit(2, add("s3://other-bucket/t/part-0.parquet"), remove("gs://bucket/t/part-1.parquet"), info())


@case(
    "path-invalid-uri",
    every(Raises(CorruptLog, "the log names a data file by an invalid URI 's3://[bucket/x.parquet'"))
    | {"changes": Gives([(0, "data"), (1, "data"), (2, "data")])},
)
def _(t: Table) -> None:
    t.base()
    t.commit(2, add("s3://[bucket/x.parquet"), info())


# -- partition values ------------------------------------------------------------------------------------------------

# label: (value, its directory as Spark escapes it: the characters special in paths or Hive specs as %XX)
PARTITION_VALUES: dict[str, tuple[str | None, str]] = {
    "slash": ("a/b", "p=a%2Fb"),
    "percent": ("100%", "p=100%25"),
    "percent-2f": ("%2F", "p=%252F"),
    "newline": ("x\ny", "p=x%0Ay"),
    "unicode": ("ünï😀 ß", "p=ünï😀 ß"),
    "empty-string": ("", "p=__HIVE_DEFAULT_PARTITION__"),
    "null": (None, "p=__HIVE_DEFAULT_PARTITION__"),
}


def _partitioned(values: Sequence[tuple[str | None, str]]) -> Callable[[Table], None]:
    """v0: schema (id, p) partitioned by p; v1: a file per value (ids 0,1 then 2,3) in its escaped directory (the log
    path URI-encodes it once more), and one file in p=z (id 9)."""

    def build(t: Table) -> None:
        t.commit(0, protocol(), metadata((ID, P), ["p"]), info())
        files = [
            t.data(f"{directory}/part-{i}.parquet", [2 * i, 2 * i + 1], partition={"p": value})
            for i, (value, directory) in enumerate(values)
        ]
        t.commit(1, *files, t.data("p=z/part-9.parquet", [9], partition={"p": "z"}), info())

    return build


def _partitioned_expectations(values: Sequence[tuple[str | None, str]]) -> dict[str, Expect]:
    # the protocol: an empty partition value is null (so "" and null share a partition)
    read = [None if v == "" else v for v, _ in values]
    logged = [quote(f"{directory}/part-{i}.parquet", safe="/=") for i, (_, directory) in enumerate(values)]
    return normal(
        1,
        [*logged, "p=z/part-9.parquet"],
        sorted([(0, read[0]), (1, read[0]), (2, read[1]), (3, read[1]), (9, "z")], key=repr),
        columns=("id", "p"),
        partition_columns=("p",),
        compacted=(2, 1),
        clustered=(3, 2),
        new_dirs=[values[0][1]],
        clustered_dirs=sorted([values[0][1], "p=z"]),
        changes=[(0, "metadata"), (1, "data")],
    )


for _label, _entry in PARTITION_VALUES.items():
    case(f"partition-value-{_label}", _partitioned_expectations([_entry, _entry]))(_partitioned([_entry, _entry]))
_both = [PARTITION_VALUES["empty-string"], PARTITION_VALUES["null"]]
case("partition-value-empty-string-and-null", _partitioned_expectations(_both))(_partitioned(_both))


DELTA_RS_VALUES = ["a/b", "100%", "%2F", "x\ny", "ünï😀 ß", None]


def _delta_rs_rows(root: Path) -> list[tuple]:
    table = deltalake.QueryBuilder().register("t", deltalake.DeltaTable(str(root))).execute("select id, p from t")
    return sorted((tuple(r.values()) for r in pa.table(table.read_all()).to_pylist()), key=repr)


def _delta_rs_paths(root: Path) -> list[str]:
    return sorted(pa.table(deltalake.DeltaTable(str(root)).get_add_actions(flatten=True)).column("path").to_pylist())


@case(
    "partition-values-written-by-delta-rs",
    lambda t: normal(
        1,
        t.notes["paths"],
        t.notes["rows"],
        columns=("id", "p"),
        partition_columns=("p",),
        compacted=(12, 6),
        clustered=(12, 6),
        new_dirs=sorted(d for v, d in PARTITION_VALUES.values() if v in DELTA_RS_VALUES),
    ),
)
def _(t: Table) -> None:
    for ids in ([1, 2, 3, 4, 5, 6], [7, 8, 9, 10, 11, 12]):
        rows = pa.table({"id": pa.array(ids, pa.int64()), "p": pa.array(DELTA_RS_VALUES, pa.string())})
        deltalake.write_deltalake(str(t.root), rows, partition_by=["p"], mode="append")
    t.notes["paths"] = _delta_rs_paths(t.root)
    t.notes["rows"] = _delta_rs_rows(t.root)  # the oracle: deltalite reads the same rows
    assert len(t.notes["paths"]) == 12 and len(t.notes["rows"]) == 12


# -- symbolic links inside the table ---------------------------------------------------------------------------------


def _links(t: Table) -> None:
    """A link to a file outside, a link to a directory outside holding Parquet files, a dangling link, a link to the
    table itself (a cycle), and an unreferenced plain file."""
    os.symlink(t.outside / "part-out.parquet", t.root / "link.parquet")
    os.symlink(t.outside / "dir", t.root / "linkdir")
    os.symlink(t.outside / "gone.parquet", t.root / "dangling.parquet")
    os.symlink(t.root, t.root / "loop")
    (t.root / "orphan.parquet").write_bytes(b"orphan")


@case(
    "links-into-outside-on-delta-rs-table",
    lambda t: normal(1, t.notes["paths"], BASE_ROWS, vacuumed=["orphan.parquet"]),
)
def _(t: Table) -> None:
    for ids in ([0, 1], [2, 3]):
        deltalake.write_deltalake(str(t.root), pa.table({"id": pa.array(ids, pa.int64())}), mode="append")
    t.notes["paths"] = _delta_rs_paths(t.root)
    _links(t)


@case(
    "links-removed-by-the-log",
    # LITE takes these paths from the log: it deleted the file outside through `linkdir` before the fix
    normal(2, BASE_FILES, BASE_ROWS, vacuumed=["orphan.parquet"], lite=["orphan.parquet"]),
    ops=WITH_LITE,
)
def _(t: Table) -> None:
    t.base()
    _links(t)
    removed = ("link.parquet", "linkdir/part-0.parquet", "dangling.parquet", "loop/part-0.parquet", "orphan.parquet")
    t.commit(2, *(remove(p) for p in removed), info("DELETE"))


@case("links-live-file-is-a-link", normal(2, [*BASE_FILES, "link.parquet"], OUTSIDE_ROWS))
def _(t: Table) -> None:
    t.base()
    os.symlink(t.outside / "part-out.parquet", t.root / "link.parquet")
    t.commit(2, add("link.parquet", (t.outside / "part-out.parquet").stat().st_size), info())


@case(
    "links-live-file-under-a-directory-link",
    normal(2, [*BASE_FILES, "linkdir/part-0.parquet"], sorted([*BASE_ROWS, (200,)], key=repr)),
)
def _(t: Table) -> None:
    t.base()
    os.symlink(t.outside / "dir", t.root / "linkdir")
    t.commit(2, add("linkdir/part-0.parquet", (t.outside / "dir" / "part-0.parquet").stat().st_size), info())


@case(
    "links-table-opened-through-a-link",
    # the log names part-0 by the real path; VACUUM through the link must still protect it (it deleted it before)
    lambda t: normal(1, [f"file://{t.tmp}/real/part-0.parquet", "part-1.parquet"], BASE_ROWS),
    ops=WITH_LITE,
)
def _(t: Table) -> None:
    (t.tmp / "real").mkdir()
    os.symlink(t.tmp / "real", t.root)
    logged = f"file://{t.tmp}/real/part-0.parquet"
    t.commit(0, protocol(), metadata(), t.data("part-0.parquet", [0, 1], path=logged), info())
    t.commit(1, t.data("part-1.parquet", [2, 3]), info())


# -- statistics ------------------------------------------------------------------------------------------------------

DAMAGED_STATS = every(Gives([(3,)]), ("scan_id_3",))


def _damaged_stats(stats: Callable[[], str]) -> Callable[[Table], None]:
    """The base table with part-1's (ids 2, 3) stats replaced: a filter on id = 3 must still read it."""

    def build(t: Table) -> None:
        t.commit(0, protocol(), metadata(), t.data("part-0.parquet", [0, 1]), info())
        damaged = t.data("part-1.parquet", [2, 3])
        damaged["add"]["stats"] = stats()
        t.commit(1, damaged, info())

    return build


def _huge() -> str:
    # valid statistics with 50 MB of padding (a writer storing something large in the stats): one 50 MB JSON line
    return json.dumps({"numRecords": 2, "minValues": {"id": 2}, "maxValues": {"id": 3}, "pad": "x" * (50 << 20)})


for _label, _stats, _ops in (
    # scan_id_3 loads the snapshot first; OPTIMIZE copies the stats into its removes; the checkpoint into Parquet
    ("stats-50-mb", _huge, ("scan_id_3", "optimize", "checkpoint")),
    (
        "stats-nested-too-deep",
        lambda: '{"numRecords":2,"minValues":' + '{"id":' * 100_000 + "2" + "}" * 100_000 + "}",
        (*EVERY, "scan_id_3"),
    ),
    ("stats-not-json", lambda: "numRecords=2 {not json", (*EVERY, "scan_id_3")),
    ("stats-not-an-object", lambda: "[1, 2, 3]", (*EVERY, "scan_id_3")),
    (
        "stats-wrong-types",
        lambda: '{"numRecords": "two", "minValues": {"id": "two"}, "maxValues": {"id": []}}',
        (*EVERY, "scan_id_3"),
    ),
):
    case(_label, normal(1, BASE_FILES, BASE_ROWS) | DAMAGED_STATS, ops=_ops)(_damaged_stats(_stats))


# -- the same file twice, a file never added -------------------------------------------------------------------------


@case("same-path-added-twice-in-one-commit", normal(1, BASE_FILES, BASE_ROWS))
def _(t: Table) -> None:
    first = t.data("part-0.parquet", [0, 1])
    t.commit(0, protocol(), metadata(), first, first, info())
    t.commit(1, t.data("part-1.parquet", [2, 3]), info())


@case("same-path-added-in-two-commits", normal(2, BASE_FILES, BASE_ROWS))
def _(t: Table) -> None:
    t.base()
    t.commit(2, t.data("part-0.parquet", [0, 1]), info())


@case(
    "remove-of-a-file-never-added",
    # LITE reads the log, not storage: its dry run also lists the removed path that never existed (deleting it is a
    # no-op)
    normal(2, BASE_FILES, BASE_ROWS, vacuumed=["ghost.parquet"], lite=["ghost.parquet"])
    | {"lite_dry": Gives(["ghost.parquet", "never-existed.parquet"])},
    ops=WITH_LITE,
)
def _(t: Table) -> None:
    t.base()
    (t.root / "ghost.parquet").write_bytes(b"ghost")
    t.commit(2, remove("ghost.parquet"), remove("never-existed.parquet"), info("DELETE"))


# -- protocol --------------------------------------------------------------------------------------------------------

_LISTED = {"changes": Gives([(0, "data"), (1, "data")])}  # `changes` reads the log only, never the protocol


@case(
    "protocol-unknown-reader-feature",
    every(Raises(ProtocolNotSupported, "unsupported reader feature 'fancyReader'")) | _LISTED,
)
def _(t: Table) -> None:
    t.base(protocol_action=protocol(3, 7, ["fancyReader"], ["fancyReader"]))


@case(
    "protocol-unknown-writer-feature",
    normal(1, BASE_FILES, BASE_ROWS)
    | every(Raises(ProtocolNotSupported, "unsupported writer feature 'fancyWriter'"), WRITES),
    ops=WITH_LITE,
)
def _(t: Table) -> None:
    t.base(protocol_action=protocol(1, 7, None, ["fancyWriter"]))


@case(
    "protocol-reader-version-4",
    every(Raises(ProtocolNotSupported, "minReaderVersion 4 is not supported")) | _LISTED,
)
def _(t: Table) -> None:
    t.base(protocol_action=protocol(4, 7, [], []))


@case(
    "protocol-writer-version-8",
    normal(1, BASE_FILES, BASE_ROWS)
    | every(Raises(ProtocolNotSupported, "minWriterVersion 8 is not supported"), WRITES),
)
def _(t: Table) -> None:
    t.base(protocol_action=protocol(1, 8))


# -- metaData with an invalid schema ---------------------------------------------------------------------------------

_NESTED = '{"type":"struct","fields":[{"name":"a","nullable":true,"metadata":{},"type":' * 400
_SCHEMAS: dict[str, tuple[dict, type[DeltaLiteError], str]] = {
    "schema-not-json": (metadata(schema_string="{not json"), SchemaError, "schemaString is not valid JSON"),
    "schema-json-not-a-struct": (
        metadata(schema_string='{"type": "array", "elementType": "long", "containsNull": true}'),
        SchemaError,
        "schemaString must be a JSON object with type 'struct'",
    ),
    "schema-unknown-type": (
        metadata([{**ID, "type": "uint128"}]),
        SchemaError,
        "column 'id': unknown type 'uint128'",
    ),
    "schema-duplicate-column": (metadata([ID, ID]), SchemaError, "duplicate field name 'id'"),
    "schema-partition-column-not-in-schema": (
        metadata([ID], ["p"]),
        CorruptLog,
        "partition column 'p' is not in the table schema",
    ),
    "schema-nested-too-deep": (
        metadata(schema_string=_NESTED + '"long"' + "}]}" * 400),
        SchemaError,
        "schemaString is not valid JSON",
    ),
}
for _label, (_meta, _error, _fragment) in _SCHEMAS.items():
    case(_label, every(Raises(_error, _fragment)) | _LISTED)(lambda t, m=_meta: t.base(meta=m))


# -- checkpoints with a missing part or sidecar ----------------------------------------------------------------------

CHECKPOINTED_FILES = ["part-0.parquet", "part-1.parquet", "part-2.parquet", "part-3.parquet"]
CHECKPOINTED_ROWS = [(i,) for i in range(8)]


def _checkpointed(t: Table, *, v2: bool = False, split: bool = False, drop: str | None = None, clean: bool = False):
    """v0..v2 (part-0..2), a checkpoint at 2 written by deltalite (V2 with a sidecar, or classic split into two
    parts), v3 (part-3); then a part or the sidecar removed, and with ``clean`` commits 0..2 removed as log cleanup
    would."""
    if v2:
        proto = protocol(3, 7, ["v2Checkpoint"], ["v2Checkpoint"])
        meta = metadata(configuration={"delta.checkpointPolicy": "v2"})
    else:
        proto, meta = protocol(), metadata()
    t.commit(0, proto, meta, t.data("part-0.parquet", [0, 1]), info())
    t.commit(1, t.data("part-1.parquet", [2, 3]), info())
    t.commit(2, t.data("part-2.parquet", [4, 5]), info())
    write_checkpoint(DeltaTable(str(t.root)).snapshot())
    t.commit(3, t.data("part-3.parquet", [6, 7]), info())
    if split:
        classic = t.log / f"{2:020d}.checkpoint.parquet"
        actions = pq.read_table(classic)
        half = actions.num_rows // 2
        for part, piece in ((1, actions.slice(0, half)), (2, actions.slice(half))):
            pq.write_table(piece, t.log / f"{2:020d}.checkpoint.{part:010d}.0000000002.parquet")
        classic.unlink()
        (t.log / f"{2:020d}.checkpoint.0000000002.0000000002.parquet").unlink()
    if v2:
        (sidecar,) = (t.log / "_sidecars").iterdir()
        sidecar.unlink()
    if clean:
        for version in range(3):
            (t.log / f"{version:020d}.json").unlink()


_RECOVERED = normal(3, CHECKPOINTED_FILES, CHECKPOINTED_ROWS)


@case("checkpoint-multi-part-missing-a-part", _RECOVERED)
def _(t: Table) -> None:
    _checkpointed(t, split=True)


@case(
    "checkpoint-multi-part-missing-a-part-log-cleaned",
    every(Raises(CorruptLog, "has no checkpoint to start from (checkpoint 2 is incomplete: 1 of its 2 parts missing)"))
    | {"changes": Raises(CorruptLog, "version 0 is missing from the log")},
)
def _(t: Table) -> None:
    _checkpointed(t, split=True, clean=True)


@case("checkpoint-v2-missing-sidecar", _RECOVERED)
def _(t: Table) -> None:
    _checkpointed(t, v2=True)


@case(
    "checkpoint-v2-missing-sidecar-log-cleaned",
    every(
        Raises(
            CorruptLog,
            "checkpoint 2 is unreadable and no older checkpoint or full log can replace it "
            "(checkpoint 2 refers to a missing sidecar file",
        )
    )
    | {"changes": Raises(LogGap, "the commits after version -1 were removed by log cleanup")},
)
def _(t: Table) -> None:
    _checkpointed(t, v2=True, clean=True)


# -- _last_checkpoint ------------------------------------------------------------------------------------------------


def _delta_rs_opens_after_checkpoint(result: tuple, t: Table) -> None:
    # the checkpoint replaces a pointer to a checkpoint that is not there, after which delta-rs opens the table again
    assert result == (1, True, 1, BASE_FILES)
    assert json.loads((t.log / "_last_checkpoint").read_text())["version"] == 1
    assert deltalake.DeltaTable(str(t.root)).version() == 1


for _label, _hint in (
    ("last-checkpoint-pointing-forward", b'{"version": 50, "size": 3}'),
    ("last-checkpoint-naming-a-missing-checkpoint", b'{"version": 1, "size": 3}'),
    ("last-checkpoint-garbage", b"\x00\xffgarbage{"),
    ("last-checkpoint-nested-too-deep", b'{"version": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"),
):
    case(
        _label,
        normal(1, BASE_FILES, BASE_ROWS) | {"checkpoint": Gives(_delta_rs_opens_after_checkpoint)},
    )(lambda t, hint=_hint: (t.base(), (t.log / "_last_checkpoint").write_bytes(hint)))


# -- damaged commit files --------------------------------------------------------------------------------------------


@case("commit-utf8-byte-order-mark", normal(1, BASE_FILES, BASE_ROWS))
def _(t: Table) -> None:
    t.base()
    for version in (0, 1):
        commit = t.log / f"{version:020d}.json"
        commit.write_bytes(b"\xef\xbb\xbf" + commit.read_bytes())


for _label, _raw in (("commit-empty-file", b""), ("commit-whitespace-only", b"  \n\t\n\n")):
    case(_label, every(Raises(CorruptLog, "commit 2 is an empty file")))(
        lambda t, raw=_raw: (t.base(), t.commit(2, raw=raw))
    )


@case(
    "commit-truncated-last-line",
    every(Raises(CorruptLog, "commit 1 has a line that is not valid JSON"))
    | {"changes": Raises(CorruptLog, "commit 1 line 2 is not valid JSON")},
)
def _(t: Table) -> None:
    t.base()
    commit = t.log / f"{1:020d}.json"
    commit.write_bytes(commit.read_bytes()[:-20])


_TOO_DEEP = every(Raises(CorruptLog, "commit 2 has a line of JSON nested too deeply to read")) | {
    "changes": Raises(CorruptLog, "commit 2 line 1 is JSON nested too deeply to read")
}


@case("commit-info-nested-too-deep", _TOO_DEEP)
def _(t: Table) -> None:
    t.base()
    t.commit(2, raw=b'{"commitInfo": {"operation": "WRITE", "x": ' + b"[" * 100_000 + b"]" * 100_000 + b"}}\n")


@case("commit-add-nested-too-deep", _TOO_DEEP)
def _(t: Table) -> None:
    # the Arrow reader takes the line; Python's parser then gives up on the tags
    t.base()
    line = json.dumps(add("part-1.parquet", 10))[:-2] + ', "tags": {"k": "v"}, "x": ' + "[" * 5000 + "]" * 5000 + "}}"
    t.commit(2, raw=line.encode() + b"\n")


# -- others a production user meets ----------------------------------------------------------------------------------


@case(
    "log-version-gap",
    # `changes` reads commits by name and stops at the first one missing; every snapshot refuses the gap
    every(Raises(CorruptLog, "version 2 is missing from the log (commits 0..3 must be contiguous)")) | _LISTED,
)
def _(t: Table) -> None:
    t.base()
    t.commit(3, t.data("part-3.parquet", [6]), info())


@case(
    "log-commit-named-with-another-width",
    # the protocol (deltalite, delta-rs) ignores `2.json`; Spark reads it as version 2, so VACUUM refuses
    normal(1, BASE_FILES, BASE_ROWS)
    | every(Raises(VacuumRefused, "_delta_log holds '2.json': Spark reads it as version 2"), WRITES[2:6]),
    ops=WITH_LITE,
)
def _(t: Table) -> None:
    t.base()
    (t.log / "2.json").write_text(json.dumps(t.data("part-2.parquet", [4])) + "\n")


@case("log-crc-files-garbage", normal(1, BASE_FILES, BASE_ROWS))
def _(t: Table) -> None:
    t.base()
    (t.log / f"{1:020d}.crc").write_bytes(b'{"tableSizeBytes": "garbage"')
    (t.log / f".{1:020d}.json.crc").write_bytes(b"\x00\x01")


@case(
    "data-file-missing",
    normal(1, BASE_FILES, BASE_ROWS)
    | every(
        Raises(StorageError, "data file part-1.parquet is referenced by the log but missing"),
        ("scan", "optimize", "zorder"),
    )
    | every(Raises(VacuumRefused, "1 files the log references as live are not in storage"), ("vacuum_dry", "vacuum")),
    ops=WITH_LITE,
)
def _(t: Table) -> None:
    t.base()
    (t.root / "part-1.parquet").unlink()


# -- the test --------------------------------------------------------------------------------------------------------


def _watched(tmp: Path, extra: Sequence[str]) -> tuple:
    return tree_state(tmp), {p: (os.lstat(p).st_size, os.lstat(p).st_mtime_ns) for p in extra if os.path.lexists(p)}


def _built(tmp_path: Path, entry: Case) -> Table:
    table = Table(tmp_path)
    _sentinel(table.outside)
    entry.build(table)
    _age(table.root)
    return table


PAIRS = [pytest.param(c, op, id=f"{c.id}-{op}") for c in CASES for op in c.ops]


@pytest.mark.parametrize(("entry", "op"), PAIRS)
def test_adversarial_table(tmp_path: Path, entry: Case, op: str) -> None:
    table = _built(tmp_path, entry)
    expect = entry.expectations(table)[op]
    outside = tree_state(table.outside)
    before = _watched(tmp_path, entry.watch)
    if isinstance(expect, Raises):
        with pytest.raises(DeltaLiteError) as raised:
            OPS[op](DeltaTable(str(table.root)))
        message = str(raised.value)
        assert type(raised.value) is expect.error, message
        assert message.startswith(f"table {table.root}: ") and "\n" not in message, message
        assert expect.fragment in message, message
        assert _watched(tmp_path, entry.watch) == before  # nothing written
    else:
        result = OPS[op](DeltaTable(str(table.root)))
        if callable(expect.value):
            expect.value(result, table)
        else:
            assert result == expect.value
        assert _watched(tmp_path, entry.watch)[1] == before[1]
    assert tree_state(table.outside) == outside


def test_at_least_thirty_tables_and_every_item_3_case() -> None:
    ids = [c.id for c in CASES]
    assert len(ids) == len(set(ids)) and len(ids) >= 30
    for prefix in ("path-", "partition-value", "links-", "stats-", "same-path", "remove-", "protocol-", "schema-"):
        assert any(i.startswith(prefix) for i in ids), prefix
    for prefix in ("checkpoint-", "last-checkpoint-", "commit-utf8", "commit-empty", "log-", "data-file"):
        assert any(i.startswith(prefix) for i in ids), prefix


def test_the_documentation_lists_every_case() -> None:
    doc = (ROOT / "docs" / "adversarial_tables.md").read_text()
    section = doc.split("\n## Every case\n", 1)[1].split("\n## ", 1)[0]
    listed = re.findall(r"^\| `([a-z0-9-]+)` \|", section, flags=re.MULTILINE)
    assert sorted(listed) == sorted(c.id for c in CASES)


# -- the command line ------------------------------------------------------------------------------------------------

CLI = [
    ("protocol-unknown-reader-feature", ["describe"], "unsupported reader feature 'fancyReader'"),
    ("path-other-store-uri", ["scan"], "is on another store (s3) than the table (file)"),
    ("log-commit-named-with-another-width", ["vacuum", "--dry-run"], "_delta_log holds '2.json'"),
    ("commit-empty-file", ["optimize"], "commit 2 is an empty file"),
    ("schema-duplicate-column", ["checkpoint"], "duplicate field name 'id'"),
]


@pytest.mark.parametrize(("entry_id", "command", "fragment"), CLI, ids=[f"{c[0]}-{c[1][0]}" for c in CLI])
def test_cli_reports_one_line_and_exit_2(tmp_path: Path, entry_id: str, command: list[str], fragment: str) -> None:
    (entry,) = [c for c in CASES if c.id == entry_id]
    table = _built(tmp_path, entry)
    before = tree_state(tmp_path)
    line = cli_failure(command[0], table.root, *command[1:])
    assert line.startswith(f"deltalite: error: table {table.root}: ") and fragment in line, line
    assert tree_state(tmp_path) == before
