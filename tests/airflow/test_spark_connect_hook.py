"""`hooks.spark_connect` (which Spark connections mean Spark Connect, their address, the token masked) and
`jobs.connect_run.ConnectRun.kill` against the real `spark_connect_server`. In process, no metadata database: the
connections are AIRFLOW_CONN_* variables."""

from __future__ import annotations

import json
import threading
import time
from typing import Any

import pytest

from airflow_provider_deltalite.engine.errors import ExecutorError
from airflow_provider_deltalite.hooks.deltalite import InvalidConnection
from airflow_provider_deltalite.hooks.spark_connect import spark_connect_url
from airflow_provider_deltalite.jobs import driver
from airflow_provider_deltalite.jobs.connect_run import ConnectRun


def _conn(monkeypatch: pytest.MonkeyPatch, conn_id: str, **fields: Any) -> None:
    monkeypatch.setenv(f"AIRFLOW_CONN_{conn_id.upper()}", json.dumps(fields))


def test_a_spark_connect_connection_gives_the_providers_address_and_masks_the_token(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from airflow.sdk.log import redact

    token = "tok/en+with=signs-5d41402abc4b2a76"
    _conn(
        monkeypatch, "sc", conn_type="spark_connect", host="spark.example", port=15002, login="etl", password=token,
        extra={"use_ssl": True},
    )  # fmt: skip
    url = spark_connect_url("sc")
    # the Spark provider's own form: user_id, token (URL-encoded) and use_ssl as ;-parameters
    assert url == "sc://spark.example:15002/;user_id=etl;token=tok/en%2Bwith%3Dsigns-5d41402abc4b2a76;use_ssl=True"
    assert redact(f"token {token} in a message") == "token *** in a message"
    assert redact("tok/en%2Bwith%3Dsigns-5d41402abc4b2a76") == "***"


def test_a_token_without_use_ssl_is_one_warning_naming_the_host(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    _conn(monkeypatch, "plain", conn_type="spark_connect", host="spark.example", port=15002, password="t0ken-x")
    _conn(monkeypatch, "local", conn_type="spark_connect", host="localhost", port=15002, password="t0ken-x")
    tls = {"extra": {"use_ssl": True}}
    _conn(monkeypatch, "tls", conn_type="spark_connect", host="spark.example", password="t0ken-x", **tls)
    with caplog.at_level("WARNING", logger="airflow_provider_deltalite.hooks.spark_connect"):
        for conn_id in ("plain", "local", "tls"):
            spark_connect_url(conn_id)
    assert [r.getMessage() for r in caplog.records] == [
        "connection 'plain' has a token but no use_ssl: the Spark Connect client talks TLS to spark.example "
        "regardless; if that server does not serve TLS, the session will not start"
    ]


def test_other_spark_connections_and_undefined_ones_keep_the_spark_submit_path(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _conn(monkeypatch, "classic", conn_type="spark", host="yarn")
    assert spark_connect_url("classic") is None
    assert spark_connect_url("spark_default_not_defined_here") is None


@pytest.mark.parametrize(
    ("fields", "problem"),
    [
        ({}, "connection 'bad': a spark_connect connection needs a host"),
        ({"host": "sc://h:1/path"}, "connection 'bad': the host of a spark_connect connection cannot have a path"),
    ],
)
def test_an_unusable_spark_connect_connection_is_one_line(
    monkeypatch: pytest.MonkeyPatch, fields: dict[str, Any], problem: str
) -> None:
    _conn(monkeypatch, "bad", conn_type="spark_connect", **fields)
    with pytest.raises(InvalidConnection) as err:
        spark_connect_url("bad")
    assert str(err.value) == problem


def _sleep_everywhere(table: Any, options: Any, executor: Any) -> Any:
    return list(executor.map(time.sleep, [60.0, 60.0]))


def test_kill_interrupts_the_running_queries_and_stops_the_session(
    monkeypatch: pytest.MonkeyPatch, spark_connect_server: str
) -> None:
    command = driver.Command("sleep", driver.OptimizeOptions, lambda p: None, lambda a, u: None, _sleep_everywhere)  # type: ignore[arg-type]
    monkeypatch.setitem(driver.COMMANDS, "sleep", command)
    run = ConnectRun(spark_connect_server, "deltalite-kill-test")
    raised: list[BaseException] = []

    def target() -> None:
        try:
            run.run("sleep", None, None)  # type: ignore[arg-type]
        except BaseException as exc:
            raised.append(exc)

    thread = threading.Thread(target=target)
    thread.start()
    deadline = time.monotonic() + 120
    while run._executor is None and thread.is_alive() and time.monotonic() < deadline:
        time.sleep(0.1)
    executor = run._executor
    assert executor is not None, raised
    time.sleep(3)  # the two sleeping tasks run on the server now
    started = time.monotonic()
    run.kill()
    thread.join(60)
    assert not thread.is_alive() and time.monotonic() - started < 30  # not the tasks' 60 s
    [error] = raised
    assert isinstance(error, ExecutorError)
    assert str(error) == f"the sleep run on {executor.master} was stopped"
    with pytest.raises(ExecutorError, match="is closed"):
        executor.spark  # noqa: B018 - the session was stopped
