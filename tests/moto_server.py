"""The S3 API the tests run against: moto's server, with conditional writes made atomic as they are on S3.

moto checks ``If-None-Match: *`` and then stores the object in two steps, on a threaded server; two writers racing
for the same commit name can both pass the check, and the second silently replaces the first. Real S3 (and MinIO)
decide put-if-absent atomically, and deltalite's commit protocol relies on that, as every Delta writer on S3 does. So
the server is started through this module, which serialises moto's object writes (PutObject and
CompleteMultipartUpload) and DynamoDB's item writes (conditional puts decide a commit there, as DynamoDB does
atomically), and is otherwise moto's own ``moto_server``.

Run: ``python tests/moto_server.py -H 127.0.0.1 -p PORT`` (moto_server's arguments); from Python, `start_moto_server`.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any


def start_moto_server(log_path: Path) -> tuple[subprocess.Popen, dict[str, Any]]:
    """Start the server on a free 127.0.0.1 port (output to ``log_path``); the process and s3fs options for it.

    Raises:
        RuntimeError: it did not accept connections within 30 s.
    """
    from tests.ports import free_port  # here: this file also runs as the server's own script

    port = free_port()
    log = log_path.open("w")
    proc = subprocess.Popen(
        [sys.executable, str(Path(__file__).resolve()), "-H", "127.0.0.1", "-p", str(port)], stdout=log, stderr=log
    )
    log.close()  # the child holds its own descriptor
    deadline = time.monotonic() + 30
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            break
        except OSError:
            if time.monotonic() > deadline or proc.poll() is not None:
                proc.kill()
                raise RuntimeError(f"moto_server did not start on 127.0.0.1:{port}; see {log_path}") from None
            time.sleep(0.1)
    os.environ.setdefault("AWS_EC2_METADATA_DISABLED", "true")
    options = {
        "key": "testing",
        "secret": "testing",
        "endpoint_url": f"http://127.0.0.1:{port}",
        "client_kwargs": {"region_name": "us-east-1"},
    }
    return proc, options


def deltars_s3_options(options: dict[str, Any]) -> dict[str, str]:
    """delta-rs (object_store) storage options for the s3fs ``options`` of this server."""
    return {
        "AWS_ENDPOINT_URL": options["endpoint_url"],
        "AWS_ACCESS_KEY_ID": options["key"],
        "AWS_SECRET_ACCESS_KEY": options["secret"],
        "AWS_REGION": "us-east-1",
        "AWS_ALLOW_HTTP": "true",
    }


def stop_moto_server(proc: subprocess.Popen) -> None:
    """Terminate the server (kill it when it does not stop within 10 s)."""
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()


def _serialise_writes() -> None:
    from moto.dynamodb.responses import DynamoHandler
    from moto.s3.responses import S3Response

    lock = threading.Lock()

    def atomic(method: Any) -> Any:
        def locked(self: Any, *args: Any, **kwargs: Any) -> Any:
            with lock:
                return method(self, *args, **kwargs)

        return locked

    S3Response.put_object = atomic(S3Response.put_object)
    S3Response._key_response_post = atomic(S3Response._key_response_post)  # CompleteMultipartUpload
    # DynamoDB's conditional writes are atomic too; moto checks the condition and stores the item in two steps, so
    # two writers putting the entry of the same commit (`attribute_not_exists(fileName)`) could both win
    for name in ("put_item", "update_item", "delete_item", "batch_write_item", "transact_write_items"):
        setattr(DynamoHandler, name, atomic(getattr(DynamoHandler, name)))


if __name__ == "__main__":
    from moto.server import main

    _serialise_writes()
    main(sys.argv[1:])
