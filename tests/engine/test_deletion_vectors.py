"""Tests of deletion-vector reading against the real tables of the shared corpus and independent oracles."""

from __future__ import annotations

import functools
import json
import os
import re
import struct
import zlib
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote, urlsplit

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from airflow_provider_deltalite.engine.deletion_vectors import (
    decode_dv_bytes,
    decode_roaring_portable_64,
    dv_absolute_path,
    dv_unique_id,
    read_deletion_vector,
    z85_decode,
)
from airflow_provider_deltalite.engine.errors import CorruptLog, DeltaLiteError
from tests.conformance.corpus import row_multiset
from tests.helpers import CORPUS
from tests.oracles import kernel_rows, spark_test_suite_copy

MAGIC = 1681511377
COMMIT_NAME = re.compile(r"^\d{20}\.json$")

# Tables whose DV files carry the names the protocol prescribes, so delta-rs can read them too.
SPEC_NAMED_TABLES = [
    "delta-rs/table-with-dv-small",
    "delta-golden/dv-partitioned-with-checkpoint",
    "delta-golden/dv-with-columnmapping",
    "kernel-rs-golden/log-replay-dv-key-cases/delta",
    "delta-kernel-defaults/basic-dv-with-checkpoint",
    "delta-kernel-defaults/basic-dv-no-checkpoint",
    "delta-rs/table_with_deletion_logs",
    "delta-rs/cdf-table-with-cdc-and-dvs",
    "kernel-rs-data/cdf-table-with-dv",
]
# Tables written by Delta's Spark test suite, which names DV files "test%dv%prefix-deletion_vector_<uuid>.bin".
SPARK_TEST_TABLES = [
    "delta-spark-resources/table-with-dv-large",
    "delta-spark-resources/partitioned-table-with-dv-large",
    "delta-spark-resources/table-with-dv-small",
]
SPECIAL_CHAR_TABLE = "delta-spark-resources/table-with-dv-special-char"
INLINE_TABLE = "kernel-rs-data/cdf-table-with-dv"


# ----------------------------------------------------------------------------------------------- helpers


def _local_path(path: str) -> str:
    return urlsplit(path).path if path.startswith("file:") else path


def _read_local(path: str, start: int, length: int) -> bytes:
    with open(_local_path(path), "rb") as handle:
        handle.seek(start)
        return handle.read(length)


class RecordingReader:
    """A `read_range` over local files that records every call."""

    def __init__(self, resolve: Callable[[str], str] = _local_path) -> None:
        self.calls: list[tuple[str, int, int]] = []
        self._resolve = resolve

    def __call__(self, path: str, start: int, length: int) -> bytes:
        self.calls.append((path, start, length))
        with open(self._resolve(path), "rb") as handle:
            handle.seek(start)
            return handle.read(length)


def _spark_test_suite_name(path: str) -> str:
    # Delta's Spark tests set DeltaSQLConf.TEST_DV_NAME_PREFIX, so their DV files carry a prefix no reader derives.
    local = _local_path(path)
    if os.path.exists(local):
        return local
    folder, name = os.path.split(local)
    return os.path.join(folder, "test%dv%prefix-" + name)


def _commits(table: Path, up_to: int | None = None) -> Iterator[dict[str, Any]]:
    log = table / "_delta_log"
    names = sorted(name for name in os.listdir(log) if COMMIT_NAME.match(name))
    assert names and names[0] == "00000000000000000000.json", f"{table} does not keep every commit"
    for name in names:
        if up_to is not None and int(name[:20]) > up_to:
            break
        with open(log / name, encoding="utf-8") as handle:
            for line in handle:
                if line.strip():
                    yield json.loads(line)


def _all_descriptors(table: Path) -> list[dict[str, Any]]:
    """Every distinct DV descriptor of add and remove actions in the JSON commits."""
    seen: dict[str, dict[str, Any]] = {}
    for action in _commits(table):
        for kind in ("add", "remove"):
            dv = (action.get(kind) or {}).get("deletionVector")
            if dv:
                seen.setdefault(dv_unique_id(dv["storageType"], dv["pathOrInlineDv"], dv.get("offset")), dv)
    return list(seen.values())


