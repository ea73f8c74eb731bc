"""A server the whole test session shares, whichever pytest-xdist worker asks for it first.

A session-scoped fixture runs once per xdist worker, so a server it starts would run three times under `make test`,
each copy costing a JVM's start and its idle threads on the same two cores. `shared` starts the server once, in the
first worker that needs it (the others wait on a lock and read its address), and leaves it running: a worker whose
queue runs dry ends its session before the others, and must not stop a server they still use. The controller
stops every shared server when the whole session ends (`stop_all`, from ``pytest_sessionfinish``); a run without
xdist is its own controller.

A server started here is a process group of its own (``start_new_session``), so stopping the group ends the JVM
and every Python worker it started.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import signal
import time
from collections.abc import Callable
from pathlib import Path

import pytest

SUFFIX = ".service.json"


def shared_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The directory every process of this session sees: the controller's base temp (a worker's is inside it)."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


def shared(tmp_path_factory: pytest.TempPathFactory, name: str, start: Callable[[Path], tuple[str, int]]) -> str:
    """The address of the session's ``name`` server; started by ``start(work_dir)`` (its address and the process
    group id to stop) when no process of this session has started it yet."""
    root = shared_root(tmp_path_factory)
    record = root / f"{name}{SUFFIX}"
    with (root / f"{name}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        if record.exists():
            return str(json.loads(record.read_text())["address"])
        work_dir = root / name
        work_dir.mkdir(exist_ok=True)
        address, group = start(work_dir)
        record.write_text(json.dumps({"address": address, "group": group}))
        return address


def stop_all(root: Path) -> None:
    """Stop every server `shared` started under ``root``: SIGTERM to its group, SIGKILL after 15 s."""
    for record in sorted(root.glob(f"*{SUFFIX}")):
        group = int(json.loads(record.read_text())["group"])
        _signal(group, signal.SIGTERM)
        deadline = time.monotonic() + 15
        while _alive(group) and time.monotonic() < deadline:
            time.sleep(0.1)
        if _alive(group):
            _signal(group, signal.SIGKILL)
        record.unlink()


def _signal(group: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(group, sig)


def _alive(group: int) -> bool:
    with contextlib.suppress(ChildProcessError):  # without xdist the leader is our child: reap it, not a zombie
        os.waitpid(group, os.WNOHANG)
    try:
        os.killpg(group, 0)
    except ProcessLookupError:
        return False
    return True
