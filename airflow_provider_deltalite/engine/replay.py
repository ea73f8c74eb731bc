"""Log replay: reconcile the actions of a checkpoint and the commits after it into a table state.

The actions are read by `commit_file` (commit JSON) and `checkpoint_reader` (checkpoints); here the newest action
per logical file wins, and the non-file actions fold into the latest protocol, metadata, txns and domains.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pyarrow as pa

from airflow_provider_deltalite.engine import actions as A
from airflow_provider_deltalite.engine import arrow_compute as pc
from airflow_provider_deltalite.engine.arrow_util import contiguous, int64_array, numpy_of
from airflow_provider_deltalite.engine.checkpoint_reader import CheckpointContent, Superseded, checkpoint_file_actions
from airflow_provider_deltalite.engine.commit_file import NonFileAction


def file_keys(paths: pa.Array, dvs: pa.Array, normalize) -> pa.Array:
    """The logical-file key `(path, deletion vector id)` as one string per row.

    Paths are compared after resolving them (relative and absolute spellings of one file are one file); the
    resolution runs in Python only for paths that are absolute or URI-escaped.
    """
    paths = contiguous(paths)
    needs = pc.or_(pc.match_substring(paths, "%"), pc.match_substring(paths, ":"))
    needs = pc.or_(needs, pc.starts_with(paths, "/"))
    if pc.any(needs).as_py():
        # only the paths that need it pass through Python; the others stay in Arrow
        needs = pc.fill_null(needs, False)
        resolved = pa.array([normalize(p) for p in pc.filter(paths, needs).to_pylist()], pa.string())
        paths = pc.replace_with_mask(pc.cast(paths, pa.string()), needs, resolved)
    dvs = contiguous(dvs)
    if dvs.null_count == len(dvs):
        return paths
    offset = pc.cast(dvs.field("offset"), pa.string())
    dv_id = pc.binary_join_element_wise(
        dvs.field("storageType"),
        dvs.field("pathOrInlineDv"),
        pc.if_else(pc.is_valid(offset), pc.binary_join_element_wise("@", offset, ""), ""),
        "",
        null_handling="replace",
        null_replacement="",
    )
    # Files without a deletion vector keep the bare path as key, so the key does not depend on the batch.
    return pc.if_else(pc.is_valid(dvs), pc.binary_join_element_wise(paths, dv_id, "\x1f"), paths)


def reconcile(
    adds: pa.Table,
    removes: pa.Table,
    normalize: Callable[[str], str],
    checkpoint: CheckpointContent | None = None,
    partition_columns: list[str] | None = None,
    table_uri: str | None = None,
    *,
    prior: tuple[pa.Table, pa.Table] | None = None,
    base_rows: Callable[[Superseded], tuple[pa.Table, pa.Table]] | None = None,
) -> tuple[pa.Table, pa.Table]:
    """Newest action per logical file wins: surviving adds are the live files, surviving removes the tombstones.

    ``adds``/``removes`` are the commit actions after the checkpoint, in replay order (``_seq``). The checkpoint's own
    actions are reconciled already (the protocol allows no two actions for one file in a checkpoint), so only the
    commits are grouped, and a checkpoint row survives unless a commit touches its file: the cost of reconciling
    follows the commits, not the size of the table. ``prior`` (live files and tombstones of an earlier replay, whose
    commits all precede ``adds``/``removes``) stands in for the checkpoint the same way: its rows are reconciled too.
    ``base_rows(superseded)`` is a third stand-in: it returns the checkpoint rows it keeps (a partition-pruned read)
    without those ``superseded`` marks. The keys of every commit action count, whatever its partition, so a file a
    later commit removed is never resurrected by a pruned read.
    """
    live, tombstones, superseded = reconcile_commits(adds, removes, normalize)
    if checkpoint is None and prior is None and base_rows is None:
        return live, tombstones
    if prior is not None:
        base_adds, base_removes = (_surviving(rows, superseded) for rows in prior)
    elif base_rows is not None:
        base_adds, base_removes = base_rows(superseded)
    else:
        assert checkpoint is not None
        base_adds, base_removes = checkpoint_file_actions(
            checkpoint, partition_columns or [], table_uri, superseded=superseded
        )
    return (
        pa.concat_tables([base_adds, live], promote_options="permissive"),
        pa.concat_tables([base_removes, tombstones], promote_options="permissive"),
    )


def reconcile_commits(
    adds: pa.Table, removes: pa.Table, normalize: Callable[[str], str]
) -> tuple[pa.Table, pa.Table, Superseded]:
    """The commits' own winners (newest action per logical file: live adds and tombstones), and the predicate that
    marks the rows of an older state (a checkpoint, an earlier replay) the commits touch, so those rows lose."""
    add_keys = pc.cast(file_keys(adds.column("path"), adds.column("deletionVector"), normalize), pa.string())
    remove_keys = pc.cast(file_keys(removes.column("path"), removes.column("deletionVector"), normalize), pa.string())
    keys = pa.concat_arrays([add_keys, remove_keys])
    seq = pa.concat_arrays([contiguous(adds.column("_seq")), contiguous(removes.column("_seq"))])
    touched, winning = _newest_per_key(keys, seq)
    live = pc.filter(adds, pc.is_in(adds.column("_seq"), value_set=winning))
    tombstones = pc.filter(removes, pc.is_in(removes.column("_seq"), value_set=winning))

    def superseded(paths: pa.Array, dvs: pa.Array) -> pa.Array:
        if not len(touched):
            return pc.fill_null(pa.nulls(len(paths), pa.bool_()), False)
        return pc.is_in(pc.cast(file_keys(paths, dvs, normalize), pa.string()), value_set=touched)

    return live, tombstones, superseded


def _newest_per_key(keys: pa.Array, seq: pa.Array) -> tuple[pa.Array, pa.Array]:
    """The distinct keys, and the largest ``seq`` of each.

    Not ``Table.group_by``: that runs through Acero, whose import (pyarrow.dataset, substrait) adds about 40 MB to
    every process that replays a log, more than describing a 100k-file table takes.
    """
    encoded = pc.dictionary_encode(keys)
    newest = np.full(len(encoded.dictionary), np.iinfo(np.int64).min, dtype=np.int64)
    np.maximum.at(newest, numpy_of(encoded.indices), numpy_of(seq))
    return encoded.dictionary, int64_array(newest)


def _surviving(rows: pa.Table, superseded: Callable[[pa.Array, pa.Array], pa.Array]) -> pa.Table:
    """The rows of an earlier replay no newer commit touches (the table itself when none is touched: no copy)."""
    if not rows.num_rows:
        return rows
    gone = superseded(rows.column("path"), rows.column("deletionVector"))
    if not pc.any(gone).as_py():
        return rows
    return pc.filter(rows, pc.invert(gone))


def latest_non_file_state(actions: Sequence[NonFileAction]) -> dict[str, Any]:
    """Reconcile non-file actions: newest protocol and metaData, newest txn per appId, domains with removal."""
    state: dict[str, Any] = {"protocol": None, "metaData": None, "txn": {}, "domainMetadata": {}, "commitInfo": {}}
    for action in sorted(actions, key=lambda a: (a.version, a.order)):
        if action.name == A.PROTOCOL:
            state["protocol"] = action.value
        elif action.name == A.METADATA:
            state["metaData"] = action.value
        elif action.name == A.TXN and isinstance(action.value.get("appId"), str):
            state["txn"][action.value["appId"]] = action.value
        elif action.name == A.DOMAIN_METADATA and isinstance(action.value.get("domain"), str):
            if action.value.get("removed"):
                state["domainMetadata"].pop(action.value["domain"], None)
            else:
                state["domainMetadata"][action.value["domain"]] = action.value
        elif action.name == A.COMMIT_INFO and action.version >= 0:
            state["commitInfo"].setdefault(action.version, action.value)
    return state