def _live_adds(table: Path, up_to: int | None = None) -> list[dict[str, Any]]:
    """Replay the JSON commits, keying files by (path, DV id) as the protocol does."""

    def key(action: dict[str, Any]) -> tuple[str, str | None]:
        dv = action.get("deletionVector")
        dv_id = dv_unique_id(dv["storageType"], dv["pathOrInlineDv"], dv.get("offset")) if dv else None
        return unquote(action["path"]), dv_id

    live: dict[tuple[str, str | None], dict[str, Any]] = {}
    for action in _commits(table, up_to):
        if "add" in action:
            live[key(action["add"])] = action["add"]
        elif "remove" in action:
            live.pop(key(action["remove"]), None)
    return list(live.values())


def _deleted_rows(table: Path, add: dict[str, Any], read_range: Callable[[str, int, int], bytes]) -> np.ndarray:
    return read_deletion_vector(add["deletionVector"], str(table), read_range)


@functools.cache
def _physical_names(table: Path) -> dict[str, str]:
    """Logical to physical column names (they differ under column mapping)."""
    names: dict[str, str] = {}
    for action in _commits(table):
        if "metaData" in action:
            for field in json.loads(action["metaData"]["schemaString"])["fields"]:
                names[field["name"]] = field["metadata"].get("delta.columnMapping.physicalName", field["name"])
    return names


def _file_rows_after_dv(
    table: Path, add: dict[str, Any], columns: list[str], read_range: Callable[[str, int, int], bytes]
) -> list[tuple[Any, ...]]:
    physical = [_physical_names(table)[name] for name in columns]
    data = pq.read_table(table / unquote(add["path"]), columns=physical)
    rows = list(zip(*(data.column(name).to_pylist() for name in physical), strict=True))
    if not add.get("deletionVector"):
        return rows
    deleted = set(_deleted_rows(table, add, read_range).tolist())
    return [row for index, row in enumerate(rows) if index not in deleted]


def _blob_file(blob: bytes, *, offset: int = 1) -> bytes:
    """Lay out one DV the way the protocol stores it: version byte, BE size, blob, BE CRC-32."""
    return b"\x01" + b"\x00" * (offset - 1) + struct.pack(">I", len(blob)) + blob + struct.pack(">I", zlib.crc32(blob))


def _memory_reader(files: dict[str, bytes]) -> Callable[[str, int, int], bytes]:
    def read(path: str, start: int, length: int) -> bytes:
        return files[path][start : start + length]

    return read


def _small_dv() -> tuple[Path, dict[str, Any], bytes]:
    """The DV of delta-rs/table-with-dv-small, its descriptor and its blob."""
    table = CORPUS / "delta-rs/table-with-dv-small"
    (descriptor,) = _all_descriptors(table)
    raw = (table / "deletion_vector_61d16c75-6994-46b7-a15b-8b538852e50e.bin").read_bytes()
    start = descriptor["offset"] + 4
    return table, descriptor, raw[start : start + descriptor["sizeInBytes"]]


