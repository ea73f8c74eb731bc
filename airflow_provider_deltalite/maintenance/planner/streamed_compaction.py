"""Compaction candidates from the stream's file sizes, without a replay: the partitions that need compaction and
hold no deletion vector.

There, `candidates` needs of a file its partition and its size only: the compaction planner's candidates are the
files below ``min_file_size``, packed by ascending size (ties by path change which file goes in which bin, not the
bins' sizes), and a bin of one file is dropped; the estimate is the bins' sizes, counts and fragments. So the
streamed pass keeps a partition number and a size per live file (`PartitionSizes`: 12 bytes a file) and the
candidates are computed on those arrays (`compaction_candidates`), with the text, options and estimate
`candidates` gives (tests compare the plans).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pyarrow as pa

from airflow_provider_deltalite.engine import arrow_compute as pc
from airflow_provider_deltalite.engine.partition_values import distinct_rows
from airflow_provider_deltalite.maintenance.bin_packing import pack_runs
from airflow_provider_deltalite.maintenance.planner.candidates import Candidate, compaction_candidate
from airflow_provider_deltalite.maintenance.planner.plan import Estimate
from airflow_provider_deltalite.maintenance.planner.policy import MaintenancePolicy

PartitionKey = tuple[tuple[str, str | None], ...]


class PartitionSizes:
    """Per live file its partition's number and its size; per partition its key (as `streamed` keys partitions),
    its values in the snapshot's column order (as `candidates` names the partition), and whether a file of it has a
    deletion vector."""

    def __init__(self) -> None:
        self.number: dict[PartitionKey, int] = {}
        self.values: list[dict[str, str | None]] = []
        self._ids: list[np.ndarray] = []
        self._sizes: list[np.ndarray] = []
        self._with_dv: set[int] = set()

    def add(self, pv: pa.Array, sizes: np.ndarray, has_dv: np.ndarray) -> np.ndarray:
        """One batch's files (``pv``: their partition values, a struct); returns their partitions' numbers."""
        ids = self._numbers(pv)
        self._ids.append(ids)
        self._sizes.append(sizes)
        if has_dv.any():
            self._with_dv.update(np.unique(ids[has_dv]).tolist())
        return ids

    def merge(self, other: PartitionSizes) -> np.ndarray:
        """Append another's files (a task's, of its slice of the checkpoint), its partitions numbered here in the
        order it first saw them (as its batches, added here, would number them); returns its numbers' new ones."""
        mapping = np.array([self._number(values) for values in other.values], np.int32)
        ids, sizes = other.arrays()
        self._ids.append(mapping[ids] if len(ids) else np.zeros(0, np.int32))
        self._sizes.append(sizes)
        self._with_dv.update(int(mapping[number]) for number in other._with_dv)
        return mapping

    def has_dv(self, key: PartitionKey) -> bool:
        return self.number[key] in self._with_dv

    def arrays(self) -> tuple[np.ndarray, np.ndarray]:
        """(partition numbers, sizes) of every file streamed, held as one pair of arrays from then on."""
        if len(self._ids) != 1:
            # one list at a time: the batches of one column and its whole array are held together, not both's
            self._ids = [np.concatenate(self._ids) if self._ids else np.zeros(0, np.int32)]
            self._sizes = [np.concatenate(self._sizes) if self._sizes else np.zeros(0, np.int64)]
        return self._ids[0], self._sizes[0]

    def _numbers(self, pv: pa.Array) -> np.ndarray:
        names = list(pv.type.names) if pa.types.is_struct(pv.type) else []
        rows, inverse = distinct_rows(pv, names)
        # "" and null are one value in a key, as `candidates` has them
        canonical = ({n: None if v == "" else v for n, v in zip(names, row, strict=True)} for row in rows)
        lookup = np.fromiter((self._number(values) for values in canonical), np.int32, len(rows))
        ids = lookup[inverse]
        valid = np.asarray(pc.is_valid(pv).to_numpy(zero_copy_only=False), dtype=bool)
        if not valid.all():
            ids[~valid] = self._number({})  # a file without partition values: `candidates` files it under {}
        return ids

    def _number(self, values: dict[str, str | None]) -> int:
        key: PartitionKey = tuple(sorted(values.items()))
        number = self.number.get(key)
        if number is None:
            number = self.number[key] = len(self.values)
            self.values.append(values)
        return number


