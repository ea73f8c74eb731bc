"""What the history says about how fast maintenance runs: bytes rewritten per second, by table (and executor)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from airflow_provider_deltalite.engine import arrow_compute as pc
from airflow_provider_deltalite.maintenance.history.table import read_history

REWRITES = ("purge", "optimize", "cluster", "zorder")


def rewrite_speeds(
    history_uri: str, storage_options: Mapping[str, Any] | None = None, *, executor: str | None = None
) -> dict[str, float]:
    """Bytes read per second of wall time over the committed rewrites each table's history holds (only ``executor``'s
    rows when given): the total bytes over the total seconds, so long runs weigh more than short ones. Tables without
    such a row (or whose rows took no measurable time) are left out.

    Example:
        >>> rewrite_speeds("s3://lake/_history")  # doctest: +SKIP
        {'s3://lake/events': 73400320.0}
    """
    rows = read_history(history_uri, storage_options)
    if rows.num_rows == 0:
        return {}
    mask = pc.and_(pc.is_in(rows["operation"], pa_strings(REWRITES)), pc.equal(rows["outcome"], "committed"))
    if executor is not None:
        mask = pc.and_(mask, pc.equal(rows["executor"], executor))
    picked = pc.filter(rows, mask)
    totals: dict[str, list[float]] = {}
    for uri, nbytes, start, end in zip(
        picked["table_uri"].to_pylist(),
        picked["bytes_read"].to_pylist(),
        picked["start_time"].to_pylist(),
        picked["end_time"].to_pylist(),
        strict=True,
    ):
        seconds = (end - start).total_seconds()
        if nbytes and seconds > 0:
            total = totals.setdefault(uri, [0.0, 0.0])
            total[0] += nbytes
            total[1] += seconds
    return {uri: b / s for uri, (b, s) in totals.items() if s > 0}


def pa_strings(values: tuple[str, ...]) -> Any:
    import pyarrow as pa

    return pa.array(values, pa.string())


def last_runs(history_uri: str, storage_options: Mapping[str, Any] | None = None) -> dict[str, int]:
    """The end of each table's newest committed operation in the history, epoch ms, by table URI."""
    rows = read_history(history_uri, storage_options)
    committed = pc.filter(rows, pc.equal(rows["outcome"], "committed"))
    out: dict[str, int] = {}
    for uri, end in zip(committed["table_uri"].to_pylist(), committed["end_time"].to_pylist(), strict=True):
        ms = int(end.timestamp() * 1000)
        out[uri] = max(out.get(uri, ms), ms)
    return out