# Hand-built 32-bit portable RoaringBitmaps, written from the format description, not from the code under test.
def _bitmap32(containers: list[tuple[int, str, Any]], *, run_cookie: bool) -> tuple[bytes, list[int]]:
    n = len(containers)
    values: list[int] = []
    header = b""
    bodies: list[bytes] = []
    flags = 0
    for index, (key, kind, payload) in enumerate(containers):
        if kind == "array":
            low = sorted(payload)
            body = struct.pack(f"<{len(low)}H", *low)
        elif kind == "bitmap":
            low = sorted(payload)
            words = [0] * 1024
            for value in low:
                words[value // 64] |= 1 << (value % 64)
            body = struct.pack("<1024Q", *words)
        else:
            flags |= 1 << index
            low = [start + step for start, length in payload for step in range(length + 1)]
            body = struct.pack("<H", len(payload)) + b"".join(struct.pack("<HH", s, ln) for s, ln in payload)
        values.extend((key << 16) | value for value in low)
        header += struct.pack("<HH", key, len(low) - 1)
        bodies.append(body)
    if run_cookie:
        out = struct.pack("<I", 12347 | ((n - 1) << 16)) + flags.to_bytes((n + 7) // 8, "little") + header
        with_offsets = n >= 4
    else:
        out = struct.pack("<II", 12346, n) + header
        with_offsets = True
    if with_offsets:
        position = len(out) + 4 * n
        for body in bodies:
            out += struct.pack("<I", position)
            position += len(body)
    return out + b"".join(bodies), values


def _bitmap64(buckets: list[tuple[int, bytes, list[int]]]) -> tuple[bytes, list[int]]:
    out = struct.pack("<Q", len(buckets))
    values: list[int] = []
    for high, body, low in buckets:
        out += struct.pack("<I", high) + body
        values.extend((high << 32) | value for value in low)
    return out, values


# ----------------------------------------------------------------------------------------------- Z85 and paths


def test_z85_decode_zeromq_spec_vector() -> None:
    assert z85_decode("HelloWorld") == bytes([0x86, 0x4F, 0xD2, 0x6F, 0xB5, 0x59, 0xF7, 0x5B])
    assert z85_decode("") == b""


@pytest.mark.parametrize(
    "text",
    ["HelloWorl", "Hello~orld", "Hello orld", "HelloWörld", "HelloWorld%%%%%", "#####", "####0", "Hel\x00oWorld"],
)
def test_z85_decode_rejects_malformed_text(text: str) -> None:
    with pytest.raises(CorruptLog, match="Z85"):
        z85_decode(text)


def test_z85_decode_padded_last_group_of_the_rust_crate() -> None:
    # delta-kernel-rs encodes inline DVs with the Rust z85 crate: "##" + 3 digits carry 2 bytes.
    assert z85_decode("HelloWorld##093") == bytes([0x86, 0x4F, 0xD2, 0x6F, 0xB5, 0x59, 0xF7, 0x5B, 0x03, 0x00])
    with pytest.raises(CorruptLog):
        z85_decode("##}}}")  # 3 digits cannot exceed 2 bytes


def test_dv_unique_id() -> None:
    assert dv_unique_id("u", "ab^-aqEH.-t@S}K{vb[*k^", 4) == "uab^-aqEH.-t@S}K{vb[*k^@4"
    assert dv_unique_id("i", "wi5b=000010000siXQKl0rr91000f55c8Xg0@@D72lkbi5=-{L", None) == (
        "iwi5b=000010000siXQKl0rr91000f55c8Xg0@@D72lkbi5=-{L"
    )
    assert dv_unique_id("u", "x", 0) == "ux@0"


def test_dv_absolute_path_uuid_points_at_the_file_on_disk() -> None:
    table = CORPUS / "delta-rs/table-with-dv-small"
    (descriptor,) = _all_descriptors(table)
    expected = f"{table}/deletion_vector_61d16c75-6994-46b7-a15b-8b538852e50e.bin"
    assert dv_absolute_path(str(table), "u", descriptor["pathOrInlineDv"]) == expected
    assert dv_absolute_path(f"{table}/", "u", descriptor["pathOrInlineDv"]) == expected
    assert os.path.isfile(expected)
    assert dv_absolute_path("s3://bucket/tbl/", "u", "ab" + descriptor["pathOrInlineDv"]) == (
        "s3://bucket/tbl/ab/deletion_vector_61d16c75-6994-46b7-a15b-8b538852e50e.bin"
    )


def test_dv_absolute_path_uuid_of_every_spec_named_table_exists() -> None:
    checked = 0
    for name in SPEC_NAMED_TABLES:
        for descriptor in _all_descriptors(CORPUS / name):
            if descriptor["storageType"] == "u":
                assert os.path.isfile(dv_absolute_path(str(CORPUS / name), "u", descriptor["pathOrInlineDv"]))
                checked += 1
    assert checked > 50


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("file:/tmp/a%20b/c%25d.bin", "file:///tmp/a b/c%d.bin"),
        ("file:///tmp/x%26y.bin", "file:///tmp/x&y.bin"),
        ("file://localhost/tmp/x.bin", "file:///tmp/x.bin"),
        ("s3://bucket/dir%20x/dv.bin", "s3://bucket/dir x/dv.bin"),
        ("abfss://c@acct.dfs.core.windows.net/t/dv%2525.bin", "abfss://c@acct.dfs.core.windows.net/t/dv%25.bin"),
    ],
)
def test_dv_absolute_path_absolute_uri_is_decoded_once(value: str, expected: str) -> None:
    assert dv_absolute_path("/ignored", "p", value) == expected


def test_dv_absolute_path_errors() -> None:
    with pytest.raises(ValueError):
        dv_absolute_path("/t", "i", "wi5b=000010000siXQKl0rr91000f55c8Xg0@@D72lkbi5=-{L")
    with pytest.raises(CorruptLog, match="storageType"):
        dv_absolute_path("/t", "x", "abc")
    with pytest.raises(CorruptLog, match="shorter"):
        dv_absolute_path("/t", "u", "tooshort")
    with pytest.raises(CorruptLog, match="UUID"):
        dv_absolute_path("/t", "u", "~" * 20)


