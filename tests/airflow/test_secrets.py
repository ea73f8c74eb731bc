"""Secrets sweep (issue 9, item 4): credentials held in deltalite connections reach no log, XCom, command line,
exception, rendered field, trigger, commit or leftover file.

One ``dag.test()`` run (tests/airflow/secrets_dags/secrets_dags.py) in the session's migrated Airflow home runs every
operator and the sensor against one table on moto S3, through connections holding distinctive random credentials.
Each task runs the way a worker runs it: in a task process of its own under Airflow's supervisor, which writes the
task log file, with a secrets masker that knows only what that task registered (``dag.test()``'s in-process runner
would share one masker across tasks, and write no log files).

- successes: OPTIMIZE, Z-order and VACUUM as spark-submit jobs in local mode (credentials in the process
  environment), a poke-mode NewVersionSensor, and a deferrable one whose NewVersionTrigger waits until this test
  appends a commit;
- failures before the JVM (bad ``where``, unknown Z-order column, a retention below the table's, a missing table),
  one inside the Spark job (the driver's ``deltalite: error:`` line), and cluster deploy mode on YARN (credentials
  in a 0600 file shipped with ``--files``; there is no YARN here, so the submit fails after the command is built);
- tables by their Glue name (moto's Glue): an OPTIMIZE planned in the worker and a sensor through a connection whose
  base URI is a Glue database, a missing Glue table and a Glue table that is not a Delta table;
- an operator and the sensor through each of two connections that cannot be used: an Airflow URI-format connection
  with ``user:password@`` in its URI and Azure/GCS/S3 secret fields, and a base URI (host) carrying
  ``user:password@`` (which, before the hook refused it, reached the command line, logs and error messages).

Spark runs through a ``spark3-submit`` wrapper first on PATH that records its argv and, while the real spark-submit
runs, the command line of every process in its process group (launcher, JVM, Python driver, workers).

Each secret is searched as is, URL-encoded, JSON-escaped and base64-encoded (standard and URL-safe, at each of the
three byte alignments inside a larger blob), and by its random core alone (which survives any quoting), in every
place listed in `test_no_secret_reaches_any_place`; the other tests check that each place holds what it should, so
the sweep cannot pass by searching nothing.
"""

from __future__ import annotations

import base64
import json
import os
import re
import resource
import sqlite3
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote, quote_plus

import pytest

from airflow_provider_deltalite import DeltaTable
from airflow_provider_deltalite.demo import FAST_JVM_CONF, create_small_file_table
from airflow_provider_deltalite.hooks.spark_submit import bundled_spark_submit, pyspark_home
from airflow_provider_deltalite.jobs.driver import STORAGE_OPTIONS_ENV
from airflow_provider_deltalite.operators.base import JOB_FILE
from tests import glue_tables
from tests.airflow.conftest import AirflowHome

pytestmark = [pytest.mark.slow, pytest.mark.s3]

SECRETS_DAGS = Path(__file__).resolve().parent / "secrets_dags"
DAG_ID = "deltalite_secrets_sweep"
SUCCEEDING = ("optimize", "zorder", "vacuum", "new_data", "deferred", "optimize_glue", "sensor_glue")
UNUSABLE_CONNECTIONS = ("lake_uri", "lake_host_userinfo")
FAILING = (
    "optimize_bad_where",
    "zorder_bad_column",
    "vacuum_bad_retention",
    "sensor_missing",
    "optimize_fails_in_spark",
    "optimize_cluster_mode",
    "optimize_lake_uri",
    "vacuum_lake_host_userinfo",
    *(f"sensor_{conn}" for conn in UNUSABLE_CONNECTIONS),
    "optimize_glue_missing",
    "sensor_glue_not_delta",
)
TABLE_FILES = 6
WHERE_PROBLEM = "where may only reference partition columns; 'amount' is not one (partition columns: date)"

