"""VACUUM: delete the files a Delta table no longer references, once its retention has passed.

Planning follows the reference (`VacuumCommand`):

- **Protected** (never deleted): every live file, every tombstone whose ``deletionTimestamp`` is not older than the
  horizon, and the deletion-vector files of both (`paths.protected_files`). Change-data files are protected
  by their age only, as in the reference.
- **FULL** lists the table root recursively, in parallel by directory (tasks on the executor, one level of the tree
  at a time), one group of top-level directories after another, each compared with the protected paths under it
  alone (`by_prefix`; the log is read once, as a stream, its protected paths spilled by top-level directory), skipping
  hidden names: a name starting with ``_`` or ``.`` is neither listed nor deleted, except
  partition directories ``col=value``, ``_change_data`` and ``_delta_index``. A candidate is a listed file that is
  not protected and was last modified before the horizon. Directories left empty (and themselves older than the
  horizon) are removed afterwards, never recursively.
- **FULL from an inventory** (``inventory=``, Delta's ``USING INVENTORY``) takes the files from an inventory
  instead of listing (`inventory`), under the same rules; a stale inventory is safe (files it lists that are gone by
  now are counted in ``files_already_gone``; files written after it are not candidates).
- **LITE** takes its candidates from the ``remove`` and ``cdc`` actions of the commits since the last vacuum
  (`lite`); it never deletes never-committed files or directories.

Never deleted, whatever the mode: anything under ``_delta_log``, anything outside the table root, hidden files,
files younger than the horizon, files referenced by absolute paths, and symbolic links and what they point to
(links are not followed; a link is not a file VACUUM owns). Before deleting, FULL checks that every live file it
could have listed is actually there: when the log references live files that storage does not have (a table copied
or renamed without its files, paths that do not match), the listing and the log describe different tables and
deleting "unreferenced" files would be a guess, so VACUUM refuses (`VacuumRefused`). It also refuses a log holding a
commit or checkpoint whose version is not written with 20 digits (``2.json``): Spark reads that file as a version, so
the files only it references are live to Spark.

A real run commits ``VACUUM START`` (parameters and the counts it is about to delete), deletes, and commits
``VACUUM END`` (``COMPLETED`` or ``FAILED``); both commits carry no file actions. They are written on every storage
scheme unless ``commit_log_entries=False``. If another writer commits between planning and deleting, the plan is
checked against the newest snapshot and any candidate that became protected is kept. A dry run deletes and commits
nothing and lists the files (with sizes) it would delete.

Example:
    >>> stats = vacuum(DeltaTable("/data/events"), dry_run=True)  # doctest: +SKIP
    >>> stats.num_files_to_delete, stats.size_of_data_to_delete  # doctest: +SKIP
    (412, 1073741824)

Where each part lives: `retention` (the retention check), `paths` (hidden names, protected files, path
normalisation), `listing` (FULL's listing and its progress), `spill` and `by_prefix` (FULL a group of top-level
directories at a time), `inventory` (FULL from an inventory), `lite` (LITE's
candidates and `_last_vacuum_info`), `plan` (what is deleted), `delete` (the deletes), `run` (the operation: commits
around the deletes), `stats` (VacuumStats).
"""

from __future__ import annotations

from airflow_provider_deltalite.maintenance.vacuum.run import vacuum
from airflow_provider_deltalite.maintenance.vacuum.stats import VacuumProgress, VacuumStats

__all__ = ["VacuumProgress", "VacuumStats", "vacuum"]
