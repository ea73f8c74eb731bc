"""Progress of a long VACUUM listing (`listing.ListingProgress`): to the caller's callback and to the log, throttled,
with a final report whose counts are the listing's; stdout (the CLI's JSON) is never written."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest

from airflow_provider_deltalite import DeltaTable
from airflow_provider_deltalite.maintenance.vacuum import VacuumProgress, vacuum
from airflow_provider_deltalite.maintenance.vacuum import listing as listing_module
from tests.maintenance.test_vacuum_inventory import _table


def test_listing_progress_reaches_the_callback_and_the_log(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture
) -> None:
    path = _table(tmp_path / "t")
    for i in range(5):
        (path / f"q={i}").mkdir()
        (path / f"q={i}" / "f.parquet").write_bytes(b"x")
    files = sum(1 for d, _, names in os.walk(path) for n in names if not d.startswith(str(path / "_")))
    files -= 1  # p=a/.hidden.crc: hidden, not listed
    monkeypatch.setattr(listing_module, "PROGRESS_EVERY_FILES", 1)
    monkeypatch.setattr(listing_module, "PROGRESS_EVERY_S", 0.0)
    events: list[VacuumProgress] = []
    with caplog.at_level(logging.INFO, logger=listing_module.__name__):
        vacuum(DeltaTable(str(path)), dry_run=True, progress=events.append, max_concurrent_tasks=1)
    listing = [e for e in events if e.phase == "listing"]
    assert len(listing) >= 2
    assert [e.files for e in listing] == sorted(e.files for e in listing)
    assert (listing[-1].files, listing[-1].done) == (files, 7)  # the root, p=a and q=0..4 (_tmp is hidden)
    assert all(e.elapsed_s >= 0 and e.rate >= 0 for e in listing)
    lines = [r.getMessage() for r in caplog.records if r.name == listing_module.__name__]
    assert lines[-1].startswith(f"VACUUM listed {path}: {files} files in 7 directories")
    assert capsys.readouterr().out == ""