# The spark-submit the Spark connections name (one of the Spark provider's allowed binaries). It records its argv, the
# names (never the values) of the credential-carrying environment variables, the storage-options files it is asked
# to ship (their mode and keys, never their values) and, while the real spark-submit runs, the command line of every
# process in its process group: the launcher, the JVM, the Python driver and its workers. In cluster deploy mode
# there is no cluster here (YARN): it records the command and fails as spark-submit would, without starting a JVM.
WRAPPER = """#!{python}
import json, os, stat, subprocess, sys, time

argv = sys.argv[1:]
shipped = []
if "--files" in argv:
    for path in argv[argv.index("--files") + 1].split(","):
        if "storage-options" in os.path.basename(path):
            with open(path) as handle:
                keys = sorted(json.load(handle))
            shipped.append({{"path": path, "mode": oct(stat.S_IMODE(os.stat(path).st_mode)), "keys": keys}})
names = sorted(k for k in os.environ if k.startswith(("DELTALITE_", "AWS_", "AZURE_", "GOOGLE_")))
cluster = "--deploy-mode" in argv and argv[argv.index("--deploy-mode") + 1] == "cluster"
group, me, seen = os.getpgid(0), os.getpid(), set()
if cluster:
    print("Exception in thread main: no YARN cluster here (spark3-submit test wrapper)", flush=True)
    returncode = 1
else:
    proc = subprocess.Popen([{real!r}, *argv], env={{**os.environ, "SPARK_HOME": {home!r}}})
    while proc.poll() is None:
        for entry in os.listdir("/proc"):
            if not entry.isdigit() or int(entry) == me:
                continue
            try:
                if os.getpgid(int(entry)) != group:
                    continue
                with open(f"/proc/{{entry}}/cmdline", "rb") as handle:
                    raw = handle.read()
            except OSError:
                continue
            if raw:
                seen.add(tuple(part.decode(errors="replace") for part in raw.rstrip(b"\\0").split(b"\\0")))
        time.sleep(0.05)
    returncode = proc.returncode
record = {{"argv": argv, "env_names": names, "children": sorted(seen), "shipped": shipped, "returncode": returncode}}
with open(os.path.join(os.environ["DELTALITE_SECRETS_OUT"], "spark-submit.jsonl"), "a") as out:
    out.write(json.dumps(record) + "\\n")
sys.exit(returncode)
"""


def _core() -> str:
    return uuid.uuid4().hex


def make_secrets() -> dict[str, str]:
    """Distinctive credentials, each with a random core; ``/``, ``+`` and ``=`` make the encoded forms differ."""
    return {
        "aws_access_key_id": f"AKIA{_core()[:16].upper()}",
        "aws_secret_access_key": f"wJalr/{_core()}+K7MDENG=",
        "aws_session_token": f"IQoJb3JpZ2luX2Vj//{_core()}+tok==",
        "login": f"login-{_core()}",
        "password": f"pw/{_core()}+=",
        "uri_user": f"uri-user-{_core()}",
        "uri_password": f"uri-pw-{_core()}",
        "uri_aws_secret_access_key": f"uriSecret/{_core()}+",
        "azure_account_key": f"{_core()}{_core()}+/az==",
        "azure_sas_token": f"sv=2025-01-05&ss=b&srt=o&sig={_core()}%2B%2F",
        "azure_client_secret": f"cs~{_core()}",
        "azure_connection_string": (
            f"DefaultEndpointsProtocol=https;AccountName=acct;AccountKey={_core()}==;EndpointSuffix=core.windows.net"
        ),
        "gcs_private_key": f"-----BEGIN PRIVATE KEY-----\nMIIE{_core()}\n-----END PRIVATE KEY-----\n",
        "storage_option_secret": f"so-{_core()}",
        "host_user": f"hostuser{_core()}",
        "host_password": f"hostpass{_core()}",
    }


def _base64_forms(data: bytes) -> set[bytes]:
    """The base64 text of ``data`` wherever it sits in a larger blob: one form per byte alignment, cut to the
    characters that depend on ``data`` alone."""
    forms = set()
    for offset in range(3):
        encoded = base64.b64encode(bytes(offset) + data)
        start = 4 if offset else 0
        end = len(encoded) if (offset + len(data)) % 3 == 0 else len(encoded) - 4
        for text in (encoded[start:end], encoded[start:end].replace(b"+", b"-").replace(b"/", b"_")):
            if len(text) >= 16:
                forms.add(text)
    return forms


def secret_forms(value: str) -> dict[str, bytes]:
    """Every form of ``value`` searched for, by name."""
    raw = value.encode()
    forms: dict[str, bytes] = {
        "raw": raw,
        "url": quote(value, safe="").encode(),
        "url-plus": quote_plus(value).encode(),
        "json": json.dumps(value)[1:-1].encode(),
    }
    core = re.search(r"[0-9a-f]{32}", value)
    if core is not None:  # the random hex digits survive any quoting, escaping or truncation around them
        forms["core"] = core.group().encode()
    for i, form in enumerate(sorted(_base64_forms(raw))):
        forms[f"base64-{i}"] = form
    return forms


