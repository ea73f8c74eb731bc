"""Random table histories for the VACUUM property tests, and the oracle they are judged by.

A history is written by delta-rs 1.6.3 (appends, partition overwrites, deletes that write change data, compactions)
into partitions whose values need escaping (``b c``, ``d%e``, ``f=g``, ``ü/x``), then placed in time: the first
``old`` commits long before the retention horizon, the rest after it, by rewriting each commit's timestamps and
``deletionTimestamp`` and setting the files' modification times. Around it go orphans (old and young), hidden files,
an empty old directory, and files outside the root.

The oracle does not use deltalite: the files that must survive are those delta-rs lists for every version that is
still within retention, plus everything young, hidden or outside the root; every other visible file older than the
horizon must be deleted.
"""

from __future__ import annotations

import collections
import json
import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import unquote

import pyarrow as pa
from hypothesis import strategies as st

from tests.conformance.corpus import row_multiset

HOUR_MS = 3_600_000
DAY_MS = 24 * HOUR_MS
RETENTION_HOURS = 24
PARTS = ("a", "b c", "d%e", "f=g", "ü/x")
CONFIG = {
    "delta.enableChangeDataFeed": "true",
    "delta.deletedFileRetentionDuration": f"interval {RETENTION_HOURS} hours",
}


@dataclass(frozen=True)
class Op:
    kind: str
    part: str = "a"
    rows: int = 1
    modulo: int = 2


ops = st.lists(
    st.one_of(
        st.builds(Op, kind=st.just("append"), part=st.sampled_from(PARTS), rows=st.integers(1, 4)),
        st.builds(Op, kind=st.just("overwrite"), part=st.sampled_from(PARTS), rows=st.integers(1, 4)),
        st.builds(Op, kind=st.just("delete"), modulo=st.integers(2, 3)),
        st.builds(Op, kind=st.just("compact")),
    ),
    min_size=1,
    max_size=6,
)
ORPHAN_DIRS = ("", "p=a", "p=b%20c", "p=%C3%BC%2Fx", "new=dir", "_change_data", "_delta_index")


@dataclass(frozen=True)
class Orphan:
    directory: str
    name: str
    young: bool


orphans = st.lists(
    st.builds(
        Orphan,
        directory=st.sampled_from(ORPHAN_DIRS),
        name=st.sampled_from(("part-orphan.parquet", "deletion_vector_0f0e.bin", "x y%z.parquet", "a[1].parquet")),
        young=st.booleans(),
    ),
    max_size=6,
    unique_by=lambda o: (o.directory, o.name),
)


def write_history(path: Path, history: list[Op], deltalake) -> int:
    """Write the table with delta-rs; returns the latest version (the first commit creates the table)."""
    next_id = 0

    def rows(part: str, n: int) -> pa.Table:
        nonlocal next_id
        ids = list(range(next_id, next_id + n))
        next_id += n
        return pa.table({"id": pa.array(ids, pa.int64()), "p": [part] * n})

    deltalake.write_deltalake(str(path), rows("a", 2), partition_by=["p"], configuration=CONFIG)
    for op in history:
        if op.kind == "append":
            deltalake.write_deltalake(str(path), rows(op.part, op.rows), mode="append")
        elif op.kind == "overwrite":
            deltalake.write_deltalake(str(path), rows(op.part, op.rows), mode="overwrite", predicate=f"p = '{op.part}'")
        elif op.kind == "delete":
            deltalake.DeltaTable(str(path)).delete(f"id % {op.modulo} = 0")
        else:
            deltalake.DeltaTable(str(path)).optimize.compact()
    return deltalake.DeltaTable(str(path)).version()


def commit_lines(path: Path, version: int) -> list[dict]:
    return [json.loads(line) for line in (path / "_delta_log" / f"{version:020d}.json").read_text().splitlines()]


def written_paths(actions: Iterable[dict]) -> list[str]:
    """Paths (decoded once, as on storage) of the files a commit wrote: adds and change data."""
    return [unquote(a[k]["path"]) for a in actions for k in ("add", "cdc") if k in a]


def place_in_time(path: Path, latest: int, old: int, now_ms: int) -> dict[int, int]:
    """Rewrite commits ``0..old-1`` to lie two days back and the rest two hours back (a minute apart); set the log's
    and the written files' mtimes to match. Returns each version's time."""
    times = {}
    for v in range(latest + 1):
        times[v] = now_ms - 2 * DAY_MS + v * 60_000 if v < old else now_ms - 2 * HOUR_MS + (v - old) * 60_000
    for v, t in times.items():
        actions = commit_lines(path, v)
        for a in actions:
            if "commitInfo" in a:
                a["commitInfo"]["timestamp"] = t
            if "remove" in a:
                a["remove"]["deletionTimestamp"] = t
            if "add" in a:
                a["add"]["modificationTime"] = t
        log_file = path / "_delta_log" / f"{v:020d}.json"
        log_file.write_text("".join(json.dumps(a) + "\n" for a in actions))
        os.utime(log_file, ns=(t * 1_000_000, t * 1_000_000))
        for rel in written_paths(actions):
            os.utime(path / rel, ns=(t * 1_000_000, t * 1_000_000))
    return times


