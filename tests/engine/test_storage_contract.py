"""The storage contract: the same cases through `Storage` on every backend (the local disk, ``memory://`` and S3 on
moto), so that a backend that behaves differently from the others fails here, not in a maintenance operation.

Where the stores really differ (S3 cannot tell a deleted key from a missing one; the local disk is tried once), the
expected value is spelled out per backend.
"""

from __future__ import annotations

import contextlib
import math
import os
import pickle
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import fsspec
import pytest

from airflow_provider_deltalite import DeltaTable
from airflow_provider_deltalite.engine.errors import (
    CreateOnlyNotSupported,
    InvalidArgument,
    StorageError,
    TableNotFound,
)
from airflow_provider_deltalite.engine.log_path import LOG_DIR, version_prefix
from airflow_provider_deltalite.engine.storage import (
    SCHEME_TO_BACKEND,
    DeleteOutcome,
    DirListing,
    FileInfo,
    Storage,
    delete_file,
    read_bytes,
    write_bytes,
)
from airflow_provider_deltalite.engine.storage.fsspec_backend import FsspecBackend
from airflow_provider_deltalite.engine.storage.local import LocalBackend
from airflow_provider_deltalite.engine.storage.memory import MemoryBackend
from airflow_provider_deltalite.engine.storage.s3 import S3Backend
from tests.faults import FaultyFileSystem

ATTEMPTS = 3
FAST = {
    "deltalite_retry_attempts": str(ATTEMPTS),
    "deltalite_retry_base_delay_s": "0.001",
    "deltalite_retry_max_delay_s": "0.002",
}
# The S3 case carries its marker itself: the fixture fetches moto at run time, where the marker hook cannot see it.
BACKENDS = ("local", "memory", pytest.param("s3", marks=pytest.mark.s3))
C0, C1, C2, C3 = (f"{version_prefix(v)}.json" for v in range(4))
CP2 = f"{version_prefix(2)}.checkpoint.parquet"


@dataclass
class Store:
    """One backend under test: the table URI, its storage options, and the plain filesystem under it."""

    kind: str
    uri: str
    options: dict[str, Any]
    fs: Any

    def storage(self, **faults: Any) -> tuple[Storage, FaultyFileSystem]:
        """A `Storage` of the table whose requests go through a `FaultyFileSystem` (no faults unless scripted)."""
        faulty = FaultyFileSystem(self.fs, **faults)
        return Storage(self.uri, self.options, filesystem=faulty), faulty


@pytest.fixture(scope="module")
def s3(s3_endpoint: dict[str, Any]) -> Any:
    import s3fs

    return s3fs.S3FileSystem(**s3_endpoint, use_listings_cache=False, skip_instance_cache=True)


@pytest.fixture(params=BACKENDS)
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    unique = uuid.uuid4().hex[:12]
    if request.param == "local":
        yield Store("local", str(tmp_path / "t"), dict(FAST), fsspec.filesystem("file"))
    elif request.param == "memory":
        memory = fsspec.filesystem("memory")
        yield Store("memory", f"memory://contract-{unique}/t", dict(FAST), memory)
        with contextlib.suppress(FileNotFoundError):
            memory.rm(f"/contract-{unique}", recursive=True)
    else:
        s3 = request.getfixturevalue("s3")
        bucket = f"contract-{unique}"
        s3.call_s3("create_bucket", Bucket=bucket)
        yield Store("s3", f"s3://{bucket}/t", {**request.getfixturevalue("s3_endpoint"), **FAST}, s3)


@pytest.fixture
def storage(store: Store) -> Storage:
    return Storage(store.uri, store.options)


def _seed(storage: Storage) -> None:
    """Two commits, a checkpoint, a sidecar below the log; a.json (1 byte), b.json (4 bytes) and sub/x.bin at the
    root."""
    for name, data in {
        f"{LOG_DIR}/{C0}": b"zero",
        f"{LOG_DIR}/{C1}": b"one",
        f"{LOG_DIR}/{CP2}": b"cp",
        f"{LOG_DIR}/{C2}": b"two",
        f"{LOG_DIR}/{C3}": b"three",
        f"{LOG_DIR}/_sidecars/s.parquet": b"side",
        "a.json": b"A",
        "b.json": b"BBBB",
        "sub/x.bin": b"x",
    }.items():
        storage.write(name, data)


