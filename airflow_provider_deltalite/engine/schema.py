"""Delta schema JSON: parsing and validating a `metaData.schemaString` (Spark StructType JSON).

The Arrow side (types, conforming file data) is in `conform`; column mapping in `column_mapping`; partition values
in `partition_values`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

import pyarrow as pa

from airflow_provider_deltalite.engine.errors import SchemaError

# Delta's primitive types and the Arrow type each reads as.
PRIMITIVES: dict[str, pa.DataType] = {
    "string": pa.string(),
    "long": pa.int64(),
    "integer": pa.int32(),
    "short": pa.int16(),
    "byte": pa.int8(),
    "float": pa.float32(),
    "double": pa.float64(),
    "boolean": pa.bool_(),
    "binary": pa.binary(),
    "date": pa.date32(),
    "timestamp": pa.timestamp("us", tz="UTC"),
    "timestamp_ntz": pa.timestamp("us"),
    # Spark's NullType; delta-rs reads such columns as Arrow null, so do the same.
    "void": pa.null(),
}
VARIANT = "variant"
# geometry and geography (feature `geospatial`), with an optional CRS (and, for geography, an edge algorithm):
# `geometry(OGC:CRS84)`, `geography(OGC:CRS84, spherical)`. Their values are stored and read as WKB binary.
GEOSPATIAL_TYPE = re.compile(r"^(geometry|geography)(\([^()]*\))?$")
_DECIMAL = re.compile(r"^decimal(?:\(\s*(\d+)\s*,\s*(\d+)\s*\))?$")
_MAX_DECIMAL_PRECISION = 38


def parse_schema_string(schema_string: str, *, table_uri: str | None = None) -> dict:
    """Parse and validate a `metaData.schemaString` (Spark StructType JSON).

    Args:
        schema_string: the JSON text.
        table_uri: the table, used only in error messages.

    Returns:
        A normalised copy `{"type": "struct", "fields": [...]}` in which every field has `name`, `type`,
        `nullable` and `metadata`, every array has `containsNull` and every map has `valueContainsNull`.

    Raises:
        SchemaError: the text is not JSON, is not a struct, or holds an unknown type or a malformed field.
    """
    try:
        raw = json.loads(schema_string)
    except (TypeError, ValueError, RecursionError) as exc:  # RecursionError: nested too deeply to parse
        raise SchemaError(f"schemaString is not valid JSON: {exc}", table_uri) from None
    if not isinstance(raw, dict) or raw.get("type") != "struct":
        raise SchemaError("schemaString must be a JSON object with type 'struct'", table_uri)
    return validate_type(raw, "", table_uri)


def validate_type(delta_type: Any, path: str, table_uri: str | None) -> Any:
    """Validate and normalise one Delta type (see `parse_schema_string`); `path` names the column in errors."""
    where = f"column '{path}'" if path else "schema"
    if isinstance(delta_type, str):
        if delta_type in PRIMITIVES or delta_type == VARIANT or GEOSPATIAL_TYPE.match(delta_type):
            return delta_type
        match = _DECIMAL.match(delta_type)
        if match:
            decimal_params(delta_type, path, table_uri)
            return delta_type
        raise SchemaError(f"{where}: unknown type {delta_type!r}", table_uri)
    if not isinstance(delta_type, dict):
        raise SchemaError(f"{where}: type must be a string or an object, got {type(delta_type).__name__}", table_uri)
    kind = delta_type.get("type")
    if kind == "struct":
        fields = delta_type.get("fields")
        if not isinstance(fields, list):
            raise SchemaError(f"{where}: struct type needs a 'fields' list", table_uri)
        out, seen = [], set()
        for field in fields:
            if not isinstance(field, dict) or not isinstance(field.get("name"), str) or "type" not in field:
                raise SchemaError(f"{where}: every struct field needs a string 'name' and a 'type'", table_uri)
            name = field["name"]
            if name in seen:
                raise SchemaError(f"{where}: duplicate field name {name!r}", table_uri)
            seen.add(name)
            child = f"{path}.{name}" if path else name
            nullable = field.get("nullable", True)
            metadata = field.get("metadata") or {}
            if not isinstance(nullable, bool) or not isinstance(metadata, dict):
                raise SchemaError(f"column '{child}': 'nullable' must be a boolean and 'metadata' an object", table_uri)
            out.append(
                {
                    "name": name,
                    "type": validate_type(field["type"], child, table_uri),
                    "nullable": nullable,
                    "metadata": dict(metadata),
                }
            )
        return {"type": "struct", "fields": out}
    if kind == "array":
        if "elementType" not in delta_type:
            raise SchemaError(f"{where}: array type needs 'elementType'", table_uri)
        contains_null = delta_type.get("containsNull", True)
        if not isinstance(contains_null, bool):
            raise SchemaError(f"{where}: 'containsNull' must be a boolean", table_uri)
        element = validate_type(delta_type["elementType"], f"{path}.element", table_uri)
        return {"type": "array", "elementType": element, "containsNull": contains_null}
    if kind == "map":
        if "keyType" not in delta_type or "valueType" not in delta_type:
            raise SchemaError(f"{where}: map type needs 'keyType' and 'valueType'", table_uri)
        value_contains_null = delta_type.get("valueContainsNull", True)
        if not isinstance(value_contains_null, bool):
            raise SchemaError(f"{where}: 'valueContainsNull' must be a boolean", table_uri)
        return {
            "type": "map",
            "keyType": validate_type(delta_type["keyType"], f"{path}.key", table_uri),
            "valueType": validate_type(delta_type["valueType"], f"{path}.value", table_uri),
            "valueContainsNull": value_contains_null,
        }
    raise SchemaError(f"{where}: unknown type {kind!r}", table_uri)


def validated_schema(schema: Any, table_uri: str | None = None) -> dict:
    """Normalise a schema dict that may not have come from `parse_schema_string`, so lookups cannot KeyError."""
    if not isinstance(schema, dict) or schema.get("type") != "struct":
        raise SchemaError("schema must be a struct object", table_uri)
    return validate_type(schema, "", table_uri)


def decimal_params(type_string: str, path: str, table_uri: str | None) -> tuple[int, int]:
    """`(precision, scale)` of a decimal type string; SchemaError when they are out of range."""
    match = _DECIMAL.match(type_string)
    if match is None:
        raise SchemaError(f"column '{path}': unknown type {type_string!r}", table_uri)
    # A bare "decimal" is Spark's DecimalType.USER_DEFAULT.
    precision, scale = (int(match.group(1)), int(match.group(2))) if match.group(1) else (10, 0)
    if not 1 <= precision <= _MAX_DECIMAL_PRECISION or scale > precision:
        raise SchemaError(f"column '{path}': invalid decimal precision/scale in {type_string!r}", table_uri)
    return precision, scale


def find_field(fields: list[dict], path: Sequence[str]) -> tuple[dict | None, list[str]]:
    """The schema field at ``path`` (struct fields by name, exact case first, else the one case-insensitive match) and
    the names as the schema spells them; ``(None, names found so far)`` when there is none."""
    names: list[str] = []
    field = None
    for i, part in enumerate(path):
        match = [f for f in fields if f["name"] == part] or [f for f in fields if f["name"].lower() == part.lower()]
        if len(match) != 1:
            return None, names
        field = match[0]
        names.append(field["name"])
        kind = field["type"]
        if i < len(path) - 1:
            if not (isinstance(kind, dict) and kind["type"] == "struct"):
                return None, names
            fields = kind["fields"]
    return field, names
