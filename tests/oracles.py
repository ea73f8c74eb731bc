"""The independent readers tests compare our results with: delta-rs 1.6.3 and delta-kernel-rs (its Python wrapper).

`assert_rows_agree(path, expected)` reads the table with every oracle that can read it and asserts each sees exactly
the expected rows (a multiset of canonical tuples, `tests.conformance.corpus.row_multiset`). What an oracle cannot
read is listed below with the error it raises and why; a listed table is checked to still fail, so a table an oracle
learns to read must come off its list. A comparison that neither oracle can make is counted per test in `NO_ORACLE`
(tests/conftest.py prints the counts at the end of the run).
"""

from __future__ import annotations

import collections
import contextlib
import json
import os
import re
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pyarrow as pa
import pyarrow.parquet as pq

from tests.conformance.corpus import DELTA_RS_CANNOT_OPEN, DELTA_RS_CANNOT_READ, row_multiset, same_multiset
from tests.helpers import copy_table

DELTA_RS = "delta-rs"
KERNEL = "delta-kernel-rs"

# delta-rs 1.6.3 `DeltaTable.to_pyarrow_table()` refuses tables whose protocol needs these reader features (its
# DataFusion QueryBuilder path reads some of them, but these tests use the plain reader). (error, why)
DELTA_RS_UNREADABLE_FEATURES: dict[str, tuple[str, str]] = {
    "deletionVectors": ("DeltaProtocolError", "reader feature deletionVectors"),
    "columnMapping": ("DeltaProtocolError", "reader feature columnMapping"),
    "v2Checkpoint": ("DeltaProtocolError", "reader feature v2Checkpoint"),
    "typeWidening-preview": ("DeltaProtocolError", "reader feature typeWidening-preview"),
    "vacuumProtocolCheck": ("DeltaProtocolError", "reader feature vacuumProtocolCheck"),
    "variantShredding-preview": ("DeltaProtocolError", "reader feature variantShredding-preview"),
}
DELTA_RS_READER_VERSION_2 = ("DeltaProtocolError", "reader version 2 (column mapping without table features)")