# -- capabilities ------------------------------------------------------------------------------------------------

CAPABILITIES = {
    # lists_from_name, atomic_create_only, has_real_directories, native_files, writes_temporary_files,
    # create_only, delete_batch_size, backend
    "local": (False, True, True, True, True, "native", 1000, LocalBackend),
    "memory": (False, True, False, False, False, "native", 1000, MemoryBackend),
    "s3": (True, True, False, False, False, "native", 1000, S3Backend),
}


def _capabilities(storage: Storage) -> tuple[Any, ...]:
    return (
        storage.lists_from_name,
        storage.atomic_create_only,
        storage.has_real_directories,
        storage.native_files,
        storage.writes_temporary_files,
        storage.create_only,
        storage.delete_batch_size,
        type(storage.backend),
    )


def test_capabilities(store: Store, storage: Storage) -> None:
    assert _capabilities(storage) == CAPABILITIES[store.kind]
    copy = pickle.loads(pickle.dumps(storage))  # a Spark executor rebuilds the same backend
    assert _capabilities(copy) == CAPABILITIES[store.kind]
    assert copy.retry_policy.attempts == ATTEMPTS
    cpus = os.cpu_count() or 1  # the rule: one thread per core on a local disk, 4 per core and at least 8 elsewhere
    assert storage.default_concurrency == (cpus if store.kind == "local" else max(8, 4 * cpus))


def test_the_registry_picks_backends_by_scheme() -> None:
    assert {scheme: cls.__name__ for scheme, cls in SCHEME_TO_BACKEND.items()} == {
        "": "LocalBackend",
        "file": "LocalBackend",
        "local": "LocalBackend",
        "memory": "MemoryBackend",
        "s3": "S3Backend",
        "s3a": "S3Backend",
    }


def test_serves_absolute_uris_of_its_own_store(store: Store, storage: Storage) -> None:
    own = {"local": "file:///x/y.parquet", "memory": "memory://x/y.parquet", "s3": "s3://b/y.parquet"}[store.kind]
    other = {"local": "s3://b/y.parquet", "memory": "s3://b/y.parquet", "s3": "gs://b/y.parquet"}[store.kind]
    assert (storage.serves(own), storage.serves("/abs/y.parquet"), storage.serves("C:/y.parquet")) == (True,) * 3
    assert storage.serves(other) is False


# -- reads -------------------------------------------------------------------------------------------------------


def test_read_ranged_read_and_read_many(storage: Storage) -> None:
    storage.write("d/data.bin", b"0123456789")
    storage.write("d/other.bin", b"other")
    assert storage.read("d/data.bin") == b"0123456789"
    assert storage.read_range("d/data.bin", 2, 3) == b"234"
    assert storage.read_range("d/data.bin", 8, 2) == b"89"
    assert storage.read_many(["d/other.bin", "d/data.bin", "d/other.bin"]) == [b"other", b"0123456789", b"other"]
    assert storage.read_many([]) == []
    with storage.open_input("d/data.bin") as fh:
        fh.seek(4)
        assert fh.read(3) == b"456"
    assert (storage.exists("d/data.bin"), storage.exists("d/none"), storage.is_dir("d")) == (True, False, True)


def test_a_missing_file_is_file_not_found_and_a_missing_table_table_not_found(store: Store, storage: Storage) -> None:
    storage.write("a.json", b"A")
    with pytest.raises(FileNotFoundError):
        storage.read("missing.json")
    with pytest.raises(FileNotFoundError):
        storage.read_range("missing.json", 0, 1)
    with pytest.raises(FileNotFoundError):
        storage.read_many(["a.json", "missing.json"])
    with pytest.raises(TableNotFound) as caught:
        DeltaTable(store.uri + "/nowhere", store.options).snapshot()
    assert str(caught.value) == f"table {store.uri}/nowhere: path does not exist"
    with pytest.raises(TableNotFound) as caught:
        DeltaTable(store.uri, store.options).snapshot()
    assert str(caught.value) == f"table {store.uri}: not a Delta table: no _delta_log directory"