# ----------------------------------------------------------------------------------------------- corpus tables


@pytest.mark.parametrize("name", SPEC_NAMED_TABLES)
def test_every_dv_of_the_log_matches_its_cardinality(name: str) -> None:
    table = CORPUS / name
    descriptors = _all_descriptors(table)
    assert descriptors
    for descriptor in descriptors:
        reader = RecordingReader()
        rows = read_deletion_vector(descriptor, str(table), reader)
        assert rows.dtype == np.uint64
        assert len(rows) == descriptor["cardinality"]
        assert bool(np.all(rows[1:] > rows[:-1]))
        if descriptor["storageType"] == "i":
            assert reader.calls == []
        else:
            path = dv_absolute_path(str(table), descriptor["storageType"], descriptor["pathOrInlineDv"])
            assert reader.calls == [(path, descriptor["offset"], descriptor["sizeInBytes"] + 8)]


@pytest.mark.parametrize("name", SPARK_TEST_TABLES)
def test_spark_test_suite_tables_decode_with_their_test_prefix(name: str) -> None:
    table = CORPUS / name
    descriptors = _all_descriptors(table)
    assert descriptors
    for descriptor in descriptors:
        spec_path = dv_absolute_path(str(table), "u", descriptor["pathOrInlineDv"])
        assert not os.path.exists(spec_path)  # only the Spark test suite's own naming finds these files
        reader = RecordingReader(_spark_test_suite_name)
        rows = read_deletion_vector(descriptor, str(table), reader)
        assert len(rows) == descriptor["cardinality"]
        assert reader.calls == [(spec_path, descriptor["offset"], descriptor["sizeInBytes"] + 8)]


def test_missing_dv_file_raises_os_error() -> None:
    table = CORPUS / "delta-spark-resources/table-with-dv-small"
    (descriptor,) = _all_descriptors(table)
    with pytest.raises(FileNotFoundError):
        read_deletion_vector(descriptor, str(table), _read_local)


def test_several_dvs_share_one_file_at_different_offsets() -> None:
    table = CORPUS / "delta-spark-resources/table-with-dv-large"
    offsets: dict[str, set[int]] = {}
    for descriptor in _all_descriptors(table):
        offsets.setdefault(descriptor["pathOrInlineDv"], set()).add(descriptor["offset"])
    assert max(len(found) for found in offsets.values()) > 1
    assert all(offset >= 1 for found in offsets.values() for offset in found)


# Rows per version as Delta's DeletionVectorsTestData documents these tables (Seq ++ appends, filterNot drops all).
_T1_V1 = [i for i in range(2000) if i not in {0, 180, 300, 700, 1800}]
_T1_V2 = [*_T1_V1, 300, 700]
_T1_V3 = [i for i in _T1_V2 if i not in {300, 250, 350, 900, 1353, 1567, 1800}]
_T1_V4 = [*_T1_V3, 900, 1567]
_T3_V1 = [i for i in range(2000) if i not in {0, 180, 308, 225, 756, 1007, 1503}]
_T3_V2 = [*_T3_V1, 308, 756]
_T3_V3 = [i for i in _T3_V2 if i not in {300, 257, 399, 786, 1353, 1567, 1800}]
_T3_V4 = [*_T3_V3, 1353, 1567]


@pytest.mark.parametrize(
    ("name", "column", "version", "expected"),
    [
        ("delta-spark-resources/table-with-dv-large", "value", 1, _T1_V1),
        ("delta-spark-resources/table-with-dv-large", "value", 2, _T1_V2),
        ("delta-spark-resources/table-with-dv-large", "value", 3, _T1_V3),
        ("delta-spark-resources/table-with-dv-large", "value", 4, _T1_V4),
        ("delta-spark-resources/partitioned-table-with-dv-large", "id", 1, _T3_V1),
        ("delta-spark-resources/partitioned-table-with-dv-large", "id", 2, _T3_V2),
        ("delta-spark-resources/partitioned-table-with-dv-large", "id", 3, _T3_V3),
        ("delta-spark-resources/partitioned-table-with-dv-large", "id", 4, _T3_V4),
        ("delta-spark-resources/table-with-dv-small", "value", 1, [1, 2, 3, 4, 5, 6, 7, 8]),
    ],
)
def test_spark_tables_match_the_delta_test_suite_expectations(
    name: str, column: str, version: int, expected: list[int], tmp_path: Path
) -> None:
    # delta-kernel-rs reads each version as the suite documents it (its copy names the DV files as the protocol does)
    oracle = kernel_rows(spark_test_suite_copy(name, tmp_path / "t"), version)
    assert Counter(oracle.column(column).to_pylist()) == Counter(expected)
    table = CORPUS / name
    reader = RecordingReader(_spark_test_suite_name)
    visible: list[tuple[Any, ...]] = []
    for add in _live_adds(table, version):
        visible.extend(_file_rows_after_dv(table, add, [column], reader))
    assert Counter(row[0] for row in visible) == Counter(expected)


