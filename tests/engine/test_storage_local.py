"""The local backend without fsspec: the root it derives from a URI is fsspec's, its reads are the disk's, and the
fsspec filesystem is still there for the callers that ask for it."""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
from pathlib import Path

import fsspec
import pytest

from airflow_provider_deltalite.engine.storage.local import LocalBackend, local_path
from airflow_provider_deltalite.engine.storage.table_storage import Storage


@pytest.mark.parametrize(
    "uri",
    [
        "/tmp/t",
        "/tmp/t/",
        "/tmp/a b/t",
        "/",
        "file:///tmp/t",
        "file:/tmp/t",
        "file://tmp/t",
        "local:///tmp/t",
        "local:/tmp/t//",
        "file:///tmp/a%20b",
        "relative/t",
        "./relative",
        ".",
        "~/t",
    ],
)
def test_local_path_is_fsspecs(uri: str) -> None:
    # the oracle: fsspec's own local filesystem, which `Storage` used to build for every local table
    assert local_path(uri) == fsspec.filesystem("file")._strip_protocol(uri)


def test_the_root_is_the_one_fsspec_gave(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    for uri in ("t", f"{tmp_path}/t/", f"file://{tmp_path}/t", f"file:{tmp_path}/a%20b"):
        _, root = fsspec.core.url_to_fs(Storage(uri).table_uri)
        assert Storage(uri).root == root.rstrip("/")
    assert Storage("t").root == f"{tmp_path}/t"


def test_local_reads_without_fsspec(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "a.bin").write_bytes(b"0123456789")
    (tmp_path / "b.bin").write_bytes(b"B")
    os.symlink(tmp_path / "gone", tmp_path / "dangling")
    code = f"""
import sys
from airflow_provider_deltalite.engine.storage.table_storage import Storage
s = Storage({str(tmp_path)!r})
out = [s.read("sub/a.bin"), s.read_range("sub/a.bin", 2, 3), s.read_many(["b.bin", "sub/a.bin"]),
       s.exists("sub/a.bin"), s.exists("dangling"), s.exists("nope"), s.is_dir("sub"), s.is_dir("b.bin")]
with s.open_input("sub/a.bin") as fh:
    fh.seek(8)
    out.append(fh.read())
try:
    s.read_many(["b.bin", "missing.bin"])
except FileNotFoundError as exc:
    out.append(str(exc))
print(out)
print("fsspec" in sys.modules)
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    missing = f"[Errno 2] No such file or directory: '{tmp_path}/missing.bin'"  # the file that failed, not the first
    expected = [b"0123456789", b"234", [b"B", b"0123456789"], True, True, False, True, False, b"89", missing]
    assert done.stdout.splitlines() == [repr(expected), "False"]


def test_fs_is_built_when_asked_for(tmp_path: Path) -> None:
    (tmp_path / "x.txt").write_bytes(b"x")
    storage = Storage(str(tmp_path), {"auto_mkdir": True})
    assert isinstance(storage.backend, LocalBackend)
    fs = storage.fs
    assert isinstance(fs, fsspec.implementations.local.LocalFileSystem) and fs.auto_mkdir is True
    assert storage.fs is fs and fs.cat_file(f"{tmp_path}/x.txt") == b"x"
    copy = pickle.loads(pickle.dumps(storage))
    assert (copy.root, copy.read("x.txt")) == (storage.root, b"x")
    with pytest.raises(AttributeError):
        _ = storage.no_such_attribute