@dataclass
class Sweep:
    """What one run of the sweep DAG left behind, by place."""

    secrets: dict[str, str]
    result: dict[str, Any]
    places: dict[str, dict[str, bytes]] = field(default_factory=dict)
    records: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    metadata: dict[str, Any] = field(default_factory=dict)
    db_rows: dict[str, list[tuple]] = field(default_factory=dict)
    commits: dict[int, list[dict[str, Any]]] = field(default_factory=dict)
    leftovers: list[Path] = field(default_factory=list)
    task_logs: dict[str, str] = field(default_factory=dict)
    table_uri: str = ""
    glue_database: str = ""
    endpoint: str = ""
    output: str = ""
    appended: int = -1
    seconds: float = 0.0
    cpu_seconds: float = 0.0


def _jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def _files_under(root: Path) -> Iterator[Path]:
    for path in sorted(root.rglob("*")):
        if path.is_file() and not path.is_symlink():
            yield path


def _append_one_file(uri: str, options: dict[str, Any]) -> int:
    """Append one data file with deltalite's engine (a data-changing commit); the new version."""
    import pyarrow as pa

    from airflow_provider_deltalite.engine.data_file_writer import WriterOptions
    from airflow_provider_deltalite.engine.rewrite import TableContext, write_data_file

    table = DeltaTable(uri, storage_options=options)
    snapshot = table.snapshot()
    rows = pa.table(
        {
            "event_id": pa.array([10_000, 10_001], pa.int64()),
            "user_id": pa.array([1, 2], pa.int64()),
            "amount": pa.array([1.5, 2.5]),
            "country": pa.array(["DE", "FR"]),
        }
    )
    add = write_data_file(TableContext.from_snapshot(snapshot), {"date": "2026-11-22"}, [rows], WriterOptions())
    assert add is not None
    txn = table.transaction(snapshot)
    txn.add({**add, "dataChange": True})
    return txn.commit("WRITE", {"mode": "Append"}).version


def _db_rows(db: Path) -> dict[str, list[tuple]]:
    """Every row of every table of the metadata database, read with sqlite3 (no Airflow in between)."""
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=30) as conn:
        tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        return {t: conn.execute(f'SELECT * FROM "{t}"').fetchall() for t in tables}


def _connections(secrets: dict[str, str], bucket: str, endpoint: str, glue_database: str) -> dict[str, str]:
    """The AIRFLOW_CONN_* variables of the run."""
    s3 = {"endpoint_url": endpoint, "region_name": "us-east-1"}
    lake = {
        "conn_type": "deltalite",
        "host": f"s3://{bucket}",
        # hidden in the form, but a connection can still carry them
        "login": secrets["login"],
        "password": secrets["password"],
        "extra": {
            "aws_access_key_id": secrets["aws_access_key_id"],
            "aws_secret_access_key": secrets["aws_secret_access_key"],
            "aws_session_token": secrets["aws_session_token"],
            **s3,
        },
    }
    foreign = {
        "aws_access_key_id": secrets["aws_access_key_id"],
        "aws_secret_access_key": secrets["uri_aws_secret_access_key"],
        **s3,
        "azure_account_name": "acct",
        "azure_account_key": secrets["azure_account_key"],
        "azure_sas_token": secrets["azure_sas_token"],
        "azure_client_secret": secrets["azure_client_secret"],
        "azure_connection_string": secrets["azure_connection_string"],
        "gcs_token": {"type": "service_account", "private_key": secrets["gcs_private_key"]},
        "storage_options": {"credential": secrets["storage_option_secret"]},
    }
    # Airflow's URI format: user:password@ of the inner s3:// URI become the connection's login and password.
    uri = (
        f"deltalite://s3://{quote(secrets['uri_user'], safe='')}:{quote(secrets['uri_password'], safe='')}@{bucket}"
        f"?__extra__={quote(json.dumps(foreign), safe='')}"
    )
    host_userinfo = {
        "conn_type": "deltalite",
        "host": f"s3://{secrets['host_user']}:{secrets['host_password']}@{bucket}",
        "extra": lake["extra"],
    }
    glue = {
        **lake,
        "host": f"glue://{glue_database}",
        "extra": {**lake["extra"], "glue_endpoint": endpoint, "glue_region": "us-east-1"},
    }
    return {
        "AIRFLOW_CONN_LAKE": json.dumps(lake),
        "AIRFLOW_CONN_LAKE_GLUE": json.dumps(glue),
        "AIRFLOW_CONN_LAKE_URI": uri,
        "AIRFLOW_CONN_LAKE_HOST_USERINFO": json.dumps(host_userinfo),
        "AIRFLOW_CONN_SPARK_WRAPPED": json.dumps(
            {"conn_type": "spark", "host": "local[2]", "extra": {"spark-binary": "spark3-submit"}}
        ),
        "AIRFLOW_CONN_SPARK_YARN_CLUSTER": json.dumps(
            {"conn_type": "spark", "host": "yarn", "extra": {"deploy-mode": "cluster", "spark-binary": "spark3-submit"}}
        ),
    }