def test_special_character_folder_absolute_path_dv() -> None:
    table = CORPUS / SPECIAL_CHAR_TABLE
    (descriptor,) = _all_descriptors(table)
    assert descriptor["storageType"] == "p"
    folder = table / "folder&with%special char"
    # The resource is a template: Delta's test substitutes the folder's URL-encoded URI for the placeholder.
    resolved = dict(descriptor)
    resolved["pathOrInlineDv"] = descriptor["pathOrInlineDv"].replace(
        "{{FOLDER_WITH_SPECIAL_CHAR}}", quote(str(folder))
    )
    expected_file = folder / "test%dv%prefix-deletion_vector_67bc892e-2979-4760-a78c-856aba806564.bin"
    assert dv_absolute_path(str(table), "p", resolved["pathOrInlineDv"]) == f"file://{expected_file}"
    reader = RecordingReader()
    rows = read_deletion_vector(resolved, str(table), reader, table_uri=str(table))
    assert len(rows) == descriptor["cardinality"] == 5
    assert reader.calls == [(f"file://{expected_file}", 1, descriptor["sizeInBytes"] + 8)]
    (add,) = _live_adds(table)
    assert int(rows.max()) < pq.ParquetFile(table / unquote(add["path"])).metadata.num_rows


@pytest.mark.parametrize(
    ("name", "checkpoint"),
    [
        ("delta-golden/dv-partitioned-with-checkpoint", "00000000000000000010.checkpoint.parquet"),
        ("delta-kernel-defaults/basic-dv-with-checkpoint", "00000000000000000040.checkpoint.parquet"),
    ],
)
def test_descriptors_from_a_parquet_checkpoint(name: str, checkpoint: str) -> None:
    table = CORPUS / name
    actions = pq.read_table(table / "_delta_log" / checkpoint, columns=["add", "remove"]).to_pylist()
    found = 0
    for action in actions:
        for kind in ("add", "remove"):
            dv = (action.get(kind) or {}).get("deletionVector")
            if dv:
                assert len(read_deletion_vector(dv, str(table), _read_local)) == dv["cardinality"]
                found += 1
    assert found


# ----------------------------------------------------------------------------------------------- delta-rs oracles


@pytest.fixture(scope="module")
def deltalake() -> Any:
    import deltalake

    return deltalake


@pytest.mark.parametrize(
    "name", [name for name in SPEC_NAMED_TABLES if name != INLINE_TABLE] + ["kernel-rs-data/compacted-log-files-table"]
)
def test_deleted_rows_match_delta_rs_selection_vectors(deltalake: Any, name: str) -> None:
    table = CORPUS / name
    oracle = pa.table(deltalake.DeltaTable(str(table)).deletion_vectors()).to_pylist()
    expected = {
        unquote(urlsplit(row["filepath"]).path): np.flatnonzero(~np.array(row["selection_vector"], dtype=bool))
        for row in oracle
    }
    ours = {
        str(table / unquote(add["path"])): _deleted_rows(table, add, _read_local)
        for add in _live_adds(table)
        if add.get("deletionVector")
    }
    assert ours.keys() == expected.keys()
    for path, rows in ours.items():
        assert rows.tolist() == expected[path].tolist(), path


@pytest.mark.parametrize("version", [1, 3, 4, 5])
def test_inline_dvs_match_delta_rs(deltalake: Any, version: int) -> None:
    table = CORPUS / INLINE_TABLE
    oracle = pa.table(deltalake.DeltaTable(str(table), version=version).deletion_vectors()).to_pylist()
    (row,) = oracle
    (add,) = [add for add in _live_adds(table, version) if add.get("deletionVector")]
    assert (add["deletionVector"]["storageType"] == "i") == (version >= 3)
    expected = np.flatnonzero(~np.array(row["selection_vector"], dtype=bool))
    assert _deleted_rows(table, add, _read_local).tolist() == expected.tolist()


