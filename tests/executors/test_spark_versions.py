"""Spark versions and installs: the package metadata, a client without classic pyspark, Spark 4.0 (the oldest
supported) over Spark Connect, clients and servers of different versions (4.0 and 4.3, the oldest and the newest,
each as client and server), the job under the spark-submit of 4.0 and of 4.3, and a server whose workers lack pyarrow.

The 4.0 side is the project's own .venv-spark40 (`make env-spark40`, `tests/executors/spark40.py`): pyspark-client
4.0 without classic pyspark or Airflow, and a 4.0 Connect server started here from the Spark 4.0 distribution. The
4.2 side is this test environment (classic pyspark and pyspark-client 4.2, constraints.txt) and its Connect server
(`spark_connect_server`). The 4.3 side is .venv-spark43 (`make env-spark43`, `tests/executors/spark43.py`): classic
pyspark 4.3 (no pyspark-client 4.3 exists on the index; classic pyspark carries the Connect client), its Connect
server and its spark-submit. Every operation goes through the CLI or the spark-submit job and is compared with the
local executor's files and with the rows delta-rs and delta-kernel-rs read.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import deltalake
import pytest

from airflow_provider_deltalite import DeltaTable
from airflow_provider_deltalite.executors import LocalExecutor
from airflow_provider_deltalite.maintenance.clustering.zorder import zorder
from airflow_provider_deltalite.maintenance.optimize import optimize
from airflow_provider_deltalite.maintenance.vacuum import vacuum
from tests.executors import spark40, spark43
from tests.executors.spark_cluster import start_connect_server
from tests.helpers import cli_failure, copy_table, tree_state
from tests.maintenance.test_optimize_spark import DV_TABLE, _new_files
from tests.maintenance.test_zorder import _flows
from tests.oracles import agreed_rows

pytestmark = pytest.mark.spark

COLUMNS = ["sourceIP", "destPort"]


@pytest.fixture(scope="module")
def env40() -> None:
    """.venv-spark40, created by `make env-spark40` when missing or out of date."""
    try:
        spark40.ensure_env()
    except RuntimeError as exc:
        pytest.fail(str(exc))


def _version_server(work_dir: Path, home: Path, python: Path, version: str) -> Iterator[str]:
    """The address of a Spark Connect server (local[2]) of ``version`` from the distribution ``home``, whose workers
    run ``python``; stopped when the fixture ends."""
    try:
        server = start_connect_server(work_dir, home=home, python=str(python))
    except RuntimeError as exc:
        pytest.fail(str(exc))
    try:
        assert f"Running Spark version {version}" in (server.work_dir / "connect.log").read_text()
        yield server.url
    finally:
        server.stop()


@pytest.fixture(scope="module")
def server40(env40: None, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The address of a Spark 4.0 Connect server whose workers run the 4.0 environment's Python."""
    yield from _version_server(
        tmp_path_factory.mktemp("connect40"), spark40.SERVER_HOME, spark40.PYTHON, spark40.VERSION
    )


@pytest.fixture(scope="module")
def env43() -> None:
    """.venv-spark43, created by `make env-spark43` when missing or out of date."""
    try:
        spark43.ensure_env()
    except RuntimeError as exc:
        pytest.fail(str(exc))


@pytest.fixture(scope="module")
def server43(env43: None, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The address of a Spark 4.3 Connect server whose workers run the 4.3 environment's Python."""
    home = spark43.server_home()
    yield from _version_server(tmp_path_factory.mktemp("connect43"), home, spark43.PYTHON, spark43.VERSION)


@pytest.fixture(scope="module")
def flows(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, int]:
    """A partitioned table of 12 small files (delta-rs wrote it), and a target size giving 3 files per partition."""
    path = _flows(tmp_path_factory.mktemp("flows") / "t", files=6, rows=3000, partitioned=True)
    return path, DeltaTable(str(path)).snapshot().size_in_bytes // 6


@pytest.fixture(scope="module")
def zordered_locally(flows: tuple[Path, int], tmp_path_factory: pytest.TempPathFactory) -> list[tuple]:
    """The files the local executor writes for a Z-order of `flows` (the reference of the shuffled Spark runs)."""
    path, target = flows
    local = copy_table(path, tmp_path_factory.mktemp("zorder-local") / "t")
    stats = zorder(DeltaTable(str(local)), COLUMNS, target_size=target, executor=LocalExecutor(2))
    assert (stats.num_files_removed, stats.num_files_added) == (12, 6)
    return _new_files(local, stats.committed_version)


def _json(out: subprocess.CompletedProcess) -> dict:
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout)


