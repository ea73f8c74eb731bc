"""The 0.1 spellings of the CLI options (`--by`, `--retain-hours`, `--lite`, `--no-retention-check`) still work for one
release, warn once each on stderr, and mean exactly what the new spellings mean."""

from __future__ import annotations

import json
from pathlib import Path

import deltalake
import pyarrow as pa

from tests.helpers import run_cli


def _table(path: Path) -> Path:
    for k in range(3):
        data = pa.table({"x": pa.array(range(k * 10, k * 10 + 10), pa.int64()), "y": pa.array([k] * 10, pa.int64())})
        deltalake.write_deltalake(str(path), data, mode="append")
    return path


def test_old_vacuum_spellings_warn_and_equal_the_new_ones(tmp_path: Path) -> None:
    path = _table(tmp_path / "t")
    old = run_cli("vacuum", path, "--retain-hours", "0", "--no-retention-check", "--lite", "--dry-run", "--json")
    new = run_cli(
        "vacuum",
        path,
        "--retention-hours",
        "0",
        "--no-enforce-retention-duration",
        "--mode",
        "lite",
        "--dry-run",
        "--json",
    )
    assert old.returncode == new.returncode == 0, old.stderr
    assert old.stderr.splitlines() == [
        "deltalite: warning: --retain-hours is deprecated and will be removed; use --retention-hours",
        "deltalite: warning: --no-retention-check is deprecated and will be removed; "
        "use --no-enforce-retention-duration",
        "deltalite: warning: --lite is deprecated and will be removed; use --mode lite",
    ]
    assert new.stderr == ""
    old_doc, new_doc = json.loads(old.stdout), json.loads(new.stdout)
    for doc in (old_doc, new_doc):
        for clock in ("timeTakenToIdentifyEligibleFiles", "minRetainedTimestamp", "vacuumStartTime", "vacuumEndTime"):
            doc.pop(clock)
    assert old_doc == new_doc
    assert (new_doc["mode"], new_doc["isDryRun"], new_doc["specifiedRetentionMillis"]) == ("LITE", True, 0)


def test_old_zorder_spelling_warns_and_clusters_the_same_columns(tmp_path: Path) -> None:
    path = _table(tmp_path / "t")
    out = run_cli("zorder", path, "--by", "x,y", "--dry-run", "--json")
    assert out.returncode == 0, out.stderr
    assert out.stderr == "deltalite: warning: --by is deprecated and will be removed; use --columns\n"
    assert json.loads(out.stdout)["zOrderStats"]["columns"] == ["x", "y"]
