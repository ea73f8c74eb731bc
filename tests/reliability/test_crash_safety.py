"""Crash safety (issue 9 item 1): SIGKILL at every named crash point, at random delays, and in the Spark job's driver.

A short run of `crash_harness` (the full 100-kill run is ``python -m tests.reliability.crash_harness``): one kill for
every (operation, named point) pair that applies, four random-delay kills, one kill of the spark-submit job's
driver. For each, the exact state the kill left (commits made, files written but not committed, files deleted,
temporary files in the log, checkpoints) and what the re-run did, and every check: the table opens with deltalite
and delta-rs, same rows, the re-run completes, VACUUM leaves exactly the live files, the log is whole.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from airflow_provider_deltalite.engine import crash_points
from tests.reliability.crash_harness import (
    CRASH_ENV,
    KINDS,
    NAMED_POINTS,
    Scenario,
    Templates,
    check_log,
    cli_args,
    delta_rs_rows,
    files_on_disk,
    format_table,
    live_files,
    run_harness,
)

CHECKS = {
    "a_opens_delta_rs",
    "a_opens_engine",
    "b_rows_equal",
    "b_rows_equal_engine",
    "e_log_after_kill",
    "c_rerun_completes",
    "c_rows_after_rerun",
    "c_end_state",
    "d_vacuum_completes",
    "d_only_live_files_left",
    "d_rows_after_vacuum",
    "e_log_final",
}


def _after(committed: int, unreferenced: int, deleted: int, log_tmp: int, checkpoints: int, last: int | None) -> dict:
    """What a kill left: versions committed, files written but not committed, files deleted, hidden temporary files
    in `_delta_log` (still there at the end), new checkpoint versions, `_last_checkpoint`'s version."""
    return {
        "versions_committed": committed,
        "new_unreferenced_files": unreferenced,
        "deleted_files": deleted,
        "log_temp_files": log_tmp,
        "new_checkpoints": checkpoints,
        "last_checkpoint": last,
        "final_log_temp_files": log_tmp,
    }


def _rewrite(added: int, removed: int, versions: list[int]) -> dict:
    return {"numFilesAdded": added, "numFilesRemoved": removed, "committedVersions": versions}


def _vacuum(deleted: int, versions: list[int]) -> dict:
    return {"objectsDeleted": deleted, "committedVersions": versions}


