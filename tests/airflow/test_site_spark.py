"""The spark-submit path runs the site's Spark, found as the Spark provider finds it (`locate_spark_submit`).

The site's Spark is a real installation made for the test: a ``SPARK_HOME`` that is not the pip package, whose
``bin/`` and ``jars/`` link to the pip pyspark's and whose ``conf/spark-defaults.conf`` is its own.
"""

from __future__ import annotations

import collections
import importlib.metadata
import json
import os
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import deltalake
import pyarrow as pa
import pytest

from airflow_provider_deltalite.demo import FAST_JVM_CONF, create_small_file_table
from airflow_provider_deltalite.hooks.deltalite import InvalidConnection
from airflow_provider_deltalite.hooks.spark_submit import (
    DeltaLiteSparkSubmitHook,
    bundled_spark_submit,
    locate_spark_submit,
    pyspark_home,
)
from airflow_provider_deltalite.operators.optimize import OptimizeOperator


def _site_spark(root: Path, defaults: str) -> Path:
    """A Spark installation at ``root``: the pip package's programs and jars, its own configuration."""
    root.mkdir()
    for name in ("bin", "jars"):
        (root / name).symlink_to(pyspark_home() / name, target_is_directory=True)
    (root / "conf").mkdir()
    (root / "conf" / "spark-defaults.conf").write_text(defaults)
    return root


def _program(directory: Path, name: str) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / name
    path.write_text("#!/bin/sh\nexit 0\n")
    path.chmod(0o755)
    return path


def test_the_spark_submit_is_found_on_path_then_in_spark_home_then_in_the_pip_package(tmp_path: Path) -> None:
    site = _site_spark(tmp_path / "spark", "")
    empty = tmp_path / "empty"
    empty.mkdir()
    on_path = tmp_path / "path"
    _program(on_path, "spark-submit")
    # on PATH: run by name as the Spark provider runs it; the child inherits SPARK_HOME
    assert locate_spark_submit("spark-submit", {"PATH": str(on_path), "SPARK_HOME": str(site)}) == (
        "spark-submit",
        None,
    )
    # not on PATH: the one in $SPARK_HOME/bin, SPARK_HOME left as it is
    assert locate_spark_submit("spark-submit", {"PATH": str(empty), "SPARK_HOME": str(site)}) == (
        str(site / "bin" / "spark-submit"),
        None,
    )
    # no other Spark: the pip package's, with SPARK_HOME pointing at it
    assert locate_spark_submit("spark-submit", {"PATH": str(empty)}) == (bundled_spark_submit(), str(pyspark_home()))
    assert locate_spark_submit("/opt/spark/bin/spark-submit", {"PATH": str(empty)}) == (
        "/opt/spark/bin/spark-submit",
        None,
    )
    _program(site.parent / "other", "spark3-submit")
    assert locate_spark_submit("spark3-submit", {"PATH": str(site.parent / "other")}) == ("spark3-submit", None)
    with pytest.raises(InvalidConnection, match=r"^spark3-submit is not on PATH and SPARK_HOME is not set$"):
        locate_spark_submit("spark3-submit", {"PATH": str(empty)})
    with pytest.raises(
        InvalidConnection, match=rf"^spark3-submit is not on PATH and SPARK_HOME \({site}\) has no bin/spark3-submit$"
    ):
        locate_spark_submit("spark3-submit", {"PATH": str(empty), "SPARK_HOME": str(site)})


@pytest.mark.parametrize("layout", ["pyspark-client", "classic without bin"])
def test_without_any_spark_submit_the_error_says_what_to_install(tmp_path: Path, layout: str) -> None:
    # pyspark-client's layout: the pyspark package without its classic half (core/, bin/, jars/): Spark Connect only;
    # or a classic package without bin/ (the python/ directory of a Spark distribution, say)
    left_out = ("bin", "jars", "sbin", "core") if layout == "pyspark-client" else ("bin", "jars", "sbin")
    client = tmp_path / "site-packages" / "pyspark"
    client.mkdir(parents=True)
    for entry in pyspark_home().iterdir():
        if entry.is_file():
            shutil.copy(entry, client / entry.name)
        elif entry.name not in left_out:
            (client / entry.name).symlink_to(entry)
    script = (
        "import json, pyspark\n"
        "from airflow_provider_deltalite.hooks.spark_submit import locate_spark_submit\n"
        "try:\n"
        f"    locate_spark_submit('spark-submit', {{'PATH': {str(tmp_path)!r}}})\n"
        "except Exception as exc:\n"
        "    print(json.dumps([type(exc).__name__, str(exc), pyspark.__file__]))\n"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(client.parent), str(Path(__file__).parents[2])])}
    out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, check=False)
    assert out.returncode == 0, out.stderr[-2000:]
    name, message, module = json.loads(out.stdout.strip().splitlines()[-1])
    assert Path(module).parent == client  # the package laid out here was the one found
    client_version = importlib.metadata.version("pyspark-client")
    if layout == "pyspark-client":
        expected = (
            f"spark-submit (not on PATH, SPARK_HOME not set) needs classic pyspark, but only pyspark-client "
            f"{client_version} is installed: pip install 'pyspark=={client_version}' (the release of your "
            "pyspark-client), or set SPARK_HOME to your "
            "Spark, or use a spark_connect connection"
        )
    else:
        expected = (
            f"spark-submit is not on PATH, SPARK_HOME is not set, and the installed pyspark ({client}) has no "
            "bin/spark-submit: set SPARK_HOME to your Spark"
        )
    assert (name, message) == ("InvalidConnection", expected)