@pytest.fixture(scope="module")
def sweep(airflow_home: AirflowHome, s3_endpoint: dict[str, Any], tmp_path_factory: pytest.TempPathFactory) -> Sweep:
    """Run the sweep DAG once and gather every place a secret could reach."""
    import s3fs

    root = tmp_path_factory.mktemp("secrets")
    out, bin_dir, tmp, work = root / "out", root / "bin", root / "tmp", root / "work"
    for d in (out, bin_dir, tmp, work):
        d.mkdir()
    secrets = make_secrets()
    bucket = f"secrets-{uuid.uuid4().hex[:8]}"
    s3 = {
        **s3_endpoint,
        "key": secrets["aws_access_key_id"],
        "secret": secrets["aws_secret_access_key"],
        "token": secrets["aws_session_token"],
    }
    fs = s3fs.S3FileSystem(**s3)
    fs.call_s3("create_bucket", Bucket=bucket)
    uri = f"s3://{bucket}/events"
    create_small_file_table(uri, files=TABLE_FILES, rows_per_file=20, storage_options=s3)
    glue_database = f"secrets_{uuid.uuid4().hex[:8]}"
    glue_tables.register(
        glue_tables.glue_client(s3_endpoint),
        glue_database,
        [
            glue_tables.spark_delta_catalog(glue_database, "events", uri),
            glue_tables.crawler_parquet("clicks", f"s3://{bucket}/raw/clicks/"),
        ],
    )

    wrapper = bin_dir / "spark3-submit"
    wrapper.write_text(WRAPPER.format(python=sys.executable, real=bundled_spark_submit(), home=str(pyspark_home())))
    wrapper.chmod(0o755)
    jvm = f"{FAST_JVM_CONF['spark.driver.extraJavaOptions']} -Djava.io.tmpdir={tmp}"
    spark_conf = {
        **FAST_JVM_CONF,
        "spark.driver.extraJavaOptions": jvm,
        "spark.executor.extraJavaOptions": jvm,
        "spark.local.dir": str(tmp),
    }
    env = {
        **{k: v for k, v in airflow_home.env.items() if k not in ("HADOOP_CONF_DIR", "YARN_CONF_DIR")},
        **_connections(secrets, bucket, s3_endpoint["endpoint_url"], glue_database),
        "AIRFLOW__CORE__DAGS_FOLDER": str(SECRETS_DAGS),
        "PATH": f"{bin_dir}{os.pathsep}{airflow_home.env['PATH']}",
        "TMPDIR": str(tmp),
        "AWS_EC2_METADATA_DISABLED": "true",
        # the task supervisor notices a finished task process within a second (default: 5)
        "AIRFLOW__WORKERS__MIN_HEARTBEAT_INTERVAL": "1",
        "DELTALITE_SECRETS_OUT": str(out),
        "DELTALITE_SECRETS_SPARK_CONF": json.dumps(spark_conf),
        "DELTALITE_SECRETS_RESULT_URI": f"s3://{bucket}/_results",
    }
    started, cpu_before = time.monotonic(), _children_cpu()
    with (root / "stdout.log").open("w") as stdout, (root / "stderr.log").open("w") as stderr:
        driver = subprocess.Popen(
            [sys.executable, str(SECRETS_DAGS / "secrets_dags.py")], env=env, cwd=work, stdout=stdout, stderr=stderr
        )
        try:
            deadline = started + 600
            # The deferrable sensor records its trigger just before deferring: then add the data it waits for.
            while not (out / "triggers.jsonl").exists():
                if driver.poll() is not None or time.monotonic() > deadline:
                    pytest.fail(f"the sensor never deferred:\n{(root / 'stdout.log').read_text()[-4000:]}")
                time.sleep(0.1)
            appended = _append_one_file(uri, s3)
            driver.wait(max(1.0, deadline - time.monotonic()))
        finally:
            if driver.poll() is None:
                driver.kill()
                driver.wait()
    output = (root / "stdout.log").read_text()
    errors = (root / "stderr.log").read_text()
    assert driver.returncode == 0, output[-4000:] + errors[-4000:]
    [result] = [json.loads(line.removeprefix("RESULT ")) for line in output.splitlines() if line.startswith("RESULT ")]

    sweep = Sweep(
        secrets=secrets,
        result=result,
        table_uri=uri,
        output=output,
        appended=appended,
        glue_database=glue_database,
        endpoint=s3_endpoint["endpoint_url"],
    )
    sweep.seconds, sweep.cpu_seconds = time.monotonic() - started, _children_cpu() - cpu_before
    sweep.records = {name: _jsonl(out / f"{name}.jsonl") for name in ("spark-submit", "failures", "triggers")}
    sweep.metadata = json.loads((out / "metadata.json").read_text())
    sweep.db_rows = _db_rows(airflow_home.path / "airflow.db")
    log_dir = airflow_home.path / "logs"
    sweep.task_logs = {
        p.parent.name.removeprefix("task_id="): p.read_text() for p in log_dir.glob(f"dag_id={DAG_ID}/*/*/*.log")
    }
    for name in fs.ls(f"{bucket}/events/_delta_log"):
        if name.endswith(".json"):
            sweep.commits[int(Path(name).stem)] = [json.loads(line) for line in fs.cat_file(name).splitlines()]
    sweep.leftovers = [*_files_under(tmp), *_files_under(work)]

    def dumps(value: Any) -> bytes:
        return json.dumps(value, default=str).encode()

    sweep.places = {
        "run stdout and stderr (dag.test, inline trigger)": {"stdout": output.encode(), "stderr": errors.encode()},
        "task log files": {str(p.relative_to(log_dir)): p.read_bytes() for p in _files_under(log_dir)},
        "XCom values (deserialized)": {x["task"]: dumps(x) for x in sweep.metadata["xcom"]},
        "rendered template fields (deserialized)": {r["task"]: dumps(r) for r in sweep.metadata["rendered"]},
        "trigger table (kwargs decrypted)": {str(t["id"]): dumps(t) for t in sweep.metadata["trigger"]},
        "metadata database, every row of every table": {t: repr(rows).encode() for t, rows in sweep.db_rows.items()},
        "every file of the Airflow home (database, logs, config)": {
            str(p.relative_to(airflow_home.path)): p.read_bytes() for p in _files_under(airflow_home.path)
        },
        "spark-submit command lines": {str(i): dumps(r["argv"]) for i, r in enumerate(sweep.records["spark-submit"])},
        "Spark process command lines (launcher, JVM, Python driver, workers)": {
            str(i): dumps(r["children"]) for i, r in enumerate(sweep.records["spark-submit"]) if r["children"]
        },
        "exceptions of failed tasks (str, repr, args, traceback)": {
            r["task"]: dumps(r) for r in sweep.records["failures"]
        },
        "serialised triggers (serialize())": {str(i): dumps(r) for i, r in enumerate(sweep.records["triggers"])},
        "Delta log commits (commitInfo and every action)": {str(v): dumps(c) for v, c in sweep.commits.items()},
        "files left in the run's temp and working directories": {str(p): p.read_bytes() for p in sweep.leftovers},
    }
    return sweep


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def hits_in(places: dict[str, dict[str, bytes]], secrets: dict[str, str]) -> list[tuple[str, str, str, str]]:
    """Every (place, item, secret name, form) where a form of a secret occurs."""
    needles = {(name, form): text for name, v in secrets.items() for form, text in secret_forms(v).items()}
    return [
        (place, item, name, form)
        for place, items in places.items()
        for item, content in items.items()
        for (name, form), text in needles.items()
        if text in content
    ]


