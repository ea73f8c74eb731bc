"""The plain sentences on top of the health page, and the number formats the page shares with its charts.

Sentences are plain text (the page escapes them): column names and partition values come from the table.
"""

from __future__ import annotations

from datetime import UTC, datetime

from airflow_provider_deltalite.maintenance.health.metrics import (
    ColumnClustering,
    PartitionHealth,
    TableHealth,
    Tombstones,
)

_UNITS = ("B", "KiB", "MiB", "GiB", "TiB", "PiB")
# what `clustering_source` says about where the measured columns came from
_SOURCES = {
    "liquid": "the table's clustering columns",
    "zorder": "the columns of the newest Z-order",
    "given": "the given columns",
}


def size_unit(size: float) -> tuple[str, int]:
    """The binary unit a size reads best in (at least 1 of it, below 1024 of it) and its size in bytes."""
    power = 0
    while power < len(_UNITS) - 1 and abs(size) >= 1024 ** (power + 1):
        power += 1
    return _UNITS[power], 1024**power


def human_size(size: int) -> str:
    """``size`` bytes in binary units, one decimal at most: ``512 B``, ``64 KiB``, ``1.5 GiB``."""
    unit, scale = size_unit(size)
    if scale == 1:
        return f"{size:,} B"
    text = f"{size / scale:.1f}".removesuffix(".0")
    return f"{text} {unit}"


def human_hours(hours: float) -> str:
    """A duration given in hours: minutes below one hour, hours below two days, days beyond."""
    if hours < 1:
        minutes = round(hours * 60)
        return f"{minutes} minute" if minutes == 1 else f"{minutes} minutes"
    if hours < 48:
        return f"{hours:.1f}".removesuffix(".0") + " hours"
    return f"{hours / 24:.1f}".removesuffix(".0") + " days"


def utc_time(epoch_ms: int) -> str:
    """An epoch-milliseconds time as ``YYYY-MM-DD HH:MM UTC``."""
    return datetime.fromtimestamp(epoch_ms / 1000, UTC).strftime("%Y-%m-%d %H:%M UTC")


def count(number: int, noun: str) -> str:
    """``1 file``, ``2 files``, ``1,024 files``: a count and its noun (a regular plural)."""
    return f"{number:,} {noun}" if number == 1 else f"{number:,} {noun}s"


def percent(share: float) -> str:
    return f"{share * 100:.1f}%"


def partition_label(partition: PartitionHealth) -> str:
    """``col=value/col=value`` as Hive paths spell it (a null value as ``(null)``); ``(table)`` when unpartitioned."""
    if not partition.partition_values:
        return "(table)"
    return "/".join(
        f"{column}={'(null)' if value is None else value}" for column, value in partition.partition_values.items()
    )


def live_partitions(health: TableHealth) -> list[PartitionHealth]:
    """The partitions that hold live files (`TableHealth.partitions` also lists those only tombstones are left of)."""
    return [partition for partition in health.partitions if partition.files]


def summary_sentences(health: TableHealth) -> list[str]:
    """What is wrong with the table and what maintenance would reclaim, in a few plain sentences."""
    sentences = [_overview(health)]
    if health.files:
        sentences.append(_small_files(health))
        sentences.append(_deleted_rows(health))
    sentences.append(_tombstones(health.tombstones))
    sentences.append(_log(health))
    sentences.append(clustering_sentence(health))
    sentences.append(_last_runs(health))
    return sentences


def _overview(health: TableHealth) -> str:
    if not health.files:
        return f"Version {health.version} has no live file."
    text = (
        f"Version {health.version} has {count(health.files, 'live file')} holding {human_size(health.bytes)} and "
        f"{count(health.rows, 'row')}"
    )
    if health.files_without_stats:
        text += f" ({count(health.files_without_stats, 'file')} without a row count)"
    if health.partition_columns:
        text += f", in {count(len(live_partitions(health)), 'partition')} of {', '.join(health.partition_columns)}"
    return text + "."


def _small_files(health: TableHealth) -> str:
    minimum = human_size(health.min_file_size)
    if not health.small_files:
        return f"No file is smaller than the minimum file size of {minimum}."
    text = (
        f"{health.small_files:,} of {count(health.files, 'file')} ({percent(health.small_file_share)}) "
        f"{'is' if health.small_files == 1 else 'are'} smaller than the minimum file size of {minimum}"
    )
    if health.partition_columns:
        with_small = sum(1 for partition in health.partitions if partition.small_files)
        text += f", in {with_small:,} of {count(len(live_partitions(health)), 'partition')}"
    return text + f"; they hold {human_size(health.small_bytes)}, which OPTIMIZE can compact."