# -- writes ------------------------------------------------------------------------------------------------------


def test_create_only_refuses_a_taken_name_on_every_backend(storage: Storage) -> None:
    path = f"{LOG_DIR}/{C0}"
    storage.write_create_only(path, b"first")
    with pytest.raises(FileExistsError):
        storage.write_create_only(path, b"second")
    assert storage.read(path) == b"first"
    assert [f.name for f in storage.list_from(LOG_DIR)] == [C0]  # no temporary file left behind


def test_has_files_under_looks_for_a_file_at_any_depth(store: Store, storage: Storage) -> None:
    given, _ = store.storage()  # through a filesystem the caller gave: the same answers

    def under(*directories: str) -> list[bool]:
        answers = [storage.has_files_under(d) for d in directories]
        assert [given.has_files_under(d) for d in directories] == answers
        return answers

    assert under("", LOG_DIR) == [False, False]
    if store.kind == "local":  # empty directories hold no file: a new table's `os.makedirs` leaves them for a moment
        os.makedirs(os.path.join(store.uri, LOG_DIR, "_sidecars"))
        assert under("", LOG_DIR) == [False, False]
    storage.write(f"{LOG_DIR}/_sidecars/s.parquet", b"side")
    assert under("", LOG_DIR, f"{LOG_DIR}/_sidecars", "sub") == [True, True, True, False]


def test_replace_overwrites(storage: Storage) -> None:
    storage.write("r/x.json", b"old content")
    storage.write("r/x.json", b"new")
    assert storage.read("r/x.json") == b"new"
    assert [(f.name, f.size) for f in storage.list_from("r")] == [("x.json", 3)]
    with pytest.raises(FileExistsError):
        storage.write_create_only("r/x.json", b"again")


def test_a_store_without_put_if_absent_takes_commits_only_in_single_writer_mode() -> None:
    # the generic fsspec backend (GCS, ABFS, ...), shown on the memory store
    store = Store("memory", f"memory://generic-{uuid.uuid4().hex[:12]}/t", dict(FAST), fsspec.filesystem("memory"))
    refusing = Storage(store.uri, store.options)
    refusing.backend = FsspecBackend(refusing.fs, refusing.retry_policy)  # an fsspec store without put-if-absent
    assert (refusing.atomic_create_only, refusing.create_only) == (False, None)
    with pytest.raises(CreateOnlyNotSupported) as caught:
        refusing.write_create_only("c.json", b"c")
    assert str(caught.value) == (
        f"table {store.uri}: the memory:// store cannot write a file only if it is absent, so concurrent writers "
        "could overwrite each other's commits; if this table has exactly one writer, pass the storage option "
        "deltalite_single_writer=true"
    )
    single = Storage(store.uri, {**store.options, "deltalite_single_writer": "true"})
    single.backend = FsspecBackend(single.fs, single.retry_policy)
    assert single.create_only == "single-writer"
    single.write_create_only("c.json", b"c")
    with pytest.raises(FileExistsError):
        single.write_create_only("c.json", b"d")
    assert single.read("c.json") == b"c"


# -- listing -----------------------------------------------------------------------------------------------------


