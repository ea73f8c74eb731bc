"""The oracles of tests/oracles.py: each reads what the other reads, at old versions too, and their lists hold."""

from __future__ import annotations

from pathlib import Path

import deltalake
import pyarrow as pa
import pytest

from tests.helpers import CORPUS, copy_table
from tests.oracles import (
    DELTA_RS,
    KERNEL,
    KERNEL_CANNOT_OPEN,
    KERNEL_CANNOT_READ,
    NO_ORACLE,
    assert_rows_agree,
    delta_rs_rows,
    kernel_rows,
    oracle_limit,
)

HISTORY = "delta-golden/basic-with-inserts-deletes-checkpoint"  # v13, a checkpoint at 10, DELETEs


def _ids(table: pa.Table) -> list[int]:
    return sorted(table.column("id").to_pylist())


@pytest.mark.parametrize("version", [0, 5, 10, 12, None])
def test_kernel_reads_each_version_as_delta_rs_does(version: int | None) -> None:
    path = CORPUS / HISTORY
    ours = kernel_rows(path, version)
    assert ours.num_rows > 0
    assert _ids(ours) == _ids(delta_rs_rows(path, version))


def test_a_version_view_leaves_the_table_alone(tmp_path: Path) -> None:
    path = copy_table(HISTORY, tmp_path / "t")
    names = sorted(p.name for p in (path / "_delta_log").iterdir())
    kernel_rows(path, 3)
    assert sorted(p.name for p in (path / "_delta_log").iterdir()) == names


def test_rows_of_a_table_we_write_agree_and_disagree(tmp_path: Path) -> None:
    data = pa.table({"id": pa.array([1, 2, 2], pa.int64()), "s": ["a", "b", "b"]})
    deltalake.write_deltalake(str(tmp_path / "t"), data)
    assert assert_rows_agree(tmp_path / "t", data) == [DELTA_RS, KERNEL]
    with pytest.raises(AssertionError, match="rows"):
        assert_rows_agree(tmp_path / "t", data.slice(0, 2))
    other = pa.table({"id": pa.array([1, 2, 3], pa.int64()), "s": ["a", "b", "b"]})
    with pytest.raises(AssertionError, match="reads other rows"):
        assert_rows_agree(tmp_path / "t", other)


def test_a_dv_table_is_read_by_the_kernel_only() -> None:
    path = CORPUS / "delta-kernel-defaults/basic-dv-no-checkpoint"
    assert oracle_limit(DELTA_RS, path) == ("DeltaProtocolError", "reader feature deletionVectors")
    assert oracle_limit(KERNEL, path) is None
    expected = pa.table(
        deltalake.QueryBuilder().register("t", deltalake.DeltaTable(str(path))).execute("SELECT * FROM t").read_all()
    )
    assert assert_rows_agree(path, expected) == [KERNEL]


def test_a_listed_table_that_reads_fails_the_comparison(tmp_path: Path) -> None:
    # a list entry is checked: the kernel reads this table, so calling it unreadable is an error
    with pytest.raises(AssertionError, match="listed as ValueError"):
        assert_rows_agree(
            CORPUS / HISTORY, pa.table({"id": pa.array([], pa.int64())}), corpus_name="kernel-rs-data/void-column"
        )


def test_no_oracle_is_counted_with_its_reason() -> None:
    name = "kernel-rs-data/table-with-geo"  # delta-rs and the kernel both refuse geometry columns
    before = sum(len(reasons) for reasons in NO_ORACLE.values())
    assert assert_rows_agree(CORPUS / name, pa.table({}), corpus_name=name) == []
    assert sum(len(reasons) for reasons in NO_ORACLE.values()) == before + 1
    (test,) = [t for t in NO_ORACLE if t.endswith("::test_no_oracle_is_counted_with_its_reason")]
    assert NO_ORACLE.pop(test) == ["delta-rs: geometry type; delta-kernel-rs: geometry type"]


def test_the_lists_name_corpus_tables() -> None:
    for name in [*KERNEL_CANNOT_OPEN, *KERNEL_CANNOT_READ]:
        assert (CORPUS / name / "_delta_log").is_dir(), name
    assert set(KERNEL_CANNOT_OPEN).isdisjoint(KERNEL_CANNOT_READ)
