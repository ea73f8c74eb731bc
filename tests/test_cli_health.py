"""`deltalite health`: the text and JSON forms, what the process imports, and bad input (one line, exit 2)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from airflow_provider_deltalite.cli import main
from airflow_provider_deltalite.cli.startup import pandas_kept_out
from tests.helpers import cli_failure, run_cli, tree_state
from tests.maintenance.health_tables import MIB
from tests.maintenance.test_health import partitioned_table
from tests.test_process_cost import run_command


def test_text_shows_the_figures_and_the_worst_partitions(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    t = partitioned_table(tmp_path)
    assert main(["health", str(t), "--min-file-size", str(6 * MIB)]) == 0
    lines = capsys.readouterr().out.splitlines()
    # the time-dependent lines (tombstones, log windows, last runs) are checked on `table_health` with a fixed now
    assert [line for line in lines if not line.startswith(("tombstones", "log", "optimize", "vacuum"))] == [
        f"table       {t} (version 8)",
        "files       7 (571 MiB), 3,620 rows, 1 file without statistics",
        "small       3 files below 6 MiB (42.9% of files, 11 MiB)",
        "deleted     10 rows by deletion vectors (0.3% of rows) in 1 file",
        "clustering  id (zorder): 1.50 files per point query, overlap depth 1.46 average / 2 max, "
        "1 file without statistics",
        "partitions with the most small files (2 of 4)",
        "  date=null: 2 of 2 files small (10 MiB), 0 rows deleted, 0 B in tombstones",
        "  date=2024-01-02: 1 of 2 files small (1 MiB), 0 rows deleted, 30 MiB in tombstones",
    ]
    assert [line.split()[0] for line in lines if line.startswith(("tombstones", "log", "optimize", "vacuum"))] == [
        "tombstones",
        "log",
        "optimize",
        "vacuum",
    ]
    assert "optimize    version 7, " in lines[6] and "vacuum      version 4, " in lines[7]


def test_json_runs_without_pandas_or_maintenance_operations(tmp_path: Path) -> None:
    t = partitioned_table(tmp_path)
    before = tree_state(t)
    doc, report = run_command("health", "--json", "--columns", "id", str(t))
    assert (report["code"], report["heavy"], report["pandas_after"]) == (0, [], "pandas")
    health = ["accumulate", "clustering_columns", "clustering_quality", "compute", "histogram", "log_health", "metrics"]
    health.append("tombstones")
    assert report["maintenance"] == sorted(
        [
            "airflow_provider_deltalite.maintenance.commit_kinds",
            "airflow_provider_deltalite.maintenance.health",
            *(f"airflow_provider_deltalite.maintenance.health.{m}" for m in health),
            "airflow_provider_deltalite.maintenance.optimize_stats",
            "airflow_provider_deltalite.maintenance.option_values",
            "airflow_provider_deltalite.maintenance.options",
            "airflow_provider_deltalite.maintenance.wording",
        ]
    )
    assert (doc["version"], doc["files"], doc["bytes"], doc["smallFiles"], doc["deletedRows"]) == (
        8,
        7,
        571 * MIB,
        5,
        10,
    )
    assert (doc["clusteringSource"], doc["clustering"][0]["pointQueryFiles"]) == ("given", 1.5)
    assert [p["partitionValues"] for p in doc["partitions"]] == [
        {"date": None},
        {"date": "2023-12-31"},
        {"date": "2024-01-01"},
        {"date": "2024-01-02"},
    ]
    assert json.loads(json.dumps(doc)) == doc
    assert tree_state(t) == before


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--columns", "nope"], "column 'nope' is not in the table schema"),
        (["--columns", "id,"], "--columns: a column name is empty in 'id,'"),
        (["--min-file-size", "-5"], "argument --min-file-size: must be a positive number of bytes: -5"),
        (["--spark-checkpoint-tasks", "0"], "--spark-checkpoint-tasks needs --executor spark"),
    ],
)
def test_bad_input_is_one_line_and_writes_nothing(tmp_path: Path, args: list[str], message: str) -> None:
    t = partitioned_table(tmp_path)
    before = tree_state(t)
    line = cli_failure("health", str(t), *args, "--html", tmp_path / "page.html")
    assert line.startswith("deltalite: error: ") and message in line, line
    assert tree_state(t) == before
    assert not (tmp_path / "page.html").exists()


def test_not_a_table(tmp_path: Path) -> None:
    line = cli_failure("health", tmp_path)
    assert "not a Delta table" in line and str(tmp_path) in line


def test_pandas_is_kept_out_unless_the_command_draws() -> None:
    import sys

    # the block only applies to a process that has not imported pandas yet: hide it while the blocks are entered
    saved = sys.modules.pop("pandas", None)
    try:
        with pandas_kept_out("health", None) as blocked:
            assert blocked
        with pandas_kept_out("health", None, draws=True) as blocked:
            assert not blocked
    finally:
        if saved is not None:
            sys.modules["pandas"] = saved


# The size buckets of the page's histogram (issue 20: log-scale, a factor of 4 apart), written out by hand.
KIB = 1024
BUCKET_EDGES = [0, 64 * KIB, 256 * KIB, MIB, 4 * MIB, 16 * MIB, 64 * MIB, 256 * MIB, 1024 * MIB, 4096 * MIB]


def _page_figures(page: str) -> dict[str, list[dict]]:
    """The traces of every chart on the page, as plotly.js receives them (``Plotly.newPlot(id, data, ...)``)."""
    figures = {}
    for call in re.finditer(r'Plotly\.newPlot\(\s*"([\w-]+)",\s*', page):
        figures[call.group(1)], _ = json.JSONDecoder().raw_decode(page, call.end())
    return figures


def test_html_writes_one_self_contained_page_with_the_tables_figures(tmp_path: Path) -> None:
    import deltalake
    import numpy as np
    import pyarrow as pa
    from plotly.offline import get_plotlyjs_version

    # p=x: one large file (random longs barely compress) and three small ones; p=y: one large, one small
    t = tmp_path / "t"
    rng = np.random.default_rng(20)
    for rows, parts in [(40_000, ["x", "y"]), (10, ["x", "y"]), (10, ["x"]), (10, ["x"])]:
        ids = pa.array(rng.integers(0, 2**62, rows * len(parts)), pa.int64())
        data = pa.table({"id": ids, "p": [p for p in parts for _ in range(rows)]})
        deltalake.write_deltalake(str(t), data, mode="append", partition_by=["p"])
    adds = pa.table(deltalake.DeltaTable(str(t)).get_add_actions(flatten=True)).to_pylist()
    sizes = {p: sorted(a["size_bytes"] for a in adds if a["partition.p"] == p) for p in ("x", "y")}
    minimum = 64 * KIB
    assert [len(sizes["x"]), len(sizes["y"])] == [4, 2]
    assert [sum(s < minimum for s in sizes[p]) for p in ("x", "y")] == [3, 1]  # the large files are not small
    assert all(256 * KIB <= s[-1] < MIB for s in sizes.values())  # ~320 KiB each: a bucket of their own
    rows = sum(a["num_records"] for a in adds)
    assert rows == 80_000 + 20 + 20
    before = tree_state(t)
    page_file = tmp_path / "out" / "health.html"
    page_file.parent.mkdir()

    out = run_cli("health", t, "--min-file-size", minimum, "--html", page_file)
    assert (out.returncode, out.stderr) == (0, "")
    assert out.stdout.splitlines()[0] == f"table       {t} (version 3)"
    assert out.stdout.splitlines()[-1] == f"page        {page_file}"
    assert [p.name for p in page_file.parent.iterdir()] == ["health.html"]
    assert tree_state(t) == before
    page = page_file.read_text(encoding="utf-8")

    # self-contained: nothing is loaded by URL, the page forbids any fetch, and plotly.js is inlined once
    assert re.findall(r"<(?:script|link|img|iframe|object|embed|audio|video|source)\b[^>]*\b(?:src|href)=", page) == []
    assert re.findall(r"<script\b[^>]*>", page) == ["<script>"] * 4
    assert "content=\"default-src 'none';" in page
    assert page.count(f"plotly.js v{get_plotlyjs_version()}") == 1
    assert len(page) > 1_000_000  # the bundle itself, not a reference to it

    # the sentences: the figures counted from delta-rs's add actions
    total = sum(every := [s for p in ("x", "y") for s in sizes[p]])
    assert KIB <= total < MIB  # shown in KiB with one decimal
    total_text = f"{total / KIB:.1f}".removesuffix(".0") + " KiB"
    assert f"<li>Version 3 has 6 live files holding {total_text} and " in page
    assert f" and {rows:,} rows, in 2 partitions of p.</li>" in page
    assert "<li>4 of 6 files (66.7%) are smaller than the minimum file size of 64 KiB, in 2 of 2 partitions;" in page
    assert "<li>No row is deleted by a deletion vector.</li>" in page
    assert "<li>The log has no checkpoint, so a reader replays 4 commits;" in page

    # the charts: the size histogram and the small files per partition (worst first, drawn bottom-up)
    figures = _page_figures(page)
    assert sorted(figures) == ["sizes-chart", "small-files-chart"]  # no clustering, no tombstone: sentences only
    buckets = [sum(lo <= s < hi for s in every) for lo, hi in zip(BUCKET_EDGES, [*BUCKET_EDGES[1:], 2**63])]
    assert buckets == [4, 0, 2, 0, 0, 0, 0, 0, 0, 0]
    [bar] = figures["sizes-chart"]
    assert bar["y"] == buckets
    files, small = figures["small-files-chart"]
    assert (files["y"], files["x"], small["y"], small["x"]) == (["p=y", "p=x"], [2, 4], ["p=y", "p=x"], [1, 3])


def test_a_struct_column_is_refused_with_one_line(tmp_path: Path) -> None:
    """Files keep min/max of leaf fields only: measuring a struct column was an Arrow error with a stack trace."""
    import deltalake
    import pyarrow as pa

    t = tmp_path / "nested"
    s = pa.array([{"a": 1, "b": "x"}, {"a": 2, "b": "y"}], pa.struct([("a", pa.int64()), ("b", pa.string())]))
    deltalake.write_deltalake(str(t), pa.table({"id": [1, 2], "s": s}))
    before = tree_state(t)
    line = cli_failure("health", str(t), "--columns", "s", "--json")
    assert line == (
        f"deltalite: error: table {t}: column 's' is a struct: files keep min/max statistics of its leaf fields, "
        "name one of them"
    ), line
    assert tree_state(t) == before
    done = run_cli("health", str(t), "--columns", "s.a", "--json")
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert (doc["files"], doc["clusteringColumns"]) == (1, ["s.a"])
