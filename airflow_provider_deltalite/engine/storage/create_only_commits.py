"""The default commit strategy: a commit file (``_delta_log/N.json``) is a create-only write, and the store decides who
wins N (a conditional PUT on S3, a hard link on a local disk). The other strategy is `dynamodb_commit`."""

from __future__ import annotations

from typing import TYPE_CHECKING

from airflow_provider_deltalite.engine.storage.dynamodb_commit import warn_if_dynamodb_writer

if TYPE_CHECKING:
    from airflow_provider_deltalite.engine.storage.table_storage import Storage


class CreateOnlyCommits:
    """Commits as create-only writes of the store (`Storage.write_if_absent`)."""

    def mode(self, storage: Storage) -> str | None:
        """What `Storage.commit_mode` reports: the store's own create-only mode."""
        return storage.create_only

    def write_commit(self, storage: Storage, path: str, data: bytes) -> None:
        # A DynamoDB-mode writer of the same table could overwrite this commit: the check costs a writer one request
        # per table and process, and readers nothing.
        warn_if_dynamodb_writer(storage)
        storage.write_if_absent(path, data)

    def recover(self, storage: Storage) -> None:
        """Nothing to finish: a create-only commit is whole or absent."""
