"""The health page: one self-contained HTML file that shows a `TableHealth` to a person.

Four Plotly charts (file sizes, small files per partition, clustering overlap per column, what VACUUM would reclaim
by day) under a few plain sentences (`report.health_text`). plotly.js is inlined once, so the page loads nothing:
no CDN, no MathJax, no web font; its Content-Security-Policy forbids any load from elsewhere as a second guard.

Every string that comes from the table (the URI, partition values, column names) is escaped: `html.escape` in the
page, and for the charts `html.escape(..., quote=False)`, since plotly.js reads labels as a small HTML dialect
(``<b>``, ``<a href>``) and turns back only ``&amp; &lt; &gt;`` and numeric entities. The URI goes through
`redact_uri` first, so no credential reaches the page.

Plotly is the ``html`` extra; without it `health_page_html` raises `MissingDependency`.
"""

from __future__ import annotations

import html
import os
import tempfile
from collections.abc import Mapping, Sequence
from typing import Any

from airflow_provider_deltalite.engine.errors import InvalidArgument, MissingDependency, redact_uri
from airflow_provider_deltalite.maintenance.health.metrics import PartitionHealth, SizeBucket, TableHealth
from airflow_provider_deltalite.report.health_text import (
    clustering_sentence,
    human_size,
    live_partitions,
    partition_label,
    size_unit,
    summary_sentences,
    utc_time,
)
from airflow_provider_deltalite.report.history_panel import history_figure, history_points
from airflow_provider_deltalite.version import __version__

MISSING_PLOTLY = "the health page needs plotly: pip install 'airflow-provider-deltalite[html]'"
# The bar colours (the tests find them in the screenshot, each inside its own chart).
SIZES_COLOUR = "#4c78a8"
ALL_FILES_COLOUR = "#c9d3df"
SMALL_FILES_COLOUR = "#f58518"
POINT_QUERY_COLOUR = "#54a24b"
DEPTH_COLOUR = "#b279a2"
RECLAIM_COLOUR = "#e45756"
HISTORY_TITLE = "Files and bytes over time, maintenance runs marked"
MAX_PARTITIONS = 30
MAX_LABEL = 48  # longer partition labels are cut on the axis (the hover shows them whole)
PLOT_CONFIG = {"displayModeBar": False, "displaylogo": False}
# a legend under the chart, whatever its height, clear of the title and of the axis title
_LEGEND_BELOW: dict[str, Any] = {
    "showlegend": True,
    "legend": {"orientation": "h", "yref": "container", "y": 0, "yanchor": "bottom", "x": 0.5, "xanchor": "center"},
    "margin": {"l": 60, "r": 20, "t": 50, "b": 90},
}
PAGE_CSP = (
    "default-src 'none'; script-src 'unsafe-inline' 'unsafe-eval'; style-src 'unsafe-inline'; img-src data:; "
    "font-src data:"
)
PAGE_STYLE = """
body { font-family: "DejaVu Sans", "Liberation Sans", Arial, sans-serif; color: #1f2933; margin: 24px auto;
       max-width: 1280px; padding: 0 24px; background: #ffffff; }
h1 { font-size: 22px; margin: 0 0 4px; overflow-wrap: anywhere; }
.meta { color: #52606d; margin: 0 0 16px; }
.summary { font-size: 15px; line-height: 1.5; padding-left: 20px; }
.summary li { margin-bottom: 4px; }
.charts { display: grid; grid-template-columns: repeat(2, minmax(0, 1fr)); gap: 16px; }
@media (max-width: 1100px) { .charts { grid-template-columns: minmax(0, 1fr); } }
.chart { border: 1px solid #e4e7eb; border-radius: 6px; padding: 8px; min-height: 120px; }
.chart h2 { font-size: 17px; font-weight: normal; color: #2a3f5f; margin: 8px 12px; }
.chart p.none { font-size: 15px; padding: 0 12px; }
footer { color: #7b8794; font-size: 12px; margin-top: 16px; }
"""


def write_health_page(health: TableHealth, path: str, history: Sequence[Mapping[str, Any]] | None = None) -> None:
    """Write the health page of ``health`` to the local file ``path`` (replaced whole, never left half written);
    with ``history`` (the table's rows of the operations history), a panel of its files and bytes over time.

    Raises:
        MissingDependency: plotly is not installed (the ``html`` extra).
        InvalidArgument: ``path`` cannot be written (no such directory, no permission).
    """
    page = health_page_html(health, history)
    target = os.path.abspath(path)
    try:
        fd, temporary = tempfile.mkstemp(prefix=".health-", suffix=".html", dir=os.path.dirname(target))
    except OSError as exc:
        raise InvalidArgument(f"cannot write the health page to {path}: {exc.strerror}", health.table_uri) from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(page)
        os.chmod(temporary, 0o644)
        os.replace(temporary, target)
    except OSError as exc:
        os.unlink(temporary)
        raise InvalidArgument(f"cannot write the health page to {path}: {exc.strerror}", health.table_uri) from None


