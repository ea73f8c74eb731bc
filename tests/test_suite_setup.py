"""The suite's own set-up: a missing corpus stops a distributed run with one line, not an xdist INTERNALERROR."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_a_missing_corpus_stops_a_distributed_run_with_one_line(tmp_path: Path) -> None:
    missing = tmp_path / "no-corpus"
    env = {**os.environ, "DELTALITE_CORPUS": str(missing)}
    args = [sys.executable, "-m", "pytest", "-n", "2", "-q", "-p", "no:cacheprovider", "tests/engine/test_replay.py"]
    out = subprocess.run(args, cwd=REPO, env=env, capture_output=True, text=True, timeout=120, check=False)
    assert out.returncode == 4, out.stdout[-2000:] + out.stderr[-2000:]
    assert "INTERNALERROR" not in out.stdout + out.stderr
    assert out.stderr.strip() == (
        f"ERROR: the test corpus is missing: {missing} is not a directory. Tests marked `corpus` read it; point "
        "DELTALITE_CORPUS at it, or deselect them with -m 'not corpus'."
    )