def compaction_candidates(
    sizes: PartitionSizes, keys: Sequence[PartitionKey], policy: MaintenancePolicy, logical: Mapping[str, str]
) -> dict[PartitionKey, Candidate | None]:
    """The candidate of each of ``keys`` (partitions without a deletion vector, no Z-order columns in ``policy``,
    which is resolved): a compaction, or None, as `candidates.rewrite_candidates` would give it."""
    ids, file_sizes = sizes.arrays()
    target = int(policy.target_file_size or 1)
    minimum = int(policy.min_file_size or target)
    fragment_size = target / policy.fragment_ratio
    numbers = np.asarray([sizes.number[k] for k in keys], np.int64)
    wanted = np.zeros(len(sizes.values), dtype=bool)
    wanted[numbers] = True
    fragments = np.bincount(ids[file_sizes < fragment_size], minlength=len(sizes.values))[numbers]
    # the compaction planner's candidates, in its order: by partition, then by ascending size
    chosen = wanted[ids]
    chosen &= file_sizes < minimum
    size, starts, ends = _sorted_runs(ids, file_sizes, chosen, numbers)
    read, removed, added, fragments_removed = _packed(size, starts, ends, target, fragment_size)
    out: dict[PartitionKey, Candidate | None] = {}
    for n, key in enumerate(keys):
        out[key] = None
        if fragments[n] < policy.min_input_files or not added[n]:
            continue
        # without deletion vectors every byte read is written again
        estimate = Estimate(
            bytes_read=int(read[n]),
            bytes_written=int(read[n]),
            files_removed=int(removed[n]),
            files_added=int(added[n]),
        )
        values = sizes.values[int(numbers[n])]
        out[key] = compaction_candidate(policy, values, logical, int(fragments[n]), estimate, int(fragments_removed[n]))
    return out


def _packed(
    size: np.ndarray, starts: np.ndarray, ends: np.ndarray, target: int, fragment_size: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per partition (its files ``size[starts[p]:ends[p]]``, ascending; together they are all of ``size``), the
    compaction planner's bins of more than one file: their bytes, files, number, and files below
    ``fragment_size``."""
    k = len(starts)
    read, removed, added, fragments = (np.zeros(k, np.int64) for _ in range(4))
    if not len(size):
        return read, removed, added, fragments
    run, first, last = pack_runs(size, starts, ends, target)
    order = np.argsort(first)
    run, first, last = run[order], first[order], last[order]
    nbytes = np.add.reduceat(size, first)  # the bins tile the files, so each bin's sum runs to the next bin
    kept = last - first > 1
    run, first, last, nbytes = run[kept], first[kept], last[kept], nbytes[kept]
    # the files below the fragment size come first in their partition
    small = np.asarray([a + int(np.searchsorted(size[a:b], fragment_size)) for a, b in zip(starts, ends)], np.int64)
    np.add.at(read, run, nbytes)
    np.add.at(removed, run, last - first)
    np.add.at(added, run, 1)
    np.add.at(fragments, run, np.clip(np.minimum(last, small[run]) - first, 0, None))
    return read, removed, added, fragments


def _sorted_runs(
    ids: np.ndarray, sizes: np.ndarray, chosen: np.ndarray, numbers: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The ``chosen`` files' sizes ordered by partition, then size, and each of the partitions ``numbers``' (start,
    end) in them: one sort of numbers, (partition, size) packed in an int64, when both fit (several times faster
    than a sort by two keys), else a sort by two keys."""
    bits = max(int(sizes.max()) if len(sizes) else 0, 1).bit_length()
    top = max(int(numbers.max()) if len(numbers) else 0, 1).bit_length()
    if bits + top <= 62 and not (len(sizes) and int(sizes.min()) < 0):
        packed = ids[chosen].astype(np.int64)
        packed <<= bits
        packed |= sizes[chosen]
        packed.sort()
        starts = np.searchsorted(packed, numbers << bits, side="left")
        ends = np.searchsorted(packed, (numbers + 1) << bits, side="left")
        packed &= (1 << bits) - 1
        return packed, starts, ends
    part, size = ids[chosen], sizes[chosen]
    order = np.lexsort((size, part))
    part, size = part[order], size[order]
    return size, np.searchsorted(part, numbers, side="left"), np.searchsorted(part, numbers, side="right")


__all__ = ["PartitionSizes", "compaction_candidates"]