# delta-kernel-rs 0.22 (wrapper 0.3.3): corpus tables it cannot open, and those it opens but cannot read the rows of.
KERNEL_CANNOT_OPEN: dict[str, tuple[str, str]] = {
    **{
        name: ("ValueError", "metaData without schemaString (the log is incomplete on purpose)")
        for name in (
            "delta-golden/canonicalized-paths-normal-a",
            "delta-golden/canonicalized-paths-normal-b",
            "delta-golden/canonicalized-paths-special-a",
            "delta-golden/canonicalized-paths-special-b",
            "delta-golden/corrupted-last-checkpoint",
            "delta-golden/deltalog-commit-info",
            "delta-golden/update-deleted-directory",
            "kernel-rs-golden/deltalog-commit-info/delta",
            "kernel-rs-golden/update-deleted-directory/delta",
        )
    },
    "delta-golden/data-reader-absolute-paths-escaped-chars": ("ValueError", "no metaData action"),
    "kernel-rs-golden/data-reader-absolute-paths-escaped-chars/delta": ("ValueError", "no metaData action"),
    "delta-kernel-benchmarks/basic_catalog_managed/delta": ("ValueError", "catalog-managed table"),
    "delta-kernel-defaults/catalog-owned-preview": ("ValueError", "catalog-managed table"),
    "kernel-rs-data/catalog_managed_0": ("ValueError", "catalog-managed table"),
    "kernel-rs-data/crc-malformed": ("ValueError", "no commit in the log"),
    "kernel-rs-data/table-with-geo": ("ValueError", "geometry type"),
    "kernel-rs-data/void-column": ("ValueError", "void type"),
}
_LIVE_FILE_MISSING = ("ArrowInvalid", "a live data file is not in the corpus")
_ONE_BYTE = ("ArrowInvalid", "1-byte data file")
_TEST_DV_PREFIX = ("ArrowInvalid", "Delta's test-suite DV file names; read the `spark_test_suite_copy`")
KERNEL_CANNOT_READ: dict[str, tuple[str, str]] = {
    "delta-golden/checkpoint": _ONE_BYTE,
    "kernel-rs-golden/checkpoint/delta": _ONE_BYTE,
    "delta-golden/delete-re-add-same-file-different-transactions": _ONE_BYTE,
    "kernel-rs-golden/delete-re-add-same-file-different-transactions/delta": _ONE_BYTE,
    "delta-golden/type-widening-nested": ("ArrowInvalid", "type widening inside a list"),
    "delta-golden/log-replay-special-characters-b": _LIVE_FILE_MISSING,
    "kernel-rs-golden/log-replay-special-characters-b/delta": _LIVE_FILE_MISSING,
    "delta-kernel-defaults/spark-variant-stable-feature-checkpoint": _LIVE_FILE_MISSING,
    "delta-rs/spark-variant-stable-feature-checkpoint": _LIVE_FILE_MISSING,
    "delta-rs-err-logs/table_a": _LIVE_FILE_MISSING,
    "delta-rs-err-logs/table_b": _LIVE_FILE_MISSING,
    "delta-rs-err-logs/table_g": _LIVE_FILE_MISSING,
    "delta-rs/checkpoint_with_partitions": _LIVE_FILE_MISSING,
    "delta-rs/checkpoints": _LIVE_FILE_MISSING,
    "delta-rs/checkpoints_vacuumed": _LIVE_FILE_MISSING,
    "delta-rs/latest_not_checkpointed": _LIVE_FILE_MISSING,
    "delta-rs/table-with-domain-metadata": _LIVE_FILE_MISSING,
    "delta-rs/with_checkpoint_no_last_checkpoint": _LIVE_FILE_MISSING,
    "kernel-rs-data/app-txn-with-last-updated": _LIVE_FILE_MISSING,
    "kernel-rs-data/with_checkpoint_no_last_checkpoint": _LIVE_FILE_MISSING,
    **{
        f"kernel-rs-golden/canonicalized-paths-{case}/delta": ("ArrowInvalid", "keeps a file removed as file:/x")
        for case in ("normal-a", "normal-b", "special-a", "special-b")
    },
    # Delta's Spark tests name DV files "test%dv%prefix-<the protocol's name>" (DeltaSQLConf.TEST_DV_NAME_PREFIX)
    # and leave a placeholder in an absolute DV path; the kernel looks for the protocol's name, which is not there
    "delta-spark-resources/partitioned-table-with-dv-large": _TEST_DV_PREFIX,
    "delta-spark-resources/table-with-dv-large": _TEST_DV_PREFIX,
    "delta-spark-resources/table-with-dv-small": _TEST_DV_PREFIX,
    "delta-spark-resources/table-with-dv-special-char": _TEST_DV_PREFIX,
    **{
        name: ("ArrowInvalid", "shredded variant files (its default engine reads unshredded ones only)")
        for name in (
            "delta-spark-resources/variant-stats-nested-no-checkpoint",
            "delta-spark-resources/variant-stats-no-checkpoint",
            "delta-spark-resources/variant-stats-state-reconstruction",
            "delta-spark-resources/variant-stats-with-struct-no-checkpoint",
        )
    },
}
# Tables it reads without an error but wrongly: checked to still differ from the expected rows.
KERNEL_READS_OTHER_ROWS: dict[str, str] = {
    "delta-rs/table_with_edge_timestamps": "INT96 timestamps beyond the nanosecond range wrap (9999-12-31 as 1816)",
}
SPARK_TEST_SUITE_TABLES = [n for n, limit in KERNEL_CANNOT_READ.items() if limit == _TEST_DV_PREFIX]
# The same limits as rules, for tables the tests write themselves. (error, why)
KERNEL_UNREADABLE_FEATURES: dict[str, tuple[str, str]] = {
    "catalogManaged": ("ValueError", "catalog-managed: the wrapper cannot pass max_catalog_version"),
    "catalogOwned-preview": ("ValueError", "catalog-managed: the wrapper cannot pass max_catalog_version"),
}
KERNEL_UNREADABLE_TYPES: dict[str, tuple[str, str]] = {
    "void": ("ValueError", "void type"),
    "geometry": ("ValueError", "geometry type"),
    "geography": ("ValueError", "geography type"),
}

# Comparisons no oracle could make, per test (its pytest node id): why, once per comparison.
NO_ORACLE: collections.defaultdict[str, list[str]] = collections.defaultdict(list)

_COMMIT = re.compile(r"^(\d{20})\.json$")
_VERSIONED = re.compile(r"^(\d{20})\.")
_COMPACTED = re.compile(r"^\d{20}\.(\d{20})\.compacted\.json$")


def delta_rs_rows(path: str | Path, version: int | None = None) -> pa.Table:
    """The rows delta-rs 1.6.3 reads (`DeltaTable.to_pyarrow_table`) at ``version`` (latest by default)."""
    import deltalake

    return pa.table(deltalake.DeltaTable(str(path), version=version).to_pyarrow_table())


