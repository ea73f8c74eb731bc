"""`deltalite scan --filter` and `files --where` prune partitions while the log is read (`Table.snapshot(where=...)`):
the rows and files are those delta-rs and the corpus's expected data give, for predicates that select nothing,
everything, a null partition, a partition whose files were removed after the checkpoint, a column-mapped partition
column, and partition and data columns mixed. Run in process (one replay each, no interpreter start)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import deltalake
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from airflow_provider_deltalite.cli import main
from airflow_provider_deltalite.engine.errors import InvalidArgument
from airflow_provider_deltalite.engine.scan import scan
from airflow_provider_deltalite.engine.table import Table
from tests.conformance.corpus import read_expected, row_multiset, same_multiset
from tests.helpers import CORPUS, tree_state

# checkpoint at 10; commits 11-13 remove files of partitions 0, 2 and 4, 14-15 replace files of 6 and 8 (DVs)
DV = CORPUS / "kernel-rs-golden/dv-partitioned-with-checkpoint"
# the same history with column mapping (name): `part` is written under a physical name
DV_CM = CORPUS / "kernel-rs-golden/dv-with-columnmapping"
NULL_PART = CORPUS / "delta-rs/delta-0.8.0-null-partition"  # k = 'A' and k null

ALL = pc.scalar(True)
CASES: dict[str, tuple[Path, str, pc.Expression, pc.Expression, pc.Expression]] = {
    # name: (table, predicate, rows it selects, partitions it selects (delta-rs add actions), and of those the
    # files a scan reads by their statistics)
    "nothing": (DV, "part = 100", pc.field("part") == 100, pc.field("partition.part") == 100, ALL),
    "everything": (DV, "part IS NULL OR part IS NOT NULL", ALL, ALL, ALL),
    "removed after the checkpoint": (DV, "part = 2", pc.field("part") == 2, pc.field("partition.part") == 2, ALL),
    "replaced after the checkpoint": (
        DV,
        "part = 6 OR part = 8",
        pc.field("part").isin([6, 8]),
        pc.field("partition.part").isin([6, 8]),
        ALL,
    ),
    "column mapped": (DV_CM, "part = 4", pc.field("part") == 4, pc.field("partition.part") == 4, ALL),
    "mixed": (
        DV,
        "part >= 5 AND col1 > 20",
        (pc.field("part") >= 5) & (pc.field("col1") > 20),
        pc.field("partition.part") >= 5,
        pc.field("max.col1") > 20,
    ),
    "null partition": (NULL_PART, "k IS NULL", pc.field("k").is_null(), pc.field("partition.k").is_null(), ALL),
}


def run(capsys: pytest.CaptureFixture[str], *argv: Any) -> tuple[int, str, str]:
    code = main([str(a) for a in argv])
    out = capsys.readouterr()
    return code, out.out, out.err


def expected_rows(table: Path) -> pa.Table:
    expected = table / "expected"
    if expected.is_dir():
        return read_expected(expected)
    return pa.table(deltalake.DeltaTable(str(table)).to_pyarrow_table())


def delta_root(table: Path) -> Path:
    return table / "delta" if (table / "delta").is_dir() else table


def delta_rs_files(table: Path, partitions: pc.Expression, stats: pc.Expression) -> tuple[set[str], set[str]]:
    """delta-rs's live files of the selected partitions, and of those the ones whose statistics may match."""
    actions = pa.table(deltalake.DeltaTable(str(delta_root(table))).get_add_actions(flatten=True))
    in_partitions = actions.filter(partitions)
    read = in_partitions.filter(stats) if stats is not ALL else in_partitions
    return set(in_partitions.column("path").to_pylist()), set(read.column("path").to_pylist())


@pytest.mark.parametrize("case", list(CASES))
def test_scan_and_files_where_equal_delta_rs_and_the_expected_data(
    case: str, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    table, predicate, rows_filter, partitions, stats = CASES[case]
    root = delta_root(table)
    out_file = tmp_path / "rows.parquet"
    code, out, err = run(capsys, "scan", "--json", "--filter", predicate, "--output", out_file, root)
    assert (code, err) == (0, ""), err
    doc = json.loads(out)
    expected = expected_rows(table).filter(rows_filter)
    got = pq.read_table(out_file)
    columns = got.column_names
    assert same_multiset(row_multiset(got, columns), row_multiset(expected, columns)), case
    in_partitions, read = delta_rs_files(table, partitions, stats)
    assert doc["rows"] == expected.num_rows
    assert doc["prunedInReplay"] is True
    # the log replay kept exactly the selected partitions' files; statistics skipped the rest
    assert (doc["filesTotal"], doc["filesSkippedByPartition"]) == (len(in_partitions), 0)
    assert (doc["filesRead"], doc["filesSkippedByStats"]) == (len(read), len(in_partitions) - len(read))

    code, out, err = run(capsys, "files", "--json", "--where", predicate, root)
    assert (code, err) == (0, ""), err
    assert {f["path"] for f in json.loads(out)["files"]} == read


def test_selected_partitions_of_the_cases() -> None:
    """The cases select what their names say: a partition with files removed after the checkpoint keeps some."""
    sizes = {name: len(delta_rs_files(c[0], c[3], ALL)[0]) for name, c in CASES.items()}
    assert sizes == {
        "nothing": 0,
        "everything": 15,
        "removed after the checkpoint": 1,
        "replaced after the checkpoint": 2,
        "column mapped": 1,
        "mixed": 8,
        "null partition": 1,
    }


def test_files_where_without_a_predicate_lists_every_file(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "files", "--json", delta_root(DV))
    assert code == 0
    assert {f["path"] for f in json.loads(out)["files"]} == delta_rs_files(DV, ALL, ALL)[0]


@pytest.mark.parametrize(
    ("argv", "fragment"),
    [
        (("scan", "--filter", "part = "), "expected a literal"),
        (("files", "--where", "part = "), "expected a literal"),
        (("files", "--where", "nope = 1"), "unknown column 'nope'"),
        (("scan", "--filter", "part = 'x'"), "part"),
    ],
)
def test_a_malformed_predicate_is_one_line_exit_2_nothing_written(
    argv: tuple[str, ...], fragment: str, capsys: pytest.CaptureFixture[str]
) -> None:
    root = delta_root(DV)
    before = tree_state(root)
    code, out, err = run(capsys, *argv, root)
    assert (code, out) == (2, "")
    assert err.startswith(f"deltalite: error: table {root}: ") and err.count("\n") == 1, err
    assert fragment in err, err
    assert tree_state(root) == before


def test_a_pruned_snapshot_scans_only_with_its_own_filter() -> None:
    snapshot = Table(str(delta_root(DV))).snapshot(where="part = 2")
    assert snapshot.pruned_by == "part = 2"
    rows, metrics = scan(snapshot, filter="part = 2")
    assert (rows.num_rows, metrics.files_total, metrics.pruned_in_replay) == (
        expected_rows(DV).filter(pc.field("part") == 2).num_rows,
        1,
        True,
    )
    with pytest.raises(InvalidArgument, match="holds only the files of the partitions 'part = 2'"):
        scan(snapshot, filter="part = 3")
    with pytest.raises(InvalidArgument):
        scan(snapshot)
