"""Which paths VACUUM may touch: the hidden-name rule, log paths resolved against the table root, and the set of
files the table still protects.

Every path here is relative to the table root and named as on storage (decoded). A log path is decoded exactly once
(`Storage.resolve_data_path`) and compared as the full backend path it resolves to (`.`/`..` resolved; on a local disk
also through symbolic links), minus the root prefix; a path that resolves outside the root is never VACUUM's business.
On a local disk VACUUM deletes only plain files reached without a link (`plain_local_file`).
"""

from __future__ import annotations

import os
import posixpath
import stat
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote

import pyarrow as pa

from airflow_provider_deltalite.engine import arrow_compute as pc
from airflow_provider_deltalite.engine.arrow_util import contiguous
from airflow_provider_deltalite.engine.deletion_vectors import dv_absolute_path
from airflow_provider_deltalite.engine.errors import CorruptLog
from airflow_provider_deltalite.engine.log_path import LOG_DIR
from airflow_provider_deltalite.engine.properties import UNIVERSAL_FORMAT_ENABLED_FORMATS
from airflow_provider_deltalite.engine.snapshot import Snapshot
from airflow_provider_deltalite.engine.storage import Storage

_NOT_HIDDEN_PREFIXES = ("_delta_index", "_change_data")
# A log path that is not returned as it is by log_path_relative: encoded, absolute, a URI, or with a `.`/`..`/empty
# segment.
_NEEDS_RESOLVING = r"%|:|^/|//|(^|/)\.\.?(/|$)|^$"


@dataclass(frozen=True)
class HiddenRule:
    """The reference's ``isHiddenDirectory``, applied to every file and directory name.

    A name starting with ``_`` or ``.`` is hidden (never listed, never deleted: ``_delta_log``, ``.x.crc``,
    ``_SUCCESS``), except names starting with ``_delta_index`` or ``_change_data`` and partition directories
    ``<partition column>=...``. With Iceberg UniForm on, ``metadata`` is hidden too.
    """

    partition_prefixes: tuple[str, ...] = ()
    iceberg_metadata_hidden: bool = False

    @classmethod
    def for_snapshot(cls, snapshot: Snapshot) -> HiddenRule:
        names = dict.fromkeys([*snapshot.partition_columns, *snapshot.partition_physical_names])
        formats = str(snapshot.properties.get(UNIVERSAL_FORMAT_ENABLED_FORMATS, "")).lower()
        return cls(tuple(f"{n}=" for n in names), "iceberg" in formats)

    def is_hidden(self, name: str) -> bool:
        if self.iceberg_metadata_hidden and name == "metadata":
            return True
        if not name.startswith(("_", ".")):
            return False
        return not name.startswith(_NOT_HIDDEN_PREFIXES) and not name.startswith(self.partition_prefixes)

    def may_hide(self, names: tuple[str, ...]) -> bool:
        """Whether any of ``names`` could be hidden (a quick test before filtering a large directory)."""
        if self.iceberg_metadata_hidden:
            return True
        return any(name.startswith(("_", ".")) for name in names)

    def is_hidden_path(self, relative: str) -> bool:
        """Whether any segment of a relative path is hidden (so a listing would never reach it)."""
        return any(self.is_hidden(part) for part in relative.split("/"))


def normal_relative(path: str | None) -> str | None:
    """A relative path with ``.``, ``..`` and empty segments resolved; None when it leaves the root or is empty."""
    if path is None or not path:
        return None
    probe = f"/{path}/"
    if "//" in probe or "/./" in probe or "/../" in probe:
        path = posixpath.normpath(path)
        if path in (".", "..") or path.startswith(("../", "/")):
            return None
    return path


def log_path_relative(storage: Storage, path: str, real_dirs: dict[str, str] | None = None) -> str | None:
    """Where an add/remove/cdc ``path`` from the log lives, relative to the root (None: outside the root).

    ``real_dirs`` caches resolved directories across calls (see `root_relative`).
    """
    if "%" not in path and ":" not in path and not path.startswith("/"):
        # A plain relative path: decoding changes nothing and joining it to the root then stripping the root gives
        # it back; skip the work (tables have millions of these).
        rel = normal_relative(path)
        if rel is not None or not path:
            return rel
        # it climbs out of the root with `..`, and may climb back in (`../<root name>/part-0.parquet`)
    try:
        full = storage.resolve_data_path(path)
    except ValueError:  # not a valid URI: no file of this table (a live file so named fails the snapshot first)
        return None
    return root_relative(storage, full, real_dirs)


def root_relative(storage: Storage, full: str, real_dirs: dict[str, str] | None = None) -> str | None:
    """A backend path relative to the root, None when the file it names is outside the root.

    `.` and `..` segments are resolved first (the file a reader opens). On a local disk a path that reaches the root
    only through a symbolic link (the table opened by one path, its log written with another) is recognised too, so
    that VACUUM protects the live file it names; ``real_dirs`` caches the resolved directories.
    """
    rel = normal_relative(storage.relative_to_root(posixpath.normpath(full)))
    if rel is None and storage.native_files and full.startswith("/"):
        cache = {} if real_dirs is None else real_dirs
        parent, name = os.path.split(full)
        for directory in (storage.root, parent):
            if directory not in cache:
                cache[directory] = os.path.realpath(directory)
        rel = normal_relative(os.path.relpath(os.path.join(cache[parent], name), cache[storage.root]))
    return rel


