"""What `plan_lake` decides across tables with: a lake policy (per-table priorities, cooldowns and policy keys) and
a lake-wide budget.

A lake policy is a `MaintenancePolicy` for every table, plus two lake keys and per-table rules::

    # lake.toml
    min_input_files = 8                  # any MaintenancePolicy key: every table's default
    table_cooldown_hours = 12            # no maintenance on a table maintained less than 12 hours ago
    [tables."s3://lake/events"]
    priority = "pin"                     # planned before every other table (still within the budget)
    [tables."*/staging_*"]
    priority = "exclude"                 # never planned
    [tables."*/orders"]
    cooldown_hours = 48
    vacuum_mode = "lite"

A rule's name is a glob (`fnmatch`) on the table URI; the first rule that matches a table applies (in the file's
order). Every key is checked when the policy is read: an unknown one is one `InvalidPolicy` naming it.
"""

from __future__ import annotations

import difflib
import fnmatch
import json
import math
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from airflow_provider_deltalite.engine.errors import InvalidArgument, InvalidPolicy
from airflow_provider_deltalite.maintenance.planner.policy import MaintenancePolicy

PRIORITIES = ("pin", "normal", "exclude")
LAKE_KEYS = ("table_cooldown_hours", "tables")
RULE_KEYS = ("priority", "cooldown_hours")


@dataclass(frozen=True)
class TableRule:
    """The rule of the tables whose URI matches ``pattern``: a priority, a cooldown and policy keys of their own."""

    pattern: str
    priority: str = "normal"
    cooldown_hours: float | None = None  # None: the lake's ``table_cooldown_hours``
    policy: Mapping[str, Any] = field(default_factory=dict)  # MaintenancePolicy keys over the lake's

    def matches(self, table_uri: str) -> bool:
        return fnmatch.fnmatchcase(table_uri, self.pattern) or fnmatch.fnmatchcase(
            table_uri.rstrip("/"), self.pattern.rstrip("/")
        )


@dataclass(frozen=True)
class TableSettings:
    """What a lake policy says about one table."""

    policy: MaintenancePolicy
    priority: str
    cooldown_hours: float