# (scenario, state after the kill, the re-run's stats). The tables: 24 appends (versions 0-23; the checkpointed one
# has delta-rs checkpoints at odd versions, the last at 23), VACUUM's copies compacted by delta-rs at version 24; the
# corpus table has versions 0-14, a checkpoint at 10, VACUUM's copy compacted at 15.
NAMED: list[tuple[Scenario, dict, dict]] = [
    # the new file is written, the commit is not: nothing committed, one file for VACUUM
    (Scenario("optimize", "flat", "after_data_files"), _after(0, 1, 0, 0, 0, None), _rewrite(1, 24, [24])),
    # the commit's content is in a hidden temporary file in the log, not linked to its name
    (
        Scenario("optimize", "partitioned", "during_commit_write"),
        _after(0, 1, 0, 1, 0, None),
        _rewrite(3, 24, [24, 25, 26]),
    ),
    # the first partition's batch is committed, the second's file is written: the re-run does the other two
    (Scenario("optimize", "partitioned", "after_data_files@2"), _after(1, 1, 0, 0, 0, None), _rewrite(2, 16, [25, 26])),
    # committed, checkpoint 24 written, `_last_checkpoint` still at 23: the re-run has nothing left to compact
    (Scenario("optimize", "checkpointed", "during_checkpoint_write"), _after(1, 0, 0, 0, 1, 23), _rewrite(0, 0, [])),
    (Scenario("zorder", "corpus", "after_data_files"), _after(0, 1, 0, 0, 0, 10), _rewrite(1, 30, [15])),
    (Scenario("zorder", "checkpointed", "during_commit_write"), _after(0, 1, 0, 1, 0, 23), _rewrite(1, 24, [24])),
    (Scenario("zorder", "checkpointed", "during_checkpoint_write"), _after(1, 0, 0, 0, 1, 23), _rewrite(0, 0, [])),
    # VACUUM START committed, nothing deleted: the re-run deletes all 24 files
    (Scenario("vacuum", "flat", "vacuum_after_start"), _after(1, 0, 0, 0, 0, None), _vacuum(24, [26, 27])),
    (Scenario("vacuum", "corpus", "during_commit_write"), _after(0, 0, 0, 1, 0, 10), _vacuum(30, [16, 17])),
    # everything deleted, VACUUM END not committed: the re-run finds nothing to delete
    (Scenario("vacuum", "partitioned", "vacuum_before_end"), _after(1, 0, 24, 0, 0, None), _vacuum(0, [26, 27])),
    (Scenario("vacuum", "flat", "during_commit_write@2"), _after(1, 0, 24, 1, 0, None), _vacuum(0, [26, 27])),
    # VACUUM END (version 26) committed and checkpointed, `_last_checkpoint` not updated
    (Scenario("vacuum", "checkpointed", "during_checkpoint_write"), _after(2, 0, 24, 0, 1, 23), _vacuum(0, [27, 28])),
    (Scenario("checkpoint", "corpus", "during_checkpoint_write"), _after(0, 0, 0, 0, 1, 10), {"version": 14}),
]
RANDOM = [
    Scenario("optimize", "partitioned", None),
    Scenario("zorder", "flat", None),
    Scenario("vacuum", "corpus", None),
    Scenario("checkpoint", "flat", None),
]
# The driver of the spark-submit job kills itself at the point (spark-submit exits 137); the group is then killed.
# One kill, re-run with the local executor (a retried task may land on either): each spark-submit costs ~10 s of JVM
# start. The full harness kills the driver 8 times (named points and random delays) and re-runs on Spark.
SPARK = [
    (
        Scenario("optimize", "flat", "after_data_files", "spark", rerun_executor="local"),
        _after(0, 1, 0, 0, 0, None),
        _rewrite(1, 24, [24]),
    ),
]


def test_the_named_scenarios_cover_every_operation_and_point_pair() -> None:
    pairs = {(op, point.split("@")[0]) for (op, _), points in NAMED_POINTS.items() for point in points}
    tested = {(s.operation, s.point.split("@")[0]) for s, _, _ in NAMED if s.point}
    assert tested == pairs
    assert len(pairs) == 11  # 3 OPTIMIZE, 3 Z-order, 4 VACUUM, 1 checkpoint


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    scenarios = [s for s, _, _ in NAMED] + RANDOM + [s for s, _, _ in SPARK]
    doc = run_harness(scenarios, seed=9, workdir=tmp_path_factory.mktemp("crash"))
    print(format_table(doc["summary"]))  # shown with -s, and on failure
    return doc


def _kills(report: dict[str, Any], executor: str) -> list[dict[str, Any]]:
    return [k for k in report["kills"] if k["scenario"]["executor"] == executor]


@pytest.mark.spark  # `report` runs spark-submit and copies a corpus table
@pytest.mark.corpus
@pytest.mark.slow
@pytest.mark.parametrize("index", range(len(NAMED)), ids=[f"{s.operation}-{s.kind}-{s.point}" for s, _, _ in NAMED])
def test_a_kill_at_a_named_point_loses_nothing(report: dict[str, Any], index: int) -> None:
    scenario, after, rerun = NAMED[index]
    kill = _kills(report, "local")[index]
    assert kill["scenario"]["point"] == scenario.point and kill["scenario"]["kind"] == scenario.kind
    assert (kill["outcome"], kill["exit_code"]) == ("killed", -signal.SIGKILL)
    assert kill["after_kill"] == after
    assert kill["rerun"] == {"executor": "local", "exit_code": 0, "stats": rerun}
    assert kill["checks"] == dict.fromkeys(CHECKS, True)
    assert (kill["problems"], kill["corrupt"]) == ([], False)


