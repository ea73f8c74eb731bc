"""Where new data files go and how their paths are spelled in the log.

Partitioned tables without column mapping get Hive-style directories (`date=2024-01-01/`), escaped the way Spark
escapes them, so a file's place says what it holds. Under column mapping the reference writes files under random
two-character prefixes instead (directory names would have to be physical names, which mean nothing to a person),
and so does deltalite. Log paths are URI-encoded relative paths, decoded exactly once by every reader.
"""

from __future__ import annotations

import random
import string
import uuid
from collections.abc import Mapping, Sequence
from urllib.parse import quote

HIVE_DEFAULT_PARTITION = "__HIVE_DEFAULT_PARTITION__"

# Spark's ExternalCatalogUtils.charToEscape (the non-Windows set): control characters and the characters that are
# special in paths or in Hive partition specs.
_ESCAPE = frozenset([chr(c) for c in range(0x01, 0x20)] + list("\"#%'*/:=?\\\x7f{[]^"))
_PREFIX_ALPHABET = string.ascii_letters + string.digits


def escape_partition_text(text: str) -> str:
    """Escape one path segment of a partition directory as Spark does (``a:b`` -> ``a%3Ab``)."""
    return "".join(f"%{ord(c):02X}" if c in _ESCAPE else c for c in text)


def partition_directory(
    partition_columns: Sequence[str], physical_names: Sequence[str], values: Mapping[str, str | None]
) -> str:
    """The Hive-style directory of a partition (``a=1/b=__HIVE_DEFAULT_PARTITION__``), "" for an unpartitioned table.

    Args:
        partition_columns: logical partition column names, in the table's order.
        physical_names: their physical names (the keys of ``values``).
        values: the raw partitionValues map of the files (None or "" is null).
    """
    parts = []
    for logical, physical in zip(partition_columns, physical_names, strict=True):
        value = values.get(physical)
        text = HIVE_DEFAULT_PARTITION if value is None or value == "" else escape_partition_text(value)
        parts.append(f"{escape_partition_text(logical)}={text}")
    return "/".join(parts)


def new_data_file_path(
    directory: str, *, codec: str, column_mapping: bool, rng: random.Random | None = None
) -> tuple[str, str]:
    """A fresh data file name: ``(relative path on storage, path as written in the log)``.

    Names are ``part-<uuid>.<codec>.parquet`` (``part-<uuid>.parquet`` without compression).
    """
    suffix = f".{codec}.parquet" if codec and codec != "none" else ".parquet"
    name = f"part-{uuid.uuid4()}{suffix}"
    if column_mapping:
        chooser = rng or random
        directory = "".join(chooser.choice(_PREFIX_ALPHABET) for _ in range(2))
    relative = f"{directory}/{name}" if directory else name
    return relative, quote(relative, safe="/=")
