"""Which columns get statistics, as delta-spark's `StatisticsCollection` selects them, and the running per-column
state (`Leaf`, `Struct`) the collector keeps for them.

- `parse_stats_columns` reads `delta.dataSkippingStatsColumns` (Spark's `multipartIdentifierList`);
- `named_fields` (`filterSchema`) keeps the fields it names, a struct naming all its leaves;
- `first_leaves` (`truncateSchema`) keeps the first `delta.dataSkippingNumIndexedCols` leaves, every non-struct field
  (arrays and maps included) counting as one;
- `field_node` keeps a whole field.

Nodes carry physical names (the output keys) and logical dotted paths (for messages). `engine/stats_collect.py` reads
the properties and fills the nodes.
"""

from __future__ import annotations

import re
from typing import Any

from airflow_provider_deltalite.engine.column_mapping import physical_name

_INTEGER_TYPES = frozenset({"byte", "short", "integer", "long"})
_BARE_NAME = re.compile(r"[A-Za-z0-9_]+")


def parse_stats_columns(text: str) -> list[tuple[str, ...]] | None:
    """Spark's `multipartIdentifierList`: comma-separated, dot-separated parts, backquotes around special names.

    Returns the lower-cased name paths (Spark matches them case-insensitively), or None when the text does not parse.
    """
    if not text.strip():
        return []  # Spark: an empty list selects no column
    paths: list[tuple[str, ...]] = []
    parts: list[str] = []
    pos, n = 0, len(text)
    while True:
        while pos < n and text[pos].isspace():
            pos += 1
        if pos < n and text[pos] == "`":
            end = pos + 1
            chars = []
            while True:
                close = text.find("`", end)
                if close < 0:
                    return None
                chars.append(text[end:close])
                if close + 1 < n and text[close + 1] == "`":  # a doubled backquote stands for one
                    chars.append("`")
                    end = close + 2
                    continue
                break
            parts.append("".join(chars))
            pos = close + 1
        else:
            match = _BARE_NAME.match(text, pos)
            # a bare number lexes as a numeric literal in Spark's grammar, not as an identifier
            if match is None or match.group().isdigit():
                return None
            parts.append(match.group())
            pos = match.end()
        while pos < n and text[pos].isspace():
            pos += 1
        if pos == n or text[pos] == ",":
            paths.append(tuple(p.lower() for p in parts))
            parts = []
            if pos == n:
                return paths
            pos += 1
        elif text[pos] == ".":
            pos += 1
        else:
            return None


class Leaf:
    """Running statistics of one non-struct column."""

    __slots__ = ("has_nan", "kind", "max", "min", "name", "null_count", "path")

    def __init__(self, name: str, path: str, delta_type: Any) -> None:
        self.name = name
        self.path = path  # logical dotted path, for error messages
        self.kind = _leaf_kind(delta_type)
        self.null_count = 0
        self.min: Any = None
        self.max: Any = None
        self.has_nan = False


class Struct:
    """A struct column: its selected children."""

    __slots__ = ("children", "name")

    def __init__(self, name: str, children: list[Leaf | Struct]) -> None:
        self.name = name
        self.children = children


def _leaf_kind(delta_type: Any) -> str | None:
    """The kind of min/max kept for a Delta type; None means a null count only."""
    if not isinstance(delta_type, str):
        return None  # array and map: Spark counts nulls of the column itself, nothing inside
    if delta_type in _INTEGER_TYPES:
        return "integer"
    if delta_type in ("float", "double", "string", "date", "timestamp", "timestamp_ntz"):
        return delta_type
    if delta_type.startswith("decimal"):  # the schema parser has checked the precision and scale
        return "decimal"
    return None  # boolean, binary, void: not SkippingEligibleDataType


def field_node(field: dict, mode: str, path: str) -> Leaf | Struct:
    """The whole field: a struct with all its leaves, or a leaf."""
    name = physical_name(field, mode)
    child_path = f"{path}.{field['name']}" if path else field["name"]
    field_type = field["type"]
    if isinstance(field_type, dict) and field_type["type"] == "struct":
        return Struct(name, [field_node(child, mode, child_path) for child in field_type["fields"]])
    return Leaf(name, child_path, field_type)


def first_leaves(fields: list[dict], budget: int, mode: str, path: str) -> tuple[list[Leaf | Struct], int]:
    """`truncateSchema`: the first `budget` leaves depth-first; a struct is cut where the count runs out."""
    out: list[Leaf | Struct] = []
    used = 0
    for field in fields:
        if used >= budget:
            break
        field_type = field["type"]
        child_path = f"{path}.{field['name']}" if path else field["name"]
        if isinstance(field_type, dict) and field_type["type"] == "struct":
            children, count = first_leaves(field_type["fields"], budget - used, mode, child_path)
            used += count
            out.append(Struct(physical_name(field, mode), children))
        else:
            used += 1
            out.append(Leaf(physical_name(field, mode), child_path, field_type))
    return out, used


def named_fields(fields: list[dict], paths: list[tuple[str, ...]], mode: str, path: str) -> list[Leaf | Struct]:
    """`filterSchema`: fields named by `paths` in schema order; names that match nothing are ignored, as in Spark."""
    wanted: dict[str, list[tuple[str, ...]]] = {}
    for p in paths:
        wanted.setdefault(p[0], []).append(p[1:])
    out: list[Leaf | Struct] = []
    for field in fields:
        rests = wanted.get(field["name"].lower())
        if rests is None:
            continue
        child_path = f"{path}.{field['name']}" if path else field["name"]
        field_type = field["type"]
        if all(not rest for rest in rests):
            out.append(field_node(field, mode, path))
        elif isinstance(field_type, dict) and field_type["type"] == "struct":
            # Spark drops a whole-struct entry when a deeper path names the same struct: only the deeper paths count
            deeper = [rest for rest in rests if rest]
            out.append(Struct(physical_name(field, mode), named_fields(field_type["fields"], deeper, mode, child_path)))
        # a path through a non-struct field selects nothing
    return out
