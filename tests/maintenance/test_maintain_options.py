"""`MaintainOptions` (the plan the maintain job receives) and the driver's ``maintain`` command without Spark: the
options round trip, the plan they carry, and bad documents failing with one line before the table is opened."""

from __future__ import annotations

import json
from pathlib import Path

import deltalake
import pyarrow as pa
import pytest

from airflow_provider_deltalite import DeltaTable
from airflow_provider_deltalite.engine.errors import InvalidArgument
from airflow_provider_deltalite.jobs import driver
from airflow_provider_deltalite.maintenance.maintain_options import MaintainOptions
from airflow_provider_deltalite.maintenance.planner import MaintenancePlan, MaintenancePolicy, plan_maintenance


def _plan(tmp_path: Path) -> tuple[DeltaTable, MaintenancePlan]:
    for i in range(6):
        deltalake.write_deltalake(str(tmp_path / "t"), pa.table({"id": [i], "v": [str(i)]}), mode="append")
    table = DeltaTable(str(tmp_path / "t"))
    return table, plan_maintenance(table, MaintenancePolicy.from_mapping({"min_input_files": 6}))


def test_the_options_carry_the_plan_through_json(tmp_path: Path) -> None:
    table, plan = _plan(tmp_path)
    assert [a.operation for a in plan.actions] == ["optimize"]
    options = MaintainOptions(
        policy=plan.policy, actions=tuple(plan.to_dict()["actions"]), version=plan.version, planned_at=plan.planned_at
    )
    again = MaintainOptions.from_json(options.to_json(), table.uri)
    assert again == options
    assert MaintenancePlan.from_dict(again.plan_dict(table.uri)) == plan
    assert driver.COMMANDS["maintain"].options_class is MaintainOptions
    text = MaintainOptions.from_text({"policy": '{"min_input_files": 6}', "actions": "[]", "version": "3"}, table.uri)
    assert (text.policy, text.actions, text.version, text.planned_at) == ({"min_input_files": 6}, (), 3, None)


@pytest.mark.parametrize(
    ("values", "problem"),
    [
        ({"policy": {"bogus_key": 1}}, "unknown policy key 'bogus_key'"),
        ({"policy": {"min_input_files": -1}}, "min_input_files"),
        ({"policy": [1]}, "policy must be a mapping of policy keys to values, got [1]"),
        ({"actions": {"operation": "optimize"}}, "actions must be a list of planned actions"),
        ({"actions": [{"options": {}}]}, "every action must be an object with an operation, got {'options': {}}"),
        ({"version": -2}, "version must be a whole number of at least 0, got -2"),
        ({"plan": {}}, "unknown maintain option 'plan'"),
    ],
)
def test_bad_options_are_one_line_naming_the_table(values: dict, problem: str) -> None:
    with pytest.raises(InvalidArgument) as raised:
        MaintainOptions.build(values, "/lake/t")
    message = str(raised.value)
    assert message.startswith("table /lake/t: ") and problem in message and "\n" not in message


def test_the_job_needs_its_plan_as_a_document(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    missing = tmp_path / "missing"
    assert driver.main(["maintain", "--table", str(missing)]) == 2
    assert capsys.readouterr().err == (
        "deltalite: error: the maintain job takes its plan as --options (a MaintainOptions JSON object)\n"
    )
    bad = json.dumps({"policy": {"bogus_key": 1}, "actions": []})
    assert driver.main(["maintain", "--table", str(missing), "--options", bad]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"deltalite: error: table {missing}: unknown policy key 'bogus_key'")
    assert err.count("\n") == 1
    assert not missing.exists()
