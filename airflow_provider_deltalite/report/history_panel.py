"""The history panel of the health page: the table's files and bytes over time, from the operations history, with
each maintenance run marked where it ended.

The rows are the history table's rows of one table (`maintenance.history.read_history`, as dicts), in any order.
Each row gives two points, the health before the run at its start and after it at its end (rows without health
figures, such as runs deferred by the budget, give none); each committed run is a marker on the files line, its
operation in the hover text.
"""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

FILES_COLOUR = "#4c78a8"
BYTES_COLOUR = "#9d755d"
RUN_COLOUR = "#72b7b2"


def _label(text: str) -> str:
    return html.escape(text, quote=False)


def history_points(rows: Sequence[Mapping[str, Any]]) -> list[tuple[datetime, int, int]]:
    """(time, files, bytes) before and after each run, in time order."""
    points = []
    for row in rows:
        if row.get("files_before") is not None:
            points.append((row["start_time"], int(row["files_before"]), int(row.get("bytes_before") or 0)))
        if row.get("files_after") is not None:
            points.append((row["end_time"], int(row["files_after"]), int(row.get("bytes_after") or 0)))
    return sorted(points, key=lambda p: p[0])


def history_figure(go: Any, rows: Sequence[Mapping[str, Any]], layout: dict[str, Any]) -> Any:
    """The panel's figure (``layout``: the page's common layout, which this adds a second y axis to)."""
    points = history_points(rows)
    times = [p[0] for p in points]
    files = go.Scatter(
        x=times,
        y=[p[1] for p in points],
        name="files",
        mode="lines",
        line={"color": FILES_COLOUR, "width": 3},
        hovertemplate="%{x}: %{y:,} files<extra></extra>",
    )
    nbytes = go.Scatter(
        x=times,
        y=[p[2] for p in points],
        name="bytes",
        mode="lines",
        yaxis="y2",
        line={"color": BYTES_COLOUR, "width": 2, "dash": "dot"},
        hovertemplate="%{x}: %{y:,} bytes<extra></extra>",
    )
    runs = [r for r in rows if r.get("outcome") == "committed" and r.get("files_after") is not None]
    runs.sort(key=lambda r: r["end_time"])
    marks = go.Scatter(
        x=[r["end_time"] for r in runs],
        y=[r["files_after"] for r in runs],
        name="maintenance runs",
        mode="markers",
        marker={"color": RUN_COLOUR, "size": 14, "symbol": "diamond"},
        customdata=[_label(str(r["operation"])) for r in runs],
        hovertemplate="%{x}: %{customdata}<extra></extra>",
    )
    layout["yaxis2"] = {"title": {"text": "bytes"}, "overlaying": "y", "side": "right", "showgrid": False}
    return go.Figure(data=[files, nbytes, marks], layout=layout)
