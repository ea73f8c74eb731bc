"""Shared helpers of the conformance suite: the corpus catalogue, expected data, row normalisation, delta-rs views."""

from __future__ import annotations

import collections
import datetime as dt
import decimal
import json
import math
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import pyarrow as pa
import pyarrow.parquet as pq

from tests.helpers import CORPUS

# Positive tables deltalite refuses on purpose, with the error it must raise and why (docs/conformance.md shows these).
KNOWN_REFUSALS: dict[str, tuple[str, str]] = {}
_REFUSAL_RULES = (
    ("variantType", "ProtocolNotSupported", "the variant type is not supported (reader feature variantType)"),
    ("variantShredding", "ProtocolNotSupported", "variant shredding is not supported"),
    ("catalogManaged", "ProtocolNotSupported", "catalog-managed tables commit through a catalog, not the log"),
    ("geospatial", "ProtocolNotSupported", "geospatial types are not supported"),
)
# Tables the corpus marks positive but whose logs break the protocol; deltalite raises a typed error.
PROTOCOL_VIOLATIONS: dict[str, tuple[str, str]] = {
    "delta-golden/data-reader-absolute-paths-escaped-chars": ("CorruptLog", "the log has no metaData action"),
    "kernel-rs-golden/data-reader-absolute-paths-escaped-chars/delta": (
        "CorruptLog",
        "the log has no metaData action",
    ),
    "kernel-rs-data/crc-malformed": ("TableNotFound", "_delta_log holds a .crc file but no commit"),
}


@dataclass(frozen=True)
class CorpusTable:
    """One catalogued corpus table."""

    entry: dict[str, Any]

    @property
    def name(self) -> str:
        return self.entry["staged_path"]

    @property
    def path(self) -> Path:
        return CORPUS / self.entry["staged_path"]

    @property
    def role(self) -> str:
        role = self.entry["test_role"]
        if role.startswith("positive") or "should open" in role:
            return "positive"
        if role.startswith("negative") or "should error" in role:
            return "negative"
        return "skip"

    @property
    def features(self) -> list[str]:
        return list(self.entry.get("features") or [])

    def refusal(self) -> tuple[str, str] | None:
        """The documented error for a table deltalite refuses, or None."""
        if self.name in PROTOCOL_VIOLATIONS:
            return PROTOCOL_VIOLATIONS[self.name]
        proto = self.entry.get("protocol") or {}
        names = list(proto.get("readerFeatures") or [])
        for needle, error, reason in _REFUSAL_RULES:
            if any(needle in n for n in names):
                return error, reason
        return None

    def expected_dirs(self) -> dict[str, Path]:
        """Expected-data directories keyed by ``latest`` or ``v<N>``."""
        root = self.path.parent if self.path.name == "delta" else None
        out: dict[str, Path] = {}
        if root is not None and (root / "expected").is_dir():
            exp = root / "expected"
            subdirs = [d for d in exp.iterdir() if d.is_dir()]
            if any((d / "table_content.parquet").exists() for d in subdirs):  # dat layout
                for d in subdirs:
                    if d.name == "latest" or (d.name.startswith("v") and d.name[1:].isdigit()):
                        out[d.name] = d
            elif list(exp.glob("*.parquet")):  # kernel-rs golden: a Spark dump of the latest snapshot
                out["latest"] = exp
        via = self.entry.get("expected_via") or ""
        if not out and via.startswith("kernel-rs-golden/") and "table bytes identical" in via:
            exp = CORPUS / via.split(" ")[0]
            if exp.is_dir():
                out["latest"] = exp
        return out


def corpus_tables() -> list[CorpusTable]:
    """Every table in summary.json that has a `_delta_log` (the archive is exercised by the benchmark)."""
    summary = json.loads((CORPUS / "summary.json").read_text())
    return [CorpusTable(e) for e in summary if e.get("has_delta_log") and ".tar." not in e["staged_path"]]


def read_expected(directory: Path) -> pa.Table:
    """Expected rows from a Spark parquet dump directory (or a dat `table_content.parquet`)."""
    files = sorted(directory.glob("*.parquet"))
    tables = [pq.read_table(f) for f in files]
    tables = [t for t in tables if t.num_columns]
    if not tables:
        return pa.table({})
    return pa.concat_tables(tables, promote_options="permissive")


def _canon(value: Any) -> Any:
    if value is None:
        return None
    if isinstance(value, float):
        return "NaN" if math.isnan(value) else value
    if isinstance(value, decimal.Decimal):
        return ("dec", str(value.normalize()) if value == value else "NaN")
    if isinstance(value, dt.datetime):
        if value.tzinfo is not None:
            value = value.astimezone(dt.UTC).replace(tzinfo=None)
        return ("ts", value.isoformat())
    if isinstance(value, dt.date):
        return ("date", value.isoformat())
    if isinstance(value, bytes):
        return ("bin", value.hex())
    if isinstance(value, dict):
        return ("struct", tuple((k, _canon(v)) for k, v in sorted(value.items())))
    if isinstance(value, list):
        if value and all(isinstance(v, tuple) and len(v) == 2 for v in value):  # an Arrow map as pairs
            return ("map", tuple(sorted(((_canon(k), _canon(v)) for k, v in value), key=repr)))
        return ("list", tuple(_canon(v) for v in value))
    return value


def _normalise_column(column: pa.ChunkedArray) -> list[Any]:
    # INT96 and ns timestamps from Spark dumps have no zone; ours are UTC: compare as naive UTC microseconds.
    if pa.types.is_timestamp(column.type):
        column = column.cast(pa.timestamp("us", tz=column.type.tz))
    return [_canon(v) for v in column.to_pylist()]


def row_multiset(table: pa.Table, columns: list[str]) -> collections.Counter:
    """Rows as a multiset of canonical tuples over ``columns`` (matched case-insensitively)."""
    lookup = {n.lower(): n for n in table.column_names}
    values = [_normalise_column(table.column(lookup[c.lower()])) for c in columns]
    return collections.Counter(zip(*values, strict=True)) if values else collections.Counter({(): table.num_rows})


def deltars_paths(path: Path, version: int | None = None) -> set[str] | None:
    """The live file paths delta-rs 1.6.3 sees, decoded and relative; None when delta-rs cannot open the table."""
    try:
        import deltalake

        table = deltalake.DeltaTable(str(path), version=version)
        actions = table.get_add_actions(flatten=True)
        paths = (
            pa.table(actions).column("path").to_pylist()
            if not isinstance(actions, pa.Table)
            else actions.column("path").to_pylist()
        )
    except Exception:
        return None
    return {normalise_path(p, path) for p in paths}


def normalise_path(p: str, root: Path) -> str:
    """A log path reduced to a decoded path relative to ``root`` when it lies inside it."""
    text = unquote(p)
    if text.startswith("file:"):
        text = "/" + text[len("file:") :].lstrip("/")
    prefix = str(root).rstrip("/") + "/"
    return text[len(prefix) :] if text.startswith(prefix) else text


def versions_with_complete_log(path: Path) -> Iterator[int]:
    """Versions from the first JSON commit of a gap-free run ending at the latest commit."""
    names = sorted(p.name for p in (path / "_delta_log").glob("*.json") if p.name[:20].isdigit() and len(p.name) == 25)
    versions = [int(n[:20]) for n in names]
    if not versions:
        return iter(())
    run = [versions[-1]]
    for v in reversed(versions[:-1]):
        if v != run[-1] - 1:
            break
        run.append(v)
    return iter(sorted(run))