@pytest.mark.parametrize(
    "name",
    [
        "delta-rs/table-with-dv-small",
        "kernel-rs-golden/log-replay-dv-key-cases/delta",
        "delta-kernel-defaults/basic-dv-with-checkpoint",
        "delta-kernel-defaults/basic-dv-no-checkpoint",
    ],
)
def test_visible_rows_match_delta_rs_query(deltalake: Any, name: str) -> None:
    # DeltaTable.to_pyarrow_table() refuses the deletionVectors reader feature; the DataFusion query path applies DVs.
    table = CORPUS / name
    visible = pa.table(
        deltalake.QueryBuilder().register("t", deltalake.DeltaTable(str(table))).execute("SELECT * FROM t").read_all()
    )
    columns = visible.column_names
    expected = Counter(zip(*(visible.column(name).to_pylist() for name in columns), strict=True))
    adds = _live_adds(table)
    ours: Counter[tuple[Any, ...]] = Counter()
    total = 0
    for add in adds:
        ours.update(_file_rows_after_dv(table, add, columns, _read_local))
        total += pq.ParquetFile(table / unquote(add["path"])).metadata.num_rows
    assert ours == expected
    cardinality = sum(add["deletionVector"]["cardinality"] for add in adds if add.get("deletionVector"))
    assert total - visible.num_rows == cardinality
    if len(adds) == 1:
        assert total - visible.num_rows == adds[0]["deletionVector"]["cardinality"]


# ----------------------------------------------------------------------------------------------- malformed input


def test_bad_magic_raises_corrupt_log() -> None:
    _, descriptor, blob = _small_dv()
    for magic in (MAGIC + 1, MAGIC - 1):  # MAGIC - 1 is Delta's native format, never valid on disk
        bad = struct.pack("<I", magic) + blob[4:]
        with pytest.raises(CorruptLog, match="magic"):
            decode_dv_bytes(bad)
        reader = _memory_reader({"/t/dv.bin": _blob_file(bad)})
        with pytest.raises(CorruptLog, match=r"magic.*") as caught:
            read_deletion_vector({**descriptor, "storageType": "p", "pathOrInlineDv": "/t/dv.bin"}, "/t", reader)
        assert "/t/dv.bin" in str(caught.value)


def test_bad_crc_raises_corrupt_log() -> None:
    _, descriptor, blob = _small_dv()
    stored = bytearray(_blob_file(blob))
    stored[-1] ^= 0xFF
    reader = _memory_reader({"/t/dv.bin": bytes(stored)})
    with pytest.raises(CorruptLog, match="CRC") as caught:
        read_deletion_vector({**descriptor, "storageType": "p", "pathOrInlineDv": "/t/dv.bin"}, "/t", reader)
    assert "/t/dv.bin" in str(caught.value) and "\n" not in str(caught.value)


def test_corrupted_real_file_raises_corrupt_log(tmp_path: Path) -> None:
    table, descriptor, _ = _small_dv()
    source = table / "deletion_vector_61d16c75-6994-46b7-a15b-8b538852e50e.bin"
    stored = bytearray(source.read_bytes())
    stored[20] ^= 0x01  # one bit inside the bitmap
    (tmp_path / source.name).write_bytes(bytes(stored))
    with pytest.raises(CorruptLog, match="CRC") as caught:
        read_deletion_vector(descriptor, str(tmp_path), _read_local, table_uri="s3://user:secret@bucket/tbl?sig=1")
    assert isinstance(caught.value, DeltaLiteError)
    assert caught.value.table_uri == "s3://bucket/tbl"
    assert "secret" not in str(caught.value)
    assert str(tmp_path / source.name) in str(caught.value)


def test_truncated_file_raises_corrupt_log() -> None:
    _, descriptor, blob = _small_dv()
    stored = _blob_file(blob)
    dv = {**descriptor, "storageType": "p", "pathOrInlineDv": "/t/dv.bin"}
    for cut in range(len(stored)):
        with pytest.raises(CorruptLog):
            read_deletion_vector(dv, "/t", _memory_reader({"/t/dv.bin": stored[:cut]}))


