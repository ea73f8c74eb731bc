"""VACUUM FULL from an inventory instead of a listing (Delta's ``VACUUM ... USING INVENTORY``).

An inventory is a CSV (with a header) or Parquet file with Delta's inventory columns: ``path`` (the file's fully
qualified URI or absolute path), ``length`` (bytes), ``isDir`` and ``modificationTime`` (ms since the epoch); other
columns are ignored. An S3 Inventory report is read from its ``manifest.json``: its data files (CSV, gzip-compressed,
keys URL-encoded; or Parquet) with the columns ``bucket``, ``key``, ``size`` and ``last_modified_date``; in a
versioned report only current versions that are not delete markers count.

The rows go through the rules of a listing (`to_listing`): a path outside the table root is ignored, so is one with
a hidden segment (`paths.HiddenRule`), one inside ``_delta_log`` and one with empty, ``.`` or ``..`` segments; of a
path listed twice the newest row counts (as in the reference). Planning is then FULL's (`plan.plan_full`): protected
files are never candidates whatever the inventory says, nor files younger than the horizon. A stale inventory is
safe: a listed file that is gone by now is deleted idempotently (counted as already gone); a file written after the
inventory is simply not a candidate. So the check that every live file is in storage (`plan.missing_live_files`) is
not made: an inventory taken before the newest commits lacks their files by design.

A bad inventory (unreadable, a missing column, a column of the wrong type) raises `InvalidInventory` naming the
problem before anything is committed or deleted.
"""

from __future__ import annotations

import json
import posixpath
from typing import Any
from urllib.parse import unquote_plus

import pyarrow as pa

from airflow_provider_deltalite.engine import arrow_compute as pc
from airflow_provider_deltalite.engine.errors import InvalidInventory
from airflow_provider_deltalite.engine.storage import Storage
from airflow_provider_deltalite.maintenance.vacuum.listing import ListedDir
from airflow_provider_deltalite.maintenance.vacuum.paths import HiddenRule, in_log

INVENTORY_FORMATS = ("csv", "parquet", "s3-inventory")
COLUMNS = {"path": pa.string(), "length": pa.int64(), "isDir": pa.bool_(), "modificationTime": pa.int64()}
S3_COLUMNS = ("bucket", "key", "size", "last_modified_date")
# A directory only implied by the paths of its files: no time of its own, so never removed as empty.
_UNKNOWN_DIR_TIME = 2**62


def read_inventory(storage: Storage, source: str, fmt: str | None = None) -> pa.Table:
    """The inventory at ``source`` (a local path or a URI of the table's store) as Delta's four columns.

    Raises:
        InvalidInventory: unreadable, an unknown format, a missing column or one of the wrong type.
    """
    fmt = fmt or _guess_format(source)
    try:
        if fmt == "s3-inventory":
            return _read_s3_inventory(storage, source)
        data = _read_bytes(storage, source)
        table = _parse(data, fmt, source, header=True)
    except InvalidInventory:
        raise
    except (OSError, ValueError, pa.ArrowException) as exc:
        raise InvalidInventory(f"cannot read the inventory {source}: {' '.join(str(exc).split())}") from None
    return _delta_columns(table, source)


def _guess_format(source: str) -> str:
    name = source.rstrip("/").rsplit("/", 1)[-1].lower()
    if name == "manifest.json":
        return "s3-inventory"
    if name.endswith(".parquet"):
        return "parquet"
    if name.endswith((".csv", ".csv.gz")):
        return "csv"
    raise InvalidInventory(
        f"cannot tell the format of the inventory {source} from its name (.csv, .csv.gz, .parquet or manifest.json); "
        f"give it (inventory_format, CLI --inventory-format): one of {', '.join(INVENTORY_FORMATS)}"
    )


def _read_bytes(storage: Storage, source: str) -> bytes:
    """The file's bytes: a local file directly; through the table's filesystem when the URI is of its store (same
    options), else fsspec."""
    scheme = source.split("://", 1)[0] if "://" in source else "file"
    if scheme == "file":  # the local backend imports no filesystem library; neither does reading its inventory
        with open(source.removeprefix("file://"), "rb") as fh:
            return fh.read()
    import fsspec

    if scheme in storage.protocols:
        with storage.fs.open(storage.fs._strip_protocol(source), "rb") as fh:
            return fh.read()
    with fsspec.open(source, "rb") as fh:
        return fh.read()