# -- the search itself ------------------------------------------------------------------------------------------------


def test_the_search_finds_each_form_of_each_secret_inside_larger_text() -> None:
    secrets = make_secrets()
    for name, value in secrets.items():
        blobs = {
            "raw": f"before {value} after".encode(),
            "url": f"x={quote(value, safe='')}&y".encode(),
            "json": json.dumps({"k": value}).encode(),
            "repr": repr({"k": value}).encode(),
            **{f"base64-{n}": base64.b64encode(b"p" * n + value.encode() + b"tail") for n in range(3)},
            **{f"urlsafe-{n}": base64.urlsafe_b64encode(b"pq" * n + value.encode()) for n in range(3)},
        }
        for label, blob in blobs.items():
            assert hits_in({"p": {label: blob}}, {name: value}), (name, label)
    assert hits_in({"p": {"clean": b"no credentials here: *** and ******"}}, secrets) == []


# -- the sweep --------------------------------------------------------------------------------------------------------


def test_no_secret_reaches_any_place(sweep: Sweep) -> None:
    hits = hits_in(sweep.places, sweep.secrets)
    searched = {place: len(items) for place, items in sweep.places.items()}
    forms = sum(len(secret_forms(v)) for v in sweep.secrets.values())
    print(
        f"\nsecrets sweep: {len(sweep.secrets)} secrets in {forms} forms, {len(searched)} places "
        f"({sum(searched.values())} items, {sum(len(c) for i in sweep.places.values() for c in i.values())} bytes): "
        f"{len(hits)} hits; the run took {sweep.seconds:.0f} s wall, {sweep.cpu_seconds:.0f} s CPU"
    )
    for place, count in searched.items():
        print(f"  {place}: {count}")
    assert not hits, "secrets found:\n" + "\n".join(f"{p} / {i}: {n} ({f})" for p, i, n, f in hits)
    assert all(count > 0 for count in searched.values()), searched