def test_truncated_blob_raises_corrupt_log() -> None:
    _, _, blob = _small_dv()
    for cut in range(len(blob)):
        with pytest.raises(CorruptLog):
            decode_dv_bytes(blob[:cut], where="dv.bin")
    with pytest.raises(CorruptLog):
        decode_roaring_portable_64(b"\x01\x00\x00")


def test_descriptor_mismatches_raise_corrupt_log() -> None:
    table, descriptor, _ = _small_dv()
    with pytest.raises(CorruptLog, match="cardinality"):
        read_deletion_vector({**descriptor, "cardinality": descriptor["cardinality"] + 1}, str(table), _read_local)
    with pytest.raises(CorruptLog, match="size"):
        read_deletion_vector({**descriptor, "sizeInBytes": descriptor["sizeInBytes"] - 2}, str(table), _read_local)
    with pytest.raises(CorruptLog, match="storageType"):
        read_deletion_vector({**descriptor, "storageType": "r"}, str(table), _read_local)
    with pytest.raises(CorruptLog, match="sizeInBytes"):
        read_deletion_vector({**descriptor, "sizeInBytes": None}, str(table), _read_local)
    with pytest.raises(CorruptLog):
        read_deletion_vector({**descriptor, "offset": -1}, str(table), _read_local)
    with pytest.raises(CorruptLog):
        read_deletion_vector({**descriptor, "sizeInBytes": "36"}, str(table), _read_local)


def test_bad_inline_dv_raises_corrupt_log() -> None:
    inline = {"storageType": "i", "pathOrInlineDv": "^Bg9^0rr910000000000iXQKl0rr91000315c8Xg000f5", "sizeInBytes": 36}
    assert read_deletion_vector({**inline, "cardinality": 2}, "/t", _read_local).tolist() == [0, 5]
    with pytest.raises(CorruptLog, match="Z85") as caught:
        read_deletion_vector({**inline, "pathOrInlineDv": "^Bg9^0rr9~"}, "/t", _read_local, table_uri="/t")
    assert str(caught.value).startswith("table /t: ")
    with pytest.raises(CorruptLog, match="sizeInBytes"):
        read_deletion_vector({**inline, "sizeInBytes": 30}, "/t", _read_local)
    with pytest.raises(CorruptLog, match="cardinality"):
        read_deletion_vector({**inline, "cardinality": 3}, "/t", _read_local)


def test_random_corruption_only_ever_raises_corrupt_log() -> None:
    rng = np.random.default_rng(20240611)
    blobs = [_small_dv()[2]]
    table = CORPUS / "delta-kernel-defaults/basic-dv-with-checkpoint"
    for descriptor in _all_descriptors(table)[:5]:
        path = dv_absolute_path(str(table), "u", descriptor["pathOrInlineDv"])
        blobs.append(_read_local(path, descriptor["offset"] + 4, descriptor["sizeInBytes"]))
    outcomes: Counter[str] = Counter()
    for blob in blobs:
        for _ in range(400):
            mutated = bytearray(blob)
            for position in rng.integers(0, len(blob), size=int(rng.integers(1, 4))):
                mutated[position] = int(rng.integers(0, 256))
            try:
                rows = decode_dv_bytes(bytes(mutated))
            except CorruptLog:
                outcomes["corrupt"] += 1
            else:
                assert rows.dtype == np.uint64 and bool(np.all(rows[1:] > rows[:-1]))
                outcomes["decoded"] += 1
    assert outcomes["corrupt"] > 0


@pytest.mark.parametrize(
    "payload",
    [
        struct.pack("<QI", 1, 0) + struct.pack("<I", 99),  # unknown 32-bit cookie
        struct.pack("<Q", 2**40),  # absurd bucket count
        struct.pack("<QI", 2, 5) + struct.pack("<II", 12346, 0) + struct.pack("<I", 5) + struct.pack("<II", 12346, 0),
        struct.pack("<QI", 1, 0) + struct.pack("<II", 12346, 70000),  # more containers than 16-bit keys allow
        # array container whose values are not increasing
        struct.pack("<QI", 1, 0)
        + struct.pack("<II", 12346, 1)
        + struct.pack("<HHI", 0, 1, 20)
        + struct.pack("<HH", 9, 3),
        # run container whose run passes 65535
        struct.pack("<QI", 1, 0) + struct.pack("<IB", 12347, 1) + struct.pack("<HHHHH", 0, 9, 1, 65530, 9),
    ],
)
def test_malformed_bitmaps_raise_corrupt_log(payload: bytes) -> None:
    with pytest.raises(CorruptLog):
        decode_roaring_portable_64(payload)
    with pytest.raises(CorruptLog):
        decode_dv_bytes(struct.pack("<I", MAGIC) + payload)


