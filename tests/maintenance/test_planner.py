"""The maintenance planner: exact plans on hand-written logs and hand-built health, policies, and the ``where``
predicates of partition actions.

Every expected figure is computed by hand from the sizes, row counts and timestamps written in the logs below
(`planner_tables`); the planner reads no data file, so the data files do not exist.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import deltalake
import pyarrow as pa
import pytest

from airflow_provider_deltalite.engine.errors import InvalidArgument, InvalidPolicy
from airflow_provider_deltalite.engine.table import Table
from airflow_provider_deltalite.maintenance.checkpoint import checkpoint
from airflow_provider_deltalite.maintenance.health.metrics import ColumnClustering
from airflow_provider_deltalite.maintenance.planner import (
    DeferredAction,
    Estimate,
    MaintenancePlan,
    MaintenancePolicy,
    PlannedAction,
    Reason,
    decide,
    plan_maintenance,
    run_plan,
)
from airflow_provider_deltalite.maintenance.planner.where import logical_names, partitions_predicate
from airflow_provider_deltalite.maintenance.rewrites import considered_files
from airflow_provider_deltalite.table import DeltaTable
from tests.maintenance.liquid_tables import clustered_points
from tests.maintenance.planner_tables import (
    DATE_SCHEMA,
    HOUR,
    KIB,
    MIB,
    NOW,
    add,
    commit_info,
    delta_rs_table,
    make_health,
    metadata,
    partition_health,
    protocol,
    remove,
    write_log,
)
from tests.oracles import agreed_rows, spark_test_suite_copy

A, B, C = "2026-11-01", "2026-11-02", "2026-11-03"
POLICY = MaintenancePolicy(target_file_size=MIB)  # fragments: files below 1 MiB / 8 = 128 KiB
GIB = 1024 * MIB
DEFAULT_BUDGET = 100 * GIB  # max_rewrite_bytes_per_run
# _mixed's purge (2 MiB) and compaction (980 KiB) each run with their estimate plus half of the default budget they
# leave unused (an even number of bytes, so no odd byte goes to the first)
SPARE = (DEFAULT_BUDGET - 2 * MIB - 980 * KIB) // 2


def _mixed(root: Path, *extra_commits: list[dict[str, Any]]) -> Table:
    """day=A: 6 files of 80 KiB; day=B: 4 files of 100 KiB; day=C: two 2 MiB files with deletion vectors removing
    10 and 3 of their 100 rows; day=null: 5 files of 100 KiB."""
    files = (
        [add(f"day={A}/a{i}.parquet", 80 * KIB, partition={"day": A}) for i in range(6)]
        + [add(f"day={B}/b{i}.parquet", 100 * KIB, partition={"day": B}) for i in range(4)]
        + [
            add(f"day={C}/c0.parquet", 2 * MIB, partition={"day": C}, dv_rows=10),
            add(f"day={C}/c1.parquet", 2 * MIB, partition={"day": C}, dv_rows=3),
        ]
        + [add(f"day=__HIVE_DEFAULT_PARTITION__/n{i}.parquet", 100 * KIB, partition={"day": None}) for i in range(5)]
    )
    write_log(
        root,
        [
            [commit_info(NOW - 100 * HOUR, "CREATE TABLE"), protocol(dvs=True), metadata(DATE_SCHEMA, ["day"])],
            [commit_info(NOW - 90 * HOUR), *files],
            *extra_commits,
        ],
    )
    return Table(str(root))


def _optimize_reason(label: str, fragments: int) -> Reason:
    return Reason(
        "fragments",
        fragments,
        "min_input_files",
        5,
        f"partition day={label}: {fragments} fragments (files below 128 KiB, target_file_size / fragment_ratio), "
        "at least min_input_files=5",
    )


PURGE = PlannedAction(
    operation="purge",
    options={
        "where": f"day = '{C}'",
        "target_size": MIB,
        "min_file_size": 1,
        "max_deleted_rows_ratio": 0.05,
        "max_bytes_to_rewrite": 2 * MIB + SPARE,
    },
    partitions=({"day": C},),
    reasons=(
        Reason(
            "files_over_deleted_rows_ratio",
            1,
            "max_deleted_rows_ratio",
            0.05,
            f"partition day={C}: 1 file whose deletion vectors remove more than max_deleted_rows_ratio=0.05 of their "
            "rows (up to 10.0%)",
        ),
    ),
    # c0 alone: 2 MiB read, 90% of it written again (10 of 100 rows deleted), one file for one
    estimate=Estimate(bytes_read=2 * MIB, bytes_written=round(2 * MIB * 0.9), files_removed=1, files_added=1),
)


# An OPTIMIZE half an hour ago, under the default one-hour cooldown: why compaction waits.
HALF_HOUR_INTO_OPTIMIZE_COOLDOWN = Reason(
    "hours_since_optimize",
    0.5,
    "optimize_cooldown_hours",
    1.0,
    "the last OPTIMIZE was 0.5 hours ago, within optimize_cooldown_hours=1",
)


def test_small_files_and_deletion_vectors_give_compaction_and_purge_per_partition(tmp_path: Path) -> None:
    table = _mixed(tmp_path / "t")
    snapshot = table.snapshot()
    plan = decide(make_health(table.uri, 1), snapshot, POLICY, NOW)
    optimize = PlannedAction(
        operation="optimize",
        options={
            "where": f"day IS NULL OR day = '{A}'",
            "target_size": MIB,
            "min_file_size": MIB,
            "max_deleted_rows_ratio": 0.05,
            "max_bytes_to_rewrite": 980 * KIB + SPARE,
        },
        partitions=({"day": None}, {"day": A}),
        reasons=(_optimize_reason("null", 5), _optimize_reason(A, 6)),
        # one bin per partition (500 KiB and 480 KiB, both below 1 MiB): 11 files into 2
        estimate=Estimate(bytes_read=980 * KIB, bytes_written=980 * KIB, files_removed=11, files_added=2),
    )
    assert plan.actions == (PURGE, optimize)  # B has 4 fragments, below min_input_files; c1's 3% is below 5%
    assert plan.deferred == ()
    assert plan.total == Estimate(
        bytes_read=2 * MIB + 980 * KIB,
        bytes_written=round(2 * MIB * 0.9) + 980 * KIB,
        files_removed=12,
        files_added=3,
    )
    assert (plan.table_uri, plan.version, plan.planned_at) == (table.uri, 1, NOW)
    assert plan.policy == {
        **MaintenancePolicy().to_dict(),
        "target_file_size": MIB,
        "min_file_size": MIB,
        "max_commits_since_checkpoint": 10,
        "retention_hours": 168.0,
    }
    assert MaintenancePlan.from_dict(json.loads(json.dumps(plan.to_dict()))) == plan
    # the same plan with the table's measured health (one snapshot load)
    assert plan_maintenance(table, POLICY, now=NOW) == plan


def test_the_budget_defers_the_least_useful_partitions(tmp_path: Path) -> None:
    table = _mixed(tmp_path / "t")
    # fragments removed per byte: A 6 / 480 KiB > null 5 / 500 KiB > C 0 / 2 MiB; only A fits 700 KiB
    policy = POLICY.replace(max_rewrite_bytes_per_run=700 * KIB)
    plan = decide(make_health(table.uri, 1), table.snapshot(), policy, NOW)
    assert [(a.operation, a.partitions, a.options["where"]) for a in plan.actions] == [
        ("optimize", ({"day": A},), f"day = '{A}'")
    ]
    assert plan.actions[0].estimate == Estimate(480 * KIB, 480 * KIB, 6, 1)
    assert plan.actions[0].options["max_bytes_to_rewrite"] == 700 * KIB  # the one action's share: all of the budget
    assert [(d.operation, d.partitions, d.estimate.bytes_read) for d in plan.deferred] == [
        ("purge", ({"day": C},), 2 * MIB),
        ("optimize", ({"day": None},), 500 * KIB),
    ]
    reason = plan.deferred[1].reasons[0]
    assert (reason.metric, reason.value, reason.policy_key, reason.threshold) == (
        "bytes_read",
        500 * KIB,
        "max_rewrite_bytes_per_run",
        700 * KIB,
    )
    assert reason.text == (
        "partition day=null: rewriting 500 KiB does not fit what is left of max_rewrite_bytes_per_run=700 KiB after "
        "more useful partitions (5 fragments removed)"
    )


def test_a_recent_optimize_defers_every_rewrite(tmp_path: Path) -> None:
    table = _mixed(tmp_path / "t")
    health = make_health(table.uri, 1, optimize_timestamp=NOW - HOUR // 2)
    plan = decide(health, table.snapshot(), POLICY, NOW)
    assert plan.actions == ()
    cooldown = HALF_HOUR_INTO_OPTIMIZE_COOLDOWN
    assert plan.deferred == (
        DeferredAction("purge", ({"day": C},), (cooldown,), PURGE.estimate),
        DeferredAction("optimize", ({"day": None}, {"day": A}), (cooldown,), Estimate(980 * KIB, 980 * KIB, 11, 2)),
    )
    # an hour later the cooldown is over
    assert [a.operation for a in decide(health, table.snapshot(), POLICY, NOW + HOUR).actions] == ["purge", "optimize"]


def _vacuum_table(root: Path) -> Table:
    return _mixed(
        root,
        [
            commit_info(NOW - 10 * HOUR, "DELETE"),
            remove("day=2026-10-01/old.parquet", MIB, NOW - 200 * HOUR, {"day": "2026-10-01"}),
            remove("day=2026-10-02/young.parquet", 2 * MIB, NOW - 10 * HOUR, {"day": "2026-10-02"}),
        ],
    )


def test_vacuum_counts_reclaimable_tombstones_with_the_files_budget(tmp_path: Path) -> None:
    table = _vacuum_table(tmp_path / "t")
    snapshot = table.snapshot()
    # the table's 168 hours: only old.parquet (200 hours old) is reclaimable; the health says so
    health = make_health(table.uri, 2, reclaimable=(1, MIB))
    policy = POLICY.replace(max_rewrite_bytes_per_run=0)
    plan = decide(health, snapshot, policy, NOW)
    assert plan.actions == (
        PlannedAction(
            "vacuum",
            {"mode": "full", "max_files_to_delete": 100_000},
            (),
            (
                Reason(
                    "reclaimable_tombstone_files",
                    1,
                    "vacuum_min_reclaimable_files",
                    1,
                    "1 removed file (1 MiB) past the 168-hour retention, at least vacuum_min_reclaimable_files=1; "
                    "FULL also deletes files the log never referenced, so that is a lower bound",
                ),
            ),
            Estimate(files_deleted=1),
        ),
    )
    # a retention of 5 hours makes both tombstones reclaimable (counted from the log); one file per run
    policy = policy.replace(retention_hours=5, max_files_deleted_per_run=1, vacuum_mode="lite")
    plan = decide(health, snapshot, policy, NOW)
    (vacuum,) = plan.actions
    assert vacuum.options == {"mode": "lite", "max_files_to_delete": 1, "retention_hours": 5.0}
    assert vacuum.estimate == Estimate(files_deleted=1)
    assert vacuum.reasons[0].text == (
        "2 removed files (3 MiB) past the 5-hour retention, at least vacuum_min_reclaimable_files=1"
    )
    assert [(d.operation, d.estimate, d.reasons[0].policy_key) for d in plan.deferred if d.operation == "vacuum"] == [
        ("vacuum", Estimate(files_deleted=1), "max_files_deleted_per_run")
    ]
    # a VACUUM two hours ago: within the 24-hour cooldown
    recent = make_health(table.uri, 2, reclaimable=(1, MIB), vacuum_timestamp=NOW - 2 * HOUR)
    plan = decide(recent, snapshot, POLICY.replace(max_rewrite_bytes_per_run=0), NOW)
    assert [a.operation for a in plan.actions] == []
    deferred = [d for d in plan.deferred if d.operation == "vacuum"]
    assert [r.metric for r in deferred[0].reasons] == ["reclaimable_tombstone_files", "hours_since_vacuum"]
    assert deferred[0].reasons[1].value == 2.0


def test_many_commits_without_a_checkpoint_give_a_checkpoint(tmp_path: Path) -> None:
    table = _vacuum_table(tmp_path / "t")
    policy = POLICY.replace(max_rewrite_bytes_per_run=0)
    plan = decide(make_health(table.uri, 2, commits_since_checkpoint=12), table.snapshot(), policy, NOW)
    assert [(a.operation, a.options) for a in plan.actions] == [("checkpoint", {})]
    reason = plan.actions[0].reasons[0]
    assert (reason.metric, reason.value, reason.policy_key, reason.threshold) == (
        "commits_since_checkpoint",
        12,
        "max_commits_since_checkpoint",
        10,
    )
    assert reason.text == "12 commits since the newest checkpoint, at least max_commits_since_checkpoint=10"
    # the policy's own threshold wins over the table's interval
    plan = decide(
        make_health(table.uri, 2, commits_since_checkpoint=12),
        table.snapshot(),
        policy.replace(max_commits_since_checkpoint=20),
        NOW,
    )
    assert plan.actions == ()


def test_a_healthy_table_needs_nothing(tmp_path: Path) -> None:
    root = write_log(
        tmp_path / "t",
        [
            [commit_info(NOW - 100 * HOUR), protocol(), metadata(DATE_SCHEMA, ["day"])],
            [
                commit_info(NOW - 90 * HOUR),
                *[add(f"day={A}/f{i}.parquet", 2 * MIB, partition={"day": A}) for i in range(3)],
            ],
        ],
    )
    table = Table(str(root))
    plan = decide(make_health(table.uri, 1), table.snapshot(), POLICY, NOW)
    assert plan.is_empty and plan.actions == () and plan.deferred == () and plan.total == Estimate()


def test_a_liquid_table_with_new_files_is_clustered(tmp_path: Path) -> None:
    cube = {"ZCUBE_ID": "cube-1", "ZCUBE_ZORDER_BY": '["id"]'}
    domain = {
        "domainMetadata": {
            "domain": "delta.clustering",
            "configuration": json.dumps({"clusteringColumns": [["id"]]}),
            "removed": False,
        }
    }
    root = write_log(
        tmp_path / "t",
        [
            [commit_info(NOW - 100 * HOUR), protocol(clustering=True), metadata(DATE_SCHEMA), domain],
            [
                commit_info(NOW - 90 * HOUR),
                *[add(f"c{i}.parquet", 300 * KIB, tags=cube, provider="liquid") for i in range(2)],
                *[add(f"n{i}.parquet", 100 * KIB) for i in range(5)],
            ],
        ],
    )
    table = Table(str(root))
    plan = decide(make_health(table.uri, 1), table.snapshot(), POLICY, NOW)
    # the 600 KiB cube is larger than the 500 KiB of new data, so it is left alone (see clustering.liquid)
    assert plan.actions == (
        PlannedAction(
            "cluster",
            {"target_size": MIB, "max_bytes_to_rewrite": DEFAULT_BUDGET},
            (),
            (
                Reason(
                    "unclustered_files",
                    5,
                    "min_input_files",
                    5,
                    "the table: 5 files not yet clustered on id, at least min_input_files=5",
                ),
            ),
            Estimate(bytes_read=500 * KIB, bytes_written=500 * KIB, files_removed=5, files_added=1),
        ),
    )
    # four new files are not enough
    assert decide(make_health(table.uri, 1), table.snapshot(), POLICY.replace(min_input_files=6), NOW).is_empty


def test_zorder_on_new_files_or_poor_point_queries_supersedes_compaction(tmp_path: Path) -> None:
    def tags(cube: str) -> dict[str, str]:
        return {"ZCUBE_ID": cube, "ZCUBE_ZORDER_BY": '["id"]', "ZCUBE_ZORDER_CURVE": "zorder"}

    root = write_log(
        tmp_path / "t",
        [
            [commit_info(NOW - 100 * HOUR), protocol(), metadata(DATE_SCHEMA, ["day"])],
            [
                commit_info(NOW - 90 * HOUR),
                *[add(f"day={A}/a{i}.parquet", 100 * KIB, partition={"day": A}) for i in range(5)],
                *[add(f"day={B}/b{i}.parquet", 100 * KIB, partition={"day": B}, tags=tags("z1")) for i in range(3)],
                *[add(f"day={C}/c{i}.parquet", 300 * KIB, partition={"day": C}, tags=tags("z2")) for i in range(2)],
                add(f"day={C}/c2.parquet", 100 * KIB, partition={"day": C}),
            ],
        ],
    )
    table = Table(str(root))
    poor = ColumnClustering("id", 3, 0, 3.0, 3.0, 3)
    health = make_health(
        table.uri,
        1,
        partitions=[partition_health({"day": A}), partition_health({"day": B}), partition_health({"day": C}, [poor])],
        zorder_columns=("id",),
    )
    plan = decide(health, table.snapshot(), POLICY.replace(max_point_query_files=2), NOW)
    # A: 5 new files; B: one cube, nothing new; C: one new file only, but a point query reads 3 files
    assert plan.actions == (
        PlannedAction(
            "zorder",
            {
                "columns": ["id"],
                "curve": "zorder",
                "where": f"day = '{A}' OR day = '{C}'",
                "target_size": MIB,
                "max_bytes_to_rewrite": DEFAULT_BUDGET,
            },
            ({"day": A}, {"day": C}),
            (
                Reason(
                    "unclustered_files",
                    5,
                    "min_input_files",
                    5,
                    f"partition day={A}: 5 files not yet Z-ordered on id, at least min_input_files=5",
                ),
                Reason(
                    "point_query_files",
                    3.0,
                    "max_point_query_files",
                    2.0,
                    f"partition day={C}: a point query on id reads 3.0 files on average, more than "
                    "max_point_query_files=2",
                ),
            ),
            # every file of both partitions is rewritten: 500 KiB and 700 KiB, one output file each
            Estimate(bytes_read=1200 * KIB, bytes_written=1200 * KIB, files_removed=8, files_added=2),
        ),
    )
    assert plan.policy["zorder_columns"] == ["id"]  # from the log's newest Z-order


@pytest.mark.parametrize(
    ("kind", "values"),
    [
        ("string", ["it's", "plain", None, "x = 'y' OR 1 = 1"]),
        ("date", ["2026-11-01", "2026-11-02", None]),
        ("timestamp", ["2026-11-01 10:00:00", "2026-11-01 10:00:00.123456", None]),
        ("integer", ["-3", "7", None]),
        ("boolean", ["true", "false", None]),
        ("decimal(10,2)", ["1.50", "-2.25", None]),
    ],
)
def test_a_partition_predicate_selects_exactly_its_partition(tmp_path: Path, kind: str, values: list) -> None:
    fields = [{"name": "id", "type": "long", "nullable": True, "metadata": {}}]
    fields.append({"name": "my col", "type": kind, "nullable": True, "metadata": {}})
    files = [add(f"f{i}.parquet", KIB, partition={"my col": v}) for i, v in enumerate(values)]
    root = write_log(tmp_path / "t", [[commit_info(NOW), protocol(), metadata(fields, ["my col"]), *files]])
    snapshot = Table(str(root)).snapshot()
    logical = logical_names(snapshot.partition_columns, snapshot.partition_physical_names)
    paths = snapshot.files.column("path").to_pylist()
    for i, value in enumerate(values):
        where = partitions_predicate([{"my col": value}], logical)
        assert where is not None
        assert [paths[j] for j in considered_files(snapshot, where)] == [f"f{i}.parquet"], where
    both = partitions_predicate([{"my col": values[0]}, {"my col": values[-1]}], logical)
    assert sorted(paths[j] for j in considered_files(snapshot, both)) == ["f0.parquet", f"f{len(values) - 1}.parquet"]
    assert partitions_predicate([{}], {}) is None  # an unpartitioned table: no predicate


def test_a_partition_predicate_names_logical_columns_under_column_mapping(tmp_path: Path) -> None:
    fields = [
        {
            "name": "id",
            "type": "long",
            "nullable": True,
            "metadata": {"delta.columnMapping.id": 1, "delta.columnMapping.physicalName": "col-1"},
        },
        {
            "name": "day",
            "type": "date",
            "nullable": True,
            "metadata": {"delta.columnMapping.id": 2, "delta.columnMapping.physicalName": "col-2"},
        },
    ]
    config = {"delta.columnMapping.mode": "name", "delta.columnMapping.maxColumnId": "2"}
    mapped = {"protocol": {"minReaderVersion": 2, "minWriterVersion": 5}}
    files = [add(f"f{i}.parquet", KIB, partition={"col-2": d}) for i, d in enumerate([A, B])]
    root = write_log(tmp_path / "t", [[commit_info(NOW), mapped, metadata(fields, ["day"], config), *files]])
    snapshot = Table(str(root)).snapshot()
    logical = logical_names(snapshot.partition_columns, snapshot.partition_physical_names)
    where = partitions_predicate([{"col-2": B}], logical)
    assert where == f"day = '{B}'"
    assert considered_files(snapshot, where) == [1]
    # the plan's partitions are as the log writes them; its where and its sentences name the logical column
    more = [add(f"g{i}.parquet", KIB, partition={"col-2": B}) for i in range(5)]
    write_log(tmp_path / "u", [[commit_info(NOW), mapped, metadata(fields, ["day"], config), *files, *more]])
    table = Table(str(tmp_path / "u"))
    (action,) = decide(make_health(table.uri, 0), table.snapshot(), POLICY, NOW).actions
    assert (action.operation, action.partitions, action.options["where"]) == ("optimize", ({"col-2": B},), where)
    assert action.reasons[0].text.startswith(f"partition day={B}: 6 fragments")


# -- policies --------------------------------------------------------------------------------------------------------


def test_policy_defaults_are_the_anchors() -> None:
    assert MaintenancePolicy().to_dict() == {
        "target_file_size": None,
        "min_file_size": None,
        "min_input_files": 5,
        "fragment_ratio": 8.0,
        "max_deleted_rows_ratio": 0.05,
        "zorder_columns": None,
        "max_point_query_files": None,
        "max_commits_since_checkpoint": None,
        "vacuum_min_reclaimable_files": 1,
        "vacuum_mode": "full",
        "retention_hours": None,
        "max_rewrite_bytes_per_run": 100 * 1024**3,
        "max_files_deleted_per_run": 100_000,
        "optimize_cooldown_hours": 1.0,
        "vacuum_cooldown_hours": 24.0,
        "checkpoint_cooldown_hours": 0.0,
    }


@pytest.mark.parametrize(
    ("data", "key", "message"),
    [
        (
            {"max_rewrite_byte_per_run": 1},
            "max_rewrite_byte_per_run",
            "unknown policy key 'max_rewrite_byte_per_run' (did you mean 'max_rewrite_bytes_per_run'?)",
        ),
        (
            {"max_rewrite_bytes_per_run": -1},
            "max_rewrite_bytes_per_run",
            "policy key 'max_rewrite_bytes_per_run' must not be negative, got -1",
        ),
        (
            {"vacuum_cooldown_hours": -0.5},
            "vacuum_cooldown_hours",
            "policy key 'vacuum_cooldown_hours' must not be negative, got -0.5",
        ),
        ({"min_input_files": "5"}, "min_input_files", "policy key 'min_input_files' must be a whole number, got '5'"),
        ({"fragment_ratio": 0.5}, "fragment_ratio", "policy key 'fragment_ratio' must be at least 1, got 0.5"),
        (
            {"max_deleted_rows_ratio": 1.5},
            "max_deleted_rows_ratio",
            "policy key 'max_deleted_rows_ratio' must be between 0 and 1, got 1.5",
        ),
        ({"vacuum_mode": "fast"}, "vacuum_mode", "policy key 'vacuum_mode' must be 'full' or 'lite', got 'fast'"),
        (
            {"zorder_columns": []},
            "zorder_columns",
            "policy key 'zorder_columns' must be a non-empty list of column names, got []",
        ),
        ({"target_file_size": 0}, "target_file_size", "policy key 'target_file_size' must be at least 1, got 0"),
        (
            {"optimize_cooldown_hours": True},
            "optimize_cooldown_hours",
            "policy key 'optimize_cooldown_hours' must be a finite number, got True",
        ),
    ],
)
def test_a_bad_policy_is_one_error_naming_the_key(data: dict, key: str, message: str) -> None:
    with pytest.raises(InvalidPolicy) as caught:
        MaintenancePolicy.from_mapping(data, "/t")
    assert caught.value.key == key
    assert str(caught.value) == f"table /t: {message}"
    assert isinstance(caught.value, InvalidArgument)


def test_a_policy_file_is_json_or_toml(tmp_path: Path) -> None:
    (tmp_path / "p.json").write_text('{"min_input_files": 3, "zorder_columns": ["a", "b"], "retention_hours": null}')
    (tmp_path / "p.toml").write_text('min_input_files = 3\nzorder_columns = ["a", "b"]\n')
    expected = MaintenancePolicy(min_input_files=3, zorder_columns=("a", "b"))
    assert MaintenancePolicy.from_file(tmp_path / "p.json") == expected
    assert MaintenancePolicy.from_file(tmp_path / "p.toml") == expected
    assert MaintenancePolicy.from_mapping(expected.to_dict()) == expected
    (tmp_path / "bad.toml").write_text("min_input_files = \n")
    with pytest.raises(InvalidPolicy, match=r"the policy file '.*bad.toml' is not valid TOML"):
        MaintenancePolicy.from_file(tmp_path / "bad.toml")
    (tmp_path / "list.json").write_text("[1]")
    with pytest.raises(InvalidPolicy, match="must hold one object of policy keys"):
        MaintenancePolicy.from_file(tmp_path / "list.json")
    with pytest.raises(InvalidPolicy, match=r"cannot read the policy file '.*missing.json': No such file"):
        MaintenancePolicy.from_file(tmp_path / "missing.json")


def test_a_plan_dict_with_an_unknown_operation_is_refused() -> None:
    with pytest.raises(InvalidArgument, match="not a maintenance plan: unknown operation 'defrag'"):
        MaintenancePlan.from_dict(
            {"tableUri": "/t", "version": 1, "plannedAt": 0, "policy": {}, "actions": [{"operation": "defrag"}]}
        )


# -- running a plan --------------------------------------------------------------------------------------------------


def _rows(path: Path) -> list[tuple]:
    table = deltalake.DeltaTable(str(path)).to_pyarrow_table()
    return sorted(zip(*(table.column(n).to_pylist() for n in ("id", "p", "v")), strict=True))


def test_run_plan_runs_the_actions_in_order_and_keeps_every_row(tmp_path: Path) -> None:
    path, removed_size = delta_rs_table(tmp_path / "t")
    rows = _rows(path)
    table = Table(str(path))
    snapshot = table.snapshot()
    policy = MaintenancePolicy(target_file_size=MIB, max_commits_since_checkpoint=5)
    plan = plan_maintenance(table, policy, snapshot=snapshot)
    assert [(a.operation, a.partitions) for a in plan.actions] == [
        ("optimize", ({"p": "a"},)),
        ("vacuum", ()),
        ("checkpoint", ()),
    ]
    a_files = [p for p in (path / "p=a").iterdir()]
    assert plan.actions[0].estimate.files_removed == 6 and plan.actions[0].estimate.files_added == 1
    assert plan.actions[0].estimate.bytes_read == sum(p.stat().st_size for p in a_files)
    assert plan.actions[1].estimate == Estimate(files_deleted=1)  # the tombstone of ten days ago
    assert plan.actions[2].reasons[0].value == 9  # versions 0-8, no checkpoint
    started: list[str] = []
    run = run_plan(table, MaintenancePlan.from_dict(plan.to_dict()), on_action=lambda a: started.append(a.operation))
    assert started == [a.operation for a in run.actions] == ["optimize", "vacuum", "checkpoint"]
    optimize_stats, vacuum_stats, checkpoint_stats = (a.stats for a in run.actions)
    assert (optimize_stats["numFilesRemoved"], optimize_stats["numFilesAdded"]) == (6, 1)
    assert vacuum_stats["objectsDeleted"] == plan.actions[1].estimate.files_deleted == 1
    assert vacuum_stats["sizeOfDataToDelete"] == removed_size and vacuum_stats["numFilesDeferred"] == 0
    assert checkpoint_stats["checkpoint"]["version"] == optimize_stats["committedVersion"] + 2
    after = deltalake.DeltaTable(str(path))
    assert _rows(path) == rows  # delta-rs reads the same rows
    assert sorted(Path(u).parent.name for u in after.file_uris()) == ["p=a", "p=b", "p=b"]
    assert all(p.exists() for p in a_files)  # OPTIMIZE's tombstones are within the retention
    assert (path / "_delta_log" / "_last_checkpoint").exists()
    assert run.to_dict()["actions"][0]["operation"] == "optimize"


def test_run_plan_stops_at_the_first_failure_naming_the_action(tmp_path: Path) -> None:
    path, _ = delta_rs_table(tmp_path / "t")
    table = Table(str(path))
    plan = MaintenancePlan(
        table_uri=table.uri,
        version=8,
        planned_at=NOW,
        policy={},
        actions=(
            PlannedAction("checkpoint", {}, (), (), Estimate()),
            PlannedAction("zorder", {"columns": ["nope"]}, (), (), Estimate()),
            PlannedAction("vacuum", {"max_files_to_delete": 1}, (), (), Estimate()),
        ),
    )
    with pytest.raises(InvalidArgument) as caught:
        run_plan(table, plan)
    error = caught.value
    assert error.problem == (
        "zorder column 'nope' does not exist in the table; maintenance action 2 of 3 (zorder) failed; completed "
        "before it: checkpoint"
    )
    assert (error.action, error.completed) == ("zorder", ("checkpoint",))  # type: ignore[attr-defined]
    assert deltalake.DeltaTable(str(path)).version() == 8  # nothing after the checkpoint ran; no commit


def test_run_plan_purges_deletion_vectors_and_the_oracles_read_the_same_rows(tmp_path: Path) -> None:
    path = spark_test_suite_copy("delta-spark-resources/partitioned-table-with-dv-large", tmp_path / "t")
    rows = agreed_rows(path)
    table = Table(str(path))
    # every deletion vector there removes 1 to 4 of its file's 200 rows; a ratio of 0 purges them all; no partition
    # has 100 files, so nothing is compacted
    plan = plan_maintenance(table, MaintenancePolicy(max_deleted_rows_ratio=0.0, min_input_files=100))
    (purge,) = [a for a in plan.actions if a.operation != "checkpoint"]
    assert purge.operation == "purge"
    assert sorted(p["partCol"] for p in purge.partitions) == ["0", "3", "5", "6", "7", "8", "9"]
    assert (purge.estimate.files_removed, purge.estimate.files_added) == (7, 7)
    run = run_plan(table, plan)
    assert run.actions[0].stats["numDeletionVectorsRemoved"] == 7
    assert agreed_rows(path) == rows  # delta-kernel-rs reads deletion vectors; delta-rs 1.6.3 cannot
    live = table.snapshot().files
    assert live.num_rows == 14 and live.column("deletionVector").null_count == 14


def test_a_recent_checkpoint_defers_the_next_one(tmp_path: Path) -> None:
    root = write_log(
        tmp_path / "t",
        [
            [commit_info(NOW - 100 * HOUR), protocol(), metadata(DATE_SCHEMA, ["day"])],
            [commit_info(NOW - 90 * HOUR), add(f"day={A}/f.parquet", 2 * MIB, partition={"day": A})],
        ],
    )
    checkpoint(Table(str(root)))
    write_log_tail = [[commit_info(NOW - 2 * HOUR, "SET TBLPROPERTIES")] for _ in range(11)]
    for version, actions in enumerate(write_log_tail, start=2):
        (root / "_delta_log" / f"{version:020d}.json").write_text("".join(json.dumps(a) + "\n" for a in actions))
    (written,) = (root / "_delta_log").glob("*.checkpoint.parquet")
    os.utime(written, ((NOW - HOUR) / 1000,) * 2)  # the checkpoint was written an hour before "now"
    table = Table(str(root))
    health = make_health(table.uri, 12, commits_since_checkpoint=11, last_checkpoint_version=1)
    policy = POLICY.replace(checkpoint_cooldown_hours=2)
    plan = decide(health, table.snapshot(), policy, NOW)
    assert plan.actions == ()
    ((why, cooldown),) = [d.reasons for d in plan.deferred]
    assert why.text == "11 commits since the newest checkpoint (version 1), at least max_commits_since_checkpoint=10"
    assert (cooldown.metric, cooldown.value, cooldown.policy_key, cooldown.threshold) == (
        "hours_since_checkpoint",
        1.0,
        "checkpoint_cooldown_hours",
        2.0,
    )
    plan = decide(health, table.snapshot(), policy.replace(checkpoint_cooldown_hours=0.5), NOW)
    assert [a.operation for a in plan.actions] == ["checkpoint"]


def test_many_partitions_are_split_into_actions_the_expression_code_can_walk(tmp_path: Path) -> None:
    fields = [{"name": "id", "type": "long", "nullable": True, "metadata": {}}]
    fields.append({"name": "k", "type": "integer", "nullable": True, "metadata": {}})
    files = [add(f"k={k}/f{i}.parquet", KIB, partition={"k": str(k)}) for k in range(250) for i in range(5)]
    root = write_log(tmp_path / "t", [[commit_info(NOW), protocol(), metadata(fields, ["k"]), *files]])
    table = Table(str(root))
    snapshot = table.snapshot()
    plan = decide(make_health(table.uri, 0), snapshot, POLICY, NOW)
    # partitions in their log order (values as strings: 0, 1, 10, 100, 101, ...): 100 per action
    assert [len(a.partitions) for a in plan.actions] == [100, 100, 50]
    names = sorted(str(k) for k in range(250))
    for n, action in enumerate(plan.actions):
        assert [p["k"] for p in action.partitions] == names[n * 100 : (n + 1) * 100]
        assert len(considered_files(snapshot, action.options["where"])) == 5 * len(action.partitions)
        assert action.estimate == Estimate(
            5 * KIB * len(action.partitions),
            5 * KIB * len(action.partitions),
            5 * len(action.partitions),
            len(action.partitions),
        )


def test_z_order_columns_the_table_no_longer_has_are_not_kept_up(tmp_path: Path) -> None:
    root = write_log(
        tmp_path / "t",
        [
            [commit_info(NOW - 100 * HOUR), protocol(), metadata(DATE_SCHEMA, ["day"])],
            [
                commit_info(NOW - 90 * HOUR),
                *[add(f"day={A}/a{i}.parquet", 2 * MIB, partition={"day": A}) for i in range(6)],
            ],
        ],
    )
    table = Table(str(root))
    # the log's newest Z-order was on a column since dropped: no Z-order, and nothing else to do
    plan = decide(make_health(table.uri, 1, zorder_columns=("gone",)), table.snapshot(), POLICY, NOW)
    assert plan.is_empty and plan.policy["zorder_columns"] is None
    # the same column named by the policy is the user's mistake: one error naming it
    with pytest.raises(InvalidArgument, match="zorder column 'gone' does not exist in the table"):
        decide(make_health(table.uri, 1), table.snapshot(), POLICY.replace(zorder_columns=("gone",)), NOW)


def test_run_plan_clusters_a_liquid_table_once(tmp_path: Path) -> None:
    path = clustered_points(tmp_path / "t", files=5, rows=300)
    rows = agreed_rows(path)
    table = Table(str(path))
    policy = MaintenancePolicy(target_file_size=MIB)
    plan = plan_maintenance(table, policy)
    assert [(a.operation, a.options, a.estimate.files_removed) for a in plan.actions] == [
        ("cluster", {"target_size": MIB, "max_bytes_to_rewrite": DEFAULT_BUDGET}, 5)
    ]
    run = run_plan(table, plan)
    assert run.actions[0].stats["clusteringStats"]["numOutputZCubes"] == 1
    assert agreed_rows(path) == rows
    # the new files are one cube on (x, y): nothing is left to cluster, and the cooldown would hold it anyway
    assert plan_maintenance(table, policy.replace(optimize_cooldown_hours=0)).is_empty


# Plans a table three ways in a fresh interpreter (nothing imported by other tests), then prints the actions planned
# and every pyspark / py4j module loaded; then imports pyspark.sql, to show this interpreter would have reported it.
NO_JVM_PROBE = """
import json, sys
from airflow_provider_deltalite.maintenance.maintain_options import MaintainOptions
from airflow_provider_deltalite.maintenance.planner import MaintenancePolicy, health_and_plan, plan_maintenance
from airflow_provider_deltalite.operators.maintenance import DeltaMaintenanceOperator
from airflow_provider_deltalite.table import DeltaTable

