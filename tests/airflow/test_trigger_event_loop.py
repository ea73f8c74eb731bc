"""50 deferred `NewVersionSensor`s in one triggerer event loop: the loop is never blocked.

Airflow's triggerer runs every trigger on one asyncio loop and warns "Triggerer's async thread was blocked for N
seconds" when its 0.1 s watchdog sleep overruns ``[triggerer] blocked_main_thread_warning_threshold`` (0.2 s). It
imports a trigger's class and builds the trigger on that loop, so the trigger's module must import nothing heavy;
the engine (pyarrow, numpy, the log replay) is imported by the first poll, in a worker thread.

A fresh interpreter (cold imports, as a new triggerer) does what the triggerer does for 50 deferred sensors (the
class loaded by its classpath and built from the serialised kwargs on the loop, then each ``run()`` as a task, a
task instance attached) while the triggerer's own watchdog coroutine measures the loop, and an audit hook records
every module imported on the loop's thread. Each table then gets an OPTIMIZE and an append; every trigger must fire
on the append with the exact payload.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.airflow.conftest import airflow_env
from tests.airflow.delta_history import append, expected_payload

pytestmark = pytest.mark.airflow

TRIGGERS = 50

_TRIGGERER = r"""
import asyncio, json, sys, threading, time, types

# What a triggerer has imported before it loads the first trigger.
import airflow.triggers.base
from airflow._shared.module_loading import import_string
from airflow.configuration import conf

CLASSPATH = "airflow_provider_deltalite.triggers.new_version.NewVersionTrigger"
tables = json.loads(sys.argv[1])
loop_thread = threading.get_ident()
imported_on_loop = []


def audit(event, args):
    if event == "import" and threading.get_ident() == loop_thread:
        imported_on_loop.append(args[0])


sys.addaudithook(audit)


async def main():
    stalls = []
    done = asyncio.Event()

    async def watchdog():  # the triggerer's TriggerRunner.block_watchdog, also timing the loop thread's own CPU
        while not done.is_set():
            last, cpu = time.monotonic(), time.thread_time()
            await asyncio.sleep(0.1)
            stalls.append((time.monotonic() - last, time.thread_time() - cpu))

    dog = asyncio.create_task(watchdog())
    await asyncio.sleep(0.3)
    runs = []
    for trigger_id, table in enumerate(tables):
        cls = import_string(CLASSPATH)  # TriggerRunner.create_triggers: on the loop
        await asyncio.sleep(0)
        trigger = cls(table_uri=table, deltalite_conn_id=None, since=1, poll_interval=0.5)
        trigger.trigger_id = trigger_id
        # serving a deferred task (the workload's task instance, as the triggerer attaches it): one event, then return
        trigger.task_instance = types.SimpleNamespace(task_id=f"wait_{trigger_id}")
        runs.append(asyncio.create_task(anext(trigger.run())))
    print("started", flush=True)
    await asyncio.to_thread(sys.stdin.readline)  # the test commits to every table, then writes a line
    events = await asyncio.wait_for(asyncio.gather(*runs), 120)
    done.set()
    await dog
    return [e.payload for e in events], stalls


events, stalls = asyncio.run(main())
print(json.dumps({
    "events": events,
    "max_stall": max(wall for wall, _ in stalls),
    "max_loop_cpu": max(cpu for _, cpu in stalls),
    "threshold": conf.getfloat("triggerer", "blocked_main_thread_warning_threshold"),
    "imported_on_loop": imported_on_loop,
}))
"""

# What importing the trigger's module may load on the loop: the trigger, what it shares with the sensor and the errors.
# The engine, pyarrow and numpy wait for the first poll's thread.
LIGHT_MODULES = {
    "airflow_provider_deltalite",
    "airflow_provider_deltalite.version",
    "airflow_provider_deltalite.triggers",
    "airflow_provider_deltalite.triggers.new_version",
    "airflow_provider_deltalite.triggers.new_data",
    "airflow_provider_deltalite.engine",
    "airflow_provider_deltalite.engine.errors",
}


def test_fifty_deferred_sensors_never_block_the_triggerers_event_loop(tmp_path: Path) -> None:
    from tests.airflow.delta_history import optimize

    first = tmp_path / "t0"
    append(first, [1, 2])
    append(first, [3])  # version 1: the sensors' baseline
    tables = [first] + [tmp_path / f"t{i}" for i in range(1, TRIGGERS)]
    for table in tables[1:]:
        shutil.copytree(first, table)
    proc = subprocess.Popen(
        [sys.executable, "-c", _TRIGGERER, json.dumps([str(t) for t in tables])],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=airflow_env(tmp_path / "home"),
    )
    try:
        assert proc.stdout is not None and proc.stdin is not None
        assert proc.stdout.readline() == "started\n", proc.stderr.read() if proc.stderr else ""
        # while the 50 triggers poll: an OPTIMIZE (not new data) and then an append on every table
        for table in tables:
            assert optimize(table) == 2
            assert append(table, [4, 5, 6]) == 3
        out, err = proc.communicate("go\n", timeout=180)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, err[-3000:]
    result = json.loads(out.strip().splitlines()[-1])

    ours = {m for m in result["imported_on_loop"] if m.split(".")[0] == "airflow_provider_deltalite"}
    heavy = [m for m in result["imported_on_loop"] if m.split(".")[0] in ("pyarrow", "numpy", "pandas", "deltalake")]
    assert ours <= LIGHT_MODULES, sorted(ours - LIGHT_MODULES)
    assert heavy == []
    skipped = [{"version": 2, "kind": "rearrange"}]
    assert result["events"] == [{"status": "success", **expected_payload(t, 1, [3], skipped, 3)} for t in tables]
    # Airflow warns when the watchdog's 0.1 s sleep takes longer than the threshold (0.2 s): the work the loop thread
    # itself did between two ticks stays well inside the 0.1 s that leaves. Its CPU time, not the wall time, is
    # asserted: on a loaded machine the wall time also counts the time the OS gave the loop's CPU to other processes.
    print(
        f"loop: longest watchdog tick {result['max_stall']:.3f} s, most CPU in one tick {result['max_loop_cpu']:.3f} s"
        f" (warning threshold {result['threshold']} s)"
    )
    assert result["max_loop_cpu"] < result["threshold"] - 0.1
