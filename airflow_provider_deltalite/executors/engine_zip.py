"""The zip that carries the engine to Spark executors (`SparkContext.addPyFile`, or `spark-submit --py-files`).

Executors usually do not have deltalite installed, so the driver ships the installed package as a zip that Python
imports directly (zipimport). The zip holds the package's source files only (no `__pycache__`, no `.pyc`), with
fixed timestamps and permissions, so the same sources always give the same bytes and the same file name.
"""

from __future__ import annotations

import hashlib
import importlib.resources
import io
import os
import tempfile
import threading
import zipfile
from importlib.resources.abc import Traversable

PACKAGE = "airflow_provider_deltalite"

# zip's epoch; a fixed time keeps the archive bytes independent of when the sources were checked out.
_FIXED_TIME = (1980, 1, 1, 0, 0, 0)
_SKIP_DIRS = frozenset({"__pycache__"})
_SKIP_SUFFIXES = (".pyc", ".pyo")

_cache: dict[str, str] = {}
_lock = threading.Lock()


def _walk(node: Traversable, prefix: str) -> list[tuple[str, bytes]]:
    entries: list[tuple[str, bytes]] = []
    for child in sorted(node.iterdir(), key=lambda c: c.name):
        name = child.name
        if name.startswith(".") or name in _SKIP_DIRS:  # editor swap files, caches
            continue
        if child.is_dir():
            entries.extend(_walk(child, f"{prefix}{name}/"))
        elif child.is_file() and not name.endswith(_SKIP_SUFFIXES):
            entries.append((f"{prefix}{name}", child.read_bytes()))
    return entries


def package_files() -> list[tuple[str, bytes]]:
    """Every file of the installed package as ``(archive name, content)``, sorted by name.

    Works whether the package is a directory (installed or editable) or itself inside a zip (a spark-submit driver
    that received it with ``--py-files``).
    """
    return _walk(importlib.resources.files(PACKAGE), f"{PACKAGE}/")


def package_zip_bytes() -> tuple[bytes, str]:
    """The zip of the package as bytes, and the hex SHA-256 of its content (names and bytes of every file)."""
    files = package_files()
    digest = hashlib.sha256()
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=6) as archive:
        for name, data in files:
            digest.update(name.encode() + b"\0" + len(data).to_bytes(8, "big") + data)
            info = zipfile.ZipInfo(name, date_time=_FIXED_TIME)
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            info.create_system = 3  # unix, whatever platform builds it
            archive.writestr(info, data, compress_type=zipfile.ZIP_DEFLATED, compresslevel=6)
    return buffer.getvalue(), digest.hexdigest()


def _default_dir() -> str:
    uid = os.getuid() if hasattr(os, "getuid") else "user"
    return os.path.join(tempfile.gettempdir(), f"deltalite-{uid}")


def build_package_zip(dest_dir: str | None = None) -> str:
    """Write the package zip into ``dest_dir`` (default: a per-user directory under the temp dir); return its path.

    The file is named ``airflow_provider_deltalite-<content hash>.zip``; it is built once per process and
    directory, and an existing file with the same bytes is reused. Writes are atomic (temp file, then rename), so
    concurrent builders never expose a partial zip.
    """
    directory = os.path.abspath(dest_dir or _default_dir())
    with _lock:
        cached = _cache.get(directory)
        if cached is not None and os.path.isfile(cached):
            return cached
        data, digest = package_zip_bytes()
        os.makedirs(directory, mode=0o700, exist_ok=True)
        if dest_dir is None:
            _check_private(directory)
        path = os.path.join(directory, f"{PACKAGE}-{digest[:16]}.zip")
        if not _same_bytes(path, data):
            fd, tmp = tempfile.mkstemp(prefix=".zip-", dir=directory)
            try:
                with os.fdopen(fd, "wb") as handle:
                    handle.write(data)
                os.chmod(tmp, 0o644)
                os.replace(tmp, path)
            except BaseException:
                if os.path.exists(tmp):
                    os.unlink(tmp)
                raise
        _cache[directory] = path
        return path


def _check_private(directory: str) -> None:
    """Refuse a shared temp directory someone else owns or can write: they could swap the zip Spark imports."""
    if not hasattr(os, "getuid"):
        return
    info = os.stat(directory)
    if info.st_uid != os.getuid() or info.st_mode & 0o022:
        raise PermissionError(
            f"{directory} is not a private directory of this user (owner uid {info.st_uid}, mode "
            f"{info.st_mode & 0o777:o}); remove it or pass another directory for the engine zip"
        )


def _same_bytes(path: str, data: bytes) -> bool:
    try:
        with open(path, "rb") as handle:
            return handle.read() == data
    except OSError:
        return False