@pytest.mark.spark  # `report` runs spark-submit and copies a corpus table
@pytest.mark.corpus
@pytest.mark.slow
def test_kills_at_random_delays_lose_nothing(report: dict[str, Any]) -> None:
    kills = _kills(report, "local")[len(NAMED) :]
    assert [(k["scenario"]["operation"], k["scenario"]["kind"]) for k in kills] == [
        (s.operation, s.kind) for s in RANDOM
    ]
    for kill in kills:
        assert 0 <= kill["delay_s"] <= kill["span_s"]
        # delivered (-9) or the operation won the race; either way the table must be intact
        assert (kill["outcome"], kill["exit_code"]) in {("killed", -signal.SIGKILL), ("finished", 0)}
        assert kill["rerun"]["exit_code"] == 0
        assert kill["checks"] == dict.fromkeys(CHECKS, True)
        assert (kill["problems"], kill["corrupt"]) == ([], False)


@pytest.mark.spark  # `report` runs spark-submit and copies a corpus table
@pytest.mark.corpus
@pytest.mark.slow
@pytest.mark.parametrize("index", range(len(SPARK)), ids=[f"{s.operation}-{s.point}" for s, _, _ in SPARK])
def test_killing_the_spark_jobs_driver_loses_nothing(report: dict[str, Any], index: int) -> None:
    scenario, after, rerun = SPARK[index]
    kill = _kills(report, "spark")[index]
    assert kill["scenario"]["operation"] == scenario.operation
    assert (kill["outcome"], kill["exit_code"]) == ("killed", 137)
    assert kill["after_kill"] == after
    assert kill["rerun"] == {"executor": "local", "exit_code": 0, "stats": rerun}
    assert kill["checks"] == dict.fromkeys(CHECKS, True)
    assert (kill["problems"], kill["corrupt"]) == ([], False)


@pytest.mark.spark  # `report` runs spark-submit and copies a corpus table
@pytest.mark.corpus
@pytest.mark.slow
def test_the_summary_counts_every_kill(report: dict[str, Any]) -> None:
    totals = report["totals"]
    finished = sum(k["outcome"] == "finished" for k in report["kills"])
    assert totals["runs"] == len(NAMED) + len(RANDOM) + len(SPARK) == 18
    assert (totals["delivered"], totals["finished"]) == (18 - finished, finished)
    assert (totals["failed"], totals["corruptions"]) == (0, 0)
    # 7 named local kills come after a commit (see NAMED), plus the random ones that did
    random_commits = sum(
        k["outcome"] == "killed" and k["after_kill"]["versions_committed"] > 0
        for k in _kills(report, "local")[len(NAMED) :]
    )
    assert totals["committed_before_kill"] == 7 + random_commits
    assert report["workdir"] is not None  # the caller's directory; kept tables would be under it
    assert not list(Path(report["workdir"], "kills").iterdir())  # nothing corrupt, so every copy was removed


# -- the crash points themselves, and the real CLI entry point ------------------------------------------------------

# Loads only crash_points.py (its imports are os and signal), not the engine package: a process starts in ~30 ms.
_HITS = (
    "import importlib.util, sys\n"
    "spec = importlib.util.spec_from_file_location('crash_points', sys.argv[1])\n"
    "module = importlib.util.module_from_spec(spec)\n"
    "spec.loader.exec_module(module)\n"
    "crash_point = module.crash_point\n"
    "for i in (1, 2, 3):\n"
    "    crash_point('after_data_files')\n"
    "    print(i, flush=True)\n"
)


@pytest.mark.parametrize(
    ("target", "code", "printed"),
    [
        ("after_data_files@2", -signal.SIGKILL, "1\n"),  # the second hit kills
        ("after_data_files", -signal.SIGKILL, ""),  # no count: the first hit
        ("vacuum_before_end", 0, "1\n2\n3\n"),  # another point: nothing happens here
        ("no_such_point", 0, "1\n2\n3\n"),  # a name that is not a point does nothing
        ("", 0, "1\n2\n3\n"),
    ],
)
def test_a_crash_point_kills_only_when_named_and_on_the_nth_hit(target: str, code: int, printed: str) -> None:
    env = {**os.environ, CRASH_ENV: target}
    out = subprocess.run(
        [sys.executable, "-c", _HITS, crash_points.__file__], env=env, capture_output=True, text=True, timeout=60
    )
    assert (out.returncode, out.stdout, out.stderr) == (code, printed, "")


