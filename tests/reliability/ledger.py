"""The independent record the other-writers tests check the table against (tests/reliability/test_other_writers.py).

delta-rs writer processes report every operation (`deltars_writer.apply`); the test records its own maintenance
commits. From those reports alone, never from the table, `Ledger.rows_at` says which rows (id, part, val) version v
must hold, and `check_log` says which party wrote each version. `read_versions` then reads every version with delta-rs
and with deltalite.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote

Row = tuple[int, str, int]


@dataclass
class Ledger:
    """delta-rs operations (their reports) and deltalite's commits, by version."""

    deltars: list[dict[str, Any]] = field(default_factory=list)
    ours: dict[int, str] = field(default_factory=dict)  # version -> our operation (OPTIMIZE, VACUUM START, ...)

    def record(self, report: Mapping[str, Any]) -> dict[str, Any]:
        self.deltars.append(dict(report))
        return dict(report)

    def committed(self) -> dict[int, dict[str, Any]]:
        out: dict[int, dict[str, Any]] = {}
        for r in self.deltars:
            if r["ok"]:
                assert r["version"] not in out, f"two delta-rs operations report version {r['version']}"
                out[r["version"]] = r
        return out

    def rows_at(self, version: int) -> list[Row]:
        """The rows version ``version`` must hold: every committed delta-rs operation up to it, in version order."""
        rows: dict[int, Row] = {}
        for v, r in sorted(self.committed().items()):
            if v > version:
                break
            for i, part, val in r["added"]:
                assert i not in rows, f"id {i} added twice by the writers themselves"
                rows[i] = (i, part, val)
            for i in r["deleted"]:
                rows.pop(i)
            for i, val in r["updated"].items():
                rows[int(i)] = (int(i), rows[int(i)][1], val)
        return sorted(rows.values())


def commit_infos(storage: Any, latest: int) -> dict[int, dict[str, Any]]:
    """commitInfo of versions 0..latest (every one must exist)."""
    infos = {}
    for v in range(latest + 1):
        body = storage.read(f"_delta_log/{v:020d}.json").decode()
        lines = [json.loads(line) for line in body.splitlines() if line.strip()]
        infos[v] = next((x["commitInfo"] for x in lines if "commitInfo" in x), {})
    return infos


def check_log(ledger: Ledger, infos: Mapping[int, Mapping[str, Any]], first_ours: int = 0) -> None:
    """Every version is claimed by exactly one party, and is what that party said it committed.

    delta-rs: the version it reported carries its tag (``commitInfo.ledger``); a failed operation's tag is nowhere.
    deltalite: the version holds the operation it reported. Nothing else wrote.
    """
    deltars = ledger.committed()
    tags = {v: info.get("ledger") for v, info in infos.items()}
    assert sorted(deltars.keys() | ledger.ours.keys()) == sorted(infos), "a version is claimed by nobody or twice"
    assert not deltars.keys() & ledger.ours.keys()
    for v, r in deltars.items():
        assert tags[v] == r["tag"], f"version {v}: delta-rs reported {r['tag']}, the log holds {tags[v]}"
    failed = {r["tag"] for r in ledger.deltars if not r["ok"]}
    assert not failed & set(tags.values()), "a delta-rs operation that failed is in the log"
    for v, op in ledger.ours.items():
        assert infos[v].get("operation") == op and tags[v] is None, (v, infos[v].get("operation"), op)


def deltars_rows(uri: str, options: Mapping[str, str], version: int) -> list[Row]:
    import deltalake

    t = deltalake.DeltaTable(uri, version=version, storage_options=dict(options)).to_pyarrow_table()
    return _rows(t)


def our_rows(table: Any, version: int) -> list[Row]:
    from airflow_provider_deltalite.engine.scan import scan

    t, _ = scan(table.snapshot(version), columns=["id", "part", "val"])
    return _rows(t)


def _rows(t: Any) -> list[Row]:
    cols = [t.column(c).to_pylist() for c in ("id", "part", "val")]
    return sorted(zip(*cols, strict=True))


def live_paths(table: Any, version: int) -> set[str]:
    """The data files version ``version`` references, relative to the table root, decoded (as VACUUM names them)."""
    return {unquote(p) for p in table.snapshot(version).raw_files.column("path").to_pylist()}


def read_versions(
    ledger: Ledger,
    table: Any,
    uri: str,
    options: Mapping[str, str],
    latest: int,
    gone: Iterable[str] = (),
) -> list[int]:
    """Read 0..latest with delta-rs and deltalite and compare each with the ledger; the versions skipped.

    A version is skipped only when a file it references was deleted by VACUUM (``gone``); the caller checks that
    VACUUM was allowed to (the version is outside its retention window).
    """
    gone = set(gone)
    skipped = []
    for v in range(latest + 1):
        if live_paths(table, v) & gone:
            skipped.append(v)
            continue
        expected = ledger.rows_at(v)
        assert deltars_rows(uri, options, v) == expected, f"delta-rs reads version {v} differently from the ledger"
        assert our_rows(table, v) == expected, f"deltalite reads version {v} differently from the ledger"
    return skipped
