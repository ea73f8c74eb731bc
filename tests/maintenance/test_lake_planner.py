"""`plan_lake` (issue 31, item 1): pure, on hand-built health and plans; every expected figure is computed here."""

from __future__ import annotations

import json

import pytest

from airflow_provider_deltalite.engine.errors import InvalidArgument, InvalidPolicy
from airflow_provider_deltalite.maintenance.health.metrics import PartitionHealth
from airflow_provider_deltalite.maintenance.planner.lake import (
    DEFAULT_REWRITE_BYTES_PER_SECOND,
    GIB,
    LakeTable,
    plan_lake,
)
from airflow_provider_deltalite.maintenance.planner.lake_policy import LakeBudget, LakePolicy
from tests.maintenance.lake_inputs import HOUR_MS, NOW, action, table

MIB = 1 << 20


def lake() -> list[LakeTable]:
    return [
        # 50 files into 1 for 100 MiB: 49 fewer files
        table("/l/a", (action("optimize", read=100 * MIB, removed=50, added=1),), small_files=50),
        # 20 into 1 for 10 MiB: 19 fewer, the best per byte
        table("/l/b", (action("optimize", read=10 * MIB, removed=20, added=1),), small_files=20),
        # Z-order 40 into 1 for 400 MiB, a point query then reads 1 file instead of 9: 39 + 8
        table("/l/c", (action("zorder", read=400 * MIB, removed=40, added=1),), point_query_files=9.0),
        # purge 5 files with deletion vectors into 5 for 50 MiB: 5 deletion vectors fewer to read
        table(
            "/l/d",
            (action("purge", read=50 * MIB, written=40 * MIB, removed=5, added=5),),
            dv_files=5,
            deleted_rows=1234,
        ),
        table("/l/e"),  # nothing to do
        table("/l/f", (action("vacuum", deleted=30),), reclaimable_files=30, reclaimable_bytes=30_000),
        # compacted an hour ago, within the lake's 6-hour table cooldown
        table(
            "/l/g",
            (action("optimize", read=MIB, removed=30, added=1),),
            last_optimize=NOW - HOUR_MS,
        ),
        table("/l/h", (action("optimize", read=MIB, removed=90, added=1),)),  # excluded by the policy
    ]


POLICY = LakePolicy.from_mapping({"table_cooldown_hours": 6, "tables": {"/l/h": {"priority": "exclude"}}})


def test_the_budget_takes_the_most_gain_per_byte_first() -> None:
    plan = plan_lake(lake(), POLICY, LakeBudget(bytes_rewritten=120 * MIB), now=NOW)
    # the vacuum rewrites nothing: first; then b (19 files / 10 MiB), a (49 / 100 MiB); c (47 / 400 MiB) and
    # d (5 / 50 MiB) do not fit the 10 MiB left
    assert [(a.table_uri, a.operation, a.rank, a.chosen) for a in plan.actions] == [
        ("/l/f", "vacuum", 1, True),
        ("/l/b", "optimize", 2, True),
        ("/l/a", "optimize", 3, True),
        ("/l/c", "zorder", 4, False),
        ("/l/d", "purge", 5, False),
    ]
    assert [a.gain_per_gib for a in plan.actions] == [
        None,
        19 * 1024 / 10,
        49 * 1024 / 100,
        47 * 1024 / 400,
        5 * 1024 / 50,
    ]
    assert [(t.table_uri, t.status) for t in plan.tables] == [
        ("/l/f", "chosen"),
        ("/l/b", "chosen"),
        ("/l/a", "chosen"),
        ("/l/c", "budget"),
        ("/l/d", "budget"),
        ("/l/e", "nothing to do"),
        ("/l/g", "cooldown"),
        ("/l/h", "excluded"),
    ]
    reasons = {t.table_uri: t.reason for t in plan.tables}
    assert reasons["/l/c"] == "budget: zorder: rewriting 400 MiB does not fit the 10 MiB left"
    assert reasons["/l/g"] == "maintained 1.0 hours ago, within table_cooldown_hours=6"
    assert (plan.total.bytes_read, plan.total.files_deleted) == (110 * MIB, 30)
    shares = {
        t.table_uri: (t.policy["max_rewrite_bytes_per_run"], t.policy["max_files_deleted_per_run"])
        for t in plan.chosen_tables
    }
    assert shares == {"/l/f": (0, 30), "/l/b": (10 * MIB, 0), "/l/a": (100 * MIB, 0)}
    assert plan.chosen_tables[1].policy["min_input_files"] == 5  # the table's own plan's policy, with its share
    gain = plan.actions[3].gain
    assert (gain.files_removed, gain.point_query_files_saved, gain.files) == (39, 8.0, 47.0)
    purge = plan.actions[4].gain
    assert (
        purge.files_removed,
        purge.deletion_vector_files_purged,
        purge.deleted_rows_purged,
        purge.bytes_reclaimed,
    ) == (
        0,
        5,
        1234,
        10 * MIB,
    )
    assert plan.actions[0].gain.bytes_reclaimed == 30_000
    json.dumps(plan.to_dict())  # JSON-ready
    assert plan.to_dict()["tables"][0]["chosen"] is True


