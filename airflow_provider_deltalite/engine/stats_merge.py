"""Delta statistics of a file made of other files' rows, from their statistics, without reading a row.

A stitched file (`engine/rewrite_stitch.py`) holds exactly the rows of its inputs, so its statistics follow from
theirs: ``numRecords`` and each ``nullCount`` are sums, each ``minValues`` entry the smallest of the inputs' and each
``maxValues`` entry the largest. That is exact when every input's statistics are exact, which is what the protocol
says of a file without a deletion vector (its bounds are tight). Inputs with a deletion vector are never merged here:
their bounds may be wide (``tightBounds: false``) and their rows are rewritten anyway.

Truncated string bounds stay valid bounds: a stored min is a prefix of the column's smallest value, so it is at most
that value, and the smallest of such lower bounds is at most the smallest value of all inputs; a stored max (cut with
a tie-breaker) is at least the column's largest value, and the largest of such upper bounds is at least the largest
value of all. The merged min is cut again to the table's prefix length (a prefix of a lower bound is a lower bound,
and cutting is idempotent); the merged max is kept as the input wrote it: cutting a max that already ends in a
tie-breaker again would only loosen it. An input whose max has no safe cut (Spark drops it) leaves the merged max
out, which no reader can misuse.

`merge_stats` returns None when an input lacks a statistic the table's configuration asks for (another writer, or
the configuration changed since): then the caller computes the statistics from the rows instead.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Mapping, Sequence
from decimal import Decimal
from typing import Any

from airflow_provider_deltalite.engine.stats_collect import StatsCollector
from airflow_provider_deltalite.engine.stats_columns import Leaf, Struct
from airflow_provider_deltalite.engine.stats_json import MAX_VALUES, MIN_VALUES, NULL_COUNT, NUM_RECORDS
from airflow_provider_deltalite.engine.stats_values import truncate_min

__all__ = ["load_stats", "merge_stats"]

TIGHT_BOUNDS = "tightBounds"
_MISSING = object()


def load_stats(text: str | None) -> dict[str, Any] | None:
    """An add action's ``stats`` JSON with numbers kept exact (decimals), or None when absent or unreadable."""
    if not text:
        return None
    try:
        value = json.loads(text, parse_float=Decimal)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def _key(kind: str, value: Any) -> Any:
    """A sort key of a bound of ``kind``, or _MISSING when the value is not a bound of that kind."""
    if kind == "integer":
        return value if isinstance(value, int) and not isinstance(value, bool) else _MISSING
    if kind in ("float", "double"):
        if isinstance(value, str):
            special = {"NaN": (2, 0), "Infinity": (1, 0), "-Infinity": (-1, 0)}.get(value)
            return _MISSING if special is None else special  # Spark orders NaN above every number
        if isinstance(value, int | float | Decimal) and not isinstance(value, bool):
            return (0, value)
        return _MISSING
    if kind == "decimal":
        if isinstance(value, int | Decimal) and not isinstance(value, bool):
            return Decimal(value)
        return _MISSING
    if kind == "string":
        # Python orders str by code point, which is the order of their UTF-8 bytes: Delta's string order
        return value if isinstance(value, str) else _MISSING
    if not isinstance(value, str):
        return _MISSING
    try:
        if kind == "date":
            return dt.date.fromisoformat(value)
        moment = dt.datetime.fromisoformat(value)
    except ValueError:
        return _MISSING
    if kind == "timestamp" and moment.tzinfo is None:
        moment = moment.replace(tzinfo=dt.UTC)
    if kind == "timestamp_ntz" and moment.tzinfo is not None:
        return _MISSING
    return moment


def _get(section: Any, name: str) -> Any:
    return section.get(name, _MISSING) if isinstance(section, Mapping) else _MISSING


class _Unmergeable(Exception):
    pass


def _merge_leaf_bounds(leaf: Leaf, values: list[Any], counts: list[Any], records: list[int], *, is_max: bool) -> Any:
    """The merged bound of one leaf from every input's bound (``_MISSING`` where an input has none)."""
    assert leaf.kind is not None
    best: Any = _MISSING
    best_key: Any = None
    for value, nulls, rows in zip(values, counts, records, strict=True):
        if value is _MISSING or value is None:
            if nulls == rows:
                continue  # every value null: no bound, rightly
            if leaf.kind == "string" and is_max:
                return _MISSING  # Spark drops a string max with no safe cut; so must the merged one
            raise _Unmergeable
        key = _key(leaf.kind, value)
        if key is _MISSING:
            raise _Unmergeable
        if best is _MISSING or (key > best_key if is_max else key < best_key):
            best, best_key = value, key
    return best


