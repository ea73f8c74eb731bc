"""VACUUM FULL's protected paths, spilled to a temporary Arrow IPC file by top-level prefix, so that the comparison
with the listing holds one group of prefixes at a time instead of the whole table (`by_prefix`).

The table's state arrives a batch at a time (`engine.snapshot_stream.stream_snapshot`); each batch's protected paths
(relative to the root, as `paths.protected_files` resolves them) are tagged with their top-level prefix (the first
path segment; ``""`` for files at the root), sorted by it and appended to the file as one record batch. Reading a
prefix back is then a binary search in each record batch's prefix-id column, and a zero-copy slice of the
memory-mapped file. On disk: about the bytes of the protected paths; in memory: one batch while writing, the prefix
ids and their counts always.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from airflow_provider_deltalite.engine import arrow_compute as pc
from airflow_provider_deltalite.maintenance.bin_packing import pack_greedy

# What a spilled path is to VACUUM.
LIVE = 0  # a live file or its deletion-vector file: protected, and a FULL listing must find it
KEPT = 1  # a tombstone not yet expired, its deletion-vector file, or another spelling of a protected path: protected
EXPIRED = 2  # an expired tombstone (spilled only for max_files_to_delete's ages): not protected

_SCHEMA = pa.schema([("path", pa.string()), ("prefix", pa.int32()), ("kind", pa.int8()), ("stamp", pa.int64())])


def top_prefix(paths: pa.Array) -> pa.Array:
    """The first segment of each relative path, ``""`` for a path without ``/`` (a file at the root)."""
    found = pc.extract_regex(paths, r"^(?P<p>[^/]*)/")
    return pc.fill_null(pc.struct_field(found, [0]), "")


@dataclass(frozen=True)
class PrefixPaths:
    """The spilled paths of some prefixes.

    Attributes:
        protected: live files, unexpired tombstones and their deletion-vector files.
        live: the subset a FULL listing must find.
        expired_stamps: expired tombstone path -> deletionTimestamp (0 when absent); empty unless spilled.
    """

    protected: frozenset[str]
    live: frozenset[str]
    expired_stamps: dict[str, int]


class PrefixSpill:
    """Protected paths by top-level prefix in a temporary file (removed by `close`; a context manager)."""

    def __init__(self) -> None:
        fd, self._path = tempfile.mkstemp(prefix="deltalite-vacuum-", suffix=".arrow")
        os.close(fd)
        self._sink: pa.NativeFile | None = pa.OSFile(self._path, "wb")
        self._writer: pa.ipc.RecordBatchFileWriter | None = pa.ipc.new_file(self._sink, _SCHEMA)
        self._reader: pa.ipc.RecordBatchFileReader | None = None
        self._ids: dict[str, int] = {}
        self._counts = np.zeros(0, dtype=np.int64)  # protected paths (LIVE and KEPT) per prefix id
        self.rows = 0

    def __enter__(self) -> PrefixSpill:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def add(self, paths: pa.Array, kind: int, stamps: pa.Array | None = None) -> None:
        """Append ``paths`` (relative to the root) of one ``kind``, with their tombstone ``stamps`` for EXPIRED."""
        if not len(paths):
            return
        if self._writer is None:
            raise RuntimeError("the spill is closed for writing")
        prefixes = pc.dictionary_encode(top_prefix(paths))
        local = [self._ids.setdefault(p, len(self._ids)) for p in prefixes.dictionary.to_pylist()]
        ids = np.asarray(local, dtype=np.int32)[prefixes.indices.to_numpy(zero_copy_only=False)]
        if kind != EXPIRED:
            counts = np.bincount(ids, minlength=len(self._ids))
            if len(self._counts) < len(counts):
                self._counts = np.concatenate([self._counts, np.zeros(len(counts) - len(self._counts), np.int64)])
            self._counts[: len(counts)] += counts
        order = np.argsort(ids, kind="stable")
        stamp_column = (
            pa.nulls(len(paths), pa.int64()) if stamps is None else pc.fill_null(pc.cast(stamps, pa.int64()), 0)
        )
        batch = pa.record_batch(
            [
                pc.take(paths, pa.array(order)),
                pa.array(ids[order], pa.int32()),
                pa.array(np.full(len(paths), kind, np.int8)),
                pc.take(stamp_column, pa.array(order)),
            ],
            schema=_SCHEMA,
        )
        self._writer.write_batch(batch)
        self.rows += len(paths)

    def finish(self) -> None:
        """Close the file for writing and map it for reading."""
        if self._writer is not None:
            self._writer.close()
            assert self._sink is not None
            self._sink.close()
            self._writer = self._sink = None
            self._reader = pa.ipc.open_file(pa.memory_map(self._path))

    def count(self, prefix: str) -> int:
        """How many protected paths ``prefix`` holds."""
        index = self._ids.get(prefix)
        return int(self._counts[index]) if index is not None and index < len(self._counts) else 0

    def read(self, prefixes: Iterable[str]) -> PrefixPaths:
        """The spilled paths of ``prefixes``."""
        self.finish()
        assert self._reader is not None
        wanted = np.asarray(sorted({self._ids[p] for p in prefixes if p in self._ids}), dtype=np.int32)
        protected: list[str] = []
        live: list[str] = []
        stamps: dict[str, int] = {}
        if not len(wanted):
            return PrefixPaths(frozenset(), frozenset(), stamps)
        for i in range(self._reader.num_record_batches):
            batch = self._reader.get_batch(i)
            ids = batch.column(1).to_numpy()
            starts = np.searchsorted(ids, wanted, "left")
            ends = np.searchsorted(ids, wanted, "right")
            kind = int(batch.column(2)[0].as_py()) if batch.num_rows else LIVE
            for start, end in zip(starts.tolist(), ends.tolist(), strict=True):
                if start == end:
                    continue
                part = batch.slice(start, end - start)
                names = part.column(0).to_pylist()
                if kind == EXPIRED:
                    stamps.update(zip(names, part.column(3).to_pylist(), strict=True))
                else:
                    protected.extend(names)
                    if kind == LIVE:
                        live.extend(names)
        live_set = frozenset(live)
        del live
        # one set for both when nothing but live paths is protected (the usual case)
        extra = [p for p in protected if p not in live_set]
        return PrefixPaths(live_set.union(extra) if extra else live_set, live_set, stamps)

    def close(self) -> None:
        """Remove the file."""
        try:
            if self._writer is not None:
                self._writer.close()
            if self._sink is not None:
                self._sink.close()
        finally:
            self._writer = self._sink = self._reader = None
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self._path)


def groups(
    prefixes: Sequence[tuple[str, int]], count: Callable[[str], int], max_paths: int, max_prefixes: int
) -> list[list[tuple[str, int]]]:
    """``prefixes`` cut into consecutive groups of at most ``max_prefixes`` holding at most ``max_paths`` protected
    paths together (a larger prefix alone)."""
    return pack_greedy(prefixes, lambda item: count(item[0]), max_paths, max_prefixes)