def test_a_smaller_candidate_still_fits_after_a_larger_one_is_deferred() -> None:
    plan = plan_lake(lake(), POLICY, LakeBudget(bytes_rewritten=160 * MIB), now=NOW)
    assert [t.table_uri for t in plan.chosen_tables] == ["/l/f", "/l/b", "/l/a", "/l/d"]
    assert plan.total.bytes_read == 160 * MIB


def test_a_pinned_table_goes_first() -> None:
    policy = LakePolicy.from_mapping({"tables": {"/l/d": {"priority": "pin"}, "/l/h": {"priority": "exclude"}}})
    plan = plan_lake(lake(), policy, LakeBudget(bytes_rewritten=120 * MIB), now=NOW)
    # without a table cooldown g (29 files fewer for 1 MiB) ranks first among the rewrites; a no longer fits
    assert [(a.table_uri, a.chosen) for a in plan.actions] == [
        ("/l/d", True),
        ("/l/f", True),
        ("/l/g", True),
        ("/l/b", True),
        ("/l/a", False),
        ("/l/c", False),
    ]
    assert plan.actions[0].reason == "pinned by the lake policy"
    assert {t.table_uri for t in plan.chosen_tables} == {"/l/d", "/l/f", "/l/b", "/l/g"}


def test_vacuum_is_cut_to_the_files_left() -> None:
    plan = plan_lake(lake(), POLICY, LakeBudget(files_deleted=12), now=NOW)
    [vacuum] = [a for a in plan.actions if a.operation == "vacuum"]
    assert (vacuum.chosen, vacuum.estimate.files_deleted, vacuum.gain.bytes_reclaimed) == (True, 12, 12_000)
    [f] = [t for t in plan.tables if t.table_uri == "/l/f"]
    assert f.policy["max_files_deleted_per_run"] == 12


def test_the_time_budget_uses_the_observed_speed() -> None:
    # b at its observed 1 MiB/s takes 10 s; a at the default speed 100 MiB / 64 MiB/s = 1.5625 s
    speeds = {"/l/b": float(MIB)}
    plan = plan_lake(lake(), POLICY, LakeBudget(seconds=5.0), now=NOW, bytes_per_second=speeds)
    by = {(a.table_uri): a for a in plan.actions}
    assert by["/l/b"].seconds == 10.0
    assert by["/l/a"].seconds == 100 * MIB / DEFAULT_REWRITE_BYTES_PER_SECOND
    assert by["/l/b"].chosen is False and by["/l/a"].chosen is True
    assert by["/l/b"].reason == "budget: an estimated 10 s does not fit the 5 s left"


def test_no_budget_takes_everything_but_cooldowns_and_exclusions() -> None:
    plan = plan_lake(lake(), POLICY, None, now=NOW)
    assert [t.table_uri for t in plan.chosen_tables] == ["/l/f", "/l/b", "/l/a", "/l/c", "/l/d"]


def test_partition_actions_count_their_partitions_small_files() -> None:
    parts = tuple(
        PartitionHealth({"p": v}, 10, 10_000, 100, small, 0, 0, 0, 0, 0, ()) for v, small in (("x", 7), ("y", 2))
    )
    t = table("/l/p", (action("optimize", read=GIB, removed=9, added=1, partitions=({"p": "x"},)),), partitions=parts)
    [a] = plan_lake([t], None, None, now=NOW).actions
    assert (a.gain.small_files_removed, a.gain.files_removed) == (7, 8)


