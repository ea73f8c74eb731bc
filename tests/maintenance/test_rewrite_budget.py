"""``max_bytes_to_rewrite``: OPTIMIZE and Z-order read at most that many input bytes per run, taking bins in their
planned order and counting the rest (``numBinsDeferred``, ``bytesDeferred``); the planner gives each rewrite action its
share of ``max_rewrite_bytes_per_run``, so files that arrive between planning and running cannot push a run over it.

Sizes come from delta-rs's add actions, rows from delta-rs's reader: neither is our code.
"""

from __future__ import annotations

import collections
from pathlib import Path

import deltalake
import pyarrow as pa
import pytest

from airflow_provider_deltalite.engine.errors import InvalidArgument
from airflow_provider_deltalite.engine.table import Table
from airflow_provider_deltalite.maintenance.clustering.zorder import plan_zorder, zorder
from airflow_provider_deltalite.maintenance.optimize import optimize, plan_optimize
from airflow_provider_deltalite.maintenance.options import OptimizeOptions, ZOrderOptions
from airflow_provider_deltalite.maintenance.planner import (
    MaintenancePlan,
    MaintenancePolicy,
    plan_maintenance,
    run_plan,
)
from tests.helpers import cli_failure, tree_state

MIB = 1024 * 1024


def _append(path: Path, partitions: list[str], first: int, appends: int) -> None:
    """``appends`` delta-rs appends, each one file per partition holding the same ten ids (so the partitions' files
    are alike and their bins the same size, whatever order the bins are planned in)."""
    for i in range(first, first + appends):
        ids = list(range(i * 10, i * 10 + 10))
        batch = pa.table({"p": [p for p in partitions for _ in ids], "id": pa.array(ids * len(partitions), pa.int64())})
        deltalake.write_deltalake(str(path), batch, mode="append", partition_by=["p"])


def _files(path: Path) -> dict[str, list[int]]:
    """Partition -> the sizes of its live files, as delta-rs reads the log."""
    adds = pa.table(deltalake.DeltaTable(str(path)).get_add_actions(flatten=True))
    out: dict[str, list[int]] = collections.defaultdict(list)
    for p, size in zip(adds.column("partition.p").to_pylist(), adds.column("size_bytes").to_pylist(), strict=True):
        out[p].append(size)
    return dict(out)


def _rows(path: Path) -> collections.Counter:
    table = deltalake.DeltaTable(str(path)).to_pyarrow_table()
    return collections.Counter(zip(table.column("p").to_pylist(), table.column("id").to_pylist(), strict=True))


def _partition_bytes(path: Path) -> int:
    """The bytes of each partition's files, which are the same for every partition."""
    (size,) = {sum(sizes) for sizes in _files(path).values()}
    return size


def test_a_run_plan_stays_within_the_budget_when_files_arrive_after_planning(tmp_path: Path) -> None:
    path = tmp_path / "t"
    _append(path, ["a", "b"], 0, 5)
    planned_bytes = _partition_bytes(path)  # five small files per partition: each partition is one bin
    budget = 2 * planned_bytes  # both partitions fit, exactly
    table = Table(str(path))
    policy = MaintenancePolicy(
        target_file_size=MIB, max_rewrite_bytes_per_run=budget, max_commits_since_checkpoint=1000
    )
    plan = plan_maintenance(table, policy)
    ((action,),) = [plan.actions]
    assert (action.operation, sorted(p["p"] for p in action.partitions)) == ("optimize", ["a", "b"])
    assert (action.estimate.bytes_read, action.options["max_bytes_to_rewrite"], plan.deferred) == (budget, budget, ())

    _append(path, ["a", "b"], 5, 3)  # delta-rs appends three more files to each partition before the run
    grown = _partition_bytes(path)
    assert planned_bytes < grown <= budget < 2 * grown  # one grown partition fits the budget, two would not
    rows = _rows(path)

    run = run_plan(table, MaintenancePlan.from_dict(plan.to_dict()))
    stats = run.actions[0].stats
    assert stats["filesRemoved"]["totalSize"] == grown  # the bytes read: within the budget
    assert (stats["numFilesRemoved"], stats["numFilesAdded"]) == (8, 1)
    assert (stats["numBinsDeferred"], stats["bytesDeferred"], stats["partitionsOptimized"]) == (1, grown, 1)
    assert sorted(len(sizes) for sizes in _files(path).values()) == [1, 8]  # the other partition waits
    assert _rows(path) == rows


