"""A real standalone Spark cluster on 127.0.0.1 for tests: one master and N workers started with `spark-class`.

Each daemon runs in its own process group, so stopping the cluster also ends the executor JVMs and Python workers
the workers started. The pyspark wheel is the Spark distribution (`SPARK_HOME`).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from tests.jvm_archive import jvm_options
from tests.ports import free_port

# Test JVMs live seconds: C1-only JIT and the serial GC start them seconds sooner on 2 cores.
FAST_JVM_OPTIONS = jvm_options()  # C1, the serial collector and the suite's class archive (tests/jvm_archive.py)
# Spark settings giving a test's driver and executors the same start-up options.
FAST_JVM_CONF = {"spark.driver.extraJavaOptions": FAST_JVM_OPTIONS, "spark.executor.extraJavaOptions": FAST_JVM_OPTIONS}


def spark_home() -> Path:
    """The pyspark package directory, which holds `bin/spark-class` and the jars."""
    import pyspark

    return Path(pyspark.__file__).resolve().parent


def spark_env(home: Path | None = None, python: str | None = None) -> dict[str, str]:
    """The environment for Spark daemons: loopback only, no repo on PYTHONPATH, the Spark distribution ``home``
    (default: this interpreter's pyspark) and workers' Python ``python`` (default: this interpreter)."""
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)  # executors must get the engine from the shipped zip, not from the repository
    env.update(
        SPARK_HOME=str(home or spark_home()),
        PYSPARK_PYTHON=python or sys.executable,
        SPARK_LOCAL_IP="127.0.0.1",
        SPARK_LOCAL_HOSTNAME="127.0.0.1",
        SPARK_DAEMON_JAVA_OPTS=FAST_JVM_OPTIONS,
        SPARK_DAEMON_MEMORY="256m",
    )
    return env


@dataclass
class SparkCluster:
    """A running master and its workers; `stop` ends them all."""

    master_url: str
    web_url: str
    work_dir: Path
    processes: list[subprocess.Popen] = field(default_factory=list)

    def status(self) -> dict:
        """The master's JSON status page (workers, applications)."""
        with urllib.request.urlopen(f"{self.web_url}/json/", timeout=2) as response:
            return json.load(response)

    def alive_workers(self) -> int:
        return sum(1 for w in self.status().get("workers", []) if w.get("state") == "ALIVE")

    def logs(self) -> str:
        """The tail of every daemon's log, for failure messages."""
        parts = []
        for log in sorted(self.work_dir.glob("*.log")):
            parts.append(f"--- {log.name}\n" + "\n".join(log.read_text(errors="replace").splitlines()[-20:]))
        return "\n".join(parts)

    def stop(self) -> None:
        """SIGTERM every process group, then SIGKILL the groups once the daemons exited (or after 10 s)."""
        for proc in self.processes:
            _signal_group(proc, signal.SIGTERM)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and not all(_exited(p) for p in self.processes):
            time.sleep(0.1)
        # Executor JVMs and Python daemons live in the same groups and may outlive the daemons. The daemons are not
        # reaped yet, so their group ids cannot have been reused by an unrelated process.
        for proc in self.processes:
            _signal_group(proc, signal.SIGKILL)
        for proc in self.processes:
            proc.wait()
        self.processes.clear()


def _exited(proc: subprocess.Popen) -> bool:
    """Whether the process exited, without reaping it (WNOWAIT)."""
    if proc.returncode is not None:
        return True
    try:
        return os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
    except ChildProcessError:
        return True


def _signal_group(proc: subprocess.Popen, sig: int) -> None:
    if proc.returncode is not None:  # reaped: its group id may belong to someone else by now
        return
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, sig)


def _accepts(probe: Callable[[], object]) -> bool:
    """Whether ``probe()`` is true; false while the master's web UI does not answer yet, or while something else
    answers on its port (a page that is not the master's JSON: the master then exits, see `start_cluster`)."""
    try:
        return bool(probe())
    except (OSError, ValueError):
        return False


class _DaemonExited(RuntimeError):
    """A daemon of a starting cluster exited (a port `free_port` chose was taken again before the daemon bound it)."""