@pytest.mark.slow
def test_the_real_cli_dies_at_the_named_point_and_the_table_stays_intact(tmp_path: Path) -> None:
    # `python -m airflow_provider_deltalite`, as a user runs it (the harness forks warm children instead)
    templates = Templates(tmp_path / "templates")
    templates.root.mkdir()
    table = templates.copy("flat", "optimize", tmp_path / "t")
    rows, before = delta_rs_rows(table), files_on_disk(table)
    env = {**os.environ, CRASH_ENV: "during_commit_write"}
    cmd = [sys.executable, "-m", "airflow_provider_deltalite", *cli_args("optimize", KINDS["flat"], table)]
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
    assert (out.returncode, out.stdout, out.stderr) == (-signal.SIGKILL, "", "")
    log = check_log(table)
    assert (log.latest, log.temp_files, log.problems) == (23, 1, [])
    assert len(files_on_disk(table) - before) == 1 and live_files(table) == before
    assert delta_rs_rows(table) == rows
    # the same command without the variable commits version 24 with the 24 files compacted into one
    env.pop(CRASH_ENV)
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    stats = json.loads(done.stdout)
    assert (stats["committedVersions"], stats["numFilesRemoved"], stats["numFilesAdded"]) == ([24], 24, 1)
    assert delta_rs_rows(table) == rows


def test_the_log_check_finds_gaps_torn_checkpoints_and_bad_hints(tmp_path: Path) -> None:
    # the oracle of check (e) must be able to fail: break a small delta-rs table in each way it looks for
    import deltalake
    import pyarrow as pa

    table = tmp_path / "t"
    for i in range(3):
        rows = pa.table({"id": pa.array([i], pa.int64())})
        config = {"delta.checkpointInterval": "2"} if i == 0 else None
        deltalake.write_deltalake(str(table), rows, mode="append", configuration=config)
    log = table / "_delta_log"
    state = check_log(table)
    assert (state.latest, state.checkpoints, state.last_checkpoint, state.temp_files, state.problems) == (
        2,
        [1],
        1,
        0,
        [],
    )  # delta-rs checkpoints version 1 with this interval

    checkpoint = log / "00000000000000000001.checkpoint.parquet"
    data = checkpoint.read_bytes()
    checkpoint.write_bytes(data[: len(data) // 2])
    assert check_log(table).problems == [
        "checkpoint 00000000000000000001.checkpoint.parquet is unreadable: ArrowInvalid",
        "_last_checkpoint names version 1, but 00000000000000000001.checkpoint.parquet is missing or unreadable",
    ]
    checkpoint.write_bytes(data)

    hint = (log / "_last_checkpoint").read_text()
    (log / "_last_checkpoint").write_text(json.dumps({**json.loads(hint), "version": 5}))
    assert check_log(table).problems == [
        "_last_checkpoint names version 5, but 00000000000000000005.checkpoint.parquet is missing or unreadable",
        "_last_checkpoint names version 5, after the latest commit 2",
    ]
    (log / "_last_checkpoint").write_text(json.dumps({**json.loads(hint), "size": 99}))
    assert check_log(table).problems == [
        f"_last_checkpoint says 99 actions, the checkpoint holds {json.loads(hint)['size']}"
    ]
    (log / "_last_checkpoint").write_text(hint)

    commit = log / "00000000000000000001.json"
    text = commit.read_text()
    commit.write_text(text.rstrip("\n") + '\n{"add": {}, "remove": {}}\n')  # delta-rs ends without a newline
    assert check_log(table).problems == ['commit 1 has a line that is not one action: {"add": {}, "remove": {}}']
    commit.write_text(text[: len(text) // 2])
    assert check_log(table).problems == ["commit 1 has a line that is not JSON"]
    commit.unlink()
    assert check_log(table).problems == ["gap in the log: versions [1]"]
    (log / ".00000000000000000003.json.0123.tmp").write_text("{}")
    assert check_log(table).temp_files == 1
