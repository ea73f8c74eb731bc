"""The checks a commit makes before it writes a version, apart from the conflict rules (`engine/conflicts.py`).

- `validate_staged_actions`: the staged adds and removes are valid against the read snapshot (table properties parse,
  no duplicates, removes name live files with their live deletion vector, append-only and partitioning respected).
- `ensure_files_outlive_vacuum`: the commit-side retention check. New files must be younger than half of
  ``delta.deletedFileRetentionDuration``, or a concurrent VACUUM may already have deleted them (`CommitTooLate`).
  The VACUUM side of the same retention is `maintenance/vacuum/retention.py`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import pyarrow as pa

from airflow_provider_deltalite.engine import arrow_compute as pc
from airflow_provider_deltalite.engine.errors import CommitTooLate, TransactionError
from airflow_provider_deltalite.engine.features import ensure_writable
from airflow_provider_deltalite.engine.file_actions import dv_key, ensure_can_add_files
from airflow_provider_deltalite.engine.properties import (
    APPEND_ONLY,
    CHECKPOINT_INTERVAL,
    DELETED_FILE_RETENTION_DURATION,
    LOG_RETENTION_DURATION,
)
from airflow_provider_deltalite.engine.snapshot import Snapshot


def validate_staged_actions(
    snapshot: Snapshot,
    adds: Sequence[dict[str, Any]],
    removes: Sequence[dict[str, Any]],
    resolve: Callable[[str], str],
) -> None:
    """Refuse staged actions that must not be committed on ``snapshot``; ``resolve`` maps a log path to its key.

    Raises:
        TransactionError: invalid actions (duplicates, a remove of a file that is not live, mixed dataChange, ...).
        ProtocolNotSupported: the table has a writer feature deltalite does not handle for these actions.
        InvalidTableProperty: a property the commit or its post-commit checkpoint depends on does not parse.
    """
    uri = snapshot.table_uri
    protocol = snapshot.protocol
    ensure_writable(protocol, uri)
    # properties the commit and its post-commit checkpoint depend on: fail before writing anything
    properties = snapshot.properties
    properties.positive_integer(CHECKPOINT_INTERVAL)
    properties.interval_ms(LOG_RETENTION_DURATION)
    properties.interval_ms(DELETED_FILE_RETENTION_DURATION)
    append_only = properties.boolean(APPEND_ONLY)
    if adds:
        ensure_can_add_files(snapshot)
    flags = {bool(a.get("dataChange", True)) for a in [*adds, *removes]}
    if len(flags) > 1:
        raise TransactionError("a commit must not mix dataChange=true and dataChange=false actions", uri)
    if True in flags and removes and append_only:
        raise TransactionError(
            f"the table is append-only ({APPEND_ONLY}=true): removes with dataChange=true are not allowed", uri
        )
    expected = set(snapshot.partition_physical_names)
    for a in adds:
        keys = set(a.get("partitionValues") or {})
        if keys != expected:
            raise TransactionError(
                f"the add of {a['path']} has partitionValues for {sorted(keys)}, but the table is partitioned by "
                f"{sorted(expected)} (physical names)",
                uri,
            )
    add_keys = [(resolve(a["path"]), dv_key(a)) for a in adds]
    remove_keys = [(resolve(r["path"]), dv_key(r)) for r in removes]
    if len(set(a for a, _ in add_keys)) != len(add_keys):
        raise TransactionError("the same path is added twice in one commit", uri)
    if len(set(remove_keys)) != len(remove_keys):
        raise TransactionError("the same file is removed twice in one commit", uri)
    if set(add_keys) & set(remove_keys):
        raise TransactionError("a file is both added and removed in one commit", uri)
    if remove_keys:
        missing = _not_live(snapshot, removes, remove_keys, resolve)
        if missing:
            path, dv = missing[0]
            what = f"{path} with deletion vector {dv}" if dv else path
            raise TransactionError(f"cannot remove {what}: it is not a live file at version {snapshot.version}", uri)


def _not_live(
    snapshot: Snapshot,
    removes: Sequence[dict[str, Any]],
    remove_keys: Sequence[tuple[str, str]],
    resolve: Callable[[str], str],
) -> list[tuple[str, str]]:
    """The keys of the ``removes`` that name no live file of ``snapshot``.

    A remove made from the log carries its add's path as written: those are matched on the raw path, among only the
    live rows that have one of the removed paths, so a commit of a few removes on a table of millions of files does
    not resolve millions of paths. Only the removes that no raw path matches (a path written differently, say
    absolute where the add is relative) are compared with every live path resolved.
    """
    live = snapshot.raw_files
    paths = live.column("path")
    raw_paths = list({r["path"] for r in removes})
    rows = pc.indices_nonzero(pc.is_in(paths, value_set=pa.array(raw_paths, paths.type))).to_pylist()
    picked_paths = pc.take(paths, rows).to_pylist() if rows else []
    picked_dvs = pc.take(live.column("deletionVector"), rows).to_pylist() if rows else []
    raw_live = {(p, dv_key({"deletionVector": d})) for p, d in zip(picked_paths, picked_dvs, strict=True)}
    unmatched = [k for r, k in zip(removes, remove_keys, strict=True) if (r["path"], k[1]) not in raw_live]
    if not unmatched:
        return []
    dv_ids = [dv_key({"deletionVector": d}) for d in live.column("deletionVector").to_pylist()]
    live_keys = {(resolve(p), d) for p, d in zip(paths.to_pylist(), dv_ids, strict=True)}
    return [k for k in unmatched if k not in live_keys]


def ensure_files_outlive_vacuum(
    snapshot: Snapshot, adds: Sequence[dict[str, Any]], now_ms: int, resolve: Callable[[str], str]
) -> None:
    """Refuse to commit new files older than half of ``delta.deletedFileRetentionDuration``.

    VACUUM deletes unreferenced files older than its start minus the retention. A file this commit adds is
    unreferenced until the commit lands, so a VACUUM planned meanwhile would delete it if it were that old, and
    the commit would then reference a missing file. Half the retention leaves a margin for clock differences and
    for the write itself. A file live in the read snapshot is referenced already (a deletion-vector update re-adds
    it with its original time): it is not at risk.

    Raises:
        CommitTooLate: some new file is that old; nothing was committed.
    """
    retention = snapshot.properties.interval_ms(DELETED_FILE_RETENTION_DURATION)
    old = [
        a
        for a in adds
        if isinstance(a.get("modificationTime"), int) and now_ms - a["modificationTime"] > retention // 2
    ]
    if old:
        live = {resolve(p) for p in snapshot.raw_files.column("path").to_pylist()}
        old = [a for a in old if resolve(a["path"]) not in live]
    if old:
        age = now_ms - min(a["modificationTime"] for a in old)
        raise CommitTooLate(
            f"the oldest new file was written {age / 1000:.1f} s ago, more than half of "
            f"{DELETED_FILE_RETENTION_DURATION} ({retention / 1000:g} s): a concurrent VACUUM may already have "
            "deleted it, so nothing was committed; run the operation again",
            snapshot.table_uri,
        )