def test_an_unreadable_table_is_reported_not_fatal() -> None:
    broken = LakeTable("/l/x", None, None, "CorruptLog: version 3 is not JSON")
    plan = plan_lake([broken, *lake()[:1]], None, None, now=NOW)
    assert [(t.table_uri, t.status, t.reason) for t in plan.tables] == [
        ("/l/a", "chosen", "1 action within the budget"),
        ("/l/x", "error", "CorruptLog: version 3 is not JSON"),
    ]


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"min_imput_files": 3}, "unknown policy key 'min_imput_files' (did you mean 'min_input_files'?)"),
        (
            {"tables": {"/l/a": {"priorty": "pin"}}},
            "unknown policy key 'tables./l/a.priorty' (did you mean 'tables./l/a.priority'?)",
        ),
        (
            {"tables": {"/l/a": {"priority": "first"}}},
            "policy key 'tables./l/a.priority' must be one of pin, normal, exclude, got 'first'",
        ),
        (
            {"table_cooldown_hours": -1},
            "policy key 'table_cooldown_hours' must be a number of hours of at least 0, got -1",
        ),
        (
            {"tables": {"/l/a": {"min_input_files": 0}}},
            "tables./l/a: policy key 'min_input_files' must be at least 1, got 0",
        ),
    ],
)
def test_a_bad_lake_policy_names_the_key(data: dict, message: str) -> None:
    with pytest.raises(InvalidPolicy) as info:
        LakePolicy.from_mapping(data)
    assert str(info.value) == message


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"bytes_rewritten": 0}, "budget bytes_rewritten must be a whole number above 0, got 0"),
        ({"files_deleted": -3}, "budget files_deleted must be a whole number above 0, got -3"),
        ({"seconds": 0.0}, "budget seconds must be a number above 0, got 0.0"),
    ],
)
def test_a_budget_of_zero_or_below_is_refused(kwargs: dict, message: str) -> None:
    with pytest.raises(InvalidArgument) as info:
        LakeBudget(**kwargs)
    assert str(info.value) == message


def test_a_rule_overrides_policy_keys_for_matching_tables() -> None:
    policy = LakePolicy.from_mapping(
        {"min_input_files": 8, "tables": {"*/orders": {"cooldown_hours": 48, "vacuum_mode": "lite"}}}
    )
    orders, other = policy.settings("s3://lake/sales/orders"), policy.settings("s3://lake/events")
    assert (orders.policy.min_input_files, orders.policy.vacuum_mode, orders.cooldown_hours) == (8, "lite", 48.0)
    assert (other.policy.min_input_files, other.policy.vacuum_mode, other.cooldown_hours) == (8, "full", 0.0)
    assert LakePolicy.from_mapping(policy.to_dict()) == policy


def test_chosen_plan_keeps_the_chosen_actions_with_their_shares() -> None:
    from airflow_provider_deltalite.maintenance.planner.lake import chosen_plan

    tables = [
        table(
            "/l/m",
            (
                action("optimize", read=10 * MIB, removed=20, added=1),
                action("zorder", read=500 * MIB, removed=40, added=1),
                action("vacuum", deleted=30),
            ),
            reclaimable_files=30,
            reclaimable_bytes=30_000,
        )
    ]
    plan = plan_lake(tables, None, LakeBudget(bytes_rewritten=100 * MIB, files_deleted=7), now=NOW)
    cut = chosen_plan(plan, tables[0])
    assert cut is not None
    assert [(a.operation, a.options) for a in cut.actions] == [
        ("optimize", {"max_bytes_to_rewrite": 10 * MIB}),
        ("vacuum", {"max_files_to_delete": 7}),
    ]
    assert (cut.total.bytes_read, cut.total.files_deleted, cut.deferred) == (10 * MIB, 7, ())
    [entry] = plan.tables
    assert entry.reason == "2 actions within the budget; zorder deferred by the budget"
    assert chosen_plan(plan_lake(tables, None, LakeBudget(bytes_rewritten=1), now=NOW), lake()[4]) is None
