"""VACUUM's per-run budget: delete at most ``max_files_to_delete`` files, the oldest first, and count the rest.

Age is the tombstone's ``deletionTimestamp`` when the snapshot still holds the tombstone, else the file's modification
time from the listing (FULL), else 0 (a file removed so long ago that the checkpoint dropped its tombstone: among the
oldest). Ties go by path, so the same table gives the same choice.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from airflow_provider_deltalite.engine import arrow_compute as pc
from airflow_provider_deltalite.engine.snapshot import Snapshot
from airflow_provider_deltalite.maintenance.vacuum.listing import ListedDir
from airflow_provider_deltalite.maintenance.vacuum.plan import VacuumPlan


def oldest_first(
    plan: VacuumPlan, limit: int | None, snapshot: Snapshot, listing: Sequence[ListedDir] | None
) -> tuple[VacuumPlan, int]:
    """The plan cut to its ``limit`` oldest files (None: no limit), and how many eligible files it leaves."""
    if limit is None or len(plan.files) <= limit:
        return plan, 0
    wanted = {path for path, _ in plan.files}
    ages: dict[str, int] = {}
    for d in listing or ():
        for path, mtime in zip(d.paths, d.mtimes, strict=True):
            if path in wanted:
                ages[path] = mtime
    stones = snapshot.tombstones
    if stones.num_rows:
        stamps = pc.fill_null(stones.column("deletionTimestamp"), 0).to_pylist()
        for path, stamp in zip(stones.column("path").to_pylist(), stamps, strict=True):
            if path in wanted:  # a plain relative path: the log and the listing spell it alike
                ages[path] = stamp
    return cut_oldest(plan, limit, ages)


def cut_oldest(plan: VacuumPlan, limit: int | None, ages: Mapping[str, int]) -> tuple[VacuumPlan, int]:
    """The plan cut to its ``limit`` oldest files by ``ages`` (absent: 0), and how many eligible files it leaves."""
    if limit is None or len(plan.files) <= limit:
        return plan, 0
    ordered = sorted(plan.files, key=lambda f: (ages.get(f[0], 0), f[0]))
    left = [path for path, _ in ordered[limit:]]
    return plan.without(left), len(left)