def _merge_nodes(
    nodes: Sequence[Leaf | Struct],
    inputs: list[dict[str, Any]],
    prefix: int,
    paths: tuple[Any, Any, Any],
) -> tuple[dict, dict, dict]:
    mins_in, maxs_in, counts_in = paths
    mins: dict = {}
    maxs: dict = {}
    counts: dict = {}
    records = [int(s[NUM_RECORDS]) for s in inputs]
    for node in nodes:
        sub_min = [_get(m, node.name) for m in mins_in]
        sub_max = [_get(m, node.name) for m in maxs_in]
        sub_count = [_get(c, node.name) for c in counts_in]
        if isinstance(node, Struct):
            child = _merge_nodes(node.children, inputs, prefix, (sub_min, sub_max, sub_count))
            mins[node.name], maxs[node.name], counts[node.name] = child
            continue
        if any(isinstance(c, bool) or not isinstance(c, int) for c in sub_count):
            raise _Unmergeable  # a null count is needed for every leaf: it cannot be guessed
        counts[node.name] = sum(sub_count)
        if node.kind is None:
            continue
        low = _merge_leaf_bounds(node, sub_min, sub_count, records, is_max=False)
        high = _merge_leaf_bounds(node, sub_max, sub_count, records, is_max=True)
        if node.kind == "string" and isinstance(low, str):
            low = truncate_min(low, prefix)
        if low is not _MISSING:
            mins[node.name] = low
        if high is not _MISSING:
            maxs[node.name] = high
    return mins, maxs, counts


def _prune(section: dict, nodes: Sequence[Leaf | Struct], keep_struct: Any) -> dict:
    """Drop structs that the collector leaves out (no leaf of them can have the statistic), as `StatsCollector`."""
    out: dict = {}
    for node in nodes:
        if node.name not in section:
            continue
        if isinstance(node, Struct):
            if keep_struct(node):
                out[node.name] = _prune(section[node.name], node.children, keep_struct)
        else:
            out[node.name] = section[node.name]
    return out


def merge_stats(collector: StatsCollector, inputs: Sequence[Mapping[str, Any]]) -> dict[str, Any] | None:
    """The statistics of a file holding exactly the rows of files whose statistics are ``inputs``, for the columns
    ``collector`` (built for the table) selects; None when some input lacks what that needs.

    Each input is a parsed ``stats`` object (`load_stats`) of a file without a deletion vector, or
    `StatsCollector.to_dict()` of rows the caller decoded itself.
    """
    if not inputs:
        return None
    for s in inputs:
        records = s.get(NUM_RECORDS)
        if isinstance(records, bool) or not isinstance(records, int):
            return None
        if s.get(TIGHT_BOUNDS) is False:
            return None
    nodes = collector.nodes
    total = sum(int(s[NUM_RECORDS]) for s in inputs)
    out: dict[str, Any] = {NUM_RECORDS: total}
    # an input with no rows contributes nothing, whatever its statistics hold
    live = [dict(s) for s in inputs if int(s[NUM_RECORDS]) > 0]
    if not live:
        return None  # no rows: the caller writes no file
    try:
        mins, maxs, counts = _merge_nodes(
            nodes,
            live,
            collector.prefix,
            (
                [s.get(MIN_VALUES, {}) for s in live],
                [s.get(MAX_VALUES, {}) for s in live],
                [s.get(NULL_COUNT, _MISSING) for s in live],
            ),
        )
    except _Unmergeable:
        return None
    shape = collector.to_dict()  # which sections and structs the collector writes, for this schema and config
    if MIN_VALUES in shape:
        out[MIN_VALUES] = _prune(mins, nodes, collector.struct_has_minmax)
        out[MAX_VALUES] = _prune(maxs, nodes, collector.struct_has_minmax)
    if NULL_COUNT in shape:
        out[NULL_COUNT] = _prune(counts, nodes, collector.struct_has_leaf)
    return out
