"""The health page, rendered in headless Chromium (Debian's `chromium`, driven by playwright): it loads nothing but
itself, its four chart titles and its sentences read as expected, and each chart shows its bars in its own colour
(read from the screenshot's pixels, decoded here with zlib).

The TableHealth objects are built by hand, so every number on the page is known before it is rendered.
"""

from __future__ import annotations

import pickle
import re
import struct
import subprocess
import sys
import zlib
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Browser, Page

from airflow_provider_deltalite.engine.errors import InvalidArgument
from airflow_provider_deltalite.maintenance.health.metrics import (
    GIB,
    KIB,
    MIB,
    ColumnClustering,
    LastRuns,
    LogHealth,
    PartitionHealth,
    SizeBucket,
    TableHealth,
    Tombstones,
)
from airflow_provider_deltalite.report.health_page import health_page_html, write_health_page

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
NOW = int(datetime(2026, 11, 25, 4, 30, tzinfo=UTC).timestamp() * 1000)
HOUR = 3_600_000
EDGES = (0, 64 * KIB, 256 * KIB, MIB, 4 * MIB, 16 * MIB, 64 * MIB, 256 * MIB, GIB, 4 * GIB)
BUCKET_LABELS = [
    "< 64 KiB",
    "64 KiB–256 KiB",
    "256 KiB–1 MiB",
    "1 MiB–4 MiB",
    "4 MiB–16 MiB",
    "16 MiB–64 MiB",
    "64 MiB–256 MiB",
    "256 MiB–1 GiB",
    "1 GiB–4 GiB",
    "≥ 4 GiB",
]
# the bar colours, as RGB
BLUE, ORANGE, GREEN, PURPLE, RED = (76, 120, 168), (245, 133, 24), (84, 162, 75), (178, 121, 162), (228, 87, 86)
NASTY = '<img src=x onerror="window.pwned=1">'


def partition(values: dict[str, str | None], files: int, small: int) -> PartitionHealth:
    return PartitionHealth(values, files, files * 512 * MIB, 1000 * files, small, small * MIB, 0, 0, 0, 0, ())


def histogram(files: list[int]) -> tuple[SizeBucket, ...]:
    uppers = [*EDGES[1:], None]
    return tuple(SizeBucket(lower, upper, n, n * lower) for lower, upper, n in zip(EDGES, uppers, files))