def test_list_from_a_name(storage: Storage) -> None:
    # read before the writes: taken after them, it left the seeding only the 5 s margin on a loaded machine
    before = int(time.time() * 1000) - 5_000  # a store's clock and file times may lag ours a little
    _seed(storage)
    # sorted by name; the start name itself is included, directories (_sidecars) are not
    assert [(f.name, f.size) for f in storage.list_from(LOG_DIR, version_prefix(1))] == [
        (C1, 3),
        (CP2, 2),
        (C2, 3),
        (C3, 5),
    ]
    assert [f.name for f in storage.list_from(LOG_DIR, C1)] == [C1, CP2, C2, C3]
    assert [f.name for f in storage.list_from(LOG_DIR, C1 + "~")] == [CP2, C2, C3]  # between two names
    assert [f.name for f in storage.list_from(LOG_DIR, C3 + "~")] == []
    whole = storage.list_from(LOG_DIR)
    assert [f.name for f in whole] == [C0, C1, CP2, C2, C3]
    assert all(isinstance(f, FileInfo) and before <= f.modification_time <= time.time() * 1000 for f in whole)
    with pytest.raises(FileNotFoundError):
        storage.list_from("nowhere", version_prefix(1))
    with pytest.raises(FileNotFoundError):
        storage.list_from("nowhere")
    with pytest.raises(FileNotFoundError):
        storage.list_from("a.json")  # a file is not a directory


def test_list_one_directory_level(store: Store, storage: Storage) -> None:
    before = int(time.time() * 1000) - 5_000  # a store's clock and file times may lag ours a little
    _seed(storage)
    after = int(time.time() * 1000) + 5_000
    listing = storage.list_dir("")
    files = sorted(zip(listing.file_names, listing.file_sizes, strict=True))
    assert files == [("a.json", 1), ("b.json", 4)]
    assert sorted(listing.dir_names) == ["_delta_log", "sub"]
    assert listing.others == ()
    assert len(listing.file_mtimes) == 2 and all(before <= m <= after for m in listing.file_mtimes)
    assert len(listing.dir_mtimes) == 2
    assert sorted((f.name, f.size) for f in listing.dirs) == [("_delta_log", 0), ("sub", 0)]
    sub = storage.list_dir("sub")
    assert (sub.file_names, sub.file_sizes, sub.dir_names, sub.dir_mtimes, sub.others) == (("x.bin",), (1,), (), (), ())
    assert len(sub.file_mtimes) == 1 and before <= sub.file_mtimes[0] <= after
    assert storage.list_dir("nowhere") == DirListing()
    assert storage.list_dir("a.json") == DirListing()  # a file is not a directory
    # named files may skip their size and mtime: the local disk does, object stores list them anyway
    skipped = storage.list_dir("", without_details=frozenset({"a.json"}))
    sizes = dict(zip(skipped.file_names, skipped.file_sizes, strict=True))
    assert sizes == {"a.json": -1 if store.kind == "local" else 1, "b.json": 4}


# -- deletes -----------------------------------------------------------------------------------------------------


DELETED_WITH_A_MISSING_KEY = {
    "local": DeleteOutcome(("a.json", "b.json"), ("missing.json",), ()),
    "memory": DeleteOutcome(("a.json", "b.json"), ("missing.json",), ()),
    "s3": DeleteOutcome(("a.json", "b.json", "missing.json"), (), ()),  # DeleteObjects cannot tell
}


def test_delete_a_batch_with_a_missing_key(store: Store, storage: Storage) -> None:
    _seed(storage)
    assert storage.delete_files(["a.json", "b.json", "missing.json"]) == DELETED_WITH_A_MISSING_KEY[store.kind]
    assert (storage.exists("a.json"), storage.exists("b.json"), storage.read("sub/x.bin")) == (False, False, b"x")
    assert storage.delete_files([]) == DeleteOutcome()
    storage.delete(["a.json"])  # already gone: fine
    storage.delete_files(["sub/x.bin"])
    # only the local disk keeps an empty directory, which VACUUM then removes
    assert storage.remove_empty_dir("sub") is (store.kind == "local")
    assert storage.list_dir("").dir_names == ("_delta_log",)
    assert storage.remove_empty_dir(LOG_DIR) is False  # not empty


# -- failures ----------------------------------------------------------------------------------------------------

