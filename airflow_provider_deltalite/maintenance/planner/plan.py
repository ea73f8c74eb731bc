"""What `plan_maintenance` returns: the operations to run on one table, why, and what they should cost.

A plan is data: it turns into a JSON-ready dict (`to_dict`, camelCase keys) and back (`MaintenancePlan.from_dict`),
so the Airflow operator can plan in the worker and hand the chosen actions to the Spark job unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from airflow_provider_deltalite.engine.errors import InvalidArgument
from airflow_provider_deltalite.maintenance.health.metrics import plain

# The operations a plan may hold, in the order a run executes them: rewrites first (their tombstones start the
# retention clock), then VACUUM (of what earlier runs removed), then the checkpoint (which then covers them all).
OPERATIONS = ("purge", "optimize", "cluster", "zorder", "vacuum", "checkpoint")


@dataclass(frozen=True)
class Reason:
    """Why an action was chosen or left out: a metric, its value, the policy key and its threshold.

    ``text`` is the plain sentence printed by the CLI, e.g. ``"37 files below 128 MiB (fragments), at least
    min_input_files=5"``.
    """

    metric: str
    value: float | int | None
    policy_key: str | None
    threshold: float | int | None
    text: str


@dataclass(frozen=True)
class Estimate:
    """What an action should read, write and delete (from the log and file stats: an estimate, not a promise)."""

    bytes_read: int = 0
    bytes_written: int = 0
    files_removed: int = 0  # files the rewrite removes from the table
    files_added: int = 0
    files_deleted: int = 0  # files VACUUM deletes from storage


@dataclass(frozen=True)
class PlannedAction:
    """One operation to run: ``operation`` (one of `OPERATIONS`), its options as the operation's options JSON
    (``{"where": ..., "min_file_size": ...}`` for OptimizeOptions, ...), the partitions it touches (``()``: the
    whole table or not partition-specific), why, and its estimate."""

    operation: str
    options: dict[str, Any]
    partitions: tuple[dict[str, str | None], ...]
    reasons: tuple[Reason, ...]
    estimate: Estimate


@dataclass(frozen=True)
class DeferredAction:
    """An operation (or some partitions of one) the table could use but the policy holds back: a cooldown, a
    budget, or a threshold just missed. Reported so that a person sees what is waiting and why."""

    operation: str
    partitions: tuple[dict[str, str | None], ...]
    reasons: tuple[Reason, ...]
    estimate: Estimate


@dataclass(frozen=True)
class MaintenancePlan:
    """The plan for one table at one version: `actions` to run in order, `deferred` ones, and their totals."""

    table_uri: str
    version: int
    planned_at: int  # epoch ms, the "now" of cooldowns and retention
    policy: dict[str, Any]  # the effective policy, every key with its value
    actions: tuple[PlannedAction, ...]
    deferred: tuple[DeferredAction, ...] = ()
    total: Estimate = field(default_factory=Estimate)

    @property
    def is_empty(self) -> bool:
        """True when there is nothing to run."""
        return not self.actions

    def to_dict(self) -> dict[str, Any]:
        """The JSON-ready form (camelCase keys), as ``deltalite maintain --json`` prints it and XCom holds it."""
        return plain(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> MaintenancePlan:
        """The plan back from `to_dict`'s form (``MaintenancePlan.from_dict(plan.to_dict()) == plan``).

        Raises:
            InvalidArgument: ``data`` is not a plan's dict (a missing key, or an operation not in `OPERATIONS`).
        """
        try:
            return cls(
                table_uri=data["tableUri"],
                version=int(data["version"]),
                planned_at=int(data["plannedAt"]),
                policy=dict(data["policy"]),
                actions=tuple(
                    PlannedAction(
                        operation=_operation(a["operation"]),
                        options=dict(a["options"]),
                        partitions=_partitions(a["partitions"]),
                        reasons=_reasons(a["reasons"]),
                        estimate=_estimate(a["estimate"]),
                    )
                    for a in data["actions"]
                ),
                deferred=tuple(
                    DeferredAction(
                        operation=_operation(d["operation"]),
                        partitions=_partitions(d["partitions"]),
                        reasons=_reasons(d["reasons"]),
                        estimate=_estimate(d["estimate"]),
                    )
                    for d in data.get("deferred", ())
                ),
                total=_estimate(data.get("total", {})),
            )
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            problem = f"missing key {exc}" if isinstance(exc, KeyError) else str(exc)
            uri = data.get("tableUri") if isinstance(data, dict) else None
            raise InvalidArgument(f"not a maintenance plan: {problem}", uri) from None


def _operation(name: Any) -> str:
    if name not in OPERATIONS:
        raise ValueError(f"unknown operation {name!r} (expected one of {', '.join(OPERATIONS)})")
    return str(name)


def _partitions(items: Any) -> tuple[dict[str, str | None], ...]:
    return tuple(dict(p) for p in items)


def _reasons(items: Any) -> tuple[Reason, ...]:
    return tuple(Reason(r["metric"], r["value"], r["policyKey"], r["threshold"], r["text"]) for r in items)


def _estimate(data: Any) -> Estimate:
    return Estimate(
        bytes_read=int(data.get("bytesRead", 0)),
        bytes_written=int(data.get("bytesWritten", 0)),
        files_removed=int(data.get("filesRemoved", 0)),
        files_added=int(data.get("filesAdded", 0)),
        files_deleted=int(data.get("filesDeleted", 0)),
    )
