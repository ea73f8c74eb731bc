"""The S3 backend (s3fs): listings that start at a name (``ListObjectsV2`` ``StartAfter``), ``DeleteObjects`` in
batches of 1,000 keys, and create-only writes as conditional PUTs (``If-None-Match: *``: AWS S3 since 2024, MinIO,
moto). All use of s3fs's private API (its event loop and ``_call_s3``) is here."""

from __future__ import annotations

import contextlib
import functools
import time
from collections.abc import Container, Iterable, Iterator
from contextvars import ContextVar
from datetime import datetime
from typing import Any
from urllib.parse import unquote_plus

from airflow_provider_deltalite.engine.crash_points import crash_point
from airflow_provider_deltalite.engine.storage.base import DeleteOutcome, DirListing, FileInfo, Segment, mtime_ms
from airflow_provider_deltalite.engine.storage.fsspec_backend import FsspecBackend
from airflow_provider_deltalite.engine.storage.paths import describe
from airflow_provider_deltalite.engine.storage.retry import TRANSIENT_CODES, is_backend_failure, is_transient

DELETE_OBJECTS_LIMIT = 1000  # keys per DeleteObjects request
LIST_SPLIT_EVERY = 2000  # known names per key range when a large directory is listed in parallel ranges
_COLUMNS = "DeltaliteColumns"  # where `_parse_listing` leaves a listing page, in the parsed response
# Set inside the asyncio task of one of our listing requests only: s3fs's own listings keep botocore's full parse.
_OWN_LISTING: ContextVar[bool] = ContextVar("deltalite_own_listing", default=False)


def parse_timestamp(value: Any) -> Any:
    """botocore's timestamp parsing, with S3's ISO 8601 form (``2026-11-25T01:24:07.000Z``, every ``LastModified``
    of a listing) parsed by `datetime.fromisoformat`: botocore hands every timestamp to dateutil, which costs more
    than the rest of a 1,000-key listing page together; the result is the same aware datetime."""
    if isinstance(value, str) and len(value) >= 20 and value[4] == "-" and value[10] == "T":
        try:
            return datetime.fromisoformat(value)
        except ValueError:
            pass
    from botocore.utils import parse_timestamp as botocore_parse_timestamp

    return botocore_parse_timestamp(value)


def fast_timestamps(client: Any) -> None:
    """Give the s3fs client's response parsers `parse_timestamp` (once per client; parsers are made per response)."""
    factory = getattr(getattr(client, "_endpoint", None), "_response_parser_factory", None)
    if factory is not None and getattr(factory, "_defaults", {}).get("timestamp_parser") is not parse_timestamp:
        factory.set_parser_defaults(timestamp_parser=parse_timestamp)


def _parse_listing(response_dict: dict[str, Any], customized_response_dict: dict[str, Any], **_: Any) -> None:
    """A ``before-parse`` handler for ListObjectsV2: our listings need the keys, sizes, times and common prefixes of
    a page as columns, which the C XML parser reads in a fraction of what botocore's generic parse (a dict per key,
    every field typed) costs; botocore then parses only what is left (the truncation marker and token)."""
    if not _OWN_LISTING.get() or response_dict.get("status_code", 500) >= 300:
        return
    # here, not at the top: the backend registry imports this module into every process, a local table's too, and
    # the XML package took 6 ms of it
    from xml.etree import ElementTree

    root = ElementTree.fromstring(response_dict["body"])
    ns = root.tag[: root.tag.index("}") + 1] if root.tag.startswith("{") else ""
    encoded = root.findtext(f"{ns}EncodingType") == "url"
    keys: list[str] = []
    sizes: list[int] = []
    mtimes: list[int] = []
    for item in root.iterfind(f"{ns}Contents"):
        key = item.findtext(f"{ns}Key") or ""
        keys.append(unquote_plus(key) if encoded else key)
        sizes.append(int(item.findtext(f"{ns}Size") or 0))
        stamp = item.findtext(f"{ns}LastModified")
        mtimes.append(int(parse_timestamp(stamp).timestamp() * 1000) if stamp else 0)
    prefixes = [item.findtext(f"{ns}Prefix") or "" for item in root.iterfind(f"{ns}CommonPrefixes")]
    if encoded:
        prefixes = [unquote_plus(p) for p in prefixes]
    customized_response_dict[_COLUMNS] = (keys, sizes, mtimes, prefixes)
    rest = ElementTree.Element(root.tag)
    for name in ("IsTruncated", "NextContinuationToken"):
        found = root.find(f"{ns}{name}")
        if found is not None:
            rest.append(found)
    response_dict["body"] = ElementTree.tostring(rest)


