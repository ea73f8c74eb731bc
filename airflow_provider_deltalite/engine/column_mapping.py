"""Column mapping (protocol section "Column Mapping"): the mode, and the physical names and ids of fields."""

from __future__ import annotations

from collections.abc import Mapping

from airflow_provider_deltalite.engine.errors import InvalidTableProperty
from airflow_provider_deltalite.engine.properties import (
    COLUMN_MAPPING_ID,
    COLUMN_MAPPING_MODE,
    COLUMN_MAPPING_PHYSICAL_NAME,
)


def column_mapping_mode(configuration: Mapping[str, str]) -> str:
    """Return the table's column mapping mode.

    Args:
        configuration: `metaData.configuration`.

    Returns:
        "none", "name" or "id"; "none" when `delta.columnMapping.mode` is absent.

    Raises:
        InvalidTableProperty: the property holds another value.
    """
    value = dict(configuration or {}).get(COLUMN_MAPPING_MODE)
    if value is None:
        return "none"
    mode = str(value).strip().lower()  # the reference implementation compares case-insensitively
    if mode not in ("none", "name", "id"):
        raise InvalidTableProperty(f"{COLUMN_MAPPING_MODE} must be none, name or id, got {value!r}")
    return mode


def physical_name(field: dict, mode: str) -> str:
    """Return the name a field has inside data files.

    Args:
        field: a struct field of a parsed schema.
        mode: the column mapping mode.

    Returns:
        The `delta.columnMapping.physicalName` metadata when mode is not "none" and it is present, else the name.
    """
    if mode != "none":
        name = (field.get("metadata") or {}).get(COLUMN_MAPPING_PHYSICAL_NAME)
        if isinstance(name, str) and name:
            return name
    return field["name"]


def physical_to_logical_names(schema: dict, mode: str) -> dict[str, str]:
    """Map each top-level physical column name to its logical name.

    Args:
        schema: a parsed schema.
        mode: the column mapping mode.

    Returns:
        `{physical name: logical name}` in schema order.
    """
    return {physical_name(field, mode): field["name"] for field in schema["fields"]}


def column_mapping_id(field: dict) -> int | None:
    """The field's `delta.columnMapping.id`, or None when it has none."""
    value = (field.get("metadata") or {}).get(COLUMN_MAPPING_ID)
    return value if isinstance(value, int) and not isinstance(value, bool) else None
