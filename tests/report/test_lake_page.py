"""The lake page (``deltalite lake-health --html``) and the health page's history panel (``deltalite health --html
--history``), rendered in headless Chromium as the health page is (tests/report/test_health_page.py): they load
nothing but themselves, their titles and rows read as expected, and each chart shows its marks in its own colour.

The health objects and history rows are built by hand, so every figure on the pages is known before rendering.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

from playwright.sync_api import Browser

from airflow_provider_deltalite.maintenance.health.metrics import TableHealth, Tombstones
from airflow_provider_deltalite.maintenance.planner.lake import LakeTable
from airflow_provider_deltalite.report.health_page import write_health_page
from airflow_provider_deltalite.report.lake_page import lake_entries, write_lake_page
from tests.maintenance.lake_inputs import HOUR_MS, NOW, health
from tests.report.test_health_page import (
    NASTY,
    colour_counts,
    histogram,
    open_page,
    png_rgb,
    texts,
    top_down,
)

ORANGE, RED, TEAL = (245, 133, 24), (228, 87, 86), (114, 183, 178)
MIB = 1 << 20


def lake() -> list[LakeTable]:
    def table(uri: str, files: int, small: int, reclaimable: int, last: int | None = None) -> LakeTable:
        h = health(uri, files=files, small_files=small, last_optimize=last)
        stones = Tombstones(168.0, 1, reclaimable, 0, 1, reclaimable, None, None, ())
        return LakeTable(uri, replace(h, tombstones=stones), None)

    return [
        table("s3://AKIAEXAMPLE:hunter2@lake/events?sig=abc", 100, 25, 3 * MIB, NOW - 2 * HOUR_MS),
        table("s3://lake/orders", 10, 9, 0),
        table(f"s3://lake/{NASTY}", 40, 20, 7 * MIB),
        table("s3://lake/tidy", 4, 0, MIB),
        LakeTable("s3://lake/broken", None, None, "CorruptLog: version 3 is not JSON"),
    ]


def test_the_lake_page_lists_the_tables_worst_first(browser: Browser, tmp_path: Path) -> None:
    path = tmp_path / "lake.html"
    history_last = {"s3://lake/tidy": NOW - HOUR_MS}  # newer than the log says: no OPTIMIZE in its log
    write_lake_page(lake_entries(lake(), history_last), str(path), "Health of s3://lake")
    source = path.read_text(encoding="utf-8")
    for secret in ("AKIAEXAMPLE", "hunter2", "sig=abc", NASTY, "<script src"):
        assert secret not in source
    page, elsewhere, errors = open_page(browser, path, charts=2)
    assert elsewhere == [] and errors == []
    assert texts(page, "h1") == ["Health of s3://lake"]
    assert texts(page, ".gtitle") == ["Small-file share by table", "Reclaimable bytes by table"]
    rows = [
        [cell.text_content() for cell in row.query_selector_all("td")]
        for row in page.query_selector_all("#tables tbody tr")
    ]
    two_hours_ago = datetime.fromtimestamp((NOW - 2 * HOUR_MS) / 1000, UTC).strftime("%Y-%m-%d %H:%M UTC")
    an_hour_ago = datetime.fromtimestamp((NOW - HOUR_MS) / 1000, UTC).strftime("%Y-%m-%d %H:%M UTC")
    assert rows == [
        ["s3://lake/orders", "10", "90.0%", "0 B", "never"],
        [f"s3://lake/{NASTY}", "40", "50.0%", "7 MiB", "never"],
        ["s3://lake/events", "100", "25.0%", "3 MiB", two_hours_ago],
        ["s3://lake/tidy", "4", "0.0%", "1 MiB", an_hour_ago],
        ["s3://lake/broken", "CorruptLog: version 3 is not JSON"],
    ]
    # the charts' bars, the worst table on top
    assert top_down(page, "#share-chart .ytick text") == [
        "s3://lake/orders",
        f"s3://lake/{NASTY}",
        "s3://lake/events",
        "s3://lake/tidy",
    ]
    shot = png_rgb(page.screenshot(full_page=True))
    share_box = page.query_selector("#share-chart").bounding_box()
    reclaim_box = page.query_selector("#reclaimable-chart").bounding_box()
    share, red_in_share = colour_counts(shot, share_box, [ORANGE, RED])
    orange_in_reclaim, reclaim = colour_counts(shot, reclaim_box, [ORANGE, RED])
    assert share > 1000 and reclaim > 1000
    assert red_in_share == 0 and orange_in_reclaim == 0
    page.close()


def two_files() -> TableHealth:
    return replace(health("/t", files=2, small_files=2), size_histogram=histogram([2, 0, 0, 0, 0, 0, 0, 0, 0, 0]))


def _history_rows() -> list[dict]:
    start = datetime(2026, 11, 20, tzinfo=UTC)
    rows = []
    files = 50
    for day in range(3):
        begin = start + timedelta(days=day)
        rows.append({"table_uri": "/t", "operation": "optimize", "outcome": "committed", "start_time": begin,
                     "end_time": begin + timedelta(minutes=5), "files_before": files + 20, "bytes_before": 70 * MIB,
                     "files_after": 2, "bytes_after": 69 * MIB})  # fmt: skip
        files += 10
    rows.append({"table_uri": "/t", "operation": "optimize", "outcome": "deferred by budget",
                 "start_time": start, "end_time": start})  # fmt: skip
    return rows


def test_the_health_page_draws_the_history_panel(browser: Browser, tmp_path: Path) -> None:
    path = tmp_path / "health.html"
    write_health_page(two_files(), str(path), _history_rows())
    page, elsewhere, errors = open_page(browser, path, charts=3)
    assert elsewhere == [] and errors == []
    assert texts(page, ".gtitle")[-1] == "Files and bytes over time, maintenance runs marked"
    assert texts(page, "#history .legendtext") == ["files", "bytes", "maintenance runs"]
    # three committed runs: three diamonds (the deferred row has no health and draws nothing)
    assert len(page.query_selector_all("#history path.point")) == 3  # the two lines draw no points
    shot = png_rgb(page.screenshot(full_page=True))
    [teal] = colour_counts(shot, page.query_selector("#history").bounding_box(), [TEAL])
    assert teal > 100
    page.close()


def test_an_empty_history_is_said_in_a_sentence(browser: Browser, tmp_path: Path) -> None:
    path = tmp_path / "health.html"
    write_health_page(two_files(), str(path), [])
    page, _, errors = open_page(browser, path, charts=2)
    assert errors == []
    assert texts(page, "#history h2") == ["Files and bytes over time, maintenance runs marked"]
    assert texts(page, "#history p") == ["The operations history holds no run of this table."]
    page.close()
