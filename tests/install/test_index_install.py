"""The README's install commands, run as they are against the package index in fresh environments (no constraints
file), for a new user and for users whose environment already has pyspark-client 4.0 or 4.1; then one OPTIMIZE in
each on local Spark, over Spark Connect (the new user's and the 4.1 client; the 4.0 client meets servers in
tests/executors/test_spark_versions.py), and one through the new user's spark-submit.

The only thing not taken from the index is this package, which is not published there: it is built from the checkout
into a wheel that uv finds through ``UV_FIND_LINKS``. ``pip`` in the README's lines is uv's (``pip() { uv pip "$@"; }``,
the README's own "with uv" spelling): uv installs from its cache, which keeps three fresh environments of Airflow within
the suite's time. Classic pyspark is published as a source distribution only, whose build (a 400 MB wheel) takes
minutes, and uv builds it again whenever its HTTP cache re-downloads the source (here: every time). So before the
README's second line runs, the pyspark release it will ask for (the installed pyspark-client's) is offered as a wheel
in a second find-links directory, the Makefile's wheel directory (``~/.cache/deltalite-tests/wheels``, shared by every
checkout), built there once by ``pip wheel`` (pip keeps built wheels in its own cache, keyed by the source's
address): uv still resolves the version from the index, and prefers the wheel to building the source again.

What the index resolves today is what a user gets; the assertions are about that: the classic pyspark installed is
the very release of the pyspark-client installed, a user's own pyspark-client stays as it was, and every Spark run
compacts the table exactly as the local executor does, rows checked with delta-rs.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest

from airflow_provider_deltalite import DeltaTable
from airflow_provider_deltalite.demo import create_small_file_table
from airflow_provider_deltalite.executors import LocalExecutor
from airflow_provider_deltalite.maintenance.optimize import optimize
from tests.helpers import copy_table
from tests.maintenance.test_optimize_spark import _new_files
from tests.oracles import agreed_rows

pytestmark = [pytest.mark.spark, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
MARKER = "<!-- tests/install/test_index_install.py runs the two commands below"
UV = Path(sys.executable).with_name("uv")
# The Makefile's wheel directory (its WHEELS, exported as DELTALITE_WHEELS): outside the checkout, so that every
# checkout's runs find the same files and uv, which caches a local wheel by its path and time, unpacks each once.
PYSPARK_WHEELS = Path(
    os.environ.get("DELTALITE_WHEELS", Path.home() / ".cache" / "deltalite-tests" / "wheels")
).expanduser()

# Who installs: nothing yet, or an environment (an Airflow image, say) that already has this pyspark-client.
USERS = {
    "new user": None,
    "pyspark-client 4.0": "pyspark-client>=4.0,<4.1",
    "pyspark-client 4.1": "pyspark-client>=4.1,<4.2",
}


def readme_install_commands() -> list[str]:
    """The lines of the README's install block (the fenced block after `MARKER`)."""
    text = README.read_text()
    rest = text[text.index(MARKER) :]
    start = rest.index("```bash\n") + len("```bash\n")
    return [line for line in rest[start : rest.index("```", start)].splitlines() if line.strip()]


@dataclass
class Installed:
    """One fresh environment after the README's commands."""

    user: str
    venv: Path
    env: dict[str, str]
    client_before: str | None  # the user's pyspark-client before installing
    versions: dict[str, str | None]  # pyspark and pyspark-client after
    seconds: float

    @property
    def python(self) -> str:
        return str(self.venv / "bin" / "python")

    def run(self, *cmd: str, timeout: float = 600) -> subprocess.CompletedProcess:
        return subprocess.run(cmd, env=self.env, capture_output=True, text=True, timeout=timeout, check=False)


def _base_python() -> str:
    base = Path(sys.base_prefix) / "bin" / f"python{sys.version_info.major}.{sys.version_info.minor}"
    return str(base) if base.exists() else "python3"


def _checked(out: subprocess.CompletedProcess, what: str) -> subprocess.CompletedProcess:
    assert out.returncode == 0, f"{what} failed:\n{out.stdout[-3000:]}\n{out.stderr[-3000:]}"
    return out


def _versions(installed: Installed) -> dict[str, str | None]:
    code = (
        "import importlib.metadata as m, json\n"
        "def v(name):\n"
        "    try:\n        return m.version(name)\n    except m.PackageNotFoundError:\n        return None\n"
        "print(json.dumps({n: v(n) for n in ('pyspark', 'pyspark-client', 'airflow-provider-deltalite')}))"
    )
    return json.loads(_checked(installed.run(installed.python, "-c", code), "reading versions").stdout)