def _data_files(path: Path) -> list[str]:
    return sorted(str(p.relative_to(path)) for p in path.rglob("*.parquet") if "_delta_log" not in p.parts)


def _client_version(python: str) -> str:
    code = "import pyspark; print(pyspark.__version__)"
    return subprocess.run([python, "-c", code], capture_output=True, text=True, check=True).stdout.strip()


# -- dependencies ----------------------------------------------------------------------------------------------


def test_runtime_requirements_pin_nothing_and_no_extra_brings_classic_pyspark(env40: None) -> None:
    # the distribution pip installed into .venv-spark40 from this checkout's pyproject.toml
    code = "import importlib.metadata as m, json; print(json.dumps(m.requires('airflow-provider-deltalite')))"
    requires = json.loads(spark40.run([], code=code).stdout)
    runtime = [r for r in requires if "extra ==" not in r]
    by_extra: dict[str, list[str]] = {}
    for r in requires:
        if "extra ==" in r:
            requirement, extra = re.fullmatch(r'(.*); extra == "(.*)"', r).groups()  # type: ignore[union-attr]
            by_extra.setdefault(extra, []).append(requirement)
    names = [re.match(r"[A-Za-z0-9._-]+(\[[^]]*\])?", r).group(0).lower() for r in runtime]  # type: ignore[union-attr]
    assert [r for r in runtime if "==" in r or "===" in r] == []
    assert "apache-airflow-providers-apache-spark" in names  # without [pyspark]: it brings pyspark-client only
    assert not any(n in ("pyspark", "pyspark-client") or n.endswith("[pyspark]") for n in names)
    # classic pyspark through no extra (README, Installing: the second command installs the client's release); the
    # `spark` extra is still declared, empty, so that requirement lines naming it still install
    code = "import importlib.metadata as m; print(m.metadata('airflow-provider-deltalite').get_all('Provides-Extra'))"
    assert "'spark'" in spark40.run([], code=code).stdout
    assert "spark" not in by_extra
    for extra, requirements in by_extra.items():
        assert not any(re.match(r"pyspark\b(?!-)|.*\[pyspark\]", r) for r in requirements), (extra, requirements)
    # the 4.0 environment installed the package without its dependencies: pyspark-client alone
    code = "import importlib.util as u; print(u.find_spec('pyspark.core'), u.find_spec('airflow'))"
    assert spark40.run([], code=code).stdout == "None None\n"
    assert _client_version(str(spark40.PYTHON)) == spark40.VERSION


def test_without_classic_pyspark_a_local_master_names_the_spark_extra(env40: None, tmp_path: Path) -> None:
    table = copy_table(DV_TABLE, tmp_path / "t")
    before = tree_state(table)
    install = (
        f"needs classic pyspark, but only pyspark-client {spark40.VERSION} is installed: pip install "
        f"'pyspark=={spark40.VERSION}' (the release of your pyspark-client), or use a Spark Connect server "
        "(sc://host:port)"
    )
    line = spark40.failure(["optimize", str(table), "--executor", "spark", "--spark-master", "local[2]"])
    assert line == f"deltalite: error: Spark master local[2] {install}"
    line = spark40.failure(["optimize", str(table), "--executor", "spark"])  # no master, no SPARK_REMOTE: local[*]
    assert line == f"deltalite: error: Spark master local[*] {install}"
    # the spark-submit job run without spark-submit starts a local Spark too
    line = spark40.failure(["vacuum", "--table", str(table)], module="airflow_provider_deltalite.jobs.driver")
    assert line == f"deltalite: error: the deltalite Spark job {install}"
    assert tree_state(table) == before