def _deleted_rows(health: TableHealth) -> str:
    if not health.deleted_rows:
        return "No row is deleted by a deletion vector."
    return (
        f"Deletion vectors mark {health.deleted_rows:,} of {count(health.rows, 'row')} as deleted "
        f"({percent(health.deleted_row_share)}) in {count(health.files_with_deletion_vectors, 'file')}; purging them "
        "would rewrite those files without the deleted rows."
    )


def _tombstones(tombstones: Tombstones) -> str:
    if not tombstones.files:
        return "No removed file is waiting for VACUUM: the log holds no tombstone."
    retention = human_hours(tombstones.retention_hours)
    text = (
        f"{count(tombstones.files, 'removed file')} ({human_size(tombstones.bytes)}) "
        f"{'is' if tombstones.files == 1 else 'are'} held only by tombstones: VACUUM would reclaim "
        f"{human_size(tombstones.reclaimable_bytes)} ({count(tombstones.reclaimable_files, 'file')}) now"
    )
    later_files = tombstones.files - tombstones.reclaimable_files
    first, last = tombstones.next_reclaimable_at, tombstones.all_reclaimable_at
    if later_files and first is not None and last is not None:
        later_bytes = human_size(tombstones.bytes - tombstones.reclaimable_bytes)
        later = f"and the other {later_bytes} ({count(later_files, 'file')})"
        if first == last:
            text += f", {later} when they pass the retention of {retention}, on {utc_time(first)}"
        else:
            text += f", {later} as they pass the retention of {retention}, from {utc_time(first)} to {utc_time(last)}"
    if tombstones.files_without_size:
        text += f" ({count(tombstones.files_without_size, 'tombstone')} without a size, counted as no bytes)"
    return text + "."


def _log(health: TableHealth) -> str:
    log = health.log
    held = f"the log holds {count(log.log_files, 'file')} ({human_size(log.log_bytes)})"
    if log.last_checkpoint_version is None:
        text = f"The log has no checkpoint, so a reader replays {count(log.commits_since_checkpoint, 'commit')}; {held}"
    elif not log.commits_since_checkpoint:
        text = f"The newest version has a checkpoint; {held}"
    else:
        text = (
            f"{count(log.commits_since_checkpoint, 'commit')} since the last checkpoint (version "
            f"{log.last_checkpoint_version:,}; one is due every {count(log.checkpoint_interval, 'commit')}); {held}"
        )
    return (
        f"{text}. {count(log.versions_in_file_retention, 'version')} "
        f"{'is' if log.versions_in_file_retention == 1 else 'are'} within the deleted-file retention, and "
        f"{log.versions_in_log_retention:,} within the log retention of {human_hours(log.log_retention_hours)}."
    )


def clustering_sentence(health: TableHealth) -> str:
    """How many files a point query reads per clustering column, or why nothing is measured."""
    if not health.clustering:
        return (
            "No clustering columns: the table is neither liquid-clustered nor Z-ordered, so clustering overlap is "
            "not measured."
        )
    source = _SOURCES.get(health.clustering_source or "", "the measured columns")
    columns = ", ".join(column.column for column in health.clustering)
    return f"Clustering on {source} ({columns}): " + "; ".join(_column(c) for c in health.clustering) + "."


def _column(column: ColumnClustering) -> str:
    if column.point_query_files is None or column.average_depth is None:
        return f"no file has min/max statistics on {column.column}, so a query on it cannot skip files"
    return (
        f"a point query on {column.column} reads {column.point_query_files:.2f} files (average overlap depth "
        f"{column.average_depth:.2f}, at most {column.max_depth})"
    )


def _last_runs(health: TableHealth) -> str:
    runs = health.last_runs
    if runs.optimize_version is None or runs.hours_since_optimize is None:
        optimize = "No OPTIMIZE is in the retained log"
    else:
        optimize = (
            f"The last OPTIMIZE ran {human_hours(runs.hours_since_optimize)} ago (version {runs.optimize_version:,})"
        )
    if runs.vacuum_version is None or runs.hours_since_vacuum is None:
        vacuum = "no VACUUM is in the retained log"
    else:
        vacuum = f"the last VACUUM {human_hours(runs.hours_since_vacuum)} ago (version {runs.vacuum_version:,})"
    return f"{optimize}; {vacuum}."