def _check_alive(cluster: SparkCluster, deadline: float, what: str) -> None:
    dead = [p.args[1] for p in cluster.processes if p.poll() is not None]
    if dead:
        raise _DaemonExited(f"Spark daemon exited during start-up: {dead}\n{cluster.logs()}")
    if time.monotonic() > deadline:
        raise RuntimeError(f"{what} within the time limit\n{cluster.logs()}")


def start_cluster(
    work_dir: Path, *, workers: int = 2, cores: int = 1, memory: str = "1g", timeout: float = 90.0
) -> SparkCluster:
    """Start a master and ``workers`` workers on 127.0.0.1 and wait until all workers are registered and alive.

    A port chosen free can be taken by another process (another test process's Spark, say) before a daemon binds
    it; the daemons do not move to the next port then (``spark.port.maxRetries=0``: a master on another port than
    the one probed would leave the probe talking to a stranger) but exit, and the cluster starts again on new ports,
    three times at most.

    Raises:
        RuntimeError: the cluster did not come up within ``timeout`` seconds (the message carries the log tails).
    """
    for attempt in range(3):
        try:
            return _start_cluster(work_dir / f"try-{attempt}", workers, cores, memory, timeout)
        except _DaemonExited:
            if attempt == 2:
                raise
    raise AssertionError("unreachable")