# (name, fault category, call): each runs one Storage method on a seeded table
FAILING = [
    ("read", "read", lambda s: s.read("b.json")),
    ("read_range", "read", lambda s: s.read_range("b.json", 1, 2)),
    ("exists", "read", lambda s: s.exists("b.json")),
    ("write", "write", lambda s: s.write("w.json", b"W")),
    ("write_create_only", "write", lambda s: s.write_create_only("c.json", b"C")),
    ("list_from", "list", lambda s: [f.name for f in s.list_from(LOG_DIR, version_prefix(3))]),
]
RESULTS = {"read": b"BBBB", "read_range": b"BB", "exists": True, "write": None, "write_create_only": None}
RESULTS["list_from"] = [C3]
# The local disk is tried once (its faults are answers), and writes and listings there use `os` directly: the
# filesystem object never sees them.
THROUGH_FS_LOCALLY = {"read", "read_range", "exists"}


def _tries(store: Store, name: str) -> int:
    if store.kind != "local":
        return ATTEMPTS
    return 1 if name in THROUGH_FS_LOCALLY else 0


@pytest.mark.parametrize("case", FAILING, ids=[c[0] for c in FAILING])
def test_a_permanent_fault_fails_after_exactly_attempts_tries(store: Store, case: tuple[Any, ...]) -> None:
    name, category, call = case
    _seed(Storage(store.uri, store.options))
    storage, faulty = store.storage()
    faulty.fail_next(category, math.inf, "slowdown")
    tries = _tries(store, name)
    if tries == 0:
        assert call(storage) == RESULTS[name]
        assert faulty.count(category) == 0
        return
    with pytest.raises(StorageError) as caught:
        call(storage)
    path = {"list_from": LOG_DIR, "write": "w.json", "write_create_only": "c.json"}.get(name, "b.json")
    after = f" after {ATTEMPTS} attempts" if store.kind != "local" else ""
    assert str(caught.value).startswith(f"table {store.uri}: storage error on {path}{after}: OSError: ")
    assert faulty.count(category) == tries


@pytest.mark.parametrize("case", FAILING, ids=[c[0] for c in FAILING])
def test_faults_on_the_first_tries_are_retried(store: Store, case: tuple[Any, ...]) -> None:
    name, category, call = case
    _seed(Storage(store.uri, store.options))
    storage, faulty = store.storage()
    faulty.fail_next(category, ATTEMPTS - 1, "reset")
    if store.kind == "local" and name in THROUGH_FS_LOCALLY:  # no retries on the local disk
        with pytest.raises(StorageError):
            call(storage)
        assert faulty.count(category) == 1
        return
    assert call(storage) == RESULTS[name]
    assert faulty.count(category) == _tries(store, name)


def test_a_failing_batch_delete_reports_each_file(store: Store) -> None:
    _seed(Storage(store.uri, store.options))
    storage, faulty = store.storage()
    faulty.fail_next("delete", math.inf, "timeout")
    outcome = storage.delete_files(["a.json", "b.json"])
    if store.kind == "local":  # unlinked directly
        assert outcome == DeleteOutcome(("a.json", "b.json"), (), ())
        return
    assert (outcome.deleted, outcome.missing, [p for p, _ in outcome.failed]) == ((), (), ["a.json", "b.json"])
    assert [reason.endswith(f" (after {ATTEMPTS} attempts)") for _, reason in outcome.failed] == [True, True]
    # S3 sends both keys in one DeleteObjects request per try; other stores delete file by file
    assert faulty.count("delete") == (ATTEMPTS if store.kind == "s3" else 2 * ATTEMPTS)


# -- single files outside a table --------------------------------------------------------------------------------