@dataclass(frozen=True)
class LakePolicy:
    """The tables' `MaintenancePolicy` (``default``), the lake-wide ``table_cooldown_hours`` and the per-table
    ``rules`` (see the module docstring).

    Example:
        >>> LakePolicy.from_mapping({"tables": {"*/tmp_*": {"priority": "exclude"}}}).settings("/l/tmp_a").priority
        'exclude'
    """

    default: MaintenancePolicy = field(default_factory=MaintenancePolicy)
    table_cooldown_hours: float = 0.0
    rules: tuple[TableRule, ...] = ()

    def settings(self, table_uri: str) -> TableSettings:
        """The policy, priority and cooldown of ``table_uri``: the first matching rule over the lake's defaults."""
        for rule in self.rules:
            if rule.matches(table_uri):
                policy = self.default.replace(**rule.policy) if rule.policy else self.default
                cooldown = self.table_cooldown_hours if rule.cooldown_hours is None else rule.cooldown_hours
                return TableSettings(policy, rule.priority, cooldown)
        return TableSettings(self.default, "normal", self.table_cooldown_hours)

    def to_dict(self) -> dict[str, Any]:
        """The JSON-ready form; `from_mapping` reads it back."""
        out: dict[str, Any] = {**self.default.to_dict(), "table_cooldown_hours": self.table_cooldown_hours}
        out["tables"] = {
            r.pattern: {"priority": r.priority, "cooldown_hours": r.cooldown_hours, **r.policy} for r in self.rules
        }
        return out

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any]) -> LakePolicy:
        """A lake policy from a mapping (the form of the module docstring).

        Raises:
            InvalidPolicy: an unknown key (at the top or in a rule), a priority not in `PRIORITIES`, a negative
                cooldown, or what `MaintenancePolicy.from_mapping` refuses; the message names the key.
        """
        if not isinstance(data, Mapping):
            raise InvalidPolicy(f"a lake policy must be a mapping of keys to values, got {type(data).__name__}")
        known = (*MaintenancePolicy.keys(), *LAKE_KEYS)
        _check_keys(data, known, "")
        default = MaintenancePolicy.from_mapping({k: v for k, v in data.items() if k not in LAKE_KEYS})
        cooldown = _hours("table_cooldown_hours", data.get("table_cooldown_hours", 0.0))
        tables = data.get("tables") or {}
        if not isinstance(tables, Mapping):
            raise InvalidPolicy("policy key 'tables' must map table patterns to rules", key="tables")
        rules = []
        for pattern, rule in tables.items():
            where = f"tables.{pattern!s}"
            if not isinstance(rule, Mapping):
                raise InvalidPolicy(f"policy key {where!r} must be a table of keys", key=where)
            _check_keys(rule, (*MaintenancePolicy.keys(), *RULE_KEYS), f"{where}.")
            priority = rule.get("priority", "normal")
            if priority not in PRIORITIES:
                raise InvalidPolicy(
                    f"policy key '{where}.priority' must be one of {', '.join(PRIORITIES)}, got {priority!r}",
                    key=f"{where}.priority",
                )
            raw = rule.get("cooldown_hours")
            rule_cooldown = None if raw is None else _hours(f"{where}.cooldown_hours", raw)
            overrides = {k: v for k, v in rule.items() if k not in RULE_KEYS}
            try:
                default.replace(**overrides)  # checked now, not when a table first matches
            except InvalidPolicy as exc:
                raise InvalidPolicy(f"{where}: {exc.problem}", key=f"{where}.{exc.key}") from None
            rules.append(TableRule(str(pattern), priority, rule_cooldown, dict(overrides)))
        return cls(default, cooldown, tuple(rules))

    @classmethod
    def from_file(cls, path: str | Path) -> LakePolicy:
        """A lake policy from a JSON file, or TOML when the name ends in ``.toml``.

        Raises:
            InvalidPolicy: the file cannot be read or parsed, or `from_mapping` refuses it.
        """
        path = Path(path)
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else type(exc).__name__
            raise InvalidPolicy(f"cannot read the policy file {str(path)!r}: {reason}") from None
        toml = path.suffix.lower() == ".toml"
        try:
            data = tomllib.loads(text) if toml else json.loads(text)
        except (tomllib.TOMLDecodeError, json.JSONDecodeError, RecursionError) as exc:
            kind = "TOML" if toml else "JSON"
            raise InvalidPolicy(f"the policy file {str(path)!r} is not valid {kind}: {exc}") from None
        if not isinstance(data, dict):
            raise InvalidPolicy(f"the policy file {str(path)!r} must hold one object of policy keys")
        return cls.from_mapping(data)

    @classmethod
    def from_value(cls, value: Any) -> LakePolicy:
        """From a mapping, JSON text, or a file path (what a DAG param or template renders); None or empty: the
        defaults."""
        if isinstance(value, LakePolicy):
            return value
        if isinstance(value, Mapping):
            return cls.from_mapping(value)
        text = None if value is None else str(value).strip()
        if not text or text == "None":
            return cls()
        if text.startswith("{"):
            try:
                return cls.from_mapping(json.loads(text))
            except json.JSONDecodeError as exc:
                raise InvalidPolicy(f"policy is not valid JSON (line {exc.lineno}, column {exc.colno})") from None
        return cls.from_file(text)


@dataclass(frozen=True)
class LakeBudget:
    """What one lake run may spend, over every table together (None: no limit on that measure).

    Attributes:
        bytes_rewritten: bytes OPTIMIZE, purge, clustering and Z-order may read (and rewrite).
        files_deleted: files VACUUM may delete.
        seconds: the estimated wall time of every chosen action, run one after the other.

    Raises:
        InvalidArgument: a limit that is not a number above 0 (the message names it).
    """

    bytes_rewritten: int | None = None
    files_deleted: int | None = None
    seconds: float | None = None

    def __post_init__(self) -> None:
        for name in ("bytes_rewritten", "files_deleted"):
            value = getattr(self, name)
            if value is None:
                continue
            if isinstance(value, float) and value.is_integer():
                value = int(value)
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise InvalidArgument(f"budget {name} must be a whole number above 0, got {value!r}")
            object.__setattr__(self, name, value)
        s = self.seconds
        if s is not None and (isinstance(s, bool) or not isinstance(s, int | float) or not math.isfinite(s) or s <= 0):
            raise InvalidArgument(f"budget seconds must be a number above 0, got {s!r}")

    def to_dict(self) -> dict[str, Any]:
        return {"bytesRewritten": self.bytes_rewritten, "filesDeleted": self.files_deleted, "seconds": self.seconds}


def _check_keys(data: Mapping[str, Any], known: tuple[str, ...], prefix: str) -> None:
    for key in data:
        if key not in known:
            close = difflib.get_close_matches(str(key), known, n=1)
            hint = f" (did you mean '{prefix}{close[0]}'?)" if close else ""
            raise InvalidPolicy(f"unknown policy key '{prefix}{key!s}'{hint}", key=f"{prefix}{key!s}")


def _hours(name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value < 0:
        raise InvalidPolicy(f"policy key {name!r} must be a number of hours of at least 0, got {value!r}", key=name)
    return float(value)