def _columns(response: dict[str, Any]) -> Any:
    """A listing page's keys, sizes, mtimes (ms) and common prefixes: as `_parse_listing` left them, or from
    botocore's own parse (a client our handler was not registered on yet)."""
    found = response.get(_COLUMNS)
    if found is not None:
        return found
    contents = response.get("Contents", [])
    return (
        [obj["Key"] for obj in contents],
        [int(obj.get("Size", 0)) for obj in contents],
        [mtime_ms(obj) for obj in contents],
        [common["Prefix"] for common in response.get("CommonPrefixes", [])],
    )


class S3Backend(FsspecBackend):
    """A `StorageBackend` on S3 through s3fs (see `base.StorageBackend` for the contract)."""

    lists_from_name = True
    atomic_create_only = True
    composes_from_ranges = True
    # S3's multipart limits: every part but the last at least 5 MiB, at most 5 GiB, at most 10,000 parts
    min_part_bytes = 5 * 1024 * 1024
    max_part_bytes = 5 * 1024**3
    max_parts = 10_000
    delete_batch_size = DELETE_OBJECTS_LIMIT
    list_page_size: int | None = None  # MaxKeys of a listing request (None: the store's default, 1,000)
    list_split_every = LIST_SPLIT_EVERY

    def _call(self, method: str, **kwargs: Any) -> Any:
        """One S3 API call through s3fs (its event loop and client), under the retry policy."""
        from fsspec.asyn import sync

        return self.request(lambda: sync(self.fs.loop, self.fs._call_s3, method, **kwargs))

    def _pages(self, full_dir: str, start_after: str | None = None) -> Iterator[tuple[str, dict[str, Any]]]:
        """The key prefix of ``full_dir`` and each page of its one-level listing (``/`` delimiter); each page is
        retried on its own."""
        bucket, _, key_prefix = full_dir.partition("/")
        prefix = key_prefix.rstrip("/") + "/" if key_prefix else ""
        token = None
        while True:
            kwargs: dict[str, Any] = {"Bucket": bucket, "Prefix": prefix, "Delimiter": "/"}
            if self.list_page_size is not None:
                kwargs["MaxKeys"] = self.list_page_size
            if token:
                kwargs["ContinuationToken"] = token
            elif start_after is not None:
                kwargs["StartAfter"] = prefix + start_after
            response = self.request(functools.partial(self._list_page, kwargs))
            yield prefix, response
            if not response.get("IsTruncated"):
                return
            token = response.get("NextContinuationToken")

    def _list_page(self, kwargs: dict[str, Any]) -> dict[str, Any]:
        """One ListObjectsV2 request; `_columns` reads its page."""
        from fsspec.asyn import sync

        client = getattr(self.fs, "_s3", None)  # s3fs's client once it has one (the table's first read made it)
        if client is not None:
            fast_timestamps(client)
            client.meta.events.register(
                "before-parse.s3.ListObjectsV2", _parse_listing, unique_id="deltalite-parse-listing"
            )

        async def page() -> dict[str, Any]:
            _OWN_LISTING.set(True)  # this task's own context
            return await self.fs._call_s3("list_objects_v2", **kwargs)

        return sync(self.fs.loop, page)

    # -- writes ----------------------------------------------------------------------------------------------

    def _put_if_absent(self, full: str, data: bytes) -> None:
        crash_point("during_commit_write")
        self.fs.pipe_file(full, data, mode="create")

    def compose(self, full: str, segments: Iterable[Segment]) -> int:
        """A multipart upload whose parts are ``UploadPartCopy`` ranges of the sources where a range is at least
        `min_part_bytes`; literal bytes and shorter ranges are gathered into uploaded parts (a short range is read to
        fill a part, so copies stay at least 5 MiB). Any failure aborts the upload: no part is left to be billed."""
        bucket, _, key = full.partition("/")
        upload = self._call("create_multipart_upload", Bucket=bucket, Key=key)["UploadId"]
        where = {"Bucket": bucket, "Key": key, "UploadId": upload}
        parts: list[dict[str, Any]] = []
        pending = bytearray()
        sent = 0

        def number() -> int:
            if len(parts) >= self.max_parts:
                raise OSError(f"composing {full} needs more than {self.max_parts} parts")
            return len(parts) + 1

        def flush() -> None:
            nonlocal sent
            if pending:
                n = number()
                body = bytes(pending)
                response = self._call("upload_part", PartNumber=n, Body=body, **where)
                parts.append({"PartNumber": n, "ETag": response["ETag"]})
                sent += len(body)
                pending.clear()

        def copy(source: str, start: int, length: int) -> None:
            source_bucket, _, source_key = source.partition("/")
            n = number()
            response = self._call(
                "upload_part_copy",
                PartNumber=n,
                CopySource={"Bucket": source_bucket, "Key": source_key},
                CopySourceRange=f"bytes={start}-{start + length - 1}",
                **where,
            )
            parts.append({"PartNumber": n, "ETag": response["CopyPartResult"]["ETag"]})

        try:
            for segment in segments:
                if isinstance(segment, bytes | bytearray | memoryview):
                    pending += segment
                    if len(pending) >= self.max_part_bytes // 2:
                        flush()
                    continue
                source, start, length = segment
                if pending and len(pending) < self.min_part_bytes:
                    take = min(self.min_part_bytes - len(pending), length)  # the part before a copy must be whole
                    pending += self.read_range(source, start, take)
                    start, length = start + take, length - take
                if length < self.min_part_bytes:
                    pending += self.read_range(source, start, length) if length else b""
                    continue
                flush()
                while length:
                    piece = length
                    if piece > self.max_part_bytes:  # split, leaving no piece under the minimum
                        piece = min(self.max_part_bytes, length - self.min_part_bytes)
                    copy(source, start, piece)
                    start, length = start + piece, length - piece
            flush()  # the last part may be short
            if not parts:
                raise OSError(f"composing {full}: nothing to write")
            self._call("complete_multipart_upload", MultipartUpload={"Parts": parts}, **where)
        except BaseException:
            with contextlib.suppress(Exception):
                self._call("abort_multipart_upload", **where)
            raise
        return sent

    def has_files_under(self, full_dir: str) -> bool:
        bucket, _, key_prefix = full_dir.partition("/")
        prefix = key_prefix.rstrip("/") + "/" if key_prefix else ""
        response = self._call("list_objects_v2", Bucket=bucket, Prefix=prefix, MaxKeys=1)
        return bool(response.get("Contents") or response.get("CommonPrefixes"))

    # -- listing ---------------------------------------------------------------------------------------------

    def list_from(self, full_dir: str, start_name: str) -> list[FileInfo]:
        if not start_name:
            return super().list_from(full_dir, start_name)
        # StartAfter is exclusive; start from the name just before start_name so start_name itself is included.
        start_after = start_name[:-1] + chr(ord(start_name[-1]) - 1) + "\U0010ffff"
        out: list[FileInfo] = []
        for prefix, response in self._pages(full_dir, start_after):
            keys, sizes, mtimes, _ = _columns(response)
            for key, size, mtime in zip(keys, sizes, mtimes, strict=True):
                name = key[len(prefix) :]
                if name and "/" not in name and name >= start_name:
                    out.append(FileInfo(name, size, mtime))
        if not out and not self.request(lambda: self.fs.exists(full_dir)):
            raise FileNotFoundError(full_dir)
        return out

    def list_dir(self, full_dir: str, without_details: Container[str]) -> DirListing:
        # A large directory is listed as key ranges in parallel: the names the caller already knows (the table's
        # files in it) split its key space, each range its own ListObjectsV2 pages from StartAfter to the next split.
        ranges: list[tuple[str | None, str | None]] = [(None, None)]
        if isinstance(without_details, set | frozenset) and len(without_details) >= 2 * self.list_split_every:
            bounds = sorted(without_details)[self.list_split_every :: self.list_split_every]
            ranges = list(zip([None, *bounds], [*bounds, None], strict=True))
        if len(ranges) == 1:
            parts = [self._list_range(full_dir, None, None)]
        else:
            from concurrent.futures import ThreadPoolExecutor

            with ThreadPoolExecutor(min(len(ranges), self.default_concurrency)) as pool:
                parts = list(pool.map(lambda r: self._list_range(full_dir, *r), ranges))
        names: list[str] = []
        sizes: list[int] = []
        mtimes: list[int] = []
        dirs: list[str] = []
        others: list[str] = []
        for part in parts:  # in key order, as one sequential listing returns them
            names += part[0]
            sizes += part[1]
            mtimes += part[2]
            dirs += part[3]
            others += part[4]
        return DirListing(tuple(names), tuple(sizes), tuple(mtimes), tuple(dirs), (0,) * len(dirs), tuple(others))

    def _list_range(self, full_dir: str, after: str | None, upto: str | None) -> tuple[list[Any], ...]:
        """Entries of ``full_dir`` named after ``after`` (exclusive) up to ``upto`` (inclusive); None: no bound."""
        names: list[str] = []
        sizes: list[int] = []
        mtimes: list[int] = []
        dirs: list[str] = []
        others: list[str] = []
        for prefix, response in self._pages(full_dir, after):
            keys, page_sizes, page_mtimes, prefixes = _columns(response)
            start = len(prefix)
            for key, size, mtime in zip(keys, page_sizes, page_mtimes, strict=True):
                name = key[start:]
                if name and (upto is None or name <= upto):  # the empty name is the directory's own marker object
                    names.append(name)
                    sizes.append(size)
                    mtimes.append(mtime)
            for common in prefixes:
                entry = common[start:]
                if upto is not None and entry > upto:
                    continue
                name = entry.rstrip("/")
                if name and "/" not in name:
                    dirs.append(name)
                else:  # "a//b": a key with an empty segment, not a directory anyone can name
                    others.append(entry)
            last = max(keys[-1] if keys else "", prefixes[-1] if prefixes else "")
            if upto is not None and last[start:] > upto:
                break  # the next range lists the rest
        return names, sizes, mtimes, dirs, others

    # -- deletes ---------------------------------------------------------------------------------------------

    def delete(self, paths: list[str], full: list[str]) -> DeleteOutcome:
        from fsspec.asyn import sync

        policy = self.policy
        by_key: dict[tuple[str, str], str] = {}
        for path, f in zip(paths, full, strict=True):
            bucket, _, key = f.partition("/")
            by_key[(bucket, key)] = path
        deleted: list[str] = []
        failed: list[tuple[str, str]] = []
        pending = list(by_key)
        # One budget for the request and its keys: a key is retried whether its batch failed as a whole or the store
        # refused that key alone, so no key is tried more than `attempts` times.
        for attempt in range(1, policy.attempts + 1):
            retry: list[tuple[str, str]] = []
            reasons: dict[tuple[str, str], str] = {}
            for start in range(0, len(pending), DELETE_OBJECTS_LIMIT):
                chunk = pending[start : start + DELETE_OBJECTS_LIMIT]
                by_bucket: dict[str, list[str]] = {}
                for bucket, key in chunk:
                    by_bucket.setdefault(bucket, []).append(key)
                for bucket, keys in by_bucket.items():
                    try:
                        response = sync(
                            self.fs.loop,
                            self.fs._call_s3,
                            "delete_objects",
                            Bucket=bucket,
                            Delete={"Objects": [{"Key": k} for k in keys], "Quiet": False},
                        )
                    except Exception as exc:
                        if not is_backend_failure(exc):
                            raise
                        reason = describe(exc)
                        if is_transient(exc):  # the whole batch's outcome is unknown: ask again
                            for key in keys:
                                retry.append((bucket, key))
                                reasons[(bucket, key)] = reason
                        else:  # permissions, a missing bucket: retrying cannot help
                            failed.extend((by_key[(bucket, k)], reason) for k in keys)
                        continue
                    for item in response.get("Deleted", []):
                        if (bucket, item["Key"]) in by_key:
                            deleted.append(by_key[(bucket, item["Key"])])
                    for err in response.get("Errors", []):
                        ident = (bucket, err.get("Key", ""))
                        if ident not in by_key:
                            continue
                        reason = f"{err.get('Code')}: {err.get('Message')}"
                        if err.get("Code") in TRANSIENT_CODES:
                            retry.append(ident)
                            reasons[ident] = reason
                        else:
                            failed.append((by_key[ident], reason))
            if not retry:
                break
            if attempt == policy.attempts:
                failed.extend((by_key[i], f"{reasons[i]} (after {attempt} attempts)") for i in retry)
                break
            time.sleep(policy.delay(attempt))
            pending = retry
        return DeleteOutcome(tuple(deleted), (), tuple(failed))