def health_page_html(health: TableHealth, history: Sequence[Mapping[str, Any]] | None = None) -> str:
    """The health page of ``health`` as one HTML document that loads nothing from anywhere; with ``history`` (the
    table's rows of the operations history, None: no panel) a fifth panel draws them (`report.history_panel`).

    Raises:
        MissingDependency: plotly is not installed (the ``html`` extra).
    """
    try:
        import plotly.graph_objects as go
        import plotly.io as pio
    except ImportError:
        raise MissingDependency(MISSING_PLOTLY, health.table_uri, package="plotly", extra="html") from None
    figures: list[tuple[str, Any]] = [("sizes", _sizes_figure(go, health))]
    figures.append(("small-files", _small_files_figure(go, health)))
    figures.append(("clustering", _clustering_figure(go, health) if health.clustering else None))
    figures.append(("reclaim", _reclaim_figure(go, health) if health.tombstones.files else None))
    if history is not None:
        layout = chart_layout(HISTORY_TITLE, "time (UTC)", "files", **_LEGEND_BELOW)
        figures.append(("history", history_figure(go, history, layout) if history_points(history) else None))
    sections, inlined = [], False
    for name, figure in figures:
        if figure is None:
            title, reason = {
                "clustering": ("Clustering overlap per column", clustering_sentence(health)),
                "reclaim": ("What VACUUM would reclaim, by day", "Nothing to reclaim: the log holds no tombstone."),
                "history": (HISTORY_TITLE, "The operations history holds no run of this table."),
            }[name]
            body = f'<h2>{title}</h2><p class="none">{html.escape(reason)}</p>'
            sections.append(f'<section class="chart" id="{name}">{body}</section>')
            continue
        div = pio.to_html(
            figure,
            config=PLOT_CONFIG,
            include_plotlyjs=not inlined,
            include_mathjax=False,
            full_html=False,
            div_id=f"{name}-chart",
            default_height="360px",
        )
        inlined = True
        sections.append(f'<section class="chart" id="{name}">{div}</section>')
    uri = html.escape(redact_uri(health.table_uri) or "")
    sentences = "\n".join(f"<li>{html.escape(sentence)}</li>" for sentence in summary_sentences(health))
    title = f"Health of {uri} at version {health.version}"
    return f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="{PAGE_CSP}">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{title}</title>
