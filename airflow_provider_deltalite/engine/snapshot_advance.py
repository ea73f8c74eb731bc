"""A snapshot moved forward by the commits after it (`advance_snapshot`), instead of replayed from the checkpoint."""

from __future__ import annotations

from airflow_provider_deltalite.engine import actions as A
from airflow_provider_deltalite.engine.commit_file import (
    NonFileAction,
    find_non_file_actions,
    parse_commit_file_actions,
)
from airflow_provider_deltalite.engine.errors import CorruptLog
from airflow_provider_deltalite.engine.log_path import LogFileKind
from airflow_provider_deltalite.engine.log_segment import LogSegment, list_log
from airflow_provider_deltalite.engine.replay import latest_non_file_state, reconcile
from airflow_provider_deltalite.engine.snapshot import Snapshot, path_normalizer, read_commits, table_state


def advance_snapshot(snapshot: Snapshot, version: int) -> Snapshot | None:
    """The snapshot at ``version``, built from ``snapshot`` and the commits after it, or None when it cannot be.

    A transaction that checkpoints the version it committed needs that version's state. Replaying the log for it
    would read the checkpoint, the whole table state, a second time in the operation; here only the commits after
    ``snapshot`` are read, and reconciled onto its live files and tombstones as replay reconciles commits onto a
    checkpoint (`reconcile`'s ``prior``), so the state is the one `load_snapshot` builds. None when a commit in
    between changes the protocol or the metadata (the schema, partition columns and properties replay depends on),
    or the commits up to ``version`` are not all in the log: the caller loads the snapshot then.

    Example:
        >>> advance_snapshot(snapshot_at_12, 13) or load_snapshot(storage, 13)  # doctest: +SKIP
    """
    state = snapshot._state
    if state.pruned_by is not None or state.file_fields is not None:
        return None  # a checkpoint needs every live file with every field
    if version == state.version:
        return snapshot
    if version < state.version:
        return None
    storage = snapshot.storage
    uri = storage.table_uri
    listed = [f for f in list_log(storage, state.version + 1) if f.version <= version]
    commits = [f for f in listed if f.parsed.kind is LogFileKind.COMMIT]
    if [c.version for c in commits] != list(range(state.version + 1, version + 1)):
        return None
    try:
        contents = read_commits(storage, commits)
    except CorruptLog:
        return None  # the full load reports it
    new_non_file = find_non_file_actions(contents, uri)
    if any(a.name in (A.PROTOCOL, A.METADATA) for a in new_non_file):
        return None
    # the earlier state as actions before every new one, so the new ones fold onto it as replay folds them
    base = [NonFileAction(state.version, -4, A.PROTOCOL, state.protocol)]
    base.append(NonFileAction(state.version, -3, A.METADATA, state.metadata))
    base += [NonFileAction(state.version, -2, A.TXN, txn) for txn in state.txn.values()]
    base += [NonFileAction(state.version, -1, A.DOMAIN_METADATA, d) for d in state.domain_metadata.values()]
    base += [NonFileAction(v, -5, A.COMMIT_INFO, info) for v, info in state.commit_infos.items()]
    folded = latest_non_file_state(base + new_non_file)
    partition_columns = list(state.partition_union)
    adds, removes = parse_commit_file_actions(contents, partition_columns, uri)
    live, tombstones = reconcile(
        adds, removes, path_normalizer(storage), None, partition_columns, uri, prior=(state.live, state.tombstones)
    )
    old = state.segment
    segment = LogSegment(
        version=version,
        checkpoint=old.checkpoint,
        commits=old.commits + tuple(commits),
        older_checkpoints=old.older_checkpoints,
        listing=old.listing + tuple(listed),
    )
    return Snapshot(storage, table_state(folded, live, tombstones, segment, state.partition_union))