def kernel_rows(path: str | Path, version: int | None = None) -> pa.Table:
    """The rows delta-kernel-rs reads at ``version`` (latest by default).

    The wrapper only opens the latest snapshot, so an older version is read from a view of the table whose log stops
    at that version: symlinks to the data and to the log files up to it (no `_last_checkpoint`).
    """
    import delta_kernel_rust_sharing_wrapper as kernel

    with _log_view(Path(path), version) as root:
        url = root.as_uri() + "/"
        engine = kernel.PythonInterface(url)
        snapshot = kernel.Table(url).snapshot(engine)
        assert version is None or snapshot.version() == version, (snapshot.version(), version)
        return kernel.ScanBuilder(snapshot).build().execute(engine).read_all()


def oracle_limit(oracle: str, path: str | Path, *, corpus_name: str | None = None, version: int | None = None):
    """(error, why) when ``oracle`` is listed as unable to read the table, else None.

    ``corpus_name`` names an unchanged corpus table: its lists apply to its latest version. Otherwise the rules by
    reader feature and column type apply to the protocol and schema at ``version``.
    """
    if corpus_name is not None and version is None:
        lists = (
            (DELTA_RS_CANNOT_OPEN, DELTA_RS_CANNOT_READ)
            if oracle == DELTA_RS
            else (KERNEL_CANNOT_OPEN, KERNEL_CANNOT_READ)
        )
        listed = next((found[corpus_name] for found in lists if corpus_name in found), None)
        if listed is not None:
            return listed
    protocol, schema = _protocol_and_schema(Path(path), version)
    features = set(protocol.get("readerFeatures") or [])
    if oracle == DELTA_RS:
        if protocol.get("minReaderVersion") == 2:
            return DELTA_RS_READER_VERSION_2
        return next(
            (DELTA_RS_UNREADABLE_FEATURES[f] for f in sorted(features & DELTA_RS_UNREADABLE_FEATURES.keys())), None
        )
    for feature in sorted(features & KERNEL_UNREADABLE_FEATURES.keys()):
        return KERNEL_UNREADABLE_FEATURES[feature]
    types = _type_names(schema)
    return next((KERNEL_UNREADABLE_TYPES[t] for t in sorted(types & KERNEL_UNREADABLE_TYPES.keys())), None)


READERS: dict[str, Callable[[str | Path, int | None], pa.Table]] = {DELTA_RS: delta_rs_rows, KERNEL: kernel_rows}


def oracle_rows(
    path: str | Path, *, corpus_name: str | None = None, version: int | None = None
) -> tuple[dict[str, pa.Table], dict[str, str]]:
    """The rows of every oracle that can read the table, and why each other one cannot (checked to fail as listed)."""
    rows: dict[str, pa.Table] = {}
    cannot: dict[str, str] = {}
    for oracle, read in READERS.items():
        limit = oracle_limit(oracle, path, corpus_name=corpus_name, version=version)
        if limit is None:
            rows[oracle] = read(path, version)
            continue
        error, why = limit
        raised = _error_of(lambda read=read: read(path, version))
        assert raised == error, f"{oracle} on {corpus_name or path}: {raised}, listed as {error} ({why})"
        cannot[oracle] = why
    return rows, cannot


def assert_rows_agree(
    path: str | Path,
    expected: pa.Table | collections.Counter,
    *,
    columns: list[str] | None = None,
    corpus_name: str | None = None,
    version: int | None = None,
) -> list[str]:
    """Assert every oracle that can read the table sees ``expected`` (a table, or a `row_multiset` over
    ``columns``); return the oracles that compared. None could: the comparison is counted in `NO_ORACLE`."""
    if isinstance(expected, pa.Table):
        columns = expected.column_names if columns is None else columns
        expected = row_multiset(expected, columns)
    assert columns is not None, "a multiset needs its columns"
    rows, cannot = oracle_rows(path, corpus_name=corpus_name, version=version)
    if version is None and corpus_name in KERNEL_READS_OTHER_ROWS:
        assert row_multiset(rows.pop(KERNEL), columns) != expected, f"{KERNEL} reads {corpus_name} right now"
        cannot[KERNEL] = KERNEL_READS_OTHER_ROWS[corpus_name]
    for oracle, table in rows.items():
        assert table.num_rows == sum(expected.values()), f"{oracle}: {table.num_rows} rows"
        assert same_multiset(row_multiset(table, columns), expected), f"{oracle} reads other rows"
    if not rows:
        record_no_oracle(cannot)
    return list(rows)


def spark_test_suite_copy(name: str, dest: Path) -> Path:
    """A copy of a table Delta's Spark test suite wrote, as that suite reads it: DV files under the protocol's names
    (the suite writes them with a test-only prefix) and the absolute DV path's placeholder filled in."""
    path = copy_table(name, dest)
    for f in path.rglob("test%dv%prefix-deletion_vector_*.bin"):
        f.rename(f.with_name(f.name.removeprefix("test%dv%prefix-")))
    for commit in (path / "_delta_log").glob("*.json"):
        text = commit.read_text()
        folder = quote(str(path / "folder&with%special char"))
        text = text.replace("{{FOLDER_WITH_SPECIAL_CHAR}}", folder).replace("test%25dv%25prefix-", "")
        commit.write_text(text)
    return path


