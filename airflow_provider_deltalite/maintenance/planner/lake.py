"""`plan_lake`: one ordered plan across many tables, cut at one lake-wide budget.

Pure, as `decide` is: it takes each table's health and per-table plan (`health_and_plan`, measured beforehand, in
parallel by `measure_lake`) and reads nothing. Every action of every table's plan becomes a candidate with its
estimate (bytes read and written, files deleted), its expected gain and an estimated wall time; the candidates are
ranked and taken while they fit the budget (bytes rewritten, files deleted, seconds):

1. the actions of tables the policy pins (``priority = "pin"``), in the order of their table's plan;
2. the actions that rewrite nothing (checkpoints, then VACUUMs by bytes reclaimed per file deleted);
3. the rewrites (purge, OPTIMIZE, clustering, Z-order) by gain per byte rewritten, most first (then fewer bytes,
   then the table URI). One that does not fit what is left is deferred and smaller ones may still fit, as in the
   per-table planner (docs/maintenance-planner.md). A VACUUM may be cut to the files left in the budget (it deletes
   the oldest first).

The gain of a rewrite is counted in files a reader no longer opens: the files it removes less the files it writes,
plus the files whose deletion vectors it purges, plus the files a point query no longer reads on the clustering
columns (Z-order and clustering: the health's ``point_query_files`` down to 1). `Gain` also reports the small files
removed, bytes reclaimed and deleted rows purged.

Tables excluded by the policy, within their cooldown (the lake's ``table_cooldown_hours`` since their last
OPTIMIZE or VACUUM, or every action held back by the per-table cooldowns), with nothing to do, whose health could not
be measured, or none of whose actions fit are reported with that reason. Each chosen table gets its share of the
budget: its policy with ``max_rewrite_bytes_per_run`` and ``max_files_deleted_per_run`` set to what its chosen
actions use, so a per-table run (`DeltaMaintenanceOperator`, ``deltalite maintain``) stays within the lake's budget.

Example:
    >>> tables = measure_lake(find_delta_tables("s3://lake/warehouse"), LakePolicy())  # doctest: +SKIP
    >>> plan = plan_lake(tables, LakePolicy(), LakeBudget(bytes_rewritten=500 << 30))  # doctest: +SKIP
    >>> [t.table_uri for t in plan.tables if t.chosen]  # doctest: +SKIP
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import Any

from airflow_provider_deltalite.engine.errors import DeltaLiteError
from airflow_provider_deltalite.maintenance.health.metrics import PartitionHealth, TableHealth, plain
from airflow_provider_deltalite.maintenance.planner.lake_policy import LakeBudget, LakePolicy
from airflow_provider_deltalite.maintenance.planner.plan import Estimate, MaintenancePlan, PlannedAction
from airflow_provider_deltalite.maintenance.wording import count, human_size

MIB = 1 << 20
GIB = 1 << 30
HOUR_MS = 3_600_000
REWRITES = ("purge", "optimize", "cluster", "zorder")
# Wall-time assumptions when no history says otherwise (`plan_lake`'s ``bytes_per_second`` does): a rewrite reads,
# decodes, encodes and writes each byte on one core; VACUUM deletes in batches; a checkpoint reads the log.
DEFAULT_REWRITE_BYTES_PER_SECOND = 64 * MIB
DEFAULT_FILES_DELETED_PER_SECOND = 200.0
CHECKPOINT_SECONDS = 1.0
CHECKPOINT_FILES_PER_SECOND = 100_000.0

# What a table's entry in the lake plan says about it.
CHOSEN, BUDGET, COOLDOWN, NOTHING_TO_DO, EXCLUDED, ERROR = (
    "chosen",
    "budget",
    "cooldown",
    "nothing to do",
    "excluded",
    "error",
)


@dataclass(frozen=True)
class LakeTable:
    """One table as `plan_lake` sees it: its health and per-table plan, or the error that prevented them."""

    table_uri: str
    health: TableHealth | None
    plan: MaintenancePlan | None
    error: str | None = None  # "<ErrorClass>: <message>" when the health or the plan failed


@dataclass(frozen=True)
class Gain:
    """What an action is expected to bring (an estimate from the log's statistics)."""

    files_removed: int = 0  # files removed less files written (rewrites)
    small_files_removed: int = 0
    bytes_reclaimed: int = 0  # storage freed: deleted rows dropped by a rewrite, tombstoned files VACUUM deletes
    deleted_rows_purged: int = 0
    deletion_vector_files_purged: int = 0
    point_query_files_saved: float = 0.0  # files a point query on a clustering column no longer reads
    commits_folded: int = 0  # commits a checkpoint saves every reader

    @property
    def files(self) -> float:
        """The ranking gain: files a reader no longer opens."""
        return self.files_removed + self.deletion_vector_files_purged + self.point_query_files_saved


@dataclass(frozen=True)
class LakeAction:
    """One action of one table's plan, ranked in the lake (``rank`` 1 first) and chosen or not (``reason``)."""

    table_uri: str
    index: int  # the action's position in its table's plan
    operation: str
    partitions: tuple[dict[str, str | None], ...]
    estimate: Estimate
    gain: Gain
    gain_per_gib: float | None  # gain.files per GiB rewritten (None: the action rewrites nothing)
    seconds: float
    priority: str
    rank: int
    chosen: bool
    reason: str  # why it was chosen or not, one sentence


@dataclass(frozen=True)
class LakeTablePlan:
    """One table in the lake plan: ``status`` (`CHOSEN`, `BUDGET`, `COOLDOWN`, `NOTHING_TO_DO`, `EXCLUDED`,
    `ERROR`), the reason, the operations chosen, and its share of the budget as the policy to run it with."""

    table_uri: str
    status: str
    reason: str
    operations: tuple[str, ...]
    bytes_rewritten: int
    files_deleted: int
    seconds: float
    policy: dict[str, Any]  # the table's MaintenancePolicy keys with its budget share (empty when not planned)
    version: int | None

    @property
    def chosen(self) -> bool:
        return self.status == CHOSEN


@dataclass(frozen=True)
class LakePlan:
    """What `plan_lake` returns: every candidate action in lake order, every table with its status and share."""

    planned_at: int
    budget: LakeBudget
    actions: tuple[LakeAction, ...]
    tables: tuple[LakeTablePlan, ...]  # chosen ones first (in the order of their first action), then by URI
    total: Estimate = field(default_factory=Estimate)  # of the chosen actions
    seconds: float = 0.0

    @property
    def chosen_tables(self) -> tuple[LakeTablePlan, ...]:
        return tuple(t for t in self.tables if t.chosen)

    def to_dict(self) -> dict[str, Any]:
        """The JSON-ready form (camelCase keys): ``deltalite maintain-lake --json`` and the DAG's XCom."""
        out = plain(self)
        for action, data in zip(self.actions, out["actions"], strict=True):
            data["gain"]["files"] = action.gain.files
        for table, data in zip(self.tables, out["tables"], strict=True):
            data["chosen"] = table.chosen
        return out


def plan_lake(
    tables: Sequence[LakeTable],
    policy: LakePolicy | None = None,
    budget: LakeBudget | None = None,
    *,
    now: int | None = None,
    bytes_per_second: Mapping[str, float] | None = None,
) -> LakePlan:
    """One plan across ``tables`` within ``budget`` (see the module docstring).

    Args:
        tables: each table's health and plan (`measure_lake`), planned with ``policy.settings(uri).policy``.
        policy: priorities, cooldowns and each table's policy (default: `LakePolicy()`).
        budget: the lake-wide limits (default: none).
        now: epoch ms of "now" for the table cooldowns (default: the clock).
        bytes_per_second: observed rewrite throughput by table URI (the operations history); a table without one
            is estimated at `DEFAULT_REWRITE_BYTES_PER_SECOND`.

    Returns:
        LakePlan.
    """
    policy = policy or LakePolicy()
    budget = budget or LakeBudget()
    now = int(time.time() * 1000) if now is None else now
    speeds = bytes_per_second or {}
    status: dict[str, tuple[str, str]] = {}
    candidates: list[tuple[tuple[Any, ...], LakeAction]] = []
    for table in sorted(tables, key=lambda t: t.table_uri):
        uri = table.table_uri
        settings = policy.settings(uri)
        if settings.priority == "exclude":
            status[uri] = (EXCLUDED, "excluded by the lake policy")
            continue
        if table.error is not None or table.health is None or table.plan is None:
            status[uri] = (ERROR, table.error or "no health")
            continue
        held = _table_cooldown(table.health, settings.cooldown_hours, now)
        if held is not None:
            status[uri] = (COOLDOWN, held)
            continue
        if table.plan.is_empty:
            if table.plan.deferred:
                why = "; ".join(r.text for d in table.plan.deferred for r in d.reasons)
                status[uri] = (COOLDOWN if "cooldown" in why else BUDGET, f"every action is held back: {why}")
            else:
                status[uri] = (NOTHING_TO_DO, "nothing to do")
            continue
        speed = speeds.get(uri) or DEFAULT_REWRITE_BYTES_PER_SECOND
        for index, action in enumerate(table.plan.actions):
            gain = action_gain(action, table.health)
            rewrite = action.operation in REWRITES
            nbytes = action.estimate.bytes_read
            per_gib = gain.files / max(nbytes, 1) * GIB if rewrite else None
            if settings.priority == "pin":
                key: tuple[Any, ...] = (0, uri, index)
            elif not rewrite:
                reclaimed = gain.bytes_reclaimed / max(action.estimate.files_deleted, 1)
                key = (1, action.operation != "checkpoint", -reclaimed, uri, index)
            else:
                key = (2, -(per_gib or 0.0), nbytes, uri, index)
            entry = LakeAction(
                table_uri=uri,
                index=index,
                operation=action.operation,
                partitions=action.partitions,
                estimate=action.estimate,
                gain=gain,
                gain_per_gib=per_gib,
                seconds=_seconds(action, table.health, speed),
                priority=settings.priority,
                rank=0,
                chosen=False,
                reason="",
            )
            candidates.append((key, entry))
    candidates.sort(key=lambda c: c[0])
    ranked = _within_budget([c[1] for c in candidates], budget)
    return _lake_plan(ranked, tables, policy, budget, status, now)


def action_gain(action: PlannedAction, health: TableHealth) -> Gain:
    """The expected gain of one planned action on the table whose health is ``health``."""
    e = action.estimate
    if action.operation == "vacuum":
        stones = health.tombstones
        share = e.files_deleted / stones.reclaimable_files if stones.reclaimable_files else 0.0
        return Gain(bytes_reclaimed=round(stones.reclaimable_bytes * min(share, 1.0)))
    if action.operation == "checkpoint":
        return Gain(commits_folded=health.log.commits_since_checkpoint)
    parts = _partitions(action, health)
    small = sum(p.small_files for p in parts) if parts else health.small_files
    dv_files = sum(p.files_with_deletion_vectors for p in parts) if parts else health.files_with_deletion_vectors
    dv_rows = sum(p.deleted_rows for p in parts) if parts else health.deleted_rows
    saved = 0.0
    if action.operation in ("zorder", "cluster"):
        depths = [c.point_query_files for c in health.clustering if c.point_query_files is not None]
        saved = max(0.0, max(depths) - 1.0) if depths else 0.0
    return Gain(
        files_removed=max(0, e.files_removed - e.files_added),
        small_files_removed=min(small, e.files_removed),
        bytes_reclaimed=max(0, e.bytes_read - e.bytes_written),
        deleted_rows_purged=dv_rows,
        deletion_vector_files_purged=min(dv_files, e.files_removed),
        point_query_files_saved=round(saved, 3),
    )


def _partitions(action: PlannedAction, health: TableHealth) -> list[PartitionHealth]:
    if not action.partitions:
        return []
    wanted = {_key(p) for p in action.partitions}
    return [p for p in health.partitions if _key(p.partition_values) in wanted]


def _key(values: Mapping[str, str | None]) -> tuple[tuple[str, str | None], ...]:
    return tuple(sorted((k, None if v == "" else v) for k, v in values.items()))


def _seconds(action: PlannedAction, health: TableHealth, speed: float) -> float:
    if action.operation in REWRITES:
        return action.estimate.bytes_read / speed
    if action.operation == "vacuum":
        return action.estimate.files_deleted / DEFAULT_FILES_DELETED_PER_SECOND
    return CHECKPOINT_SECONDS + health.files / CHECKPOINT_FILES_PER_SECOND


def _table_cooldown(health: TableHealth, hours: float, now: int) -> str | None:
    if hours <= 0:
        return None
    runs = health.last_runs
    last = max((t for t in (runs.optimize_timestamp, runs.vacuum_timestamp) if t is not None), default=None)
    if last is None:
        return None
    since = (now - last) / HOUR_MS
    if since >= hours:
        return None
    return f"maintained {since:.1f} hours ago, within table_cooldown_hours={hours:g}"


def _within_budget(ranked: list[LakeAction], budget: LakeBudget) -> list[LakeAction]:
    """The ranked actions, each chosen while it fits what is left of every limit (a VACUUM cut to the files left)."""
    left_bytes, left_files, left_seconds = budget.bytes_rewritten, budget.files_deleted, budget.seconds
    out = []
    for rank, action in enumerate(ranked, start=1):
        e = action.estimate
        over: list[str] = []
        if action.operation == "vacuum" and left_files is not None and e.files_deleted > left_files > 0:
            cut = replace(e, files_deleted=left_files)
            ratio = left_files / e.files_deleted
            action = replace(
                action,
                estimate=cut,
                gain=replace(action.gain, bytes_reclaimed=round(action.gain.bytes_reclaimed * ratio)),
                seconds=action.seconds * ratio,
            )
            e = cut
        if left_bytes is not None and e.bytes_read > left_bytes:
            over.append(f"rewriting {human_size(e.bytes_read)} does not fit the {human_size(left_bytes)} left")
        if left_files is not None and e.files_deleted > left_files:
            over.append(f"deleting {count(e.files_deleted, 'file')} does not fit the {left_files} left")
        if left_seconds is not None and action.seconds > left_seconds:
            over.append(f"an estimated {action.seconds:.0f} s does not fit the {left_seconds:.0f} s left")
        if over:
            out.append(replace(action, rank=rank, reason="budget: " + "; ".join(over)))
            continue
        if left_bytes is not None:
            left_bytes -= e.bytes_read
        if left_files is not None:
            left_files -= e.files_deleted
        if left_seconds is not None:
            left_seconds -= action.seconds
        why = "pinned by the lake policy" if action.priority == "pin" else _chosen_reason(action)
        out.append(replace(action, rank=rank, chosen=True, reason=why))
    return out


def _chosen_reason(action: LakeAction) -> str:
    if action.gain_per_gib is None:
        return "rewrites nothing"
    return f"{action.gain.files:g} files fewer to open for {human_size(action.estimate.bytes_read)} rewritten"


def _lake_plan(
    ranked: list[LakeAction],
    tables: Sequence[LakeTable],
    policy: LakePolicy,
    budget: LakeBudget,
    status: dict[str, tuple[str, str]],
    now: int,
) -> LakePlan:
    by_table: dict[str, list[LakeAction]] = {}
    for action in ranked:
        by_table.setdefault(action.table_uri, []).append(action)
    known = {t.table_uri: t for t in tables}
    entries: list[LakeTablePlan] = []
    for uri, actions in by_table.items():  # in the order of each table's first-ranked action
        chosen = [a for a in actions if a.chosen]
        plan = known[uri].plan
        assert plan is not None
        share_bytes = sum(a.estimate.bytes_read for a in chosen)
        share_files = sum(a.estimate.files_deleted for a in chosen)
        seconds = sum(a.seconds for a in chosen)
        if chosen:
            left = [a for a in actions if not a.chosen]
            why = f"{count(len(chosen), 'action')} within the budget" + (
                f"; {', '.join(a.operation for a in left)} deferred by the budget" if left else ""
            )
            run_policy = {**plan.policy, "max_rewrite_bytes_per_run": share_bytes}
            run_policy["max_files_deleted_per_run"] = share_files
            operations = tuple(a.operation for a in chosen)
            entries.append(
                LakeTablePlan(uri, CHOSEN, why, operations, share_bytes, share_files, seconds, run_policy, plan.version)
            )
        else:
            why = "budget: " + "; ".join(f"{a.operation}: {a.reason.removeprefix('budget: ')}" for a in actions)
            status[uri] = (BUDGET, why)
    chosen_uris = {e.table_uri for e in entries}
    for uri in sorted(set(known) - chosen_uris):
        kind, why = status[uri]
        plan = known[uri].plan
        entries.append(LakeTablePlan(uri, kind, why, (), 0, 0, 0.0, {}, plan.version if plan else None))
    picked = [a for a in ranked if a.chosen]
    return LakePlan(now, budget, tuple(ranked), tuple(entries), _total(picked), sum(a.seconds for a in picked))


def chosen_plan(lake_plan: LakePlan, table: LakeTable) -> MaintenancePlan | None:
    """``table``'s own plan cut to the actions the lake chose, each held to its share of the budget: a rewrite reads
    at most its estimate (``max_bytes_to_rewrite``), a VACUUM deletes at most the files the lake gave it; None when the
    lake chose none of them. What ``deltalite maintain-lake`` runs per table."""
    plan = table.plan
    chosen = {a.index: a for a in lake_plan.actions if a.table_uri == table.table_uri and a.chosen}
    if plan is None or not chosen:
        return None
    actions = []
    for index, action in enumerate(plan.actions):
        picked = chosen.get(index)
        if picked is None:
            continue
        options = dict(action.options)
        if action.operation in REWRITES:
            options["max_bytes_to_rewrite"] = max(1, picked.estimate.bytes_read)
        elif action.operation == "vacuum":
            options["max_files_to_delete"] = max(1, picked.estimate.files_deleted)
        actions.append(replace(action, options=options, estimate=picked.estimate))
    return replace(plan, actions=tuple(actions), deferred=(), total=_total(actions))


def _total(actions: Sequence[PlannedAction | LakeAction]) -> Estimate:
    return Estimate(
        bytes_read=sum(a.estimate.bytes_read for a in actions),
        bytes_written=sum(a.estimate.bytes_written for a in actions),
        files_removed=sum(a.estimate.files_removed for a in actions),
        files_added=sum(a.estimate.files_added for a in actions),
        files_deleted=sum(a.estimate.files_deleted for a in actions),
    )


def measure_lake(
    table_uris: Sequence[str],
    policy: LakePolicy | None = None,
    *,
    storage_options: Mapping[str, Any] | None = None,
    max_workers: int = 4,
    now: int | None = None,
    open_table: Callable[[str], Any] | None = None,
) -> list[LakeTable]:
    """Each table's health and plan (`health_and_plan` under its policy from ``policy``), ``max_workers`` tables at a
    time in threads (log reads wait on storage). Excluded tables are not read. A table whose health cannot be
    measured (a corrupt log, a protocol deltalite cannot read) is returned with its ``error``, so that one broken
    table does not stop the lake.

    Args:
        open_table: builds the table from its URI (default: `engine.table.Table` with ``storage_options``).
    """
    from airflow_provider_deltalite.maintenance.planner import health_and_plan

    policy = policy or LakePolicy()
    now = int(time.time() * 1000) if now is None else now

    def opened(uri: str) -> Any:
        if open_table is not None:
            return open_table(uri)
        from airflow_provider_deltalite.engine.table import Table

        return Table(uri, storage_options)

    def one(uri: str) -> LakeTable:
        settings = policy.settings(uri)
        if settings.priority == "exclude":
            return LakeTable(uri, None, None, None)
        try:
            health, plan = health_and_plan(opened(uri), settings.policy, now=now)
        except DeltaLiteError as exc:
            return LakeTable(uri, None, None, f"{type(exc).__name__}: {exc.problem}")
        return LakeTable(uri, health, plan)

    if not table_uris:
        return []
    with ThreadPoolExecutor(max_workers=max(1, min(max_workers, len(table_uris)))) as pool:
        return list(pool.map(one, table_uris))