def test_pyspark_and_pyspark_client_of_two_releases_give_one_line(env40: None, tmp_path: Path) -> None:
    # this environment's classic pyspark 4.2 with the 4.0 environment's pyspark-client ahead of it on the path: the
    # mixed `pyspark` package a pip install of two releases leaves behind
    table = copy_table(DV_TABLE, tmp_path / "t")
    before = tree_state(table)
    (site_packages,) = spark40.VENV.glob("lib/python*/site-packages")
    env = {k: v for k, v in os.environ.items() if k != "SPARK_REMOTE"}
    env["PYTHONPATH"] = os.pathsep.join([str(spark40.ROOT), str(site_packages)])
    for master in ("local[2]", "sc://127.0.0.1:1"):
        args = ["optimize", str(table), "--executor", "spark", "--spark-master", master]
        cmd = [sys.executable, "-m", "airflow_provider_deltalite", *args]
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=420, env=env, check=False)
        assert (out.returncode, out.stdout) == (2, ""), out
        assert out.stderr == (
            f"deltalite: error: pyspark 4.2.0 and pyspark-client {spark40.VERSION} are both installed and overwrite "
            "each other's pyspark package: install one release of both, e.g. pip install --force-reinstall "
            f"--no-deps 'pyspark=={spark40.VERSION}' 'pyspark-client=={spark40.VERSION}'\n"
        )
    assert tree_state(table) == before


# -- Spark 4.0 over Spark Connect ------------------------------------------------------------------------------


def test_spark_40_client_and_server_write_the_local_executors_files(
    server40: str, flows: tuple[Path, int], tmp_path: Path
) -> None:
    path, _ = flows
    rows = agreed_rows(path)
    local = copy_table(path, tmp_path / "local")
    remote = copy_table(path, tmp_path / "remote")
    spark = ["--json", "--executor", "spark", "--spark-master", server40]

    by_local = optimize(DeltaTable(str(local)), executor=LocalExecutor(2))
    stats = _json(spark40.run(["optimize", str(remote), *spark]))
    assert (stats["executor"], stats["numFilesRemoved"], stats["numFilesAdded"]) == ("spark", 12, 2)
    assert (by_local.num_files_removed, by_local.num_files_added) == (12, 2)
    assert _new_files(remote, stats["committedVersion"]) == _new_files(local, by_local.committed_version)
    assert agreed_rows(remote) == rows

    # Z-order through the shuffle on a 4.0 server and from a 4.0 client: the two pairs of different versions below

    retain_nothing = ["--retention-hours", "0", "--no-enforce-retention-duration"]
    by_local_v = vacuum(DeltaTable(str(local)), retention_hours=0, enforce_retention_duration=False)
    stats = _json(spark40.run(["vacuum", str(remote), *retain_nothing, *spark]))
    assert (stats["executor"], stats["objectsDeleted"]) == ("spark", by_local_v.objects_deleted)
    assert by_local_v.objects_deleted == 12  # the files delta-rs wrote, compacted away
    # what is left on storage is exactly the files delta-rs reads, in both copies
    for copy in (local, remote):
        live = sorted(u[len(str(copy)) + 1 :] for u in deltalake.DeltaTable(str(copy)).file_uris())
        assert _data_files(copy) == live, copy
    assert len(_data_files(remote)) == 2
    assert agreed_rows(remote) == rows


# -- clients and servers of different versions -----------------------------------------------------------------


# The oldest and the newest supported Spark, each as the client and as the server. The versions between them (4.2,
# this environment's) meet 4.0 elsewhere in this file (workers without pyarrow) and in tests/install (4.0, 4.1 clients).
@pytest.mark.parametrize("pair", ["client 4.3, server 4.0", "client 4.0, server 4.3"])
def test_a_client_and_server_of_different_versions_run_the_shuffle_exactly(
    request: pytest.FixtureRequest,
    env40: None,
    flows: tuple[Path, int],
    zordered_locally: list[tuple],
    tmp_path: Path,
    pair: str,
) -> None:
    # Spark Connect's protocol and our tasks (mapInArrow, the repartition exchange, Arrow batches, a function
    # pickled by the client's cloudpickle and run by the server's Python workers) work across 4.0 and 4.3
    path, target = flows
    table = copy_table(path, tmp_path / "t")
    args = ["zorder", str(table), "--columns", ",".join(COLUMNS), "--target-size", str(target), "--json"]
    args += ["--executor", "spark", "--spark-master"]
    if pair == "client 4.3, server 4.0":
        request.getfixturevalue("env43")
        assert _client_version(str(spark43.PYTHON)) == spark43.VERSION
        out = spark43.run([*args, request.getfixturevalue("server40")], code=spark40.SHUFFLED_CLI)
    else:
        out = spark40.run([*args, request.getfixturevalue("server43")], code=spark40.SHUFFLED_CLI)
    stats = _json(out)
    assert (stats["executor"], stats["numFilesRemoved"], stats["numFilesAdded"]) == ("spark", 12, 6)
    assert _new_files(table, stats["committedVersion"]) == zordered_locally
    assert agreed_rows(table) == agreed_rows(path)