def _parse(data: bytes, fmt: str, source: str, *, header: bool, names: list[str] | None = None) -> pa.Table:
    if fmt == "parquet":
        import pyarrow.parquet as pq

        return pq.read_table(pa.BufferReader(data))
    if fmt == "csv":
        import pyarrow.csv as pcsv

        if data[:2] == b"\x1f\x8b":
            import gzip

            data = gzip.decompress(data)
        if header:  # Delta's columns: types inferred, then checked; a path is text even when it looks like a number
            read, convert = pcsv.ReadOptions(), pcsv.ConvertOptions(column_types={"path": pa.string()})
        else:  # an S3 Inventory data file: the manifest names the columns; all text, converted and checked here
            read = pcsv.ReadOptions(column_names=names)
            convert = pcsv.ConvertOptions(column_types=dict.fromkeys(names or [], pa.string()))
        return pcsv.read_csv(pa.BufferReader(data), read_options=read, convert_options=convert)
    raise InvalidInventory(f"unknown inventory format {fmt!r} for {source}; one of {', '.join(INVENTORY_FORMATS)}")


def _delta_columns(table: pa.Table, source: str) -> pa.Table:
    """Delta's four inventory columns, typed; text columns (CSV) converted."""
    missing = [name for name in COLUMNS if name not in table.column_names]
    if missing:
        raise InvalidInventory(
            f"the inventory {source} has no column {', '.join(missing)} (it needs path, length, isDir and "
            f"modificationTime; it has {', '.join(table.column_names) or 'none'})"
        )
    out = []
    for name, kind in COLUMNS.items():
        out.append(_typed(table.column(name), name, kind, source))
    return pa.table(out, names=list(COLUMNS))


def _typed(column: pa.ChunkedArray, name: str, kind: pa.DataType, source: str) -> pa.ChunkedArray:
    have = column.type
    ok = (
        have == kind
        or (pa.types.is_string(have) or pa.types.is_large_string(have))
        or (pa.types.is_integer(kind) and pa.types.is_integer(have))
    )
    if kind == pa.string() and not (pa.types.is_string(have) or pa.types.is_large_string(have)):
        ok = False
    if not ok:
        raise InvalidInventory(f"the inventory {source}: column {name} must be {kind}, not {have}")
    if column.null_count:
        raise InvalidInventory(f"the inventory {source}: column {name} has {column.null_count} empty values")
    if have == kind:
        return column
    try:
        if kind == pa.bool_() and pa.types.is_string(have):
            lowered = pc.utf8_lower(column)
            if not pc.all(pc.is_in(lowered, pa.array(["true", "false"]))).as_py():
                raise ValueError("not true or false")
            return pc.equal(lowered, "true")
        return pc.cast(column, kind)
    except (pa.ArrowInvalid, ValueError):
        bad = _first_bad(column, kind)
        raise InvalidInventory(f"the inventory {source}: column {name} must be {kind}, got {bad!r}") from None


def _first_bad(column: pa.ChunkedArray, kind: pa.DataType) -> Any:
    for value in column.to_pylist():
        try:
            if kind == pa.bool_():
                if str(value).lower() not in ("true", "false"):
                    return value
            else:
                pc.cast(pa.array([value]), kind)
        except (pa.ArrowInvalid, ValueError):
            return value
    return None


# -- S3 Inventory reports -------------------------------------------------------------------------------------------


