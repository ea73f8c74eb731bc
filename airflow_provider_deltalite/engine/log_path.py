"""The one parser of `_delta_log` file names."""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import Enum

LOG_DIR = "_delta_log"
LAST_CHECKPOINT = "_last_checkpoint"
SIDECAR_DIR = "_sidecars"


class LogFileKind(Enum):
    """What a `_delta_log` entry is, by its name."""

    COMMIT = "commit"
    CHECKPOINT = "checkpoint"  # classic single-file (V1, or V2 content under a classic name)
    MULTI_PART_CHECKPOINT = "multi_part_checkpoint"
    UUID_CHECKPOINT = "uuid_checkpoint"  # V2, JSON or Parquet top-level file
    COMPACTED = "compacted"
    CRC = "crc"
    UNKNOWN = "unknown"


@dataclass(frozen=True)
class ParsedLogPath:
    """A parsed log file name. ``part``/``num_parts`` are set for multi-part checkpoints, ``end_version`` for
    compacted files, ``uuid`` for V2 UUID checkpoints, ``file_format`` is ``json`` or ``parquet``."""

    name: str
    version: int
    kind: LogFileKind
    part: int | None = None
    num_parts: int | None = None
    end_version: int | None = None
    uuid: str | None = None
    file_format: str | None = None


# [0-9], not \d (which takes any Unicode digit), and fullmatch, not $ (which also matches before a final newline)
_V = "([0-9]{20})"
_PATTERNS = (
    (re.compile(_V + r"\.json"), LogFileKind.COMMIT),
    (re.compile(_V + r"\.checkpoint\.parquet"), LogFileKind.CHECKPOINT),
    (re.compile(_V + r"\.checkpoint\.([0-9]{10})\.([0-9]{10})\.parquet"), LogFileKind.MULTI_PART_CHECKPOINT),
    (re.compile(_V + r"\.checkpoint\.([0-9a-fA-F-]{36})\.(json|parquet)"), LogFileKind.UUID_CHECKPOINT),
    (re.compile(_V + r"\.([0-9]{20})\.compacted\.json"), LogFileKind.COMPACTED),
    (re.compile(_V + r"\.crc"), LogFileKind.CRC),
)


def parse_log_path(name: str) -> ParsedLogPath | None:
    """Parse a file name inside `_delta_log`; None for names that are not versioned log files."""
    for pattern, kind in _PATTERNS:
        m = pattern.fullmatch(name)
        if not m:
            continue
        version = int(m.group(1))
        if kind is LogFileKind.MULTI_PART_CHECKPOINT:
            part, num = int(m.group(2)), int(m.group(3))
            if not 1 <= part <= num:
                return ParsedLogPath(name, version, LogFileKind.UNKNOWN)
            return ParsedLogPath(name, version, kind, part=part, num_parts=num, file_format="parquet")
        if kind is LogFileKind.UUID_CHECKPOINT:
            return ParsedLogPath(name, version, kind, uuid=m.group(2), file_format=m.group(3))
        if kind is LogFileKind.COMPACTED:
            return ParsedLogPath(name, version, kind, end_version=int(m.group(2)), file_format="json")
        fmt = "json" if kind is LogFileKind.COMMIT else "parquet" if kind is LogFileKind.CHECKPOINT else None
        return ParsedLogPath(name, version, kind, file_format=fmt)
    return None


def commit_name(version: int) -> str:
    """``00000000000000000042.json``."""
    return f"{version:020d}.json"


def commit_path(version: int) -> str:
    """``_delta_log/00000000000000000042.json``, relative to the table root."""
    return f"{LOG_DIR}/{commit_name(version)}"


def version_prefix(version: int) -> str:
    """The 20-digit prefix every log file of ``version`` starts with."""
    return f"{version:020d}"
