"""What a `deltalite` process settles before it runs a command, so that it imports only what the command uses, and
before it exits."""

from __future__ import annotations

import contextlib
import gc
import os
import sys
import threading
from collections.abc import Iterator
from typing import Any

# Commands that never hand pandas objects to pyarrow nor need pandas' nanosecond Timestamps (the engine conforms data
# to microseconds): they run without pandas. Not `scan`, which prints whatever rows it reads, nor `demo` (Airflow and
# Spark), nor any command on the Spark executor (PySpark's driver uses pandas).
PANDAS_FREE_COMMANDS = frozenset(
    {"describe", "files", "history", "health", "checkpoint", "optimize", "zorder", "vacuum", "changes", "watch"}
) | {"maintain", "maintain-lake"}  # the planners, then the operations above


class PandasBlocker:
    """Fails ``import pandas`` while it is on ``sys.meta_path`` (a meta path finder by its ``find_spec``: subclassing
    ``importlib.abc.MetaPathFinder`` would import importlib.resources, tempfile, shutil and bz2 into every command).

    pyarrow imports pandas, when it is installed, the first time it converts anything: ``pa.array`` of a list or a
    NumPy array asks its pandas shim whether the value is a pandas object, and ``Array.to_numpy`` initialises the
    C++ pandas interop. Neither needs pandas to give its answer, and both do without it when the import fails (the
    shim asks once; the C++ side asks again on each conversion, a failed import costs about 2 us). For a command
    that holds no pandas object this saves 0.1-0.2 s and ~50 MB per process, the log replay alone triggering it.
    (``sys.modules["pandas"] = None`` would not do: Cython's import returns the None.)
    """

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> None:
        if fullname.partition(".")[0] == "pandas":
            raise ImportError(f"{fullname} is not used by this deltalite command")
        return None


@contextlib.contextmanager
def pandas_kept_out(command: str, executor: str | None, draws: bool = False) -> Iterator[bool]:
    """Block pandas while the block runs when ``command`` on ``executor`` (None: a command without one) never needs
    it and it is not imported yet; yields whether it does. ``draws``: the command also draws charts (``health
    --html``), whose plotting library may use pandas. Scoped, not for the whole process: `main` also runs inside
    other programs (tests, a notebook) that may use pandas afterwards."""
    if draws or command not in PANDAS_FREE_COMMANDS or executor not in (None, "local") or "pandas" in sys.modules:
        yield False
        return
    blocker = PandasBlocker()
    sys.meta_path.insert(0, blocker)
    try:
        yield True
    finally:
        sys.meta_path.remove(blocker)


def settle_for_exit() -> None:
    """Freeze every object of a process that exits next (`console_main`, never a longer-lived program).

    The interpreter's exit runs one last garbage collection over every object of numpy, pyarrow and the engine, only
    to free memory the exit frees anyway: 25-70 ms of a command that may take half a second (a stitched OPTIMIZE of a
    gigabyte). Frozen objects are left out of that collection; they are still finalised as the modules are torn down.
    In a program that goes on, frozen garbage would never be collected.
    """
    gc.freeze()


def end_process(code: int) -> None:
    """End a `deltalite` process now, with exit status ``code``, skipping the interpreter's teardown; returns (and the
    process exits the usual way) while a thread that is not a daemon still runs.

    For a command that ran on the engine alone (`console_main`): everything it wrote is closed and committed, and the
    teardown would only destroy numpy's, pyarrow's and the engine's objects and modules one by one, and the
    allocator's arenas, for memory the kernel frees anyway: 25-35 ms of a compaction of small files that takes two
    seconds. What is buffered is flushed first: standard output and error, and the logging handlers.
    """
    if any(t.is_alive() and not t.daemon for t in threading.enumerate() if t is not threading.main_thread()):
        return
    if "logging" in sys.modules:
        sys.modules["logging"].shutdown()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):  # a closed pipe (`| head`) has nothing to flush to
            stream.flush()
    os._exit(code)


# pyarrow's filesystems for object stores and HDFS. The engine reaches every store through fsspec, never through
# pyarrow.fs; but pyarrow.parquet imports pyarrow.fs, which loads them all (S3's with the AWS SDK: 16 ms of 20).
UNUSED_PYARROW_MODULES = frozenset({"pyarrow._s3fs", "pyarrow._gcsfs", "pyarrow._azurefs", "pyarrow._hdfs"})


class UnusedModuleBlocker:
    """Fails the import of `UNUSED_PYARROW_MODULES` while it is on ``sys.meta_path``; pyarrow.fs then lists those
    filesystems as not built (a meta path finder by its ``find_spec``, as `PandasBlocker`)."""

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> None:
        if fullname in UNUSED_PYARROW_MODULES:
            raise ImportError(f"{fullname} is not used by deltalite")
        return None


def load_pyarrow_for_the_engine() -> str:
    """Import pyarrow for the rest of a `deltalite` process (`console_run`), the way the engine uses it; returns the
    allocator in use.

    - jemalloc as Arrow's allocator, unless the user chose one (``ARROW_DEFAULT_MEMORY_POOL``) or this pyarrow was
      built without it. pyarrow's default, mimalloc, keeps freed pages mapped: a command that streams a checkpoint
      batch by batch held 28-57 MB more resident memory for the same allocations (describe of a 100k-file log 138
      against 110 MB, health of a 1M-file log 268 against 211 MB, a small-file OPTIMIZE 263 against 190 MB), at the
      same speed.
    - OpenBLAS, which numpy loads when pyarrow imports it, on the calling thread alone, unless the user set
      ``OPENBLAS_NUM_THREADS``. The engine calls no BLAS routine, yet OpenBLAS starts a thread per core that spins
      while it waits for work, on the cores a compaction's tasks use: 55 million instructions in a small-file
      OPTIMIZE of two seconds, counted by cachegrind. The variable is set for the import only, so that the processes
      this one starts (Spark's Python workers) keep the user's setting.
    - pyarrow's object-store filesystems left out (`UNUSED_PYARROW_MODULES`), as pyarrow.fs treats a pyarrow built
      without them.

    For this process only: `main` also runs inside other programs (tests, a notebook) whose allocator, threads and
    pyarrow are theirs. A second call (a runner that loaded pyarrow so before `console_run`) changes nothing more.
    """
    blas_threads = "OPENBLAS_NUM_THREADS" not in os.environ and "numpy" not in sys.modules
    if blas_threads:
        os.environ["OPENBLAS_NUM_THREADS"] = "1"
    if not any(isinstance(finder, UnusedModuleBlocker) for finder in sys.meta_path):
        sys.meta_path.insert(0, UnusedModuleBlocker())
    try:
        import pyarrow as pa
    finally:
        if blas_threads:
            del os.environ["OPENBLAS_NUM_THREADS"]

    if not os.environ.get("ARROW_DEFAULT_MEMORY_POOL"):
        with contextlib.suppress(NotImplementedError):  # a pyarrow built without jemalloc keeps its default
            pa.set_memory_pool(pa.jemalloc_memory_pool())
    return pa.default_memory_pool().backend_name
