"""Test helpers shared by every test module: where the corpus is, copying a table, and fingerprinting a tree."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

# The corpus sits beside the repository (../shared/corpus), in CI as on a developer machine.
CORPUS = Path(os.environ.get("DELTALITE_CORPUS", Path(__file__).resolve().parents[2] / "shared" / "corpus")).resolve()


def copy_table(src: str | Path, dest: Path) -> Path:
    """Copy a corpus table (a path relative to the corpus, or absolute) to ``dest`` and make the copy writable."""
    shutil.copytree(CORPUS / src, dest, copy_function=shutil.copyfile)
    for root, _dirs, files in os.walk(dest):
        os.chmod(root, 0o755)
        for name in files:
            os.chmod(os.path.join(root, name), 0o644)
    return dest


def tree_state(root: Path) -> dict[str, tuple]:
    """Every entry below ``root`` with its kind, size, mtime and content hash (equal before and after: untouched)."""
    state: dict[str, tuple] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            full = Path(dirpath) / name
            st = full.lstat()
            digest = hashlib.sha256(full.read_bytes()).hexdigest() if full.is_file() else None
            state[str(full.relative_to(root))] = (full.is_dir(), st.st_size, st.st_mtime_ns, digest)
    return state


def changed_entries(before: dict[str, tuple], after: dict[str, tuple]) -> dict[str, tuple]:
    """The entries of two `tree_state`s that differ, as (before, after) (None: absent): an assertion's message."""
    return {
        k: (before.get(k), after.get(k)) for k in sorted(before.keys() | after.keys()) if before.get(k) != after.get(k)
    }


def run_cli(*args: object, timeout: int = 300) -> subprocess.CompletedProcess:
    """Run ``python -m airflow_provider_deltalite ARGS`` as a subprocess and capture its output."""
    return subprocess.run(
        [sys.executable, "-m", "airflow_provider_deltalite", *(str(a) for a in args)],
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def cli_failure(*args: object) -> str:
    """Run the CLI, expect the project's bad-input contract (exit 2, nothing on stdout, one stderr line); the line."""
    out = run_cli(*args)
    assert out.returncode == 2, out
    assert out.stdout == ""
    assert out.stderr.endswith("\n") and out.stderr.count("\n") == 1, out.stderr
    return out.stderr.rstrip("\n")
