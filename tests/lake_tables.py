"""A small lake for the lake planner's tests (CLI and the example DAG): tables under one prefix that need different
work, written by delta-rs, with what each needs computed from the files on disk (never by deltalite).

- ``a_small8``, ``c_small12``, ``g_mid6``, ``e_big6``: 8, 12, 6 and 6 one-append files (10, 10, 200 and 2,000 rows
  each): each compacts into one file (all are far below 1 GiB), removing ``files - 1`` files for ``sum(sizes)`` bytes;
- ``b_few3``: three files, below ``min_input_files`` (5): nothing to do;
- ``d_vacuum``: two files, the first removed by a hand-written commit 30 days old: VACUUM deletes it;
- ``f_excluded``: ten small files, excluded by the lake policy.

The four compactions live under ``sales/``, the other three under ``ops/``: two prefixes, or one above both.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import deltalake
import pyarrow as pa

DAY_MS = 24 * 3_600_000
REWRITES = {"a_small8": (8, 10), "c_small12": (12, 10), "g_mid6": (6, 200), "e_big6": (6, 2000)}
# no checkpoint actions: the tables have fewer commits than this
POLICY = {"max_commits_since_checkpoint": 1000, "tables": {"*/f_excluded": {"priority": "exclude"}}}


def _append(path: Path, first: int, rows: int) -> None:
    ids = list(range(first, first + rows))
    deltalake.write_deltalake(str(path), pa.table({"id": ids, "name": [f"n{i}" for i in ids]}), mode="append")


def data_sizes(path: Path) -> list[int]:
    return [p.stat().st_size for p in path.glob("*.parquet")]


class Lake:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.prefixes = [root / "sales", root / "ops"]
        for name, (files, rows) in REWRITES.items():
            for i in range(files):
                _append(self.path(name), i * rows, rows)
        for i in range(3):
            _append(self.path("b_few3"), i * 10, 10)
        for i in range(10):
            _append(self.path("f_excluded"), i * 10, 10)
        self.vacuum = self.path("d_vacuum")
        _append(self.vacuum, 0, 10)
        _append(self.vacuum, 100, 10)
        log = self.vacuum / "_delta_log"
        [removed] = [json.loads(x)["add"] for x in (log / f"{0:020d}.json").read_text().splitlines() if '"add"' in x]
        self.removed_path = self.vacuum / removed["path"]
        size = self.removed_path.stat().st_size
        now = int(time.time() * 1000)
        old = now - 30 * DAY_MS
        remove = {"path": removed["path"], "deletionTimestamp": old, "dataChange": True, "extendedFileMetadata": True,
                  "partitionValues": {}, "size": size}  # fmt: skip
        commit = {"timestamp": now, "operation": "DELETE", "operationParameters": {}}
        (log / f"{2:020d}.json").write_text(json.dumps({"commitInfo": commit}) + "\n" + json.dumps({"remove": remove}))
        os.utime(self.removed_path, (old / 1000, old / 1000))
        # bytes each compaction reads and the files it removes less the one it writes: from the files on disk
        self.rewrite_bytes = {name: sum(data_sizes(self.path(name))) for name in REWRITES}
        self.gain = {name: files - 1 for name, (files, _) in REWRITES.items()}

    def path(self, name: str) -> Path:
        return self.root / ("sales" if name in REWRITES else "ops") / name

    def uri(self, name: str) -> str:
        return str(self.path(name))

    def ranked(self) -> list[str]:
        """The compactions by files removed per byte read, most first (ties: fewer bytes, then the name)."""
        return sorted(REWRITES, key=lambda n: (-self.gain[n] / self.rewrite_bytes[n], self.rewrite_bytes[n], n))

    def chosen_within(self, budget: int) -> list[str]:
        """Greedy as the issue asks: the most gain per byte first, each taken while it fits what is left."""
        left, out = budget, []
        for name in self.ranked():
            if self.rewrite_bytes[name] <= left:
                out.append(name)
                left -= self.rewrite_bytes[name]
        return out

    def interesting_budget(self) -> int:
        """A budget that admits the best two compactions but not the third: the second-best compaction and the one
        after it cost more together than what is left, so the cut is at rank 2 (asserted by the tests)."""
        first, second, third, _ = self.ranked()
        return self.rewrite_bytes[first] + self.rewrite_bytes[second] + self.rewrite_bytes[third] // 2

    def state(self) -> dict[str, Any]:
        return {n: deltalake.DeltaTable(self.uri(n)).version() for n in [*REWRITES, "b_few3", "d_vacuum", "f_excluded"]}