def test_result_files(store: Store, tmp_path: Path) -> None:
    options = {k: v for k, v in store.options.items() if not k.startswith("deltalite_")}
    uri = f"{store.uri}/results/deep/run-1.json"
    write_bytes(uri, b'{"ok": true}', options)  # local: the directories are made
    assert read_bytes(uri, options) == b'{"ok": true}'
    write_bytes(uri, b"{}", options)
    assert read_bytes(uri, options) == b"{}"
    delete_file(uri, options)
    with pytest.raises(FileNotFoundError):
        read_bytes(uri, options)
    delete_file(uri, options)  # already gone: fine
    # a filesystem that serves the URI's store is reused (the table's, with its credentials) ...
    faulty = FaultyFileSystem(store.fs)
    write_bytes(uri, b"1", filesystem=faulty)
    assert read_bytes(uri, filesystem=faulty) == b"1"
    assert (faulty.count("write"), faulty.count("read")) == ((0 if store.kind == "local" else 1), 1)
    # ... one of another store is not
    other = FaultyFileSystem(fsspec.filesystem("memory" if store.kind != "memory" else "file"))
    assert read_bytes(uri, options, filesystem=other) == b"1"
    assert other.count("read") == 0
    with pytest.raises(InvalidArgument, match=r"does not name a file"):
        write_bytes("s3://bucket", b"x")


def test_result_file_failures_are_storage_errors(store: Store) -> None:
    faulty = FaultyFileSystem(store.fs)
    faulty.fail_next("read", math.inf, "slowdown")
    with pytest.raises(StorageError) as caught:
        read_bytes(f"{store.uri}/r.json", FAST, filesystem=faulty)
    after = f" after {ATTEMPTS} attempts" if store.kind != "local" else ""  # the local disk is tried once
    assert str(caught.value).startswith(f"table {store.uri}: storage error on r.json{after}: OSError: ")
    assert faulty.count("read") == _tries(store, "read")


# -- composing a file from byte ranges ------------------------------------------------------------------------------

# S3 copies ranges of 5 MiB or more itself (UploadPartCopy), the local disk every range (copy_file_range)
COMPOSES = {"local": True, "memory": False, "s3": True}


def test_compose_writes_bytes_and_ranges_copying_large_ranges_on_the_store(store: Store, storage: Storage) -> None:
    mib = 1024 * 1024
    first, second = os.urandom(6 * mib), os.urandom(7 * mib)
    storage.write("src/one.bin", first)
    storage.write("src/two.bin", second)
    assert storage.composes_from_ranges is COMPOSES[store.kind]
    # large ranges only, then a footer: on S3 two UploadPartCopy parts and 6 bytes uploaded
    sent = storage.compose("out/a.bin", [("src/one.bin", 0, 6 * mib), ("src/two.bin", mib, 6 * mib), b"footer"])
    assert storage.read("out/a.bin") == first + second[mib:] + b"footer"
    assert sent == (6 if storage.composes_from_ranges else 12 * mib + 6)
    # small pieces around a range: a part before a copy is filled from the range, so every copied part is >= 5 MiB
    segments = [b"HEAD", ("src/one.bin", 0, 6 * mib), ("src/two.bin", 100, 1000), ("src/two.bin", mib, 6 * mib), b"T"]
    sent = storage.compose("out/b.bin", segments)
    assert storage.read("out/b.bin") == b"HEAD" + first + second[100:1100] + second[mib : 7 * mib] + b"T"
    # S3 fills the part before a copy from the range and reads the short range; the local disk copies both
    expected = {"local": 4 + 1, "memory": 4 + 12 * mib + 1000 + 1, "s3": 4 + 6 * mib + 1000 + 1}
    assert sent == expected[store.kind]


def test_compose_from_a_missing_file_fails_and_leaves_no_upload(store: Store, storage: Storage) -> None:
    storage.write("src/one.bin", os.urandom(6 * 1024 * 1024))
    with pytest.raises(StorageError):
        storage.compose("out/c.bin", [("src/one.bin", 0, 6 * 1024 * 1024), ("src/missing.bin", 0, 6 * 1024 * 1024)])
    if store.kind == "s3":
        bucket = store.uri.removeprefix("s3://").split("/")[0]
        uploads = store.fs.call_s3("list_multipart_uploads", Bucket=bucket)
        assert uploads.get("Uploads", []) == []  # aborted: nothing left to bill
        assert not store.fs.exists(f"{bucket}/t/out/c.bin")
    if store.kind == "local":
        assert not storage.exists("out/c.bin")  # the partial file is removed