def agreed_rows(path: str | Path, version: int | None = None) -> collections.Counter:
    """The rows (a `row_multiset`) every oracle that can read the table reads alike; one of them at least must."""
    rows, cannot = oracle_rows(path, version=version)
    assert rows, f"no oracle reads {path}: {cannot}"
    columns = next(iter(rows.values())).column_names
    found = {oracle: row_multiset(table, columns) for oracle, table in rows.items()}
    first = next(iter(found.values()))
    assert all(multiset == first for multiset in found.values()), f"{' and '.join(found)} read other rows"
    return first


def record_no_oracle(why: str | dict[str, str]) -> None:
    """Count one comparison no oracle could make, under the running test; ``why``: a line, or oracle -> reason."""
    if isinstance(why, dict):
        why = "; ".join(f"{oracle}: {reason}" for oracle, reason in why.items())
    running = os.environ.get("PYTEST_CURRENT_TEST")  # "<node id> (call)"
    test = running.rsplit(" ", 1)[0] if running else "outside pytest"
    NO_ORACLE[test].append(why)


def _error_of(call: Callable[[], object]) -> str | None:
    try:
        call()
    except Exception as exc:
        return type(exc).__name__
    return None


@contextlib.contextmanager
def _log_view(path: Path, version: int | None) -> Iterator[Path]:
    log = path / "_delta_log"
    latest = max((int(m.group(1)) for n in os.listdir(log) if (m := _COMMIT.match(n))), default=None)
    if version is None or version == latest:
        yield path
        return
    with tempfile.TemporaryDirectory(prefix="kernel-view-") as tmp:
        root = Path(tmp) / "t"
        (root / "_delta_log").mkdir(parents=True)
        for entry in os.listdir(path):
            if entry != "_delta_log":
                os.symlink(path / entry, root / entry)
        for name in os.listdir(log):
            compacted = _COMPACTED.match(name)
            versioned = _VERSIONED.match(name)
            if (compacted and int(compacted.group(1)) > version) or (versioned and int(versioned.group(1)) > version):
                continue
            if versioned or name == "_sidecars":
                os.symlink(log / name, root / "_delta_log" / name)
        yield root


def _protocol_and_schema(path: Path, version: int | None) -> tuple[dict[str, Any], dict[str, Any]]:
    """The protocol and schema at ``version``: the newest of the commits after the newest parquet checkpoint up to
    it, then that checkpoint, then older commits (a log without a usable checkpoint)."""
    log = path / "_delta_log"
    names = sorted(os.listdir(log), reverse=True)
    commits = [n for n in names if _COMMIT.match(n) and (version is None or int(n[:20]) <= version)]
    checkpoints = [n for n in names if ".checkpoint" in n and n.endswith(".parquet")]
    checkpoints = [n for n in checkpoints if version is None or int(n[:20]) <= version]
    newest = checkpoints[0][:20] if checkpoints else ""
    found: dict[str, Any] = {}

    def take(action: dict[str, Any]) -> None:
        for key in ("protocol", "metaData"):
            if action.get(key) and key not in found:
                found[key] = action[key]

    def from_commits(selected: list[str]) -> None:
        for name in selected:
            for line in (log / name).read_text().splitlines():
                take(json.loads(line) if line.strip() else {})

    from_commits([n for n in commits if n[:20] > newest])
    for name in (n for n in checkpoints if n[:20] == newest):
        present = [c for c in ("protocol", "metaData") if c in pq.read_schema(log / name).names]  # multi-part
        for row in pq.read_table(log / name, columns=present).to_pylist():
            take(row)
    from_commits([n for n in commits if n[:20] <= newest])
    protocol, metadata = found.get("protocol") or {}, found.get("metaData") or {}
    return protocol, json.loads(metadata.get("schemaString") or "{}")


def _type_names(schema: Any) -> set[str]:
    """Every type name in a Delta schema, parameters dropped (`geometry(OGC:CRS84)` is `geometry`)."""
    if isinstance(schema, str):
        return {schema.split("(", 1)[0]}
    if isinstance(schema, dict):
        return set().union(
            *(
                _type_names(v)
                for k, v in schema.items()
                if k in ("type", "fields", "elementType", "keyType", "valueType")
            )
        )
    if isinstance(schema, list):
        return set().union(*(_type_names(v) for v in schema))
    return set()