def table_health(**fields: Any) -> TableHealth:
    """A table that needs everything: 35 partitions full of small files (one named to inject HTML; a 36th holds
    no live file), deletion
    vectors, liquid clustering, tombstones that free over five days, a lagging checkpoint. ``fields`` override."""
    # partition pNN holds NN small files; p06 is the null partition and p35 the one whose value is HTML
    values: list[str | None] = [f"p{d:02d}" for d in range(1, 36)]
    values[5], values[34] = None, NASTY
    base: dict[str, Any] = {
        "table_uri": "s3://AKIAEXAMPLE:hunter2@bucket/events?sig=abc",
        "version": 42,
        "computed_at": NOW,
        "partition_columns": ("date",),
        "min_file_size": 128 * MIB,
        "files": 1400,
        "bytes": 700 * GIB,
        "rows": 9_876_543,
        "files_without_stats": 0,
        "size_histogram": histogram([100, 200, 230, 100, 0, 0, 1, 0, 769, 0]),
        "small_files": 630,
        "small_bytes": 630 * MIB,
        "small_file_share": 630 / 1400,
        "deleted_rows": 98_765,
        "deleted_row_share": 98_765 / 9_876_543,
        "files_with_deletion_vectors": 12,
        "clustering_columns": ("user_id", "ts"),
        "clustering_source": "liquid",
        "clustering": (
            ColumnClustering("user_id", 1400, 0, 3.25, 2.5, 6),
            ColumnClustering("ts", 1400, 0, 1.0, 1.0, 1),
        ),
        "tombstones": Tombstones(
            retention_hours=168,
            files=20,
            bytes=500 * MIB,
            files_without_size=2,
            reclaimable_files=12,
            reclaimable_bytes=300 * MIB,
            next_reclaimable_at=NOW + 15 * HOUR,
            all_reclaimable_at=NOW + 98 * HOUR + HOUR // 2,
            reclaimable_by_day=(
                ("2026-11-25", 15, 400 * MIB),
                ("2026-11-26", 2, 60 * MIB),
                ("2026-11-29", 3, 40 * MIB),
            ),
        ),
        "log": LogHealth(42, 40, 2, 10, 50, 3 * MIB + 512 * KIB, 720, 0, 43, 12),
        "last_runs": LastRuns(30, NOW - 12 * HOUR - HOUR // 2, 12.5, 20, NOW - 50 * HOUR, 50.0, ()),
        "partitions": (
            partition({"date": "p00"}, 0, 0),  # only tombstones are left of it: not a partition of the live table
            *(partition({"date": value}, 40, d) for d, value in enumerate(values, start=1)),
        ),
    }
    return TableHealth(**{**base, **fields})


# four files of 1-4 GiB: no small file, no deleted row (the two tidy tables below)
FOUR_LARGE_FILES: dict[str, Any] = {
    "size_histogram": histogram([0, 0, 0, 0, 0, 0, 0, 0, 4, 0]),
    "small_files": 0,
    "small_bytes": 0,
    "small_file_share": 0.0,
    "deleted_rows": 0,
    "deleted_row_share": 0.0,
    "files_with_deletion_vectors": 0,
}


def unclustered_health() -> TableHealth:
    """An unpartitioned table with no clustering columns that only needs VACUUM, never optimized, no checkpoint."""
    return table_health(
        table_uri="/data/tables/plain",
        version=7,
        partition_columns=(),
        min_file_size=GIB,
        files=4,
        bytes=4 * GIB,
        rows=4_000_000,
        **FOUR_LARGE_FILES,
        clustering_columns=(),
        clustering_source=None,
        clustering=(),
        tombstones=Tombstones(168, 3, 3 * GIB // 2, 0, 3, 3 * GIB // 2, None, None, (("2026-11-25", 3, 3 * GIB // 2),)),
        log=LogHealth(7, None, 8, 10, 8, 20 * KIB, 720, 0, 8, 8),
        last_runs=LastRuns(None, None, None, None, None, None, ()),
        partitions=(partition({}, 4, 0),),
    )


def healthy_health() -> TableHealth:
    """A table that needs nothing: large files in two partitions, Z-ordered with no overlap, no tombstone, the newest
    version checkpointed, optimized and vacuumed recently."""
    return table_health(
        table_uri="file:///data/tables/tidy",
        version=12,
        min_file_size=GIB,
        files=4,
        bytes=6 * GIB,
        rows=40_000,
        **FOUR_LARGE_FILES,
        clustering_columns=("id",),
        clustering_source="zorder",
        clustering=(ColumnClustering("id", 4, 0, 1.0, 1.0, 1),),
        tombstones=Tombstones(168, 0, 0, 0, 0, 0, None, None, ()),
        log=LogHealth(12, 12, 0, 10, 14, 40 * KIB, 720, 0, 13, 3),
        last_runs=LastRuns(11, NOW - 2 * HOUR, 2.0, 12, NOW - HOUR // 2, 0.5, ("id",)),
        partitions=(
            partition({"date": "2026-11-23"}, 0, 0),  # its files removed, its tombstones vacuumed from the log since
            partition({"date": "2026-11-24"}, 2, 0),
            partition({"date": "2026-11-25"}, 2, 0),
        ),
    )


def open_page(browser: Browser, path: Path, charts: int) -> tuple[Page, list[str], list[str]]:
    """The page at ``path`` once its ``charts`` charts are drawn, the URLs it asked for other than file: and data:
    (each aborted), and the errors its console logged (a Content-Security-Policy refusal among them)."""
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    routed: list[str] = []
    elsewhere: list[str] = []
    errors: list[str] = []

    def route(route: Any) -> None:
        url = route.request.url
        routed.append(url)
        if url.startswith(("file://", "data:")):
            route.continue_()
        else:
            elsewhere.append(url)
            route.abort()

    page.route("**/*", route)
    page.on("console", lambda message: errors.append(message.text) if message.type == "error" else None)
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.goto(path.as_uri())
    page.wait_for_function(f"document.querySelectorAll('.gtitle').length === {charts}")
    assert routed[0] == path.as_uri(), routed  # every request goes through the route, the page's own first
    return page, elsewhere, errors


def texts(page: Page, selector: str) -> list[str]:
    return [element.text_content() or "" for element in page.query_selector_all(selector)]


def top_down(page: Page, selector: str) -> list[str]:
    """The texts of the elements ``selector`` finds, from the top of the page down."""
    elements = page.query_selector_all(selector)
    return [e.text_content() or "" for e in sorted(elements, key=lambda e: (e.bounding_box() or {"y": 0})["y"])]


def png_rgb(png: bytes) -> tuple[int, int, bytes]:
    """Width, height and RGB rows of an 8-bit RGB or RGBA non-interlaced PNG (what Chromium writes); alpha dropped."""
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, header = 8, bytearray(), b""
    while pos < len(png):
        (length,) = struct.unpack(">I", png[pos : pos + 4])
        kind, body = png[pos + 4 : pos + 8], png[pos + 8 : pos + 8 + length]
        pos += 12 + length
        if kind == b"IHDR":
            header = body
        elif kind == b"IDAT":
            idat += body
    width, height, depth, colour, _, _, interlace = struct.unpack(">IIBBBBB", header)
    assert depth == 8 and colour in (2, 6) and interlace == 0, header
    bpp = 3 if colour == 2 else 4
    raw, stride = zlib.decompress(bytes(idat)), width * bpp
    previous, rows = bytearray(stride), bytearray()
    for y in range(height):
        kind, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1 : (y + 1) * (stride + 1)])
        if kind == 1:
            for i in range(bpp, stride):
                line[i] = (line[i] + line[i - bpp]) & 255
        elif kind == 2:
            line = bytearray((a + b) & 255 for a, b in zip(line, previous))
        elif kind == 3:
            for i in range(stride):
                left = line[i - bpp] if i >= bpp else 0
                line[i] = (line[i] + (left + previous[i]) // 2) & 255
        elif kind == 4:
            for i in range(stride):
                a, b = (line[i - bpp], previous[i]) if i >= bpp else (0, previous[i])
                c = previous[i - bpp] if i >= bpp else 0
                pa, pb, pc = abs(b - c), abs(a - c), abs(a + b - 2 * c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        else:
            assert kind == 0, kind
        rows += line if bpp == 3 else bytes(v for i, v in enumerate(line) if i % 4 != 3)
        previous = line
    return width, height, bytes(rows)


def colour_counts(shot: tuple[int, int, bytes], box: Any, colours: list[tuple[int, int, int]]) -> list[int]:
    """How many pixels inside ``box`` (CSS pixels, device scale 1) have each of ``colours`` exactly."""
    width, height, rows = shot
    wanted = {bytes(colour): i for i, colour in enumerate(colours)}
    counts = [0] * len(colours)
    x0, x1 = int(box["x"]), min(width, int(box["x"] + box["width"]))
    for y in range(int(box["y"]), min(height, int(box["y"] + box["height"]))):
        line = rows[y * width * 3 + x0 * 3 : y * width * 3 + x1 * 3]
        for x in range(0, len(line), 3):
            index = wanted.get(line[x : x + 3])
            if index is not None:
                counts[index] += 1
    return counts


def test_the_page_of_a_table_that_needs_everything(browser: Browser, tmp_path: Path) -> None:
    path = tmp_path / "health.html"
    path.write_text("an older page")
    write_health_page(table_health(), str(path))  # replaces it whole, and leaves no temporary file beside it
    assert [p.name for p in tmp_path.iterdir()] == ["health.html"]
    assert path.stat().st_mode & 0o777 == 0o644
    source = path.read_text(encoding="utf-8")
    for secret in ("AKIAEXAMPLE", "hunter2", "sig=abc", "<script src"):
        assert secret not in source
    assert source.count("plotly.js v") == 1  # inlined once

    page, elsewhere, errors = open_page(browser, path, charts=4)
    assert elsewhere == [] and errors == []
    assert page.title() == "Health of s3://bucket/events at version 42"
    assert texts(page, "h1") == ["Health of s3://bucket/events at version 42"]
    assert texts(page, ".gtitle") == [
        "Files by size",
        "Small files per partition (the 30 of 35 with most)",
        "Clustering overlap per column",
        "What VACUUM would reclaim, by day",
    ]
    assert texts(page, ".summary li") == [
        "Version 42 has 1,400 live files holding 700 GiB and 9,876,543 rows, in 35 partitions of date.",
        "630 of 1,400 files (45.0%) are smaller than the minimum file size of 128 MiB, in 35 of 35 partitions; they "
        "hold 630 MiB, which OPTIMIZE can compact.",
        "Deletion vectors mark 98,765 of 9,876,543 rows as deleted (1.0%) in 12 files; purging them would rewrite "
        "those files without the deleted rows.",
        "20 removed files (500 MiB) are held only by tombstones: VACUUM would reclaim 300 MiB (12 files) now, and "
        "the other 200 MiB (8 files) as they pass the retention of 7 days, from 2026-11-25 19:30 UTC to "
        "2026-11-29 07:00 UTC (2 tombstones without a size, counted as no bytes).",
        "2 commits since the last checkpoint (version 40; one is due every 10 commits); the log holds 50 files "
        "(3.5 MiB). 12 versions are within the deleted-file retention, and 43 within the log retention of 30 days.",
        "Clustering on the table's clustering columns (user_id, ts): a point query on user_id reads 3.25 files "
        "(average overlap depth 2.50, at most 6); a point query on ts reads 1.00 files (average overlap depth 1.00, "
        "at most 1).",
        "The last OPTIMIZE ran 12.5 hours ago (version 30); the last VACUUM 2.1 days ago (version 20).",
    ]
    # the size histogram: every bucket labelled, the counts on the bars that have files
    assert texts(page, "#sizes .xtick text") == BUCKET_LABELS
    assert texts(page, "#sizes .bartext") == ["100", "200", "230", "100", "1", "769"]
    # the 30 partitions with most small files, most first (top to bottom); the HTML value shown as text, not run
    assert top_down(page, "#small-files .ytick text") == [f"date={NASTY}"] + [
        f"date=p{d:02d}" for d in range(34, 6, -1)
    ] + ["date=(null)"]
    assert page.evaluate("window.pwned === undefined && document.querySelectorAll('img').length === 0")
    assert texts(page, "#clustering .xtick text") == ["user_id", "ts"]
    assert texts(page, "#reclaim .xtick text") == ["2026-11-25", "2026-11-26", "2026-11-29"]
    assert texts(page, "#reclaim .g-ytitle") == ["MiB"]

    shot = png_rgb(page.screenshot(full_page=True))
    assert shot[0] == 1280
    colours = [BLUE, ORANGE, GREEN, PURPLE, RED]
    expected = {"sizes": [BLUE], "small-files": [ORANGE], "clustering": [GREEN, PURPLE], "reclaim": [RED]}
    for chart, own in expected.items():
        box = page.query_selector(f"#{chart}").bounding_box()  # type: ignore[union-attr]
        assert box is not None and box["width"] > 500 and box["height"] > 300, (chart, box)
        counts = dict(zip(colours, colour_counts(shot, box, colours)))
        for colour, count in counts.items():
            assert (count > 1000) if colour in own else (count == 0), (chart, colour, count)
    page.close()


def test_the_page_of_an_unclustered_table(browser: Browser, tmp_path: Path) -> None:
    path = tmp_path / "plain.html"
    write_health_page(unclustered_health(), str(path))
    page, elsewhere, errors = open_page(browser, path, charts=3)
    assert elsewhere == [] and errors == []
    assert texts(page, ".gtitle") == ["Files by size", "Small files per partition", "What VACUUM would reclaim, by day"]
    no_clustering = (
        "No clustering columns: the table is neither liquid-clustered nor Z-ordered, so clustering overlap is not "
        "measured."
    )
    assert texts(page, "#clustering h2") == ["Clustering overlap per column"]
    assert texts(page, "#clustering p") == [no_clustering]
    assert page.query_selector("#clustering .plotly") is None
    assert texts(page, ".summary li") == [
        "Version 7 has 4 live files holding 4 GiB and 4,000,000 rows.",
        "No file is smaller than the minimum file size of 1 GiB.",
        "No row is deleted by a deletion vector.",
        "3 removed files (1.5 GiB) are held only by tombstones: VACUUM would reclaim 1.5 GiB (3 files) now.",
        "The log has no checkpoint, so a reader replays 8 commits; the log holds 8 files (20 KiB). 8 versions are "
        "within the deleted-file retention, and 8 within the log retention of 30 days.",
        no_clustering,
        "No OPTIMIZE is in the retained log; no VACUUM is in the retained log.",
    ]
    assert texts(page, "#small-files .ytick text") == ["(table)"]
    assert texts(page, "#sizes .bartext") == ["4"]
    assert texts(page, "#reclaim .g-ytitle") == ["GiB"]
    shot = png_rgb(page.screenshot(full_page=True))
    whole = {"x": 0, "y": 0, "width": shot[0], "height": shot[1]}
    blue, green, purple, red = colour_counts(shot, whole, [BLUE, GREEN, PURPLE, RED])
    assert blue > 1000 and red > 1000 and green == purple == 0
    page.close()


def test_the_page_of_a_table_that_needs_nothing(browser: Browser, tmp_path: Path) -> None:
    path = tmp_path / "tidy.html"
    write_health_page(healthy_health(), str(path))
    page, elsewhere, errors = open_page(browser, path, charts=3)
    assert elsewhere == [] and errors == []
    assert texts(page, "h1") == ["Health of file:///data/tables/tidy at version 12"]
    assert texts(page, ".gtitle") == ["Files by size", "Small files per partition", "Clustering overlap per column"]
    assert texts(page, "#reclaim h2") == ["What VACUUM would reclaim, by day"]
    assert texts(page, "#reclaim p") == ["Nothing to reclaim: the log holds no tombstone."]
    assert texts(page, ".summary li") == [
        "Version 12 has 4 live files holding 6 GiB and 40,000 rows, in 2 partitions of date.",
        "No file is smaller than the minimum file size of 1 GiB.",
        "No row is deleted by a deletion vector.",
        "No removed file is waiting for VACUUM: the log holds no tombstone.",
        "The newest version has a checkpoint; the log holds 14 files (40 KiB). 3 versions are within the "
        "deleted-file retention, and 13 within the log retention of 30 days.",
        "Clustering on the columns of the newest Z-order (id): a point query on id reads 1.00 files (average overlap "
        "depth 1.00, at most 1).",
        "The last OPTIMIZE ran 2 hours ago (version 11); the last VACUUM 30 minutes ago (version 12).",
    ]
    # both partitions, in partition order when their small files tie
    assert top_down(page, "#small-files .ytick text") == ["date=2026-11-24", "date=2026-11-25"]
    page.close()


def test_the_page_of_an_empty_table_says_so() -> None:
    empty = table_health(
        table_uri="/data/tables/empty",
        version=0,
        partition_columns=(),
        files=0,
        bytes=0,
        rows=0,
        size_histogram=histogram([0] * 10),
        small_files=0,
        small_bytes=0,
        small_file_share=0.0,
        deleted_rows=0,
        deleted_row_share=0.0,
        files_with_deletion_vectors=0,
        clustering_columns=(),
        clustering_source=None,
        clustering=(),
        tombstones=Tombstones(168, 0, 0, 0, 0, 0, None, None, ()),
        log=LogHealth(0, None, 1, 10, 1, 2 * KIB, 720, 0, 1, 1),
        last_runs=LastRuns(None, None, None, None, None, None, ()),
        partitions=(),
    )
    page = health_page_html(empty)
    assert re.findall(r"<li>(.*)</li>", page) == [
        "Version 0 has no live file.",
        "No removed file is waiting for VACUUM: the log holds no tombstone.",
        "The log has no checkpoint, so a reader replays 1 commit; the log holds 1 file (2 KiB). 1 version is within "
        "the deleted-file retention, and 1 within the log retention of 30 days.",
        "No clustering columns: the table is neither liquid-clustered nor Z-ordered, so clustering overlap is not "
        "measured.",
        "No OPTIMIZE is in the retained log; no VACUUM is in the retained log.",
    ]
    assert '"y":["(table)"]' in page.replace(" ", "")  # the one bar of an unpartitioned table, with no file


def test_without_plotly_the_page_is_one_line_naming_the_extra(tmp_path: Path) -> None:
    pickled = tmp_path / "health.pickle"
    pickled.write_bytes(pickle.dumps(table_health()))
    target = tmp_path / "page.html"
    script = f"""
import importlib.abc, importlib.util, pickle, sys

assert importlib.util.find_spec("plotly") is not None  # installed: only the finder below hides it

class NoPlotly(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name.partition(".")[0] == "plotly":
            raise ImportError("no plotly here")

sys.meta_path.insert(0, NoPlotly())
from airflow_provider_deltalite.engine.errors import MissingDependency
from airflow_provider_deltalite.report.health_page import health_page_html, write_health_page

try:
    write_health_page(pickle.loads(open({str(pickled)!r}, "rb").read()), {str(target)!r})
except MissingDependency as exc:
    print(type(exc).__name__, exc.package, exc.extra)
    print(exc)
"""
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and out.stderr == "", out
    assert out.stdout.splitlines() == [
        "MissingDependency plotly html",
        "table s3://bucket/events: the health page needs plotly: pip install 'airflow-provider-deltalite[html]'",
    ]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["health.pickle"]


def test_a_page_into_a_missing_directory_is_one_line(tmp_path: Path) -> None:
    target = tmp_path / "missing" / "page.html"
    with pytest.raises(InvalidArgument) as raised:
        write_health_page(unclustered_health(), str(target))
    assert str(raised.value) == (
        f"table /data/tables/plain: cannot write the health page to {target}: No such file or directory"
    )
    assert list(tmp_path.iterdir()) == []