# -- spark-submit of the oldest and the newest Spark -----------------------------------------------------------


@pytest.mark.parametrize("version", ["4.0", "4.3"])
def test_the_job_runs_under_the_spark_submit_of_the_oldest_and_the_newest_spark(
    request: pytest.FixtureRequest,
    flows: tuple[Path, int],
    tmp_path: Path,
    version: str,
) -> None:
    # what the operators run: spark-submit of deltalite's job, here with that Spark's own spark-submit and Python
    path, _ = flows
    local = copy_table(path, tmp_path / "local")
    by_local = optimize(DeltaTable(str(local)), executor=LocalExecutor(2))
    table = copy_table(path, tmp_path / "t")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "SPARK_REMOTE", "SPARK_HOME")}
    if version == "4.0":
        request.getfixturevalue("env40")
        home, python, expected = spark40.SERVER_HOME, spark40.PYTHON, spark40.VERSION
        # the 4.0 environment has pyspark-client only: classic pyspark 4.0 (the distribution's own) goes first
        env["PYTHONPATH"] = os.pathsep.join([str(spark40.VENV / "server"), str(spark40.ROOT)])
    else:
        request.getfixturevalue("env43")
        home, python, expected = spark43.server_home(), spark43.PYTHON, spark43.VERSION
        env["PYTHONPATH"] = str(spark43.ROOT)
    env.update(PYSPARK_PYTHON=str(python), PYSPARK_DRIVER_PYTHON=str(python), SPARK_LOCAL_IP="127.0.0.1")
    driver = spark40.ROOT / "airflow_provider_deltalite" / "jobs" / "driver.py"
    cmd = [str(home / "bin" / "spark-submit"), "--master", "local[2]", "--conf", "spark.ui.enabled=false"]
    out = subprocess.run(
        [*cmd, str(driver), "optimize", "--table", str(table)],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        check=False,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    assert f"Running Spark version {expected}" in out.stderr
    (line,) = [line for line in out.stdout.splitlines() if line.startswith("DELTALITE_RESULT ")]
    stats = json.loads(line.removeprefix("DELTALITE_RESULT "))
    assert (stats["executor"], stats["numFilesRemoved"], stats["numFilesAdded"]) == ("spark", 12, 2)
    assert _new_files(table, stats["committedVersion"]) == _new_files(local, by_local.committed_version)
    assert agreed_rows(table) == agreed_rows(path)


# -- a server whose Python workers lack pyarrow ----------------------------------------------------------------


@pytest.fixture(scope="module")
def server_without_pyarrow(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A 4.2 Connect server whose workers run a fresh virtualenv's Python: no pyarrow, fsspec or numpy there."""
    work = tmp_path_factory.mktemp("connect-no-pyarrow")
    venv = work / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    assert subprocess.run([str(python), "-c", "import pyarrow"], capture_output=True, check=False).returncode == 1
    try:
        server = start_connect_server(work / "server", python=str(python))
    except RuntimeError as exc:
        pytest.fail(str(exc))
    try:
        yield server.url
    finally:
        server.stop()


@pytest.mark.parametrize("client", ["4.2", "4.0"])
def test_workers_without_pyarrow_give_one_line_and_write_nothing(
    request: pytest.FixtureRequest, server_without_pyarrow: str, tmp_path: Path, client: str
) -> None:
    table = copy_table(DV_TABLE, tmp_path / "t")
    before = tree_state(table)
    args = ["optimize", str(table), "--executor", "spark", "--spark-master", server_without_pyarrow]
    if client == "4.2":
        line = cli_failure(*args)
    else:
        request.getfixturevalue("env40")
        line = spark40.failure(args)
    assert line == (
        f"deltalite: error: the Python of the Spark workers on {server_without_pyarrow} cannot import pyarrow "
        "(ModuleNotFoundError: No module named 'pyarrow'): install pyarrow, fsspec, numpy for the Python the "
        "workers run (PYSPARK_PYTHON or spark.pyspark.python of the cluster or Spark Connect server)"
    )
    assert tree_state(table) == before
