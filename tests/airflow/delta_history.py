"""Building a table's history for the sensor and trigger tests: appends by delta-rs, OPTIMIZE by deltalite.

Also what a commit says about itself, read straight from its JSON (not through deltalite), for expected payloads.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa


def append(path: Path, ids: list[int]) -> int:
    """Append one file of ``ids`` with delta-rs (creating the table on first use); the new version."""
    import deltalake

    deltalake.write_deltalake(str(path), pa.table({"id": pa.array(ids, pa.int64())}), mode="append")
    return deltalake.DeltaTable(str(path)).version()


def optimize(path: Path) -> int:
    """Compact every file with deltalite's OPTIMIZE (a commit whose file actions all have dataChange=false)."""
    from airflow_provider_deltalite import DeltaTable

    version = DeltaTable(str(path)).optimize().committed_version
    assert version is not None, "OPTIMIZE had nothing to compact"
    return version


def commit_facts(path: Path, version: int) -> dict[str, Any]:
    """The operation, commitInfo timestamp and data-changing adds (count, bytes) of one commit, from its JSON."""
    actions = [json.loads(line) for line in (path / "_delta_log" / f"{version:020d}.json").read_text().splitlines()]
    info = next(a["commitInfo"] for a in actions if "commitInfo" in a)
    adds = [a["add"] for a in actions if "add" in a and a["add"]["dataChange"]]
    return {
        "operation": info["operation"],
        "timestamp": info.get("inCommitTimestamp", info["timestamp"]),
        "added_files": len(adds),
        "added_bytes": sum(a["size"] for a in adds),
    }


def expected_payload(path: Path, baseline: int, versions: list[int], skipped: list[dict], rows: int) -> dict[str, Any]:
    """The sensor/trigger payload for data commits ``versions`` after ``baseline``, built from the log's own JSON."""
    facts = [commit_facts(path, v) for v in versions]
    return {
        "table_uri": str(path),
        "baseline_version": baseline,
        "version": versions[-1],
        "versions": versions,
        "skipped": skipped,
        "operations": [f["operation"] for f in facts],
        "added_files": sum(f["added_files"] for f in facts),
        "added_rows": rows,
        "added_bytes": sum(f["added_bytes"] for f in facts),
        "timestamp": facts[-1]["timestamp"],
    }