def test_the_hook_takes_spark_binary_from_the_argument_then_the_connection(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    site = tmp_path / "spark"
    _program(site / "bin", "spark3-submit")
    _program(site / "bin", "spark2-submit")
    monkeypatch.setenv("PATH", str(tmp_path / "nothing"))
    monkeypatch.setenv("SPARK_HOME", str(site))
    monkeypatch.setenv(
        "AIRFLOW_CONN_SITE",
        json.dumps({"conn_type": "spark", "host": "local[2]", "extra": {"spark-binary": "spark3-submit"}}),
    )
    hook = DeltaLiteSparkSubmitHook(conn_id="site")
    assert hook.spark_submit_command == str(site / "bin" / "spark3-submit")
    assert "SPARK_HOME" not in (hook._env_vars or {})
    assert hook._build_spark_submit_command("job.py")[:3] == [
        str(site / "bin" / "spark3-submit"),
        "--master",
        "local[2]",
    ]
    assert DeltaLiteSparkSubmitHook(conn_id="site", spark_binary="spark2-submit").spark_submit_command == str(
        site / "bin" / "spark2-submit"
    )
    # a SPARK_HOME given in env_vars is the one spark-submit's environment will have
    monkeypatch.delenv("SPARK_HOME")
    other = tmp_path / "other-spark"
    _program(other / "bin", "spark-submit")
    hook = DeltaLiteSparkSubmitHook(conn_id="spark_default", env_vars={"SPARK_HOME": str(other)})
    assert hook.spark_submit_command == str(other / "bin" / "spark-submit")
    # the Spark provider's own checks of the connection stay in force
    monkeypatch.setenv(
        "AIRFLOW_CONN_OLD", json.dumps({"conn_type": "spark", "host": "local", "extra": {"spark-home": str(site)}})
    )
    with pytest.raises(ValueError, match=r"^The `spark-home` extra is not allowed any more"):
        DeltaLiteSparkSubmitHook(conn_id="old")
    monkeypatch.setenv(
        "AIRFLOW_CONN_ODD", json.dumps({"conn_type": "spark", "host": "local", "extra": {"spark-binary": "sh"}})
    )
    with pytest.raises(ValueError, match=r"^The spark-binary extra can be one of"):
        DeltaLiteSparkSubmitHook(conn_id="odd")


@pytest.mark.slow
def test_the_operator_runs_the_sites_spark_with_its_spark_defaults(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    events = tmp_path / "events"
    events.mkdir()
    marker = "site-defaults-7f3a"
    # properties only the site's spark-defaults.conf sets: the driver writes its event log where they say, and the
    # log's environment event lists the properties the job's SparkContext ran with
    site = _site_spark(
        tmp_path / "spark",
        f"spark.eventLog.enabled true\nspark.eventLog.dir file://{events}\nspark.eventLog.compress false\n"
        f"spark.eventLog.rolling.enabled false\nspark.deltalite.test.marker {marker}\n",
    )
    monkeypatch.setenv("SPARK_HOME", str(site))
    # no spark-submit on PATH: the one in the site's SPARK_HOME runs, not the pip package's
    path = [p for p in os.environ["PATH"].split(os.pathsep) if p and not Path(p, "spark-submit").exists()]
    monkeypatch.setenv("PATH", os.pathsep.join(path))
    uri = str(tmp_path / "t")
    create_small_file_table(uri, files=6, rows_per_file=40)
    before = collections.Counter(map(repr, pa.table(deltalake.DeltaTable(uri).to_pyarrow_table()).to_pylist()))

    # a storage option standing for a credential (the local file system ignores it): it must reach the driver
    # through the spark-submit process environment only, never its command line
    secret = f"secret-{uuid.uuid4().hex}"
    connection = {"conn_type": "deltalite", "host": str(tmp_path), "extra": {"storage_options": {"token": secret}}}
    monkeypatch.setenv("AIRFLOW_CONN_SITE_LAKE", json.dumps(connection))

    op = OptimizeOperator(task_id="optimize", table_uri="t", deltalite_conn_id="site_lake", conf=FAST_JVM_CONF)
    stats = op.execute({})
    log = "".join(capfd.readouterr())

    # one file per partition (the demo table has two)
    assert (stats["numFilesRemoved"], stats["numFilesAdded"], stats["committedVersion"]) == (6, 2, 7)
    hook = op._submit_hook
    assert hook is not None
    assert hook.spark_submit_command == str(site / "bin" / "spark-submit")
    assert "SPARK_HOME" not in (hook._env or {})  # the site's, inherited: not replaced by the pip package
    assert json.loads((hook._env or {})["DELTALITE_STORAGE_OPTIONS"]) == {"token": secret}
    command = hook._build_spark_submit_command("job.py")
    assert command[0] == str(site / "bin" / "spark-submit")
    assert not any(secret in arg for arg in command)
    [cmd] = [line for line in log.splitlines() if "Spark-Submit cmd:" in line]
    assert f"Spark-Submit cmd: {site / 'bin' / 'spark-submit'} --master local[*] " in cmd
    assert secret not in log
    [log] = list(events.iterdir())
    records = [json.loads(line) for line in log.read_text().splitlines()]
    [environment] = [r for r in records if r["Event"] == "SparkListenerEnvironmentUpdate"]
    properties = environment["Spark Properties"]
    properties = dict(properties) if isinstance(properties, list) else properties
    assert properties["spark.deltalite.test.marker"] == marker
    assert properties["spark.master"] == "local[*]"
    after = collections.Counter(map(repr, pa.table(deltalake.DeltaTable(uri).to_pyarrow_table()).to_pylist()))
    assert after == before
    assert len(deltalake.DeltaTable(uri).file_uris()) == 2