def _pyspark_wheel(version: str | None) -> None:
    """A wheel of classic pyspark ``version`` in `PYSPARK_WHEELS`, built there by pip once (in a directory of its
    own, then renamed into place: another checkout's run may be reading the directory)."""
    assert version is not None, "the README's first line installed no pyspark-client"
    name = f"pyspark-{version}-py2.py3-none-any.whl"
    if (PYSPARK_WHEELS / name).exists():
        return
    PYSPARK_WHEELS.mkdir(parents=True, exist_ok=True)
    build = Path(tempfile.mkdtemp(prefix=".build-", dir=PYSPARK_WHEELS))
    try:
        pip = [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "-w", str(build), f"pyspark=={version}"]
        out = subprocess.run(pip, capture_output=True, text=True, timeout=1800, check=False)
        assert out.returncode == 0, out.stderr[-3000:]
        os.replace(build / name, PYSPARK_WHEELS / name)
    finally:
        shutil.rmtree(build, ignore_errors=True)


def _install(user: str, client: str | None, work: Path, package: Path) -> Installed:
    started = time.monotonic()
    venv = work / user.replace(" ", "-")
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("PYTHONPATH", "PYTHONDONTWRITEBYTECODE", "SPARK_HOME", "SPARK_REMOTE", "PYSPARK_PYTHON")
        and not k.startswith(("UV_", "PIP_", "VIRTUAL_ENV"))
    }
    env.update(
        VIRTUAL_ENV=str(venv),
        PATH=os.pathsep.join([str(venv / "bin"), str(UV.parent), env.get("PATH", "")]),
        PYSPARK_PYTHON=str(venv / "bin" / "python"),
        SPARK_LOCAL_IP="127.0.0.1",
    )
    # this package's wheel (not on the index), and the wheels of the pyspark releases a user may need
    env["UV_FIND_LINKS"] = f"{package},{PYSPARK_WHEELS}"
    installed = Installed(user, venv, env, None, {}, 0.0)
    _checked(installed.run(str(UV), "venv", "--quiet", "--python", _base_python(), str(venv)), f"{user}: uv venv")
    if client is not None:  # the environment the user already had
        _checked(installed.run(str(UV), "pip", "install", "--quiet", client), f"{user}: {client}")
        installed.client_before = _versions(installed)["pyspark-client"]
    first, second = readme_install_commands()
    for line in (first, second):
        if line is second:  # the pyspark it asks for, as a wheel uv finds (module docstring)
            _pyspark_wheel(_versions(installed)["pyspark-client"])
        script = 'set -euo pipefail\npip() { uv pip "$@"; }\n' + line + "\n"
        _checked(installed.run("bash", "-c", script, timeout=900), f"{user}: the README's {line!r}")
    installed.versions = _versions(installed)
    installed.seconds = time.monotonic() - started
    return installed


