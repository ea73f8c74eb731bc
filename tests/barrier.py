"""A file-system barrier for the writer processes of the concurrency tests: each process adds its pid to a directory
and waits until ``parties`` have (the test counts as one when it wants to release them itself)."""

from __future__ import annotations

import os
import time
from pathlib import Path


def wait(barrier: Path, parties: int, timeout_s: float = 120) -> None:
    barrier.mkdir(parents=True, exist_ok=True)
    (barrier / str(os.getpid())).touch()
    deadline = time.monotonic() + timeout_s
    while len(list(barrier.iterdir())) < parties:
        if time.monotonic() > deadline:
            raise SystemExit("barrier timeout")
        time.sleep(0.005)