def test_every_task_ended_as_planned(sweep: Sweep) -> None:
    assert sweep.result["state"] == "failed"  # the failures are part of the plan
    assert sweep.result["tasks"] == {task: "success" for task in SUCCEEDING} | {task: "failed" for task in FAILING}


def test_each_task_wrote_its_own_log_file_with_what_it_did(sweep: Sweep) -> None:
    logs = sweep.task_logs
    assert sorted(logs) == sorted([*SUCCEEDING, *FAILING])
    for task in ("optimize", "zorder", "vacuum"):
        assert "Spark-Submit cmd: spark3-submit --master local[2] " in logs[task]
        assert "DELTALITE_RESULT {" in logs[task]  # the job's stats line
    assert "New data in events: version(s) [1, 2, 3, 4, 5, 6]" in logs["new_data"]
    assert f"New data in events: version(s) [{sweep.appended}]" in logs["deferred"]  # after the trigger fired
    failures = {r["task"]: r["str"] for r in sweep.records["failures"]}
    for task in FAILING:
        assert "Task failed with exception" in logs[task]
        assert json.dumps(failures[task])[1:-1] in logs[task]  # the exception message, as logged (JSON lines)
    assert f"deltalite: error: table {sweep.table_uri}: {WHERE_PROBLEM}" in logs["optimize_fails_in_spark"]
    resolved = f"glue://{sweep.glue_database}/events is the Delta table at {sweep.table_uri}"
    assert resolved in logs["optimize_glue"] and resolved in logs["sensor_glue"]