@dataclass
class Scene:
    """Everything placed around the table, relative to the table root unless said otherwise."""

    old_orphans: set[str] = field(default_factory=set)
    young_orphans: set[str] = field(default_factory=set)
    hidden: set[str] = field(default_factory=set)
    outside: list[Path] = field(default_factory=list)  # absolute
    links: set[str] = field(default_factory=set)
    empty_old_dir: str = "p=empty"


def _touch(file: Path, when_ms: int, data: bytes = b"orphan") -> None:
    file.parent.mkdir(parents=True, exist_ok=True)
    file.write_bytes(data)
    os.utime(file, ns=(when_ms * 1_000_000, when_ms * 1_000_000))


def furnish(path: Path, placed: list[Orphan], now_ms: int, *, links: bool = True) -> Scene:
    """Create orphans, hidden files, an empty old directory, files outside the root and (locally) links."""
    scene = Scene()
    old, young = now_ms - 30 * DAY_MS, now_ms - HOUR_MS
    for o in placed:
        rel = f"{o.directory}/{o.name}" if o.directory else o.name
        _touch(path / rel, young if o.young else old)
        (scene.young_orphans if o.young else scene.old_orphans).add(rel)
    for rel in ("_SUCCESS", ".hidden.parquet", "_tmp/part-0.parquet", "p=a/.part-0.parquet.crc", "_delta_log/x.tmp"):
        _touch(path / rel, old)
        scene.hidden.add(rel)
    (path / scene.empty_old_dir).mkdir()
    sibling = path.parent / f"{path.name}_sibling"  # shares the root's name as a prefix
    for outside in (path.parent / "outside" / "part-0.parquet", sibling / "part-0.parquet"):
        _touch(outside, old)
        scene.outside.append(outside)
    if links:
        os.symlink(path.parent / "outside" / "part-0.parquet", path / "link.parquet")
        os.symlink(path.parent / "outside", path / "linkdir")
        for rel in ("link.parquet", "linkdir"):
            os.utime(path / rel, ns=(old * 1_000_000, old * 1_000_000), follow_symlinks=False)
            scene.links.add(rel)
    # every directory old, so that one VACUUM empties is old enough to go
    for dirpath, dirnames, _ in os.walk(path):
        for d in dirnames:
            full = Path(dirpath) / d
            if not full.is_symlink():
                os.utime(full, ns=(old * 1_000_000, old * 1_000_000))
    return scene


def is_hidden(rel: str) -> bool:
    """The oracle's own reading of the hidden rule (partition column ``p``)."""
    return any(
        part.startswith(("_", ".")) and not part.startswith(("_change_data", "_delta_index", "p="))
        for part in rel.split("/")
    )


def visible_files(path: Path) -> dict[str, int]:
    """Regular, non-hidden files under the root (links not followed), with mtimes in ms."""
    out = {}
    for dirpath, _dirnames, filenames in os.walk(path):
        for name in filenames:
            full = Path(dirpath) / name
            rel = str(full.relative_to(path))
            if full.is_symlink() or is_hidden(rel):
                continue
            out[rel] = full.stat().st_mtime_ns // 1_000_000
    return out


def all_entries(path: Path) -> set[str]:
    return {str((Path(d) / n).relative_to(path)) for d, ds, fs in os.walk(path) for n in ds + fs}


def retained_versions(times: dict[int, int], horizon_ms: int) -> list[int]:
    """Versions still current at or after the horizon: the one active at the horizon, and every later one."""
    latest = max(times)
    return [v for v in times if v == latest or times[v + 1] > horizon_ms]


def snapshot_rows(uri: str, versions: Iterable[int], deltalake, storage_options=None) -> dict[int, collections.Counter]:
    out = {}
    for v in versions:
        table = pa.table(deltalake.DeltaTable(uri, version=v, storage_options=storage_options).to_pyarrow_table())
        out[v] = row_multiset(table, table.column_names)
    return out


def needed_by(uri: str, versions: Iterable[int], deltalake, root: str, storage_options=None) -> set[str]:
    """Files delta-rs reads for ``versions``, relative to ``root`` (its ``file_uris`` are decoded)."""
    prefix = root.rstrip("/") + "/"
    out = set()
    for v in versions:
        for uri_ in deltalake.DeltaTable(uri, version=v, storage_options=storage_options).file_uris():
            assert uri_.startswith(prefix), uri_
            out.add(uri_[len(prefix) :])
    return out


def expired_log_paths(path: Path, old: int) -> set[str]:
    """Paths removed (or written as change data) by the commits before the horizon: what LITE may consider."""
    out = set()
    for v in range(old):
        for a in commit_lines(path, v):
            if "remove" in a:
                out.add(unquote(a["remove"]["path"]))
            if "cdc" in a:
                out.add(unquote(a["cdc"]["path"]))
    return out
