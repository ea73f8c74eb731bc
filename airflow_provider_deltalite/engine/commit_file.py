"""Commit files: THE parser of commit JSON (one action per line) and the vectorised reading of their actions.

Every reader of commit JSON (replay, conflict checking, history, log cleanup, the change feed, VACUUM LITE) goes
through `clean_commit_bytes` and `parse_action_line` here, so they agree on what a damaged file is:

- a UTF-8 byte order mark at the start is dropped and a missing final newline is added;
- blank (whitespace-only) lines are skipped;
- a line that is not valid JSON, is nested too deeply for Python's parser, or is not a JSON object raises
  CorruptLog naming the commit version (and the line, when it is known).

Commit files are parsed with one vectorised pyarrow JSON pass over all of them (only `add` and `remove` are read
that way); the rare non-file actions (one commitInfo per commit, metaData, protocol, txn, domainMetadata) are found
by a byte search and parsed one by one, so the cost per file action stays in Arrow.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.json as pa_json

from airflow_provider_deltalite.engine import actions as A
from airflow_provider_deltalite.engine import arrow_compute as pc
from airflow_provider_deltalite.engine.arrow_util import contiguous, int64_array
from airflow_provider_deltalite.engine.errors import CorruptLog

_BOM = b"\xef\xbb\xbf"
_KEY_NEEDLES = tuple((name, f'"{name}"'.encode()) for name in A.NON_FILE_ACTIONS)


@dataclass
class NonFileAction:
    """A parsed non-file action with where it came from (version, and its order inside the replay)."""

    version: int
    order: int
    name: str
    value: dict[str, Any]


def clean_commit_bytes(data: bytes) -> bytes:
    """Normalise the bytes of a commit file (or JSON checkpoint) before parsing it.

    Drops a leading UTF-8 byte order mark (some writers add one) and ends the data with a newline, so that every
    action is a complete line and the vectorised reader counts one row per line.

    Args:
        data: the file's content as read.

    Returns:
        The cleaned content; blank lines are kept (the parsers skip them).
    """
    if data.startswith(_BOM):
        data = data[len(_BOM) :]
    if data and not data.endswith(b"\n"):
        data += b"\n"
    return data


def parse_action_line(line: bytes, version: int, table_uri: str | None, line_no: int | None = None) -> dict[str, Any]:
    """Parse one line of a commit file into its action object.

    Args:
        line: the line, without its newline; must not be blank.
        version: the commit's version, named in errors.
        table_uri: for error messages.
        line_no: the line's number in the file (1-based), named in errors when known.

    Returns:
        The JSON object of the line.

    Raises:
        CorruptLog: the line is not valid JSON, is nested too deeply to read, or is not a JSON object.
    """
    try:
        obj = json.loads(line)
    except ValueError:
        raise _line_error(
            version, line_no, "not valid JSON (truncated or corrupt commit file)", "that is not valid JSON", table_uri
        ) from None
    except RecursionError:  # Python's parser gives up on deep nesting; no writer nests actions that deep
        raise _line_error(
            version, line_no, "JSON nested too deeply to read", "of JSON nested too deeply to read", table_uri
        ) from None
    if not isinstance(obj, dict):
        raise _line_error(version, line_no, "not a JSON object", "that is not a JSON object", table_uri)
    return obj


def _line_error(
    version: int, line_no: int | None, problem: str, problem_of_unnumbered: str, table_uri: str | None
) -> CorruptLog:
    if line_no is None:
        return CorruptLog(f"commit {version} has a line {problem_of_unnumbered}", table_uri)
    return CorruptLog(f"commit {version} line {line_no} is {problem}", table_uri)


def commit_lines(version: int, data: bytes, table_uri: str | None) -> Iterator[tuple[int, dict[str, Any]]]:
    """The actions of a commit file one line at a time: ``(line number, action object)``, blank lines skipped.

    Args:
        version: the commit's version, named in errors.
        data: the file's content, cleaned by `clean_commit_bytes`.
        table_uri: for error messages.

    Raises:
        CorruptLog: a line is not valid JSON or not a JSON object (the version and line are named).
    """
    for line_no, line in enumerate(data.split(b"\n"), start=1):
        if line.strip():
            yield line_no, parse_action_line(line, version, table_uri, line_no)


def _strip_blank_lines(data: bytes) -> bytes:
    return b"".join(line + b"\n" for line in data.split(b"\n") if line.strip())


def find_non_file_actions(
    contents: Sequence[tuple[int, bytes]], table_uri: str | None, order_base: int = 0
) -> list[NonFileAction]:
    """Locate and parse the non-file actions of commit files by searching for their keys.

    A key string can only appear unescaped as a JSON key (inside strings quotes are escaped), except as a bare
    string value inside an action; each candidate line is parsed, so an action that merely holds such a value is
    skipped. A candidate line that is not a JSON object raises CorruptLog, as in `commit_lines`.
    """
    found: list[NonFileAction] = []
    for version, data in contents:
        starts: set[int] = set()
        for _name, needle in _KEY_NEEDLES:
            pos = data.find(needle)
            while pos != -1:
                starts.add(data.rfind(b"\n", 0, pos) + 1)
                end = data.find(b"\n", pos)
                pos = data.find(needle, end if end != -1 else len(data))
        for start in sorted(starts):
            end = data.find(b"\n", start)
            line = data[start : end if end != -1 else len(data)]
            obj = parse_action_line(line, version, table_uri)
            if len(obj) != 1:
                continue
            ((name, value),) = obj.items()
            if name in A.NON_FILE_ACTIONS and isinstance(value, dict):
                found.append(NonFileAction(version, order_base + start, name, value))
    return found


def parse_commit_file_actions(
    contents: Sequence[tuple[int, bytes]], partition_columns: list[str], table_uri: str | None, seq_base: int = 0
) -> tuple[pa.Table, pa.Table]:
    """The add and remove actions of commit files, as Arrow tables in the order they appear.

    Raises CorruptLog naming the commit version for a line that is not JSON or an action of the wrong shape.
    """
    schema = A.json_read_schema(partition_columns)
    versions: list[int] = []
    counts: list[int] = []
    chunks: list[bytes] = []
    for version, data in contents:
        if not data.strip():
            continue
        counts.append(data.count(b"\n"))
        versions.append(version)
        chunks.append(data)
    buffer = b"".join(chunks)
    if not buffer:
        return empty_file_actions(partition_columns)
    try:
        table = pa_json.read_json(
            pa.BufferReader(buffer),
            read_options=pa_json.ReadOptions(block_size=max(1 << 22, min(len(buffer) // 2 + 1, 1 << 26))),
            parse_options=pa_json.ParseOptions(explicit_schema=schema, unexpected_field_behavior="ignore"),
        )
    except pa.ArrowInvalid:
        return _parse_commits_slowly(contents, partition_columns, table_uri, seq_base)
    if table.num_rows != sum(counts):
        # Blank lines are skipped by the reader and would shift rows against versions; drop them and retry.
        cleaned = [(v, _strip_blank_lines(d)) for v, d in contents]
        if any(len(a) != len(b) for (_, a), (_, b) in zip(contents, cleaned, strict=True)):
            return parse_commit_file_actions(cleaned, partition_columns, table_uri, seq_base)
        raise CorruptLog("commit files could not be split into one action per line", table_uri)
    row_versions = np.repeat(np.asarray(versions, dtype=np.int64), counts)
    tags = _tags_column(buffer, table.num_rows, row_versions, table_uri)
    return _split_file_actions(table, row_versions, seq_base, tags)


def empty_file_actions(partition_columns: list[str]) -> tuple[pa.Table, pa.Table]:
    """Empty add and remove tables in the layout `parse_commit_file_actions` returns."""
    ps = A.partition_struct(partition_columns)
    empty_add = pa.schema([*A.add_fields(ps), pa.field("tags", A.STRING_MAP)]).empty_table()
    empty_remove = pa.schema(A.remove_fields(ps)).empty_table()
    return with_order(empty_add, [], []), with_order(empty_remove, [], [])


def _split_file_actions(
    table: pa.Table, row_versions: np.ndarray, seq_base: int, tags: pa.Array | None
) -> tuple[pa.Table, pa.Table]:
    seq = np.arange(seq_base, seq_base + table.num_rows, dtype=np.int64)
    out = []
    for name in (A.ADD, A.REMOVE):
        column = contiguous(table.column(name))
        mask = pc.is_valid(column)
        rows = pa.Table.from_struct_array(pc.filter(column, mask)) if len(column) else None
        if rows is None:
            rows = pa.schema(list(column.type)).empty_table()
        if name == A.ADD:
            add_tags = pc.filter(tags, mask) if tags is not None else pa.nulls(rows.num_rows, A.STRING_MAP)
            rows = rows.append_column("tags", add_tags)
        mask_np = mask.to_numpy(zero_copy_only=False)
        out.append(with_order(rows, row_versions[mask_np], seq[mask_np]))
    return out[0], out[1]


def with_order(table: pa.Table, versions: Iterable[int], seq: Iterable[int]) -> pa.Table:
    """Append the replay-order columns ``_version`` and ``_seq`` (one value per row)."""
    table = table.append_column(
        "_version", int64_array(list(versions) if not isinstance(versions, np.ndarray) else versions)
    )
    return table.append_column("_seq", int64_array(list(seq) if not isinstance(seq, np.ndarray) else seq))


def _tags_column(buffer: bytes, num_rows: int, row_versions: np.ndarray, table_uri: str | None) -> pa.Array | None:
    # Tags are free-form maps, which the Arrow JSON reader cannot parse; they are rare, so parse only tagged lines.
    if b'"tags"' not in buffer:
        return None
    values: list[Any] = [None] * num_rows
    for i, line in enumerate(buffer.split(b"\n")[:num_rows]):
        if b'"tags"' in line:
            # the Arrow reader took the line, but Python's parser may still give up on deep nesting
            obj = parse_action_line(line, int(row_versions[i]), table_uri)
            action = obj.get(A.ADD) or obj.get(A.REMOVE) or {}
            tags = action.get("tags")
            if isinstance(tags, dict):
                values[i] = [(str(k), None if v is None else str(v)) for k, v in tags.items()]
    return pa.array(values, type=A.STRING_MAP)


def _parse_commits_slowly(
    contents: Sequence[tuple[int, bytes]], partition_columns: list[str], table_uri: str | None, seq_base: int
) -> tuple[pa.Table, pa.Table]:
    """Line-by-line parsing, used when the vectorised pass fails: finds the bad line, or tolerates odd types."""
    ps = A.partition_struct(partition_columns)
    add_type, remove_type = pa.struct(A.add_fields(ps)), pa.struct(A.remove_fields(ps))
    adds: list[dict] = []
    removes: list[dict] = []
    add_order: tuple[list[int], list[int]] = ([], [])
    remove_order: tuple[list[int], list[int]] = ([], [])
    seq = seq_base
    for version, data in contents:
        for line_no, obj in commit_lines(version, data, table_uri):
            for name, target, order in ((A.ADD, adds, add_order), (A.REMOVE, removes, remove_order)):
                if name in obj:
                    action = obj[name]
                    if not isinstance(action, dict) or not isinstance(action.get("path"), str):
                        raise CorruptLog(f"commit {version} line {line_no}: {name} action without a path", table_uri)
                    target.append(action)
                    order[0].append(version)
                    order[1].append(seq)
            seq += 1
    try:
        add_table = _dicts_to_table(adds, add_type, with_tags=True)
        remove_table = _dicts_to_table(removes, remove_type, with_tags=False)
    except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, ValueError) as exc:
        raise CorruptLog(f"a file action has a field of the wrong type: {exc}", table_uri) from None
    return with_order(add_table, *add_order), with_order(remove_table, *remove_order)


def _dicts_to_table(rows: list[dict], struct_type: pa.StructType, *, with_tags: bool) -> pa.Table:
    columns = {}
    for f in struct_type:
        values: list[Any] = [r.get(f.name) for r in rows]
        if f.name == "partitionValues":
            values = [{k: (None if (v or {}).get(k) is None else str(v[k])) for k in f.type.names} for v in values]
        if f.name == "size" or f.name in ("modificationTime", "deletionTimestamp"):
            values = [None if v is None else int(v) for v in values]
        columns[f.name] = pa.array(values, type=f.type)
    if with_tags:
        columns["tags"] = pa.array(
            [
                [(str(k), None if v is None else str(v)) for k, v in r["tags"].items()]
                if isinstance(r.get("tags"), dict)
                else None
                for r in rows
            ],
            type=A.STRING_MAP,
        )
    return pa.table(columns)