# ----------------------------------------------------------------------------------------------- bitmap format


@pytest.mark.parametrize("run_cookie", [False, True])
def test_hand_built_bitmaps_of_every_container_kind(run_cookie: bool) -> None:
    runs = [(0, 2), (100, 0), (65000, 535)]
    containers = [
        (0, "array", [1, 5, 4095, 65535]),
        (1, "bitmap", list(range(0, 65536, 13))),
        (7, "array", [42]),
    ]
    if run_cookie:
        containers.append((9, "run", runs))
    low_a, values_a = _bitmap32(containers, run_cookie=run_cookie)
    low_b, values_b = _bitmap32(
        [(3, "run" if run_cookie else "array", runs if run_cookie else [3])], run_cookie=run_cookie
    )
    empty = struct.pack("<II", 12346, 0)
    blob, values = _bitmap64([(0, low_a, values_a), (1, empty, []), (2**32 - 1, low_b, values_b)])
    rows = decode_roaring_portable_64(blob)
    assert rows.dtype == np.uint64
    assert rows.tolist() == values
    assert decode_dv_bytes(struct.pack("<I", MAGIC) + blob, expected_cardinality=len(values)).tolist() == values


def test_empty_bitmap() -> None:
    assert decode_roaring_portable_64(struct.pack("<Q", 0)).tolist() == []
    assert decode_dv_bytes(struct.pack("<IQ", MAGIC, 0), expected_cardinality=0).size == 0


def test_cross_check_with_pyroaring() -> None:
    import pyroaring

    rng = np.random.default_rng(7)
    cases = [
        [],
        [0],
        [2**64 - 1],
        list(range(100_000)),
        rng.choice(3_000_000, size=100_000, replace=False).tolist(),
        rng.integers(0, 2**40, size=5000).tolist(),
        list(range(0, 600_000, 3)) + [2**33 + v for v in range(10)],
    ]
    for values in cases:
        for optimise in (False, True):
            bitmap = pyroaring.BitMap64(values)
            if optimise:
                bitmap.run_optimize()
            rows = decode_roaring_portable_64(bitmap.serialize())
            assert np.array_equal(rows, np.unique(np.array(values, dtype=np.uint64)))
    # Delta's writer emits one 32-bit bitmap per high key, empty ones included, in pyroaring's 32-bit layout.
    buckets = [(0, pyroaring.BitMap([1, 2, 3]).serialize(), [1, 2, 3]), (1, pyroaring.BitMap().serialize(), [])]
    dense = pyroaring.BitMap(range(10, 70_000))
    dense.run_optimize()
    buckets.append((2, dense.serialize(), list(range(10, 70_000))))
    blob, values = _bitmap64(buckets)
    assert decode_roaring_portable_64(blob).tolist() == values


# ----------------------------------------------------------------------------------------------- delta-kernel-rs


@pytest.mark.parametrize("name", [*SPEC_NAMED_TABLES, *SPARK_TEST_TABLES, SPECIAL_CHAR_TABLE])
def test_visible_rows_match_delta_kernel(name: str, tmp_path: Path) -> None:
    # delta-rs reads only some of these (test_visible_rows_match_delta_rs_query); delta-kernel-rs reads them all, the
    # Spark test suite's tables as that suite reads them (DV files under the protocol's names, placeholder filled in)
    table = CORPUS / name
    if name in SPARK_TEST_TABLES or name == SPECIAL_CHAR_TABLE:
        table = spark_test_suite_copy(name, tmp_path / "t")
    partition_columns = next(
        a["metaData"]["partitionColumns"] for a in reversed(list(_commits(table))) if "metaData" in a
    )
    columns = [c for c in _physical_names(table) if c not in partition_columns]
    ours: Counter[tuple[Any, ...]] = Counter()
    for add in _live_adds(table):
        ours.update(_file_rows_after_dv(table, add, columns, _read_local))
    theirs = kernel_rows(table)
    visible = pa.Table.from_pylist(
        [dict(zip(columns, row)) for row in ours.elements()], schema=theirs.select(columns).schema
    )
    assert theirs.num_rows == visible.num_rows
    assert row_multiset(theirs, columns) == row_multiset(visible, columns)