def test_failed_tasks_raised_one_line_errors_naming_no_value(sweep: Sweep) -> None:
    uri, glue = sweep.table_uri, sweep.glue_database
    userinfo = "connection 'lake_host_userinfo': the base URI (host) holds credentials (user:password@); put them in "
    foreign = (
        "connection 'lake_uri': extra field(s) azure_account_key, azure_account_name, azure_client_secret, "
        "azure_connection_string, azure_sas_token, gcs_token do not apply to a s3 table"
    )
    expected = {
        "optimize_bad_where": ("InvalidExpression", f"table {uri}: {WHERE_PROBLEM}"),
        "zorder_bad_column": (
            "InvalidArgument",
            f"table {uri}: zorder column 'no_such_column' does not exist in the table",
        ),
        "sensor_missing": ("TableNotFound", f"table {uri.rsplit('/', 1)[0]}/missing: path does not exist"),
        "optimize_fails_in_spark": ("DeltaLiteJobFailed", f"table {uri}: optimize job failed: {WHERE_PROBLEM}"),
        "optimize_cluster_mode": (
            "DeltaLiteJobFailed",
            f"table {uri}: optimize job failed: spark-submit exited with code 1; last output: Exception in thread "
            "main: no YARN cluster here (spark3-submit test wrapper)",
        ),
        "optimize_lake_uri": ("InvalidConnection", foreign),
        "sensor_lake_uri": ("InvalidConnection", foreign),
        "vacuum_lake_host_userinfo": ("InvalidConnection", userinfo + "the extra fields"),
        "sensor_lake_host_userinfo": ("InvalidConnection", userinfo + "the extra fields"),
        "optimize_glue_missing": (
            "CatalogTableNotFound",
            f"table glue://{glue}/missing: table 'missing' does not exist in database '{glue}' of the Glue Data "
            f"Catalog of region us-east-1 at {sweep.endpoint}",
        ),
        "sensor_glue_not_delta": (
            "NotADeltaTable",
            f"table glue://{glue}/clicks: the Glue table is not a Delta table (classification=parquet)",
        ),
    }
    failures = {r["task"]: r for r in sweep.records["failures"]}
    assert sorted(failures) == sorted(FAILING)
    for task, (kind, message) in expected.items():
        assert (failures[task]["type"], failures[task]["str"]) == (kind, message), task
    retention = failures["vacuum_bad_retention"]
    assert retention["type"] == "RetentionTooShort"
    assert retention["str"].startswith(f"table {uri}: a retention of 0 hours is shorter than the table's ")
    assert all("\n" not in r["str"] for r in failures.values())


def test_xcom_holds_the_stats_and_payloads(sweep: Sweep) -> None:
    xcom = {x["task"]: x["value"] for x in sweep.metadata["xcom"] if x["key"] == "return_value"}
    assert sorted(xcom) == sorted(SUCCEEDING)
    optimize, zorder, vacuum = xcom["optimize"], xcom["zorder"], xcom["vacuum"]
    assert (optimize["numFilesRemoved"], optimize["numFilesAdded"], optimize["committedVersion"]) == (6, 2, 7)
    assert (zorder["committedVersion"], zorder["zOrderStats"]["columns"]) == (8, ["user_id", "amount"])
    assert (vacuum["committedVersions"], vacuum["objectsDeleted"]) == ([9, 10], 8)
    assert all(x["executor"] == "spark" and x["skippedReason"] is None for x in (optimize, zorder, vacuum))
    assert (xcom["new_data"]["versions"], xcom["deferred"]["versions"]) == ([1, 2, 3, 4, 5, 6], [sweep.appended])
    assert xcom["deferred"]["baseline_version"] == 6 and xcom["deferred"]["table_uri"] == sweep.table_uri
    # by Glue name: the plan ran in the worker on the table's location, and the threshold skipped Spark
    assert (xcom["optimize_glue"]["numFilesRemoved"], xcom["optimize_glue"]["skippedReason"]) == (
        TABLE_FILES,
        f"{TABLE_FILES} files to compact, fewer than min_small_files=1000",
    )
    assert (xcom["sensor_glue"]["table_uri"], xcom["sensor_glue"]["versions"]) == (sweep.table_uri, [1, 2, 3, 4, 5, 6])


def test_rendered_fields_and_the_trigger_are_in_the_metadata_database(sweep: Sweep) -> None:
    rendered = {r["task"]: r["fields"] for r in sweep.metadata["rendered"]}
    assert sorted(rendered) == sorted([*SUCCEEDING, *FAILING])
    assert rendered["optimize"]["table_uri"] == "events" and rendered["optimize"]["deltalite_conn_id"] == "lake"
    assert rendered["optimize"]["env_vars"] is None  # credentials never pass through a templated field
    [recorded] = sweep.records["triggers"]
    assert recorded["kwargs"] == {
        "table_uri": "events",
        "deltalite_conn_id": "lake",
        "since": 6,
        "poll_interval": 0.2,
        "include_rearrangements": False,
        "include_metadata_changes": False,
        "fail_if_missing": False,
    }
    # the session's Airflow home also holds the triggers of the sensor tests: only this sweep's table counts
    stored = [
        t
        for t in sweep.metadata["trigger"]
        if t["classpath"] == recorded["classpath"] and t["kwargs"].get("table_uri") == "events"
    ]
    assert [t["kwargs"] for t in stored] == [recorded["kwargs"]]
    assert len(sweep.db_rows["trigger"]) >= 1 and len(sweep.db_rows["xcom"]) >= len(SUCCEEDING)