def _read_s3_inventory(storage: Storage, manifest_uri: str) -> pa.Table:
    try:
        manifest = json.loads(_read_bytes(storage, manifest_uri))
        fmt = str(manifest["fileFormat"]).lower()
        files = [f["key"] for f in manifest["files"]]
        destination = str(manifest["destinationBucket"]).rsplit(":", 1)[-1]  # arn:aws:s3:::bucket
        schema = str(manifest.get("fileSchema", ""))
    except (KeyError, TypeError, ValueError) as exc:
        problem = f"{type(exc).__name__}: {exc}"
        raise InvalidInventory(f"the S3 Inventory manifest {manifest_uri} is not one ({problem})") from None
    if fmt not in ("csv", "parquet"):
        raise InvalidInventory(
            f"the S3 Inventory report {manifest_uri} is {fmt.upper()}; deltalite reads CSV or Parquet"
        )
    names = [n.strip() for n in schema.split(",")] if fmt == "csv" else None
    if names is not None:
        lowered = {n.lower() for n in names}
        absent = [c for c in ("bucket", "key", "size", "lastmodifieddate") if c not in lowered]
        if absent:
            raise InvalidInventory(
                f"the S3 Inventory report {manifest_uri} lacks {', '.join(absent)} in its fileSchema ({schema}); "
                "VACUUM needs Size and LastModifiedDate in the report"
            )
    scheme = manifest_uri.split("://", 1)[0] if "://" in manifest_uri else "s3"
    parts = []
    for key in files:
        uri = f"{scheme}://{destination}/{key}"
        try:
            part = _parse(_read_bytes(storage, uri), fmt, uri, header=False, names=names)
        except (OSError, ValueError, pa.ArrowException) as exc:
            raise InvalidInventory(
                f"cannot read the S3 Inventory data file {uri}: {' '.join(str(exc).split())}"
            ) from None
        parts.append(_s3_rows(part, uri, encoded=fmt == "csv", scheme=scheme))
    if not parts:
        return pa.table({name: pa.array([], kind) for name, kind in COLUMNS.items()})
    return pa.concat_tables(parts)


def _s3_rows(part: pa.Table, source: str, *, encoded: bool, scheme: str) -> pa.Table:
    """An S3 Inventory data file as Delta's columns (CSV column names are the manifest's ``Bucket, Key, ...``)."""
    by_name = {n.lower().replace("_", ""): n for n in part.column_names}
    missing = [c for c in S3_COLUMNS if c.replace("_", "") not in by_name]
    if missing:
        raise InvalidInventory(f"the S3 Inventory data file {source} has no column {', '.join(missing)}")

    def col(name: str) -> pa.ChunkedArray:
        return part.column(by_name[name.replace("_", "")])

    keep = None
    if "islatest" in by_name:  # a versioned report: only current versions
        keep = _truthy(col("is_latest"))
    if "isdeletemarker" in by_name:
        marker = pc.invert(_truthy(col("is_delete_marker")))
        keep = marker if keep is None else pc.and_(keep, marker)
    if keep is not None:
        part = pc.filter(part, keep)
    keys = col("key")
    if keys.null_count or col("bucket").null_count:
        raise InvalidInventory(f"the S3 Inventory data file {source} has rows without a bucket or key")
    if encoded:
        keys = pa.chunked_array([pa.array([unquote_plus(k) for k in keys.to_pylist()], pa.string())])
    paths = pc.binary_join_element_wise(pa.scalar(f"{scheme}://"), col("bucket"), pa.scalar("/"), keys, "")
    size = _typed(col("size"), "size", pa.int64(), source)
    stamps = col("last_modified_date")
    if pa.types.is_timestamp(stamps.type):
        mtime = pc.cast(pc.cast(stamps, pa.timestamp("ms", tz="UTC")), pa.int64())
    elif pa.types.is_integer(stamps.type):
        mtime = pc.cast(stamps, pa.int64())
    else:
        mtime = pa.chunked_array([pa.array([_iso_ms(v) for v in stamps.to_pylist()], pa.int64())], pa.int64())
    is_dir = pc.ends_with(keys, "/")
    return pa.table([paths, size, is_dir, mtime], names=list(COLUMNS))


def _truthy(column: pa.ChunkedArray) -> pa.ChunkedArray:
    if pa.types.is_boolean(column.type):
        return pc.fill_null(column, False)
    return pc.equal(pc.utf8_lower(pc.fill_null(pc.cast(column, pa.string()), "false")), "true")


def _iso_ms(value: str | None) -> int:
    from datetime import datetime

    if value is None:
        raise InvalidInventory("an S3 Inventory row has no last_modified_date")
    try:
        return int(datetime.fromisoformat(value).timestamp() * 1000)
    except ValueError:
        raise InvalidInventory(f"an S3 Inventory last_modified_date is not a time: {value!r}") from None


