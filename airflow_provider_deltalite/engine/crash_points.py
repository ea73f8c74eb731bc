"""Named points where the crash-injection tests kill the process, to show that a writer dying anywhere loses nothing.

A point does nothing unless the environment variable ``DELTALITE_CRASH_AT`` names it. ``DELTALITE_CRASH_AT=name``
kills the process with SIGKILL the first time the point is reached; ``name@N`` on the N-th time (a checkpoint or a
batched OPTIMIZE reaches some points more than once). SIGKILL is what an out-of-memory killer, a lost node or a
``kill -9`` does: no ``finally`` block, no ``atexit`` handler, no flushed buffer runs, so whatever the storage holds at
that moment is what readers and the next run find.

The points (see ``docs/reliability.md``):

``after_data_files``
    every new data file of an OPTIMIZE or Z-order commit is written; the commit is not.
``during_commit_write``
    inside the create-only write of a commit file (locally: the content is in a hidden temporary file that is not yet
    linked to its name; on object stores: before the conditional PUT).
``after_dynamodb_entry``
    with a DynamoDB commit table: the commit is in its temp file and its DynamoDB entry is put (not complete); the
    commit file is not written yet.
``during_checkpoint_write``
    a checkpoint's Parquet file (or its sidecars and top-level file) is written; ``_last_checkpoint`` is not.
``vacuum_after_start``
    ``VACUUM START`` is committed; nothing is deleted yet.
``vacuum_before_end``
    the files are deleted; ``VACUUM END`` is not committed.
"""

from __future__ import annotations

import os
import signal

CRASH_ENV = "DELTALITE_CRASH_AT"
POINTS = (
    "after_data_files",
    "during_commit_write",
    "after_dynamodb_entry",
    "during_checkpoint_write",
    "vacuum_after_start",
    "vacuum_before_end",
)

_hits: dict[str, int] = {}


def crash_point(name: str) -> None:
    """Kill this process with SIGKILL if ``DELTALITE_CRASH_AT`` names this point (and hit count); else return."""
    target = os.environ.get(CRASH_ENV)
    if not target:
        return
    wanted, _, nth = target.partition("@")
    if wanted != name:
        return
    _hits[name] = _hits.get(name, 0) + 1
    if _hits[name] >= (int(nth) if nth.isdigit() else 1):
        os.kill(os.getpid(), signal.SIGKILL)