def _start_cluster(work_dir: Path, workers: int, cores: int, memory: str, timeout: float) -> SparkCluster:
    work_dir.mkdir(parents=True, exist_ok=True)
    spark_class = str(spark_home() / "bin" / "spark-class")
    env = spark_env()
    port, web_port, rest_port = free_port(), free_port(), free_port()
    # The master's REST submission server would take its fixed default, 6066: a second cluster on the machine (another
    # pytest-xdist worker's) would then fail to bind it, with no retries left, and never register its workers.
    env["SPARK_DAEMON_JAVA_OPTS"] += f" -Dspark.port.maxRetries=0 -Dspark.master.rest.port={rest_port}"
    cluster = SparkCluster(f"spark://127.0.0.1:{port}", f"http://127.0.0.1:{web_port}", work_dir)

    def launch(name: str, args: list[str]) -> None:
        with (work_dir / f"{name}.log").open("wb") as log:
            cluster.processes.append(
                subprocess.Popen(
                    [spark_class, *args],
                    env=env,
                    cwd=work_dir,
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
            )

    try:
        launch(
            "master",
            [
                "org.apache.spark.deploy.master.Master",
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
                "--webui-port",
                str(web_port),
            ],
        )
        deadline = time.monotonic() + timeout
        # Workers that find no master retry only after 1-10 s (randomised), so start them once the master listens.
        while not _accepts(cluster.status):
            _check_alive(cluster, deadline, "the Spark master did not start")
            time.sleep(0.1)
        for n in range(workers):
            worker_dir = work_dir / f"worker-{n}"
            worker_dir.mkdir(exist_ok=True)
            launch(
                f"worker-{n}",
                [
                    "org.apache.spark.deploy.worker.Worker",
                    cluster.master_url,
                    "--host",
                    "127.0.0.1",
                    "--cores",
                    str(cores),
                    "--memory",
                    memory,
                    "--webui-port",
                    str(free_port()),
                    "--work-dir",
                    str(worker_dir),
                ],
            )
        while not _accepts(lambda: cluster.alive_workers() == workers):
            _check_alive(cluster, deadline, f"{workers} Spark workers did not register")
            time.sleep(0.1)
        return cluster
    except BaseException:
        cluster.stop()
        raise


def spark_submit(master: str, args: list[str], env_extra: dict[str, str]) -> subprocess.CompletedProcess:
    """Run the deltalite job with spark-submit on ``master``, as a cluster machine without the package would."""
    from airflow_provider_deltalite.executors.engine_zip import build_package_zip

    zip_path = build_package_zip()
    job = Path(__file__).resolve().parents[2] / "airflow_provider_deltalite" / "jobs" / "driver.py"
    cmd = [
        str(spark_home() / "bin" / "spark-submit"),
        "--master",
        master,
        "--conf",
        "spark.ui.enabled=false",
        "--conf",
        "spark.driver.host=127.0.0.1",
        "--conf",
        "spark.driver.bindAddress=127.0.0.1",
        "--py-files",
        zip_path,
        str(job),
        *args,
    ]
    # the driver runs the job from the zip, like a cluster machine without the package installed
    env = {**spark_env(), **env_extra, "PYTHONPATH": "", "PYSPARK_PYTHON": sys.executable}
    env["PYSPARK_DRIVER_PYTHON"] = sys.executable
    return subprocess.run(
        cmd, capture_output=True, text=True, timeout=600, env=env, cwd=str(job.parents[2]), check=False
    )


@dataclass
class ConnectServer:
    """A running Spark Connect server (its own local[2] Spark); `stop` ends it and its Python workers."""

    url: str
    work_dir: Path
    process: subprocess.Popen

    def logs(self) -> str:
        log = self.work_dir / "connect.log"
        return "\n".join(log.read_text(errors="replace").splitlines()[-30:]) if log.exists() else ""

    def stop(self) -> None:
        _signal_group(self.process, signal.SIGTERM)
        try:
            self.process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            _signal_group(self.process, signal.SIGKILL)
            self.process.wait()


def start_connect_server(
    work_dir: Path,
    *,
    master: str = "local[2]",
    timeout: float = 120.0,
    home: Path | None = None,
    python: str | None = None,
    settings: Mapping[str, str] | None = None,
    env_extra: Mapping[str, str] | None = None,
    name: str = "deltalite-tests-connect",
    also_listening: Sequence[int] = (),
) -> ConnectServer:
    """Start a Spark Connect server on 127.0.0.1 (spark-submit of SparkConnectServer, the jar the pyspark wheel
    ships) whose Python workers run this interpreter, and wait until it accepts connections.

    ``home`` is another Spark distribution to run the server from (a classic pyspark package directory of another
    version), ``python`` another Python for its workers (``PYSPARK_PYTHON``). ``settings`` are more ``--conf``
    values (they win over the defaults here), ``env_extra`` more environment variables (a token stays off the
    command line that way), and the start waits for the ports in ``also_listening`` too (the UI's, say).

    Raises:
        RuntimeError: the server exited or did not listen within ``timeout`` seconds (the message carries its log).
    """
    work_dir.mkdir(parents=True, exist_ok=True)
    port = free_port()
    conf = {
        "spark.connect.grpc.binding.address": "127.0.0.1",
        "spark.connect.grpc.binding.port": str(port),
        "spark.ui.enabled": "false",
        "spark.driver.host": "127.0.0.1",
        "spark.driver.bindAddress": "127.0.0.1",
        "spark.driver.extraJavaOptions": FAST_JVM_OPTIONS,
        **(settings or {}),
    }
    cmd = [
        str((home or spark_home()) / "bin" / "spark-submit"),
        "--class",
        "org.apache.spark.sql.connect.service.SparkConnectServer",
        "--name",
        name,
        "--master",
        master,
        *[arg for key, value in conf.items() for arg in ("--conf", f"{key}={value}")],
        "--driver-memory",
        "1g",
        "spark-internal",
    ]
    with (work_dir / "connect.log").open("wb") as log:
        env = spark_env(home, python)
        env.pop("SPARK_DAEMON_MEMORY", None)  # spark-submit would size the server's heap by it
        env.update(env_extra or {})
        proc = subprocess.Popen(
            cmd,
            env=env,
            cwd=work_dir,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    server = ConnectServer(f"sc://127.0.0.1:{port}", work_dir, proc)
    deadline = time.monotonic() + timeout
    try:
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"the Spark Connect server exited during start-up\n{server.logs()}")
            try:
                for listening in (port, *also_listening):
                    socket.create_connection(("127.0.0.1", listening), timeout=1).close()
                return server
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"the Spark Connect server did not listen within {timeout:g}s\n{server.logs()}")
            time.sleep(0.2)
    except BaseException:
        server.stop()
        raise
