"""`_delta_log/_last_checkpoint`: reading the hint, writing it, and its checksum (PROTOCOL "Last Checkpoint File").

The file only ever speeds up finding the newest checkpoint: a reader that cannot use it lists the log instead.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping
from decimal import Decimal
from typing import Any
from urllib.parse import quote

from airflow_provider_deltalite.engine.log_path import LAST_CHECKPOINT, LOG_DIR
from airflow_provider_deltalite.engine.storage import Storage


def read_last_checkpoint_hint(storage: Storage) -> dict[str, Any] | None:
    """The `_last_checkpoint` JSON, or None when it is missing or unreadable (it is only ever a hint)."""
    try:
        raw = storage.read(f"{LOG_DIR}/{LAST_CHECKPOINT}")
        hint = json.loads(raw)
    except (FileNotFoundError, ValueError, UnicodeDecodeError, RecursionError):  # RecursionError: nested too deeply
        return None
    if not isinstance(hint, dict) or not isinstance(hint.get("version"), int) or hint["version"] < 0:
        return None
    return hint


def write_last_checkpoint(
    storage: Storage, version: int, size: int, size_in_bytes: int, num_adds: int, v2: dict[str, Any] | None
) -> None:
    """Write `_last_checkpoint` for a checkpoint, with its checksum (the caller decides whether to move the pointer).

    Args:
        storage: the table's storage.
        version: the checkpoint's version.
        size: the number of actions in the checkpoint.
        size_in_bytes: the bytes of all its files.
        num_adds: the number of `add` actions.
        v2: the `v2Checkpoint` pointer (path, sizeInBytes, modificationTime) of a V2 checkpoint, else None.
    """
    # version, size (and parts, never written here) come first: old readers split-read just those (reference order)
    doc: dict[str, Any] = {"version": version, "size": size, "sizeInBytes": size_in_bytes, "numOfAddFiles": num_adds}
    if v2 is not None:
        doc["v2Checkpoint"] = v2
    doc["checksum"] = last_checkpoint_checksum(doc)
    storage.write(f"{LOG_DIR}/{LAST_CHECKPOINT}", json.dumps(doc, separators=(",", ":")).encode())


def _encode(text: str) -> str:
    # Only a-z A-Z 0-9 - . _ ~ stay; every other UTF-8 octet becomes %XX in uppercase (quote's own rules, safe="").
    return '"' + quote(text.encode("utf-8"), safe="-._~") + '"'


def _java_double(value: float) -> str:
    """A double as Jackson's `asText` (Java's Double.toString) prints it; `_last_checkpoint` normally holds none."""
    if math.isnan(value) or math.isinf(value):
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    if value == 0 or 1e-3 <= abs(value) < 1e7:
        return f"{value:.1f}" if value == int(value) else repr(value)
    # computerized scientific notation with the shortest digits: 1.0E10, 1.5E-5
    exact = Decimal(repr(value))
    digits = "".join(map(str, exact.as_tuple().digits)).rstrip("0") or "0"
    sign = "-" if value < 0 else ""
    return f"{sign}{digits[0]}.{digits[1:] or '0'}E{exact.adjusted()}"


def _canonical_pairs(node: Any, path: list[str], out: list[str]) -> None:
    if isinstance(node, Mapping):
        for key, value in node.items():
            _canonical_pairs(value, [*path, _encode(str(key))], out)
    elif isinstance(node, list | tuple):
        for i, value in enumerate(node):
            _canonical_pairs(value, [*path, str(i)], out)
    else:
        if node is None:
            text = "null"
        elif isinstance(node, bool):
            text = "true" if node else "false"
        elif isinstance(node, int):
            text = str(node)
        elif isinstance(node, float):
            text = _java_double(node)
        else:
            text = _encode(str(node))
        out.append(f"{'+'.join(path)}={text}")


def last_checkpoint_checksum(document: Mapping[str, Any]) -> str:
    """The MD5 `checksum` of a `_last_checkpoint` document, as PROTOCOL.md ("JSON checksum") defines it.

    Every leaf becomes ``path=value``: path segments are the URL-encoded, quoted key names (array positions as bare
    numbers) joined by ``+``; strings are URL-encoded and quoted, literals and numbers stay as they are. The pairs are
    sorted and joined by ``,`` (the top-level ``checksum`` key is left out) and the MD5 hex digest of that text is the
    checksum. Pairs are sorted as whole ``path=value`` strings, which is what the reference implementation does; for
    the documents written here that is the same as the protocol's sort by path. Empty objects and arrays contribute
    nothing.

    Example:
        >>> last_checkpoint_checksum({"k0": "'v 0'", "checksum": "x", "k1": {"k2": 2, "k3": ["v3", [1, 2],
        ...     {"k4": "v4", "k5": ["v5", "v6", "v7"]}]}})
        '6a92d155a59bf2eecbd4b4ec7fd1f875'
    """
    pairs: list[str] = []
    for key, value in document.items():
        if key == "checksum":
            continue
        _canonical_pairs(value, [_encode(str(key))], pairs)
    pairs.sort()
    return hashlib.md5(",".join(pairs).encode("utf-8")).hexdigest()