def test_optimize_takes_bins_while_they_fit_and_counts_the_rest(tmp_path: Path) -> None:
    path = tmp_path / "t"
    _append(path, ["a", "b", "c"], 0, 4)
    rows = _rows(path)
    size = _partition_bytes(path)  # each partition: one bin of four files
    table = Table(str(path))

    dry = optimize(table, max_bytes_to_rewrite=2 * size + size // 2, dry_run=True)
    assert (dry.num_bins, dry.num_files_removed, dry.num_bins_deferred, dry.bytes_deferred) == (2, 8, 1, size)

    # a bin larger than the whole cap is never rewritten: nothing is read, nothing committed
    before = tree_state(path)
    small = optimize(table, max_bytes_to_rewrite=size - 1)
    assert (small.num_bins, small.num_files_removed, small.committed_version) == (0, 0, None)
    assert (small.num_bins_deferred, small.bytes_deferred) == (3, 3 * size)
    assert tree_state(path) == before

    stats = optimize(table, max_bytes_to_rewrite=2 * size + size // 2)
    assert (stats.num_bins, stats.num_files_removed, stats.num_files_added) == (2, 8, 2)
    assert stats.files_removed.total_size == 2 * size
    assert (stats.num_bins_deferred, stats.bytes_deferred, stats.committed_version) == (1, size, 4)
    assert stats.to_dict()["numBinsDeferred"] == 1 and stats.to_dict()["bytesDeferred"] == size
    assert sorted(len(sizes) for sizes in _files(path).values()) == [1, 1, 4]
    assert _rows(path) == rows

    rest = optimize(table, max_bytes_to_rewrite=size)  # the deferred bin, alone, fits exactly
    assert (rest.num_bins, rest.num_files_removed, rest.num_bins_deferred, rest.bytes_deferred) == (1, 4, 0, 0)
    assert sorted(len(sizes) for sizes in _files(path).values()) == [1, 1, 1]
    assert _rows(path) == rows


def test_zorder_takes_partitions_while_they_fit(tmp_path: Path) -> None:
    path = tmp_path / "t"
    _append(path, ["a", "b", "c"], 0, 3)
    rows = _rows(path)
    size = _partition_bytes(path)  # Z-order rewrites every file of a partition: each is one bin
    stats = zorder(Table(str(path)), ["id"], max_bytes_to_rewrite=2 * size)
    assert (stats.num_bins, stats.num_files_removed, stats.files_removed.total_size) == (2, 6, 2 * size)
    assert (stats.num_bins_deferred, stats.bytes_deferred, stats.z_order_stats["numOutputCubes"]) == (1, size, 2)
    assert sorted(len(sizes) for sizes in _files(path).values()) == [1, 1, 3]
    assert _rows(path) == rows


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (0, "max_bytes_to_rewrite must be a positive number of bytes, got 0"),
        (-5, "max_bytes_to_rewrite must be a positive number of bytes, got -5"),
        ("1000", "max_bytes_to_rewrite must be a positive number of bytes, got '1000'"),
        (True, "max_bytes_to_rewrite must be a positive number of bytes, got True"),
    ],
)
def test_a_bad_max_bytes_to_rewrite_names_it(value: object, message: str) -> None:
    for cls, extra in ((OptimizeOptions, {}), (ZOrderOptions, {"columns": ["id"]})):
        with pytest.raises(InvalidArgument) as caught:
            cls.build({**extra, "max_bytes_to_rewrite": value}, "/t")
        assert caught.value.problem == message
    with pytest.raises(InvalidArgument) as caught:
        OptimizeOptions.from_text({"max_bytes_to_rewrite": "a lot"})
    assert caught.value.problem == "max_bytes_to_rewrite must be a whole number, got 'a lot'"
    assert ZOrderOptions.from_text({"columns": "id", "max_bytes_to_rewrite": "4096"}).max_bytes_to_rewrite == 4096


def test_the_planners_refuse_a_bad_cap_given_to_them_directly(tmp_path: Path) -> None:
    path = tmp_path / "t"
    _append(path, ["a"], 0, 2)
    snapshot = Table(str(path)).snapshot()
    for plan in (
        lambda: plan_optimize(snapshot, max_bytes_to_rewrite=0),
        lambda: plan_zorder(snapshot, ["id"], max_bytes_to_rewrite=-1),
    ):
        with pytest.raises(
            InvalidArgument, match=r"max_bytes_to_rewrite must be a positive number of bytes, got -?[01]$"
        ):
            plan()


def test_the_cli_refuses_a_bad_max_bytes_to_rewrite_and_writes_nothing(tmp_path: Path) -> None:
    path = tmp_path / "t"
    _append(path, ["a"], 0, 2)
    before = tree_state(path)
    assert cli_failure("optimize", path, "--max-bytes-to-rewrite", "0") == (
        f"deltalite: error: table {path}: max_bytes_to_rewrite must be a positive number of bytes, got 0"
    )
    assert cli_failure("zorder", path, "--columns", "id", "--max-bytes-to-rewrite", "-1") == (
        f"deltalite: error: table {path}: max_bytes_to_rewrite must be a positive number of bytes, got -1"
    )
    assert cli_failure("optimize", path, "--max-bytes-to-rewrite", "lots") == (
        "deltalite: error: argument --max-bytes-to-rewrite: not a whole number of bytes: 'lots'"
    )
    assert tree_state(path) == before
