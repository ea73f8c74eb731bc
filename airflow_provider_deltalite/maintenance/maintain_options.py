"""`MaintainOptions`: what the `maintain` Spark job runs, the actions of a maintenance plan made in the Airflow worker.

Beside the per-operation options of `maintenance.options`, and like them free of pyarrow: the operator imports it while
Airflow parses DAGs.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from airflow_provider_deltalite.engine.errors import InvalidArgument
from airflow_provider_deltalite.maintenance.option_values import history_location, optional_text, whole_number
from airflow_provider_deltalite.maintenance.options import MaintenanceOptions


def json_value(name: str, value: Any) -> Any:
    """A value given as JSON text (a rendered template) or as it is; None/""/"None" mean unset."""
    if not isinstance(value, str):
        return value
    text = optional_text(value)
    if text is None:
        return None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise InvalidArgument(f"{name} is not valid JSON (line {exc.lineno}, column {exc.colno})") from None


@dataclass(frozen=True, kw_only=True)
class MaintainOptions(MaintenanceOptions):
    """Running a maintenance plan (`maintenance.planner.run_plan`): the plan's actions as they were planned.

    The operator plans in the Airflow worker and the Spark job runs what it chose, so the job receives the plan's
    actions (``MaintenancePlan.to_dict()["actions"]``) rather than planning again.

    Attributes:
        policy: the policy keys the plan was made with (checked by `MaintenancePolicy.from_mapping`).
        actions: the planned actions, as ``MaintenancePlan.to_dict()`` holds them.
        version: the version the plan was made on (None: not known).
        planned_at: the plan's "now", epoch milliseconds (None: not known).
        history_uri: the operations history table every action appends its row to (None: none).
    """

    operation: ClassVar[str] = "maintain"
    text_converters: ClassVar[Mapping[str, Callable[[str, Any], Any]]] = {
        "policy": json_value,
        "actions": json_value,
        "version": whole_number,
        "planned_at": whole_number,
        "history_uri": lambda _, v: optional_text(v),
    }

    policy: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    actions: tuple[Mapping[str, Any], ...] = ()
    version: int | None = None
    planned_at: int | None = None
    history_uri: str | None = None

    def check(self) -> None:
        history_location(self.history_uri)
        if not isinstance(self.policy, Mapping) or not all(isinstance(k, str) for k in self.policy):
            raise InvalidArgument(f"policy must be a mapping of policy keys to values, got {self.policy!r}")
        from airflow_provider_deltalite.maintenance.planner.policy import MaintenancePolicy

        MaintenancePolicy.from_mapping(self.policy)  # one line naming a bad key
        self._set("policy", dict(self.policy))
        actions = self.actions
        if isinstance(actions, str | Mapping) or not isinstance(actions, Sequence):
            raise InvalidArgument(f"actions must be a list of planned actions, got {actions!r}")
        for action in actions:
            if not isinstance(action, Mapping) or not isinstance(action.get("operation"), str):
                raise InvalidArgument(f"every action must be an object with an operation, got {action!r}")
        self._set("actions", tuple(dict(a) for a in actions))
        for name in ("version", "planned_at"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
                raise InvalidArgument(f"{name} must be a whole number of at least 0, got {value!r}")

    def plan_dict(self, table_uri: str) -> dict[str, Any]:
        """The plan these options carry, in `MaintenancePlan.to_dict`'s form (for `MaintenancePlan.from_dict`)."""
        totals = dict.fromkeys(("bytesRead", "bytesWritten", "filesRemoved", "filesAdded", "filesDeleted"), 0)
        for action in self.actions:
            for key, value in (action.get("estimate") or {}).items():
                if key in totals and isinstance(value, int):
                    totals[key] += value
        return {
            "tableUri": table_uri,
            "version": self.version if self.version is not None else -1,
            "plannedAt": self.planned_at if self.planned_at is not None else 0,
            "policy": dict(self.policy),
            "actions": [dict(a) for a in self.actions],
            "deferred": [],
            "total": totals,
        }
