"""A class-data-sharing archive of the test environment's Spark driver, and the JVM options of the suite's drivers.

The suite starts about a hundred Spark drivers (spark-submit jobs, Connect servers, the local executor's gateway),
each of which loads some fifteen thousand classes from the jars and compiles them: a driver that runs one small
OPTIMIZE costs about 30 s of CPU, a third of it before any work. Java 17 can map classes that an earlier run
loaded, already parsed and verified, from an archive (AppCDS, `-XX:ArchiveClassesAtExit` / `-XX:SharedArchiveFile`),
and the C1 compiler alone with the serial collector starts a short-lived JVM sooner on two cores. Together they take a
driver from about 19 s to 12 s of wall time and from 30 s to 14 s of CPU (measured with `deltalite optimize
--executor spark`).

`make test` builds the archive once per environment (``python -m tests.jvm_archive PATH``: one Z-order through
``--executor spark``, which loads the classes of a job with a shuffle and Python workers); `tests/conftest.py` hands
`SUITE_SPARK_SUBMIT_OPTS` to every spark-submit the suite starts, and `tests/executors/spark_cluster.py` to the
standalone cluster's daemons and executors. A JVM whose class path differs from the archive's (the Spark 4.0 and 4.3
distributions) ignores it silently (``-Xlog:cds=off``) and starts as it would without.

This only changes how fast the suite's own JVMs start; the product never sets these options.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
ARCHIVE = REPO / ".venv" / "spark-classes.jsa"
FAST_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
QUIET = "-Xlog:cds=off -Xlog:cds+dynamic=off"


def jvm_options(archive: Path = ARCHIVE) -> str:
    """C1 and the serial collector, and the archive's classes when it has been built."""
    return f"{FAST_OPTIONS} -XX:SharedArchiveFile={archive} {QUIET}" if archive.is_file() else FAST_OPTIONS


def build(archive: Path) -> None:
    """Run one Z-order through local Spark, the driver dumping the classes it loaded into ``archive``."""
    from airflow_provider_deltalite.demo import create_small_file_table

    with tempfile.TemporaryDirectory(prefix="deltalite-cds-") as tmp:
        table = Path(tmp) / "events"
        create_small_file_table(str(table), files=8, rows_per_file=50)
        partial = archive.with_suffix(".partial")
        env = {**os.environ, "SPARK_SUBMIT_OPTS": f"{FAST_OPTIONS} -XX:ArchiveClassesAtExit={partial} {QUIET}"}
        command = [sys.executable, "-m", "airflow_provider_deltalite", "zorder", str(table), "--columns", "user_id"]
        command += ["--executor", "spark", "--spark-master", "local[2]"]
        out = subprocess.run(command, env=env, capture_output=True, text=True, timeout=600)
        if out.returncode != 0 or not partial.is_file():
            raise SystemExit(f"building {archive} failed (exit {out.returncode}): {out.stderr[-2000:]}")
        partial.replace(archive)  # a half-written archive is never used


if __name__ == "__main__":
    build(Path(sys.argv[1]) if len(sys.argv) > 1 else ARCHIVE)
