"""The S3 backend's own parse of ListObjectsV2 pages (`engine/storage/s3.py` `_parse_listing`) against botocore's:
keys that S3 URL-encodes in listings (spaces, ``+``, ``%``, non-ASCII, XML-special characters), sizes, LastModified
and common prefixes, over several pages. The oracle is a plain boto3 client's ``list_objects_v2`` (botocore's own
parse and URL decoding), on the same moto_server."""

from __future__ import annotations

from typing import Any

import boto3
import pytest
import s3fs

from airflow_provider_deltalite.engine.storage import Storage
from airflow_provider_deltalite.engine.storage.s3 import _COLUMNS

pytestmark = pytest.mark.s3

BUCKET = "listing"
ODD_NAMES = ["a b.parquet", "a+b.parquet", "100%.parquet", "é ü.parquet", "x&y<z>.parquet", "q'\"uote.parquet"]


def _oracle(client: Any, prefix: str) -> tuple[dict[str, tuple[int, int]], list[str]]:
    files: dict[str, tuple[int, int]] = {}
    dirs: list[str] = []
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=BUCKET, Prefix=prefix, Delimiter="/"):
        for obj in page.get("Contents", []):
            files[obj["Key"][len(prefix) :]] = (obj["Size"], int(obj["LastModified"].timestamp() * 1000))
        dirs.extend(c["Prefix"][len(prefix) :].rstrip("/") for c in page.get("CommonPrefixes", []))
    return files, sorted(dirs)


def test_own_listing_parse_matches_botocore(s3_endpoint: dict[str, Any]) -> None:
    fs = s3fs.S3FileSystem(**s3_endpoint)
    fs.call_s3("create_bucket", Bucket=BUCKET)
    names = [*ODD_NAMES, *(f"part-{i:04d}.parquet" for i in range(1000))]  # two pages of 1,000 keys and prefixes
    objects = {f"{BUCKET}/t/{name}": b"x" * (i % 7) for i, name in enumerate(names)}
    objects.update({f"{BUCKET}/t/{d}/f.parquet": b"y" for d in ("p=1", "p=a b", "p=%41", "_delta_log")})
    fs.pipe(objects)
    client = boto3.client(
        "s3",
        endpoint_url=s3_endpoint["endpoint_url"],
        aws_access_key_id=s3_endpoint["key"],
        aws_secret_access_key=s3_endpoint["secret"],
        region_name="us-east-1",
    )
    expected_files, expected_dirs = _oracle(client, "t/")
    assert len(expected_files) == len(names)
    assert expected_dirs == sorted(["p=1", "p=a b", "p=%41", "_delta_log"])

    storage = Storage(f"s3://{BUCKET}/t", s3_endpoint)
    storage.read("a b.parquet")  # the client exists from here on: listings take the own parse
    listing = storage.list_dir("")
    got = {n: (s, m) for n, s, m in zip(listing.file_names, listing.file_sizes, listing.file_mtimes, strict=True)}
    assert got == expected_files
    assert sorted(listing.dir_names) == expected_dirs
    assert listing.others == ()

    # the own parse answered (not botocore's, which `_columns` falls back to)
    page = storage.backend._list_page({"Bucket": BUCKET, "Prefix": "t/", "Delimiter": "/"})  # type: ignore[attr-defined]
    assert "Contents" not in page
    keys, _, _, prefixes = page[_COLUMNS]
    assert len(keys) + len(prefixes) == 1000 and page["IsTruncated"] is True

    start = "part-0900.parquet"
    from_name = {f.name: (f.size, f.modification_time) for f in storage.list_from("", start)}
    assert from_name == {n: v for n, v in expected_files.items() if n >= start}

    # a large directory in parallel key ranges split at names the caller knows: the same entries in the same order
    backend = storage.backend
    backend.list_page_size, backend.list_split_every = 50, 100  # type: ignore[attr-defined]
    known = frozenset(sorted(expected_files)[::3])  # 336 names: four ranges of 50-key pages
    ranged = storage.list_dir("", known)
    assert ranged == storage.list_dir("")  # sequential (nothing known), same page size
    assert ranged == listing
