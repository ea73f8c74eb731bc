"""Locations: table URIs as users write them, paths as the log writes them, and backend errors made safe to show."""

from __future__ import annotations

import os
import re
from urllib.parse import unquote, urlsplit

from airflow_provider_deltalite.engine.errors import TableNotFound, redact_uri


def normalize_table_uri(uri: str) -> str:
    """Turn a user-supplied table location into a URI fsspec understands (relative paths become absolute)."""
    if not isinstance(uri, str) or not uri.strip():
        raise TableNotFound("empty table URI")
    uri = uri.strip()
    scheme = urlsplit(uri).scheme
    if not scheme or len(scheme) == 1:
        return os.path.abspath(os.path.expanduser(uri))
    if scheme == "file":
        path = uri[len("file:") :]
        path = "/" + path.lstrip("/")
        return unquote(path)
    return uri.rstrip("/")


def uri_scheme(uri: str) -> str:
    """The store a URI names, as fsspec picks its filesystem: ``file`` for a path without a scheme.

    Example:
        >>> uri_scheme("s3://bucket/key"), uri_scheme("/tmp/result.json")
        ('s3', 'file')
    """
    from fsspec.utils import get_protocol

    return get_protocol(uri)


def is_absolute_uri(path: str) -> bool:
    """Whether a path from the log is absolute: a URI with a scheme (not a drive letter) or a rooted path."""
    if ":" not in path:  # no scheme (the usual relative path: checked for every action of a commit)
        return path.startswith("/")
    scheme = urlsplit(path).scheme
    return (bool(scheme) and len(scheme) > 1) or path.startswith("/")


def absolute_uri_to_path(uri: str) -> str:
    """Decode an absolute URI from the log (``file:/a%20b``, ``s3://b/k``) into a path the store accepts."""
    parts = urlsplit(uri)
    if parts.scheme in ("file", ""):
        return unquote(parts.path)
    return f"{parts.scheme}://{parts.netloc}{unquote(parts.path)}"


_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^\s\"'<>]+")


def describe(exc: BaseException) -> str:
    """``Type: message`` of a backend error for our messages, with the user info and query of any URL in it removed
    (an endpoint URL can carry credentials; a presigned one carries a signature)."""
    text = " ".join(str(exc).split())
    text = _URL.sub(lambda m: redact_uri(m.group(0)) or "", text)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