<style>{PAGE_STYLE}</style>
</head>
<body>
<header>
<h1>{title}</h1>
<p class="meta">Computed {utc_time(health.computed_at)} from the log and the file statistics (no data file read).</p>
</header>
<ul class="summary">
{sentences}
</ul>
<main class="charts">
{chr(10).join(sections)}
</main>
<footer>deltalite {html.escape(__version__)}</footer>
</body>
</html>
"""


def plot_label(text: str) -> str:
    """A table-derived string as plotly.js displays it literally (see the module docstring)."""
    return html.escape(text, quote=False)


def chart_layout(title: str, x_title: str, y_title: str, **more: Any) -> dict[str, Any]:
    """The plotly layout every chart of the health and lake pages shares, with ``more`` on top."""
    return {
        "title": {"text": title, "x": 0.02, "font": {"size": 17}},
        "template": "plotly_white",
        "font": {"family": "DejaVu Sans, Liberation Sans, Arial, sans-serif", "size": 12},
        "height": 360,
        "margin": {"l": 60, "r": 20, "t": 50, "b": 60},
        "xaxis": {"title": {"text": x_title}, "automargin": True},
        "yaxis": {"title": {"text": y_title}, "automargin": True},
        "showlegend": False,
        **more,
    }


def _count_ticks(largest: int) -> dict[str, Any]:
    """An axis of file counts: whole numbers only (plotly would tick 0.5 steps up to 2)."""
    return {"tickformat": ",d", "dtick": 1} if largest <= 5 else {"tickformat": ",d"}


def _bucket_label(bucket: SizeBucket) -> str:
    if bucket.upper is None:
        return f"≥ {human_size(bucket.lower)}"
    if bucket.lower == 0:
        return f"< {human_size(bucket.upper)}"
    return f"{human_size(bucket.lower)}–{human_size(bucket.upper)}"


def _sizes_figure(go: Any, health: TableHealth) -> Any:
    buckets = health.size_histogram
    bar = go.Bar(
        x=[_bucket_label(b) for b in buckets],
        y=[b.files for b in buckets],
        text=[f"{b.files:,}" if b.files else "" for b in buckets],
        textposition="outside",
        cliponaxis=False,
        customdata=[human_size(b.bytes) for b in buckets],
        hovertemplate="%{x}: %{y:,} files, %{customdata}<extra></extra>",
        marker={"color": SIZES_COLOUR},
    )
    layout = chart_layout("Files by size", "file size (log-scale buckets)", "files")
    layout["yaxis"].update(_count_ticks(max(b.files for b in buckets)))
    return go.Figure(data=[bar], layout=layout)


def _short(label: str) -> str:
    return label if len(label) <= MAX_LABEL else label[: MAX_LABEL - 1] + "…"


def _small_files_figure(go: Any, health: TableHealth) -> Any:
    live = live_partitions(health)
    shown = health.worst_partitions(MAX_PARTITIONS)
    if not health.partition_columns and not shown:  # an empty unpartitioned table still gets its one bar
        shown = [PartitionHealth({}, 0, 0, 0, 0, 0, 0, 0, 0, 0, ())]
    shown.reverse()  # plotly draws the first category at the bottom
    labels = [partition_label(p) for p in shown]
    # Categories must be unique: two labels cut to the same prefix get a zero-width space per repeat.
    seen: dict[str, int] = {}
    axis = []
    for label in labels:
        short = plot_label(_short(label))
        seen[short] = seen.get(short, -1) + 1
        axis.append(short + "\u200b" * seen[short])
    full = [plot_label(label) for label in labels]
    common = {"y": axis, "orientation": "h", "customdata": full}
    files = go.Bar(
        x=[p.files for p in shown],
        name="files",
        marker={"color": ALL_FILES_COLOUR},
        hovertemplate="%{customdata}: %{x:,} files<extra></extra>",
        **common,
    )
    small = go.Bar(
        x=[p.small_files for p in shown],
        name="small files",
        marker={"color": SMALL_FILES_COLOUR},
        hovertemplate="%{customdata}: %{x:,} small files<extra></extra>",
        **common,
    )
    title = "Small files per partition"
    if len(live) > MAX_PARTITIONS:
        title += f" (the {MAX_PARTITIONS} of {len(live):,} with most)"
    height = max(360, 110 + 22 * len(shown))
    layout = chart_layout(
        title,
        "files",
        "",
        barmode="overlay",
        height=height,
        bargap=0.25,
        **_LEGEND_BELOW,
    )
    layout["xaxis"].update(_count_ticks(max(p.files for p in shown)))
    return go.Figure(data=[files, small], layout=layout)


def _clustering_figure(go: Any, health: TableHealth) -> Any:
    columns = [plot_label(c.column) for c in health.clustering]
    point = go.Bar(
        x=columns,
        y=[c.point_query_files for c in health.clustering],
        name="files a point query reads",
        marker={"color": POINT_QUERY_COLOUR},
        hovertemplate="%{x}: a point query reads %{y:.2f} files<extra></extra>",
    )
    depth = go.Bar(
        x=columns,
        y=[c.average_depth for c in health.clustering],
        name="average overlap depth",
        marker={"color": DEPTH_COLOUR},
        hovertemplate="%{x}: average overlap depth %{y:.2f}<extra></extra>",
    )
    layout = chart_layout(
        "Clustering overlap per column",
        "column",
        "files (1 is perfect)",
        barmode="group",
        **_LEGEND_BELOW,
    )
    return go.Figure(data=[point, depth], layout=layout)


def _reclaim_figure(go: Any, health: TableHealth) -> Any:
    days = health.tombstones.reclaimable_by_day
    unit, scale = size_unit(max((size for _, _, size in days), default=0))
    bar = go.Bar(
        x=[day for day, _, _ in days],
        y=[size / scale for _, _, size in days],
        customdata=[[f"{files:,}", human_size(size)] for _, files, size in days],
        hovertemplate="%{x}: %{customdata[1]} in %{customdata[0]} files<extra></extra>",
        marker={"color": RECLAIM_COLOUR},
    )
    layout = chart_layout("What VACUUM would reclaim, by day", "day it becomes reclaimable (UTC)", unit)
    layout["xaxis"]["type"] = "category"
    return go.Figure(data=[bar], layout=layout)
