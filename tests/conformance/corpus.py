"""Shared helpers of the conformance suite: the corpus catalogue, expected data, row normalisation, delta-rs views."""

from __future__ import annotations

import collections
import datetime as dt
import decimal
import json
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from tests.helpers import CORPUS

# Positive tables deltalite refuses on purpose, with the error it must raise and why (docs/conformance.md shows these).
KNOWN_REFUSALS: dict[str, tuple[str, str]] = {}
_REFUSAL_RULES = (
    ("catalogManaged", "ProtocolNotSupported", "catalog-managed tables commit through a catalog, not the log"),
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

# delta-rs 1.6.3 is the oracle of several tests. These corpus tables it cannot open, and those it opens but cannot
# read the rows of: (the error it raises, why; a bare name is a reader feature it does not support). The tests that
# compare with delta-rs assert that it still fails on these (a table it learns to read must come off the list) and
# that it opens and reads every other table they use.
DELTA_RS_CANNOT_OPEN: dict[str, tuple[str, str]] = {
    "delta-golden/canonicalized-paths-normal-a": ("DeltaError", "null in a required field"),
    "delta-golden/canonicalized-paths-normal-b": ("DeltaError", "null in a required field"),
    "delta-golden/canonicalized-paths-special-a": ("DeltaError", "null in a required field"),
    "delta-golden/canonicalized-paths-special-b": ("DeltaError", "null in a required field"),
    "delta-golden/corrupted-last-checkpoint": ("DeltaError", "null in a required field"),
    "delta-golden/data-reader-absolute-paths-escaped-chars": ("DeltaError", "no metaData action"),
    "delta-golden/deltalog-commit-info": ("DeltaError", "null in a required field"),
    "delta-golden/update-deleted-directory": ("DeltaError", "null in a required field"),
    "delta-kernel-benchmarks/basic_catalog_managed/delta": ("DeltaError", "catalog-managed table"),
    "delta-kernel-defaults/catalog-owned-preview": ("DeltaError", "catalog-managed table"),
    "kernel-rs-data/catalog_managed_0": ("DeltaError", "catalog-managed table"),
    "kernel-rs-data/crc-malformed": ("TableNotFoundError", "no commit in the log"),
    "kernel-rs-data/table-with-geo": ("DeltaError", "geometry type"),
    "kernel-rs-golden/data-reader-absolute-paths-escaped-chars/delta": ("DeltaError", "no metaData action"),
    "kernel-rs-golden/deltalog-commit-info/delta": ("DeltaError", "null in a required field"),
    "kernel-rs-golden/update-deleted-directory/delta": ("DeltaError", "null in a required field"),
}
DELTA_RS_CANNOT_READ: dict[str, tuple[str, str]] = {
    "delta-golden/basic-decimal-table": ("ArrowInvalid", "decimal partition value"),
    "delta-golden/basic-decimal-table-legacy": ("ArrowInvalid", "decimal partition value"),
    "delta-golden/basic-with-vacuum-protocol-check-feature": ("DeltaProtocolError", "vacuumProtocolCheck"),
    "delta-golden/checkpoint": ("ArrowInvalid", "1-byte data file"),
    "delta-golden/delete-re-add-same-file-different-transactions": ("ArrowInvalid", "1-byte data file"),
    "delta-golden/log-replay-special-characters-b": ("FileNotFoundError", "live file not found"),
    "delta-golden/data-reader-timestamp_ntz-id-mode": ("DeltaProtocolError", "columnMapping"),
    "delta-golden/data-reader-timestamp_ntz-name-mode": ("DeltaProtocolError", "columnMapping"),
    "delta-golden/data-skipping-basic-stats-all-types-columnmapping-name": ("DeltaProtocolError", "reader version 2"),
    "delta-golden/table-with-columnmapping-mode-id": ("DeltaProtocolError", "reader version 2"),
    "delta-golden/table-with-columnmapping-mode-name": ("DeltaProtocolError", "reader version 2"),
    "delta-golden/table-with-icebegCompatV2Enabled": ("DeltaProtocolError", "reader version 2"),
    "delta-golden/type-widening": ("DeltaProtocolError", "typeWidening-preview"),
    "delta-golden/type-widening-nested": ("DeltaProtocolError", "typeWidening-preview"),
    "delta-golden/v2-checkpoint-json": ("DeltaProtocolError", "v2Checkpoint"),
    "delta-golden/v2-checkpoint-parquet": ("DeltaProtocolError", "v2Checkpoint"),
    "delta-kernel-defaults/column-mapping-id": ("DeltaProtocolError", "reader version 2"),
    "delta-kernel-defaults/data-reader-partition-values-column-mapping-name": (
        "DeltaProtocolError",
        "reader version 2",
    ),
    "delta-kernel-defaults/data-reader-primitives-column-mapping-name": ("DeltaProtocolError", "reader version 2"),
    "delta-kernel-defaults/kernel-pagination-v2-checkpoint-json": ("DeltaProtocolError", "v2Checkpoint"),
    "delta-kernel-defaults/kernel-pagination-v2-checkpoint-parquet": ("DeltaProtocolError", "v2Checkpoint"),
    "delta-kernel-defaults/spark-shredded-variant-preview-delta": ("DeltaProtocolError", "variantShredding-preview"),
    "delta-kernel-defaults/spark-variant-stable-feature-checkpoint": ("FileNotFoundError", "live file not found"),
    "delta-rs-err-logs/table_a": ("FileNotFoundError", "live file not found"),
    "delta-rs-err-logs/table_b": ("FileNotFoundError", "live file not found"),
    "delta-rs-err-logs/table_g": ("FileNotFoundError", "live file not found"),
    "delta-rs/checkpoint-v2-table": ("DeltaProtocolError", "v2Checkpoint"),
    "delta-rs/checkpoint_with_partitions": ("FileNotFoundError", "live file not found"),
    "delta-rs/checkpoints": ("FileNotFoundError", "live file not found"),
    "delta-rs/checkpoints_vacuumed": ("FileNotFoundError", "live file not found"),
    "delta-rs/delta-live-table": ("DeltaProtocolError", "reader version 2"),
    "delta-rs/latest_not_checkpointed": ("FileNotFoundError", "live file not found"),
    "delta-rs/spark-shredded-variant-preview-delta": ("DeltaProtocolError", "variantShredding-preview"),
    "delta-rs/spark-variant-stable-feature-checkpoint": ("FileNotFoundError", "live file not found"),
    "delta-rs/table-with-domain-metadata": ("DeltaProtocolError", "deletionVectors"),
    "delta-rs/table_with_column_mapping": ("DeltaProtocolError", "reader version 2"),
    "delta-rs/table_with_edge_timestamps": ("ArrowInvalid", "timestamp out of range"),
    "delta-rs/table_with_liquid_clustering": ("DeltaProtocolError", "deletionVectors"),
    "delta-rs/table_with_partitioning_mapping": ("DeltaProtocolError", "columnMapping, deletionVectors"),
    "delta-rs/with_checkpoint_no_last_checkpoint": ("FileNotFoundError", "live file not found"),
    "delta-spark-resources/variant-stats-nested-no-checkpoint": (
        "DeltaProtocolError",
        "deletionVectors, variantShredding-preview",
    ),
    "delta-spark-resources/variant-stats-no-checkpoint": ("DeltaProtocolError", "variantShredding-preview"),
    "delta-spark-resources/variant-stats-state-reconstruction": ("DeltaProtocolError", "variantShredding-preview"),
    "delta-spark-resources/variant-stats-with-struct-no-checkpoint": (
        "DeltaProtocolError",
        "deletionVectors, variantShredding-preview",
    ),
    "kernel-rs-data/app-txn-with-last-updated": ("FileNotFoundError", "live file not found"),
    "kernel-rs-data/basic-decimal-table": ("ArrowInvalid", "decimal partition value"),
    "kernel-rs-data/cdf-column-mapping-id-mode": ("DeltaProtocolError", "reader version 2"),
    "kernel-rs-data/cdf-column-mapping-name-mode": ("DeltaProtocolError", "reader version 2"),
    "kernel-rs-data/cdf-column-mapping-name-mode-3-7": ("DeltaProtocolError", "columnMapping, deletionVectors"),
    "kernel-rs-data/cdf-table-with-dv": ("DeltaProtocolError", "deletionVectors"),
    "kernel-rs-data/crc-full": ("DeltaProtocolError", "deletionVectors"),
    "kernel-rs-data/partition_cm/id": ("DeltaProtocolError", "columnMapping"),
    "kernel-rs-data/partition_cm/name": ("DeltaProtocolError", "columnMapping"),
    "kernel-rs-data/stats-writing-all-types/delta": ("DeltaProtocolError", "columnMapping"),
    "kernel-rs-data/timestamp-partitioned-table": ("DeltaProtocolError", "deletionVectors"),
    "kernel-rs-data/type-widening": ("DeltaProtocolError", "typeWidening-preview"),
    "kernel-rs-data/v1-multi-part-partitioned-struct-stats-only": ("DeltaProtocolError", "deletionVectors"),
    "kernel-rs-data/v1-multi-part-struct-stats-only": ("DeltaProtocolError", "deletionVectors"),
    "kernel-rs-data/v1-single-part-struct-stats-only": ("DeltaProtocolError", "deletionVectors"),
    "kernel-rs-data/v2-checkpoints-json-with-last-checkpoint": ("DeltaProtocolError", "v2Checkpoint"),
    "kernel-rs-data/v2-checkpoints-json-with-sidecars": ("DeltaProtocolError", "v2Checkpoint"),
    "kernel-rs-data/v2-checkpoints-json-without-sidecars": ("DeltaProtocolError", "v2Checkpoint"),
    "kernel-rs-data/v2-checkpoints-parquet-with-last-checkpoint": ("DeltaProtocolError", "v2Checkpoint"),
    "kernel-rs-data/v2-checkpoints-parquet-with-sidecars": ("DeltaProtocolError", "v2Checkpoint"),
    "kernel-rs-data/v2-checkpoints-parquet-without-sidecars": ("DeltaProtocolError", "v2Checkpoint"),
    "kernel-rs-data/v2-classic-checkpoint-json": ("DeltaProtocolError", "v2Checkpoint"),
    "kernel-rs-data/v2-classic-checkpoint-parquet": ("DeltaProtocolError", "v2Checkpoint"),
    "kernel-rs-data/v2-classic-parquet-struct-stats-only": ("DeltaProtocolError", "deletionVectors"),
    "kernel-rs-data/v2-json-sidecars-struct-stats-only": ("DeltaProtocolError", "deletionVectors, v2Checkpoint"),
    "kernel-rs-data/v2-parquet-sidecars-struct-stats-only": ("DeltaProtocolError", "deletionVectors, v2Checkpoint"),
    "kernel-rs-data/with_checkpoint_no_last_checkpoint": ("FileNotFoundError", "live file not found"),
    "kernel-rs-golden/basic-decimal-table-legacy/delta": ("ArrowInvalid", "decimal partition value"),
    "kernel-rs-golden/basic-decimal-table/delta": ("ArrowInvalid", "decimal partition value"),
    "kernel-rs-golden/basic-with-vacuum-protocol-check-feature/delta": ("DeltaProtocolError", "vacuumProtocolCheck"),
    "kernel-rs-golden/canonicalized-paths-normal-a/delta": ("FileNotFoundError", "keeps a file removed as file:/x"),
    "kernel-rs-golden/canonicalized-paths-normal-b/delta": ("FileNotFoundError", "keeps a file removed as file:/x"),
    "kernel-rs-golden/canonicalized-paths-special-a/delta": ("FileNotFoundError", "keeps a file removed as file:/x"),
    "kernel-rs-golden/canonicalized-paths-special-b/delta": ("FileNotFoundError", "keeps a file removed as file:/x"),
    "kernel-rs-golden/checkpoint/delta": ("ArrowInvalid", "1-byte data file"),
    "kernel-rs-golden/delete-re-add-same-file-different-transactions/delta": ("ArrowInvalid", "1-byte data file"),
    "kernel-rs-golden/log-replay-special-characters-b/delta": ("FileNotFoundError", "live file not found"),
    "kernel-rs-golden/data-reader-timestamp_ntz-id-mode/delta": ("DeltaProtocolError", "columnMapping"),
    "kernel-rs-golden/data-reader-timestamp_ntz-name-mode/delta": ("DeltaProtocolError", "columnMapping"),
    "kernel-rs-golden/data-skipping-basic-stats-all-types-columnmapping-name/delta": (
        "DeltaProtocolError",
        "reader version 2",
    ),
    "kernel-rs-golden/dv-partitioned-with-checkpoint/delta": ("DeltaProtocolError", "deletionVectors"),
    "kernel-rs-golden/dv-with-columnmapping/delta": ("DeltaProtocolError", "columnMapping, deletionVectors"),
    "kernel-rs-golden/table-with-columnmapping-mode-id/delta": ("DeltaProtocolError", "reader version 2"),
    "kernel-rs-golden/table-with-columnmapping-mode-name/delta": ("DeltaProtocolError", "reader version 2"),
    "kernel-rs-golden/v2-checkpoint-json/delta": ("DeltaProtocolError", "v2Checkpoint"),
    "kernel-rs-golden/v2-checkpoint-parquet/delta": ("DeltaProtocolError", "v2Checkpoint"),
}


def deltars_error(call: Callable[[], object]) -> str | None:
    """The type name of the error a delta-rs call raises, or None when it succeeds."""
    try:
        call()
    except Exception as exc:
        return type(exc).__name__
    return None


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
    kind = column.type
    if pa.types.is_timestamp(kind):
        column = column.cast(pa.timestamp("us", tz=kind.tz))
    # Vectorised where `_canon` would be the identity or a plain rewrite: a corpus table of a million rows is compared
    # three times, value by value in Python it took half a minute.
    if pa.types.is_integer(kind) or pa.types.is_string(kind) or pa.types.is_large_string(kind):
        return column.to_pylist()
    if pa.types.is_floating(kind) and not pc.any(pc.is_nan(column)).as_py():
        return column.to_pylist()
    if pa.types.is_decimal(kind) and kind.scale >= 0:  # a negative scale's text has an exponent
        # without trailing fractional zeros, so that equal values of any scale read alike
        text = pc.replace_substring_regex(column.cast(pa.string()), pattern=r"(\.[0-9]*?)0+$", replacement=r"\1")
        text = pc.replace_substring_regex(text, pattern=r"\.$", replacement="")
        return pc.binary_join_element_wise("dec:", text, "").to_pylist()
    return [_canon(v) for v in column.to_pylist()]


def row_multiset(table: pa.Table, columns: list[str]) -> collections.Counter:
    """Rows as a multiset of canonical tuples over ``columns`` (matched case-insensitively)."""
    lookup = {n.lower(): n for n in table.column_names}
    values = [_normalise_column(table.column(lookup[c.lower()])) for c in columns]
    return collections.Counter(zip(*values, strict=True)) if values else collections.Counter({(): table.num_rows})


def same_multiset(a: collections.Counter, b: collections.Counter) -> bool:
    """``a == b`` for multisets, compared in C: Counter's own ``==`` is a Python loop over every row."""
    if min(a.values(), default=1) <= 0 or min(b.values(), default=1) <= 0:  # a count brought to zero is no row
        a, b = +a, +b
    return dict.__eq__(a, b)


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
