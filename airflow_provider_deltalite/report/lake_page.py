"""The lake page: one self-contained HTML file with every table of a lake, worst first.

Two Plotly charts (the small-file share and the reclaimable bytes of each table) over a table of the figures and
each table's last maintenance (from its log, or from the operations history when that is newer). Built like the
health page (`report.health_page`): plotly.js inlined once, nothing loaded from anywhere, every table-derived string
escaped and every URI redacted.
"""

from __future__ import annotations

import html
import os
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from airflow_provider_deltalite.engine.errors import InvalidArgument, MissingDependency, redact_uri
from airflow_provider_deltalite.maintenance.health.metrics import TableHealth
from airflow_provider_deltalite.maintenance.wording import human_size, percent
from airflow_provider_deltalite.report.health_page import (
    MISSING_PLOTLY,
    PAGE_CSP,
    PAGE_STYLE,
    PLOT_CONFIG,
    chart_layout,
    plot_label,
)
from airflow_provider_deltalite.report.health_text import utc_time
from airflow_provider_deltalite.version import __version__

SHARE_COLOUR = "#f58518"
RECLAIM_COLOUR = "#e45756"
SHARE_TITLE = "Small-file share by table"
RECLAIM_TITLE = "Reclaimable bytes by table"
COLUMNS = ("table", "files", "small-file share", "reclaimable", "last maintenance")
MAX_TABLES = 40  # bars per chart (the table below lists every one)


@dataclass(frozen=True)
class LakeEntry:
    """One table of the lake page: its health (None with ``error`` when it could not be measured) and its last
    maintenance, epoch ms (None: none known)."""

    table_uri: str
    health: TableHealth | None
    last_maintenance: int | None
    error: str | None = None


def lake_entries(tables: Sequence[Any], history_last: Mapping[str, int] | None = None) -> list[LakeEntry]:
    """Entries from `measure_lake`'s tables (``history_last``: the history's newest committed run per table URI),
    the highest small-file share first, then the most reclaimable bytes, then the URI; unmeasured tables last."""
    out = []
    for t in tables:
        health = t.health
        last = None
        if health is not None:
            runs = health.last_runs
            last = max((x for x in (runs.optimize_timestamp, runs.vacuum_timestamp) if x is not None), default=None)
        seen = (history_last or {}).get(t.table_uri)
        if seen is not None and (last is None or seen > last):
            last = seen
        out.append(LakeEntry(t.table_uri, health, last, t.error))

    def key(e: LakeEntry) -> tuple[Any, ...]:
        if e.health is None:
            return (1, 0.0, 0, e.table_uri)
        return (0, -e.health.small_file_share, -e.health.tombstones.reclaimable_bytes, e.table_uri)

    return sorted(out, key=key)


def write_lake_page(entries: Sequence[LakeEntry], path: str, title: str) -> None:
    """Write the lake page to the local file ``path`` (replaced whole).

    Raises:
        MissingDependency: plotly is not installed (the ``html`` extra).
        InvalidArgument: ``path`` cannot be written.
    """
    page = lake_page_html(entries, title)
    target = os.path.abspath(path)
    try:
        fd, temporary = tempfile.mkstemp(prefix=".lake-", suffix=".html", dir=os.path.dirname(target))
    except OSError as exc:
        raise InvalidArgument(f"cannot write the lake page to {path}: {exc.strerror}") from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(page)
        os.chmod(temporary, 0o644)
        os.replace(temporary, target)
    except OSError as exc:
        os.unlink(temporary)
        raise InvalidArgument(f"cannot write the lake page to {path}: {exc.strerror}") from None


def lake_page_html(entries: Sequence[LakeEntry], title: str) -> str:
    """The lake page as one HTML document that loads nothing (``entries`` in the order `lake_entries` gives)."""
    try:
        import plotly.graph_objects as go
        import plotly.io as pio
    except ImportError:
        raise MissingDependency(MISSING_PLOTLY, package="plotly", extra="html") from None
    measured = [e for e in entries if e.health is not None][:MAX_TABLES]
    shown = list(reversed(measured))  # plotly draws the first category at the bottom
    names = [plot_label(redact_uri(e.table_uri) or "") for e in shown]
    share = go.Bar(
        y=names,
        x=[e.health.small_file_share * 100 for e in shown if e.health is not None],
        orientation="h",
        marker={"color": SHARE_COLOUR},
        hovertemplate="%{y}: %{x:.1f}% of files are small<extra></extra>",
    )
    reclaim = go.Bar(
        y=names,
        x=[e.health.tombstones.reclaimable_bytes for e in shown if e.health is not None],
        orientation="h",
        marker={"color": RECLAIM_COLOUR},
        hovertemplate="%{y}: %{x:,} bytes reclaimable<extra></extra>",
    )
    height = max(360, 110 + 26 * len(shown))
    figures = [
        (
            "share",
            go.Figure(data=[share], layout=chart_layout("Small-file share by table", "% of files", "", height=height)),
        ),
        (
            "reclaimable",
            go.Figure(data=[reclaim], layout=chart_layout("Reclaimable bytes by table", "bytes", "", height=height)),
        ),
    ]
    sections, inlined = [], False
    for name, figure in figures:
        div = pio.to_html(
            figure,
            config=PLOT_CONFIG,
            include_plotlyjs=not inlined,
            include_mathjax=False,
            full_html=False,
            div_id=f"{name}-chart",
            default_height=f"{height}px",
        )
        inlined = True
        sections.append(f'<section class="chart" id="{name}">{div}</section>')
    rows = "\n".join(_row(e) for e in entries)
    heading = html.escape(title)
    return f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="{PAGE_CSP}">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{heading}</title>
<style>{PAGE_STYLE}
table.lake {{ border-collapse: collapse; margin: 16px 0; font-size: 14px; width: 100%; }}
table.lake th, table.lake td {{ border-bottom: 1px solid #e4e7eb; padding: 4px 8px; text-align: right; }}
table.lake th:first-child, table.lake td:first-child {{ text-align: left; overflow-wrap: anywhere; }}
</style>
</head>
<body>
<header>
<h1>{heading}</h1>
<p class="meta">{len(entries)} tables, worst first, from their logs and file statistics (no data file read).</p>
</header>
<main class="charts">
{chr(10).join(sections)}
</main>
<table class="lake" id="tables">
<thead><tr>{"".join(f"<th>{h}</th>" for h in COLUMNS)}</tr></thead>
<tbody>
{rows}
</tbody>
</table>
<footer>deltalite {html.escape(__version__)}</footer>
</body>
</html>
"""


def _row(e: LakeEntry) -> str:
    uri = html.escape(redact_uri(e.table_uri) or "")
    if e.health is None:
        return f'<tr><td>{uri}</td><td colspan="4">{html.escape(e.error or "not measured")}</td></tr>'
    h = e.health
    last = utc_time(e.last_maintenance) if e.last_maintenance is not None else "never"
    cells = [f"{h.files:,}", percent(h.small_file_share), human_size(h.tombstones.reclaimable_bytes), last]
    return f"<tr><td>{uri}</td>" + "".join(f"<td>{html.escape(c)}</td>" for c in cells) + "</tr>"