# -- rows to a listing ----------------------------------------------------------------------------------------------


def root_prefixes(storage: Storage) -> list[str]:
    """The spellings an inventory may use for paths under the table root (with the trailing ``/``)."""
    root = storage.root.rstrip("/")
    if storage.native_files:
        return [f"{root}/", f"file://{root}/", f"file:{root}/"]
    return [f"{p}://{root}/" for p in storage.protocols]


def to_listing(inventory: pa.Table, storage: Storage, rule: HiddenRule) -> tuple[list[ListedDir], int]:
    """The inventory's rows under the table root as a listing (`listing.ListedDir` per directory); and how many rows
    it had in all. Rows outside the root, hidden, in the log or with unusual segments are left out."""
    total = inventory.num_rows
    paths = inventory.column("path")
    rel_parts = [(pc.starts_with(paths, prefix), len(prefix)) for prefix in root_prefixes(storage)]
    rows: dict[str, tuple[int, bool, int]] = {}  # relative path -> (length, isDir, mtime), the newest row
    taken = None
    for mask, cut in rel_parts:
        if taken is not None:
            mask = pc.and_(mask, pc.invert(taken))
        taken = mask if taken is None else pc.or_(taken, mask)
        chosen = pc.filter(inventory, mask)
        if not chosen.num_rows:
            continue
        rel = pc.utf8_slice_codeunits(chosen.column("path"), cut)
        for path, length, is_dir, mtime in zip(
            rel.to_pylist(),
            chosen.column("length").to_pylist(),
            chosen.column("isDir").to_pylist(),
            chosen.column("modificationTime").to_pylist(),
            strict=True,
        ):
            path = path.rstrip("/") if is_dir else path
            if not _plain(path) or in_log(path):
                continue
            seen = rows.get(path)
            if seen is None or mtime > seen[2]:
                rows[path] = (length, is_dir, mtime)
    return _group(rows, rule), total


def _plain(path: str) -> bool:
    return bool(path) and not path.startswith("/") and all(p not in ("", ".", "..") for p in path.split("/"))


def _group(rows: dict[str, tuple[int, bool, int]], rule: HiddenRule) -> list[ListedDir]:
    files: dict[str, tuple[list[str], list[int], list[int]]] = {"": ([], [], [])}
    dir_times: dict[str, int] = {"": 0}
    hidden: dict[str, int] = {}
    subdirs: dict[str, set[str]] = {}
    for path in sorted(rows):
        length, is_dir, mtime = rows[path]
        parent = posixpath.dirname(path)
        if rule.is_hidden_path(path):
            # the first hidden segment makes its directory not empty; nothing below it is VACUUM's
            parts = path.split("/")
            for i, part in enumerate(parts):
                if rule.is_hidden(part):
                    where = "/".join(parts[:i])
                    hidden[where] = hidden.get(where, 0) + 1
                    break
            continue
        # every directory on the way exists, listed or not
        ancestor = parent
        child = path
        while True:
            subdirs.setdefault(ancestor, set())
            if child != path or is_dir:
                subdirs[ancestor].add(child)
            dir_times.setdefault(ancestor, _UNKNOWN_DIR_TIME)
            files.setdefault(ancestor, ([], [], []))
            if not ancestor:
                break
            child, ancestor = ancestor, posixpath.dirname(ancestor)
        if is_dir:
            dir_times[path] = mtime
            files.setdefault(path, ([], [], []))
            subdirs.setdefault(path, set())
        else:
            names, sizes, mtimes = files[parent]
            names.append(path)
            sizes.append(length)
            mtimes.append(mtime)
    listing = []
    for directory in sorted(files):
        names, sizes, mtimes = files[directory]
        subs = tuple((s, dir_times.get(s, _UNKNOWN_DIR_TIME)) for s in sorted(subdirs.get(directory, ())))
        listing.append(
            ListedDir(
                directory,
                dir_times.get(directory, _UNKNOWN_DIR_TIME),
                tuple(names),
                tuple(sizes),
                tuple(mtimes),
                subs,
                (),
                hidden.get(directory, 0),
            )
        )
    return listing