@pytest.fixture(scope="module")
def environments(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Installed]]:
    """The three environments, built side by side."""
    work = tmp_path_factory.mktemp("index-install")
    source = work / "source"  # a clean copy to build the wheel from (setuptools writes build/ and egg-info)
    shutil.copytree(
        ROOT / "airflow_provider_deltalite",
        source / "airflow_provider_deltalite",
        ignore=shutil.ignore_patterns("__pycache__"),
    )
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    wheels = work / "wheels"
    build = subprocess.run(
        [str(UV), "build", "--quiet", "--wheel", "--out-dir", str(wheels), str(source)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert build.returncode == 0, build.stderr[-3000:]
    with ThreadPoolExecutor(len(USERS)) as pool:
        futures = {user: pool.submit(_install, user, client, work, wheels) for user, client in USERS.items()}
        built = {user: future.result() for user, future in futures.items()}
    for installed in built.values():
        print(f"{installed.user}: {installed.versions}, installed in {installed.seconds:.0f} s")
    yield built
    shutil.rmtree(work, ignore_errors=True)


@pytest.fixture(scope="module")
def small_files(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[tuple], int]:
    """A table of 8 small files in 2 partitions, and the files and version the local executor's OPTIMIZE gives."""
    path = tmp_path_factory.mktemp("small-files") / "events"
    create_small_file_table(str(path), files=8, rows_per_file=50)
    reference = copy_table(path, tmp_path_factory.mktemp("reference") / "events")
    stats = optimize(DeltaTable(str(reference)), executor=LocalExecutor(2))
    assert (stats.num_files_removed, stats.num_files_added, stats.committed_version) == (8, 2, 9)
    return path, _new_files(reference, 9), DeltaTable(str(path)).snapshot().num_files


def _optimized_as_locally(table: Path, stats: dict, small_files: tuple[Path, list[tuple], int]) -> None:
    path, files, _ = small_files
    assert (stats["numFilesRemoved"], stats["numFilesAdded"], stats["committedVersion"]) == (8, 2, 9)
    assert _new_files(table, 9) == files
    assert agreed_rows(table) == agreed_rows(path)


def test_the_readme_installs_a_matching_classic_pyspark_and_keeps_the_users_client(
    environments: dict[str, Installed],
) -> None:
    assert readme_install_commands() == [
        "pip install 'airflow-provider-deltalite[s3]'",
        "pip install \"pyspark==$(pip show pyspark-client | sed -n 's/^Version: //p')\"",
    ]
    for user, installed in environments.items():
        versions = installed.versions
        assert versions["airflow-provider-deltalite"] is not None, user
        assert versions["pyspark"] is not None and versions["pyspark"] == versions["pyspark-client"], (user, versions)
        if installed.client_before is not None:  # theirs stayed, and classic pyspark is its release
            assert versions["pyspark-client"] == installed.client_before, (user, versions)
    assert environments["pyspark-client 4.0"].versions["pyspark"].startswith("4.0.")  # type: ignore[union-attr]
    assert environments["pyspark-client 4.1"].versions["pyspark"].startswith("4.1.")  # type: ignore[union-attr]


@pytest.mark.parametrize("user", list(USERS))
def test_optimize_on_local_spark(
    environments: dict[str, Installed], small_files: tuple[Path, list[tuple], int], tmp_path: Path, user: str
) -> None:
    installed = environments[user]
    table = copy_table(small_files[0], tmp_path / "events")
    args = ["optimize", str(table), "--executor", "spark", "--spark-master", "local[1]", "--json"]
    out = _checked(installed.run(str(installed.venv / "bin" / "deltalite"), *args), f"{user}: local Spark")
    stats = json.loads(out.stdout)
    assert stats["executor"] == "spark"
    _optimized_as_locally(table, stats, small_files)


# The 4.0 client against other servers is tests/executors/test_spark_versions.py's (4.0 and 4.3 servers); here the
# clients no other test runs: this environment's 4.2 as a user gets it, and 4.1.
@pytest.mark.parametrize("user", ["new user", "pyspark-client 4.1"])
def test_optimize_over_spark_connect(
    environments: dict[str, Installed],
    small_files: tuple[Path, list[tuple], int],
    spark_connect_server: str,
    tmp_path: Path,
    user: str,
) -> None:
    # the environment's client (4.2 or 4.1) against the suite's 4.2 server
    installed = environments[user]
    table = copy_table(small_files[0], tmp_path / "events")
    args = ["optimize", str(table), "--executor", "spark", "--spark-master", spark_connect_server, "--json"]
    out = _checked(installed.run(str(installed.venv / "bin" / "deltalite"), *args), f"{user}: Spark Connect")
    _optimized_as_locally(table, json.loads(out.stdout), small_files)


def test_optimize_through_the_environments_spark_submit(
    environments: dict[str, Installed], small_files: tuple[Path, list[tuple], int], tmp_path: Path
) -> None:
    # what the operators run: spark-submit of deltalite's job, here the one classic pyspark installed in the env
    installed = environments["new user"]
    table = copy_table(small_files[0], tmp_path / "events")
    (site,) = installed.venv.glob("lib/python*/site-packages")
    driver = site / "airflow_provider_deltalite" / "jobs" / "driver.py"
    spark_submit = installed.venv / "bin" / "spark-submit"
    out = _checked(
        installed.run(
            str(spark_submit),
            "--master",
            "local[1]",
            "--conf",
            "spark.ui.enabled=false",
            str(driver),
            "optimize",
            "--table",
            str(table),
        ),
        "spark-submit",
    )
    (line,) = [line for line in out.stdout.splitlines() if line.startswith("DELTALITE_RESULT ")]
    _optimized_as_locally(table, json.loads(line.removeprefix("DELTALITE_RESULT ")), small_files)