def test_credentials_reach_spark_only_through_the_environment_or_a_private_file(sweep: Sweep) -> None:
    runs = sweep.records["spark-submit"]
    local = [r for r in runs if "cluster" not in r["argv"]]
    [cluster] = [r for r in runs if "cluster" in r["argv"]]
    # local mode: OPTIMIZE, Z-order, VACUUM and the OPTIMIZE that fails in Spark; the credentials in the environment
    assert sorted(r["argv"][r["argv"].index(JOB_FILE) + 1] for r in local) == [
        "optimize",
        "optimize",
        "vacuum",
        "zorder",
    ]
    for run in local:
        assert STORAGE_OPTIONS_ENV in run["env_names"] and run["shipped"] == []
        assert "--storage-options-file" not in run["argv"]
        application = run["argv"][run["argv"].index(JOB_FILE) :]
        # spark-submit's scripts, the JVM and the Python driver it started all got the same application arguments
        assert all(c[c.index(JOB_FILE) :] == application for c in run["children"] if JOB_FILE in c)
        assert [sys.executable, *application] in run["children"]  # the Python driver
        assert any(c[0].endswith("/java") and JOB_FILE in c for c in run["children"])  # the JVM
    assert sorted(r["returncode"] for r in local) == [0, 0, 0, 2]  # the engine's error exits with 2
    # cluster mode: a 0600 file shipped with --files and named on the command line, nothing in the environment
    assert STORAGE_OPTIONS_ENV not in cluster["env_names"]
    [shipped] = cluster["shipped"]
    assert shipped["mode"] == "0o600"
    assert shipped["keys"] == ["client_kwargs", "endpoint_url", "key", "secret", "token"]
    assert cluster["argv"][-2:] == ["--storage-options-file", Path(shipped["path"]).name]
    assert cluster["argv"][cluster["argv"].index("--deploy-mode") + 1] == "cluster"
    assert not Path(shipped["path"]).exists()  # deleted when the job ended


def test_no_credentials_file_or_result_is_left_behind(sweep: Sweep) -> None:
    names = [p.name for p in sweep.leftovers]
    assert not any("storage-options" in n or n == "result.json" for n in names), names
    assert not any(part.startswith("deltalite-job-") for p in sweep.leftovers for part in p.parts), names
    # what is left: the engine zip the operators shipped, built in this run's TMPDIR (one per package content)
    assert names and all(n.startswith("airflow_provider_deltalite-") and n.endswith(".zip") for n in names), names


def test_every_commit_was_searched_and_none_came_from_a_failed_task(sweep: Sweep) -> None:
    operations = [
        next(a["commitInfo"]["operation"] for a in c if "commitInfo" in a) for _, c in sorted(sweep.commits.items())
    ]
    assert operations == [
        "CREATE TABLE",
        *["WRITE"] * TABLE_FILES,
        "OPTIMIZE",
        "OPTIMIZE",
        "VACUUM START",
        "VACUUM END",
        "WRITE",
    ]
    assert sorted(sweep.commits) == list(range(sweep.appended + 1))


# -- the fix: credentials in a URI are refused before anything uses the URI -------------------------------------------


def test_a_uri_with_user_and_password_is_refused_naming_no_value(monkeypatch: pytest.MonkeyPatch) -> None:
    from airflow_provider_deltalite.engine import InvalidArgument
    from airflow_provider_deltalite.hooks.deltalite import DeltaLiteHook, InvalidConnection

    user, password = f"AKIA{_core()[:16].upper()}", f"pw{_core()}"
    with pytest.raises(InvalidArgument) as err:
        DeltaLiteHook(None).get_table(f"s3://{user}:{password}@lake/events")
    assert str(err.value) == (
        "table s3://lake/events: the table URI holds credentials (user:password@); put them in a deltalite connection"
    )
    monkeypatch.setenv(
        "AIRFLOW_CONN_PASSWORD_HOST", json.dumps({"conn_type": "deltalite", "host": f"s3://{user}:{password}@lake"})
    )
    with pytest.raises(InvalidConnection) as err:
        DeltaLiteHook("password_host").get_table("events")
    assert str(err.value) == (
        "connection 'password_host': the base URI (host) holds credentials (user:password@); put them in the extra "
        "fields"
    )
    # a user part alone names a place (an ADLS container), not a credential
    uri = "abfss://container@account.dfs.core.windows.net/lake/events"
    assert DeltaLiteHook(None).resolve_table_uri(uri) == uri