def jvm_modules():
    return sorted(m for m in sys.modules if m.split(".")[0] in ("pyspark", "py4j"))

table, policy = DeltaTable(sys.argv[1]), json.loads(sys.argv[2])
plans = [
    plan_maintenance(table, MaintenancePolicy(**policy)),
    health_and_plan(table, MaintenancePolicy(**policy))[1],
]
operator = DeltaMaintenanceOperator(task_id="maintain", table_uri=sys.argv[1], policy=policy)
skipped = operator.plan(table, MaintainOptions(policy=policy))  # the operator's step in the worker, before Spark
plans.append(operator.maintenance_plan)
after_planning = jvm_modules()
import pyspark.sql
print(json.dumps({
    "actions": [[a.operation for a in plan.actions] for plan in plans],
    "skipped": skipped,
    "airflow": "airflow" in sys.modules,
    "jvm_after_planning": after_planning,
    "jvm_after_importing_pyspark": "pyspark" in jvm_modules() and "py4j" in jvm_modules(),
}))
"""


def test_planning_starts_no_jvm_and_imports_neither_pyspark_nor_py4j(tmp_path: Path) -> None:
    path, _ = delta_rs_table(tmp_path / "t")
    policy = {"target_file_size": MIB}
    proc = subprocess.run(
        [sys.executable, "-c", NO_JVM_PROBE, str(path), json.dumps(policy)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    report = json.loads(proc.stdout)
    # each way planned the work the table needs: p=a's six fragments and the ten-day-old tombstone
    assert report["actions"] == [["optimize", "vacuum"]] * 3
    assert (report["skipped"], report["airflow"]) == (None, True)
    assert report["jvm_after_planning"] == []
    assert report["jvm_after_importing_pyspark"] is True


def test_a_recent_optimize_in_a_real_log_defers_compaction_until_its_cooldown_is_over(tmp_path: Path) -> None:
    """delta-rs writes three small files, our OPTIMIZE compacts them, delta-rs appends four more: five fragments.
    The OPTIMIZE commit's file time is set to half an hour before "now" (the log's time without in-commit
    timestamps); the default optimize_cooldown_hours=1 defers the compaction, 0 plans it, and so does an hour later."""
    path = tmp_path / "t"

    def append(i: int) -> None:
        data = pa.table({"id": pa.array(range(10 * i, 10 * i + 10), pa.int64())})
        deltalake.write_deltalake(str(path), data, mode="append")

    for i in range(3):
        append(i)
    assert DeltaTable(str(path)).optimize().committed_version == 3
    for i in range(3, 7):
        append(i)
    history = {h["version"]: h["operation"] for h in deltalake.DeltaTable(str(path)).history()}
    assert history == {v: "OPTIMIZE" if v == 3 else "WRITE" for v in range(8)}
    optimized_at = int(time.time()) - 1800  # whole seconds: the file time in ms is exact
    log = path / "_delta_log"
    for version in range(3):
        os.utime(log / f"{version:020d}.json", (optimized_at - 3600, optimized_at - 3600))
    os.utime(log / f"{3:020d}.json", (optimized_at, optimized_at))
    now = (optimized_at + 1800) * 1000
    adds = pa.table(deltalake.DeltaTable(str(path)).get_add_actions(flatten=True))
    sizes = adds.column("size_bytes").to_pylist()
    assert len(sizes) == 5 and max(sizes) < 128 * MIB  # one compacted file and four appends: all fragments
    estimate = Estimate(bytes_read=sum(sizes), bytes_written=sum(sizes), files_removed=5, files_added=1)
    table = Table(str(path))

    plan = plan_maintenance(table, now=now)
    assert (plan.version, plan.actions, plan.total) == (7, (), Estimate())
    cooldown = HALF_HOUR_INTO_OPTIMIZE_COOLDOWN
    assert plan.deferred == (DeferredAction("optimize", (), (cooldown,), estimate),)

    fragments = Reason(
        "fragments",
        5,
        "min_input_files",
        5,
        "the table: 5 fragments (files below 128 MiB, target_file_size / fragment_ratio), at least min_input_files=5",
    )
    # the one rewrite action carries the whole budget (max_rewrite_bytes_per_run, 100 GiB) as its cap
    options = {
        "target_size": 1 << 30,
        "min_file_size": 1 << 30,
        "max_deleted_rows_ratio": 0.05,
        "max_bytes_to_rewrite": 100 << 30,
    }
    compaction = PlannedAction("optimize", options, (), (fragments,), estimate)
    for policy, at in [(MaintenancePolicy(optimize_cooldown_hours=0), now), (MaintenancePolicy(), now + HOUR // 2)]:
        plan = plan_maintenance(table, policy, now=at)
        assert (plan.actions, plan.deferred, plan.total) == ((compaction,), (), estimate)
