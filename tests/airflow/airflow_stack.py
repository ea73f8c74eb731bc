"""Real Airflow components on a throw-away Airflow home, for the tests that run the provider as a deployment does."""

from __future__ import annotations

import contextlib
import os
import signal
import sqlite3
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.airflow.conftest import AIRFLOW_BIN, AirflowHome


class AirflowStack:
    """Airflow's components (dag-processor, scheduler, triggerer, api-server) on one Airflow home, each in its own
    process group, stopped by its PID.

    The scheduler and triggerer run with ``--skip-serve-logs``: their log servers would listen on every interface, on
    fixed ports another Airflow on the machine may hold. The api-server listens on 127.0.0.1 only, on the port given.
    """

    def __init__(self, home: AirflowHome, env: dict[str, str], logs: Path) -> None:
        self.home, self.env, self.logs = home, env, logs
        self.procs: dict[str, subprocess.Popen] = {}
        self.starts: dict[str, int] = {}

    def start(self, name: str, *args: str) -> None:
        """Start ``airflow NAME ARGS`` (the scheduler and triggerer with ``--skip-serve-logs``)."""
        self.starts[name] = self.starts.get(name, 0) + 1
        log = (self.logs / f"{name}-{self.starts[name]}.log").open("w")
        if name in ("scheduler", "triggerer"):
            args = ("--skip-serve-logs", *args)
        self.procs[name] = subprocess.Popen(
            [str(AIRFLOW_BIN), name, *args], env=self.env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
        log.close()

    def stop(self, name: str, timeout: float = 30) -> None:
        """SIGTERM (a graceful shutdown) to the process group; SIGKILL after ``timeout`` seconds."""
        proc = self.procs.pop(name)
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout)
        with contextlib.suppress(ProcessLookupError):  # what is left of the group
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()

    def stop_all(self) -> None:
        """Teardown: SIGTERM to every group at once, SIGKILL to what still runs 3 s later (nothing is kept)."""
        procs = [p for p in self.procs.values() if p.poll() is None]
        self.procs.clear()
        for proc in procs:
            os.killpg(proc.pid, signal.SIGTERM)
        deadline = time.monotonic() + 3
        for proc in procs:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(max(0.0, deadline - time.monotonic()))
            with contextlib.suppress(ProcessLookupError):  # children of the group (executor workers) go too
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()

    def log(self, name: str) -> str:
        """What the component's latest start has logged."""
        return (self.logs / f"{name}-{self.starts[name]}.log").read_text()

    def check_running(self) -> None:
        for name, proc in self.procs.items():
            if proc.poll() is not None:
                tail = (self.logs / f"{name}-{self.starts[name]}.log").read_text()[-3000:]
                pytest.fail(f"airflow {name} exited with {proc.returncode}:\n{tail}")

    def query(self, sql: str) -> list[tuple]:
        with sqlite3.connect(f"file:{self.home.path / 'airflow.db'}?mode=ro", uri=True, timeout=10) as db:
            return db.execute(sql).fetchall()

    def wait_for(
        self, what: str, sql: str, expected: Any, decode: Callable[[list[tuple]], Any] = list, timeout: float = 600
    ) -> None:
        """Poll ``sql`` until ``decode(rows) == expected``; fail with the last result after ``timeout`` seconds.

        The timeout is for a hang only (a component that died fails at once, through `check_running`): the first
        wait covers three cold Airflow processes and a DAG parse, tens of CPU-seconds that a loaded machine stretches
        well past a minute."""
        deadline = time.monotonic() + timeout
        while True:
            self.check_running()
            try:
                got = decode(self.query(sql))
            except sqlite3.OperationalError:  # locked, or the table not there yet
                got = None
            if got == expected:
                return
            if time.monotonic() > deadline:
                pytest.fail(f"timed out waiting for {what}: {sql} -> {got!r}, expected {expected!r}")
            time.sleep(0.25)
