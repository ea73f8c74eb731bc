"""The S3 backend (s3fs): listings that start at a name (``ListObjectsV2`` ``StartAfter``), ``DeleteObjects`` in
batches of 1,000 keys, and create-only writes as conditional PUTs (``If-None-Match: *``: AWS S3 since 2024, MinIO,
moto). All use of s3fs's private API (its event loop and ``_call_s3``) is here."""

from __future__ import annotations

import time
from collections.abc import Container, Iterator
from typing import Any

from airflow_provider_deltalite.engine.crash_points import crash_point
from airflow_provider_deltalite.engine.storage.base import DeleteOutcome, DirListing, FileInfo, mtime_ms
from airflow_provider_deltalite.engine.storage.fsspec_backend import FsspecBackend
from airflow_provider_deltalite.engine.storage.paths import describe
from airflow_provider_deltalite.engine.storage.retry import TRANSIENT_CODES, is_backend_failure, is_transient

DELETE_OBJECTS_LIMIT = 1000  # keys per DeleteObjects request


class S3Backend(FsspecBackend):
    """A `StorageBackend` on S3 through s3fs (see `base.StorageBackend` for the contract)."""

    lists_from_name = True
    atomic_create_only = True
    delete_batch_size = DELETE_OBJECTS_LIMIT

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
            if token:
                kwargs["ContinuationToken"] = token
            elif start_after is not None:
                kwargs["StartAfter"] = prefix + start_after
            response = self._call("list_objects_v2", **kwargs)
            yield prefix, response
            if not response.get("IsTruncated"):
                return
            token = response.get("NextContinuationToken")

    # -- writes ----------------------------------------------------------------------------------------------

    def _put_if_absent(self, full: str, data: bytes) -> None:
        crash_point("during_commit_write")
        self.fs.pipe_file(full, data, mode="create")

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
            for obj in response.get("Contents", []):
                name = obj["Key"][len(prefix) :]
                if name and "/" not in name and name >= start_name:
                    out.append(FileInfo(name, int(obj.get("Size", 0)), mtime_ms(obj)))
        if not out and not self.request(lambda: self.fs.exists(full_dir)):
            raise FileNotFoundError(full_dir)
        return out

    def list_dir(self, full_dir: str, without_details: Container[str]) -> DirListing:
        names: list[str] = []
        sizes: list[int] = []
        mtimes: list[int] = []
        dirs: list[str] = []
        others: list[str] = []
        for prefix, response in self._pages(full_dir):
            for obj in response.get("Contents", []):
                name = obj["Key"][len(prefix) :]
                if name:  # the empty name is the directory's own marker object
                    names.append(name)
                    sizes.append(int(obj.get("Size", 0)))
                    mtimes.append(mtime_ms(obj))
            for common in response.get("CommonPrefixes", []):
                name = common["Prefix"][len(prefix) :].rstrip("/")
                if name and "/" not in name:
                    dirs.append(name)
                else:  # "a//b": a key with an empty segment, not a directory anyone can name
                    others.append(common["Prefix"][len(prefix) :])
        return DirListing(tuple(names), tuple(sizes), tuple(mtimes), tuple(dirs), (0,) * len(dirs), tuple(others))

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
