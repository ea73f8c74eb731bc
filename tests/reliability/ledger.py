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


def check_ours_change_no_data(ledger: Ledger, storage: Any) -> None:
    """Our commits only rearrange: every add and remove has dataChange=false (VACUUM START/END have none), so no
    delta-rs conflict ("deleted data this operation read") and no row change can come from them."""
    for v in ledger.ours:
        for line in storage.read(f"_delta_log/{v:020d}.json").decode().splitlines():
            action = json.loads(line) if line.strip() else {}
            for kind in ("add", "remove", "cdc"):
                if kind in action:
                    assert ledger.ours[v] == "OPTIMIZE" and action[kind]["dataChange"] is False, (v, kind)


def _rows(t: Any) -> list[Row]:
    cols = [t.column(c).to_pylist() for c in ("id", "part", "val")]
    return sorted(zip(*cols, strict=True))


class Versions:
    """deltalite's snapshots of one table by version, each loaded once (the log never changes below the latest)."""

    def __init__(self, table: Any) -> None:
        self.table = table
        self._snapshots: dict[int, Any] = {}

    def snapshot(self, version: int) -> Any:
        if version not in self._snapshots:
            self._snapshots[version] = self.table.snapshot(version)
        return self._snapshots[version]

    def live(self, version: int) -> set[str]:
        """The data files ``version`` references, relative to the table root, decoded (as VACUUM names them)."""
        return {unquote(p) for p in self.snapshot(version).raw_files.column("path").to_pylist()}

    def files(self, version: int) -> set[tuple[str, int]]:
        raw = self.snapshot(version).raw_files
        paths = [unquote(p) for p in raw.column("path").to_pylist()]
        return set(zip(paths, raw.column("size").to_pylist(), strict=True))

    def rows(self, version: int) -> list[Row]:
        from airflow_provider_deltalite.engine.scan import scan

        t, _ = scan(self.snapshot(version), columns=["id", "part", "val"])
        return _rows(t)


def read_versions(
    ledger: Ledger,
    versions: Versions,
    uri: str,
    options: Mapping[str, str],
    first: int,
    latest: int,
    gone: Iterable[str] = (),
) -> list[int]:
    """Read ``first..latest`` with delta-rs and deltalite and compare each with the ledger; the versions skipped.

    At every version: delta-rs's rows are the ledger's, and deltalite's snapshot holds exactly delta-rs's files (path
    and size). deltalite also scans the rows of the versions it wrote itself and of ``latest`` (a scan of every version
    would read the same files again and again; the file sets show that it would find the same rows).

    A version is skipped only when a file it references was deleted by VACUUM (``gone``); the caller checks that
    VACUUM was allowed to (the version is outside its retention window).
    """
    import deltalake
    import pyarrow as pa

    gone = set(gone)
    skipped = []
    deltars = None
    for v in range(first, latest + 1):
        if versions.live(v) & gone:
            skipped.append(v)
            continue
        expected = ledger.rows_at(v)
        if deltars is None:
            deltars = deltalake.DeltaTable(uri, version=v, storage_options=dict(options))
        else:
            deltars.load_as_version(v)  # forward from the last version read: delta-rs replays only the new commits
        assert _rows(deltars.to_pyarrow_table()) == expected, f"delta-rs reads version {v} differently from the ledger"
        adds = pa.table(deltars.get_add_actions(flatten=True))
        theirs = set(zip(adds.column("path").to_pylist(), adds.column("size_bytes").to_pylist(), strict=True))
        assert versions.files(v) == theirs, f"deltalite's snapshot of version {v} holds other files than delta-rs's"
        if v in ledger.ours or v == latest:
            assert versions.rows(v) == expected, f"deltalite reads version {v} differently from the ledger"
    return skipped