def plain_local_file(root: str, relative: str, dirs: dict[str, bool]) -> bool:
    """Whether deleting ``root/relative`` on a local disk deletes a plain file of the table: every directory below
    the root on the way is a real directory (not a link out of the table) and the file itself is not a link.

    A path that is already gone counts as plain (deleting it does nothing). ``dirs`` caches the directories checked.
    """
    parent = ""
    for part in relative.split("/")[:-1]:
        parent = f"{parent}/{part}" if parent else part
        ok = dirs.get(parent)
        if ok is None:
            try:
                ok = stat.S_ISDIR(os.lstat(os.path.join(root, parent)).st_mode)
            except FileNotFoundError:
                ok = True
            except OSError:
                ok = False
            dirs[parent] = ok
        if not ok:
            return False
    try:
        return stat.S_ISREG(os.lstat(os.path.join(root, relative)).st_mode)
    except FileNotFoundError:
        return True
    except OSError:
        return False


def dv_relative(storage: Storage, dv: dict[str, Any] | None) -> str | None:
    """Where the file of a deletion vector lives, relative to the root; None for inline DVs and files outside it.

    Raises:
        CorruptLog: the descriptor is malformed (then nobody can say which file it protects).
    """
    if not dv:
        return None
    kind = dv.get("storageType")
    if kind == "i":
        return None
    resolved = dv_absolute_path(storage.root, kind, dv.get("pathOrInlineDv"))
    full = resolved if kind == "u" else storage.full_path(resolved)
    return root_relative(storage, full)


@dataclass(frozen=True)
class ProtectedFiles:
    """Files the table still needs, relative to the root.

    Attributes:
        paths: live files, tombstones not yet expired, and the deletion-vector files of both.
        live: the subset referenced by live files (a FULL listing must find these).
        tombstones_expired: tombstones older than the horizon (their files are no longer protected).
    """

    paths: frozenset[str]
    live: frozenset[str]
    tombstones_expired: int


def referenced_paths(storage: Storage, table: pa.Table) -> tuple[pa.Array, list[str]]:
    """Where the files and deletion-vector files of ``table``'s actions live, relative to the root (a string array:
    no Python string per plain path); and other spellings of those paths that are kept as well."""
    column = pc.cast(contiguous(table.column("path")), pa.string())
    # Most log paths are plain relative paths that decoding and normalising leave as they are; find the others in
    # one vectorised pass and resolve only those (tables have millions of files).
    special = pc.fill_null(pc.match_substring_regex(column, _NEEDS_RESOLVING), True)
    plain = pc.filter(column, pc.invert(special))
    extra: list[str] = []
    real_dirs: dict[str, str] = {}
    for path in pc.filter(column, special).to_pylist():
        rel = log_path_relative(storage, path, real_dirs) if path is not None else None
        if rel is not None:
            extra.append(rel)
    others: list[str] = []
    dvs = table.column("deletionVector")
    if dvs.null_count != len(dvs):
        for dv in pc.filter(dvs, pc.is_valid(dvs)).to_pylist():
            rel = dv_relative(storage, dv)
            if rel is not None:
                extra.append(rel)
                if dv.get("storageType") == "u" and "%" in rel:
                    # The protocol joins a `u` prefix as written (Spark does); delta-rs URL-decodes it. Writers only
                    # use plain prefixes, but should one hold a `%`, the file under either reading is kept.
                    others.append(unquote(rel))
    if extra:
        plain = pa.concat_arrays([plain, pa.array(extra, pa.string())])
    return plain, others


def _referenced(storage: Storage, table: pa.Table) -> tuple[list[str], list[str]]:
    """`referenced_paths` as Python strings."""
    paths, others = referenced_paths(storage, table)
    return paths.to_pylist(), others


# What VACUUM reads of the file actions besides their keys: no statistics (at a million files, most of a snapshot's
# memory), so a snapshot loaded with these fields (`Table.snapshot(file_fields=...)`) is all it needs.
VACUUM_FILE_FIELDS = frozenset({"size", "deletionTimestamp"})


def protected_files(snapshot: Snapshot, horizon_ms: int) -> ProtectedFiles:
    """The reference's ``getValidFilesFromSnapshot``: everything the snapshot references, except tombstones whose
    ``deletionTimestamp`` is before ``horizon_ms``.

    A tombstone without a ``deletionTimestamp`` never expires here (the reference takes it as 0, i.e. long expired;
    when in doubt, the file is kept).
    """
    storage = snapshot.storage
    # The sets below are Python objects, which cannot reuse the pages the Arrow pool freed during log replay: hand
    # those back first (a million-file table: ~100 MB less at the peak).
    pa.default_memory_pool().release_unused()
    tombstones = snapshot.tombstones
    stamps = tombstones.column("deletionTimestamp")
    keep = pc.fill_null(pc.greater_equal(stamps, pa.scalar(horizon_ms, pa.int64())), True)
    kept = pc.filter(tombstones, keep)
    try:
        live_paths, live_others = _referenced(storage, snapshot.raw_files)
        kept_paths, kept_others = _referenced(storage, kept)
        live = frozenset(live_paths)
        del live_paths
        # one set for both when the tombstones protect nothing more (a set of a million paths is tens of MB)
        extra = [p for p in (*live_others, *kept_paths, *kept_others) if p not in live]
        paths = live.union(extra) if extra else live
    except CorruptLog as exc:
        raise CorruptLog(exc.problem, snapshot.table_uri) from None
    return ProtectedFiles(paths, live, tombstones.num_rows - kept.num_rows)


def in_log(path: str) -> bool:
    """Whether a path relative to the root is ``_delta_log`` or inside it (never a VACUUM candidate)."""
    return path == LOG_DIR or path.startswith(LOG_DIR + "/")
