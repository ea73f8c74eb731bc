"""Commits through a DynamoDB table, as delta-spark's ``S3DynamoDBLogStore`` makes them: the commit strategy for
tables that delta-spark clusters write with that log store.

Followed from delta-io/delta, ``storage-s3-dynamodb/src/main/java/io/delta/storage/`` (commit bb1057f4):
``BaseExternalLogStore.java`` (``write``, ``fixDeltaLog``, ``listFrom``, ``createTemporaryPath``,
``DEFAULT_EXTERNAL_ENTRY_EXPIRATION_DELAY_SECONDS``), ``S3DynamoDBLogStore.java`` (``createPutItemRequest``,
``getExternalEntry``, ``getLatestExternalEntry``, ``dbResultToCommitEntry``, the ``ddb.tableName`` / ``ddb.region``
defaults) and ``ExternalCommitEntry.java`` (``asComplete``, the temp path relative to ``_delta_log``).

Writing version N (`DynamoDBCommits.write_commit`):

0. N.json exists: FileExistsError (another writer won).
1. The entry of N-1, if incomplete, is recovered; without one, N-1.json must exist. For version 0, a complete entry
   whose 0.json is missing means the table was deleted but its entries were not: refused.
2. The commit is written to ``_delta_log/.tmp/N.json.<uuid>``, then the entry ``{tablePath, fileName, tempPath,
   complete: "false"}`` is put on condition that no entry for N exists: the DynamoDB table is the arbiter.
3. The temp file is copied to N.json.
4. The entry is put again with ``complete: "true"`` and ``expireTime`` (epoch seconds, one day on: DynamoDB's TTL may
   delete it then).

A writer that dies after step 2 leaves an incomplete entry; whoever lists the log next (`recover`, as delta-spark's
``listFrom`` does) or commits N+1 (step 1) copies its temp file to N.json and marks it complete. Once step 2 has
succeeded the version belongs to this writer, so a failure in steps 3 and 4 is logged, not raised (delta-spark:
"ignoring recoverable error"): the next reader finishes the commit.

Two deliberate differences, both only where delta-spark would lose a commit silently: the copy in step 3 is a
create-only write where the store has one, and when N.json turns out to hold another content (a writer outside the
protocol, e.g. a conditional-PUT writer, took N) this writer reports FileExistsError instead of believing it
committed; and a put whose response was lost and whose retry meets its own entry (same ``tempPath``) is taken as won.

Item layout (``S3DynamoDBLogStore.createPutItemRequest``): ``tablePath`` (S, hash key: the table URI as given, so
use the scheme the other writers use, ``s3a://`` for delta-spark on Hadoop), ``fileName`` (S, range key:
``00000000000000000007.json``), ``tempPath`` (S: ``.tmp/<fileName>.<uuid>``, relative to ``_delta_log``),
``complete`` (S: ``"true"``/``"false"``, a string, not a BOOL), ``expireTime`` (N: epoch seconds, only when complete).
"""

from __future__ import annotations

import contextlib
import logging
import re
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from airflow_provider_deltalite.engine.crash_points import crash_point
from airflow_provider_deltalite.engine.errors import CommitStoreError, InvalidArgument, redact_uri
from airflow_provider_deltalite.engine.storage.paths import describe
from airflow_provider_deltalite.engine.storage.retry import StorageRetryPolicy, is_transient, retry_call

if TYPE_CHECKING:
    from airflow_provider_deltalite.engine.storage.table_storage import Storage

T = TypeVar("T")
log = logging.getLogger(__name__)

LOG_DIR = "_delta_log"
TEMP_DIR = ".tmp"  # relative to the log, as delta-spark's createTemporaryPath
# BaseExternalLogStore.DEFAULT_EXTERNAL_ENTRY_EXPIRATION_DELAY_SECONDS: long enough that after DynamoDB deletes the
# entry, N.json's existence alone refuses a second write of N.
EXPIRATION_DELAY_S = 86_400
DEFAULT_REGION = "us-east-1"  # S3DynamoDBLogStore's ddb.region default

TABLE_NAME_OPTION = "dynamodb_table_name"
REGION_OPTION = "dynamodb_region"
ENDPOINT_OPTION = "dynamodb_endpoint"
# Credentials of their own for DynamoDB; without them, those of S3 (s3fs's key/secret/token/profile).
KEY_OPTIONS = {"dynamodb_key": "key", "dynamodb_secret": "secret", "dynamodb_token": "token"}
# delta-rs's names from when it had a DynamoDB log store (deltalake < 1.7), accepted as aliases.
ALIASES = {"DELTA_DYNAMO_TABLE_NAME": TABLE_NAME_OPTION, "AWS_ENDPOINT_URL_DYNAMODB": ENDPOINT_OPTION}
DYNAMODB_OPTIONS = (TABLE_NAME_OPTION, REGION_OPTION, ENDPOINT_OPTION, *KEY_OPTIONS, *ALIASES)

_COMMIT_NAME = re.compile(r"^_delta_log/(\d{20})\.json$")
# DynamoDB answers that mean "try again" (besides what `is_transient` knows from S3).
_DDB_TRANSIENT = frozenset(
    {"ProvisionedThroughputExceededException", "RequestLimitExceeded", "InternalServerError", "LimitExceededException"}
)
# One recovery at a time per process (BaseExternalLogStore's pathLock): threads that see the same incomplete entry
# would otherwise copy its temp file twice.
_recovery_lock = threading.Lock()


def commit_version(path: str) -> int | None:
    """The version of a commit file path relative to the table root (``_delta_log/<20 digits>.json``), else None."""
    match = _COMMIT_NAME.match(path)
    return int(match.group(1)) if match else None


def _error_code(exc: BaseException) -> str:
    response = getattr(exc, "response", None)
    if isinstance(response, Mapping):
        error = response.get("Error") or {}
        if isinstance(error, Mapping):
            return str(error.get("Code", ""))
    return ""


def _transient(exc: BaseException) -> bool:
    return _error_code(exc) in _DDB_TRANSIENT or is_transient(exc)


@dataclass(frozen=True)
class CommitEntry:
    """One item of the DynamoDB table (ExternalCommitEntry.java)."""

    table_path: str
    file_name: str
    temp_path: str
    complete: bool
    expire_time: int | None = None

    def to_item(self) -> dict[str, dict[str, str]]:
        """The item as S3DynamoDBLogStore.createPutItemRequest writes it."""
        item = {
            "tablePath": {"S": self.table_path},
            "fileName": {"S": self.file_name},
            "tempPath": {"S": self.temp_path},
            "complete": {"S": "true" if self.complete else "false"},
        }
        if self.expire_time is not None:
            item["expireTime"] = {"N": str(self.expire_time)}
        return item

    @classmethod
    def from_item(cls, item: Mapping[str, Any]) -> CommitEntry:
        """An item as S3DynamoDBLogStore.dbResultToCommitEntry reads it."""
        expire = item.get("expireTime")
        return cls(
            item["tablePath"]["S"],
            item["fileName"]["S"],
            item["tempPath"]["S"],
            item["complete"]["S"] == "true",
            int(expire["N"]) if expire else None,
        )

    def as_complete(self) -> CommitEntry:
        """This entry marked complete, to expire a day from now (ExternalCommitEntry.asComplete)."""
        return CommitEntry(self.table_path, self.file_name, self.temp_path, True, int(time.time()) + EXPIRATION_DELAY_S)


class DynamoDBCommits:
    """The DynamoDB commit strategy of one table's `Storage` (see the module docstring for the protocol).

    Args:
        table_uri: the table root; it is the ``tablePath`` of the entries.
        own: the DynamoDB options (`DYNAMODB_OPTIONS`, aliases resolved): the table name, region, endpoint, keys.
        s3_options: the store's fsspec options, whose credentials serve DynamoDB unless ``own`` has its own.
        policy: the storage retry policy, applied to DynamoDB requests too.
    """

    def __init__(
        self, table_uri: str, own: Mapping[str, Any], s3_options: Mapping[str, Any], policy: StorageRetryPolicy
    ) -> None:
        self.table_uri = table_uri
        self.table_name = str(own[TABLE_NAME_OPTION])
        client_kwargs = s3_options.get("client_kwargs") or {}
        self.region = own.get(REGION_OPTION) or client_kwargs.get("region_name")
        self.endpoint = own.get(ENDPOINT_OPTION)
        self._credentials = {
            option: own.get(own_name) or s3_options.get(option)
            for own_name, option in KEY_OPTIONS.items()
            if own.get(own_name) or s3_options.get(option)
        }
        self._profile = s3_options.get("profile")
        self.policy = policy
        self._client: Any = None

    @classmethod
    def from_options(
        cls, table_uri: str, own: Mapping[str, Any], s3_options: Mapping[str, Any], policy: StorageRetryPolicy
    ) -> DynamoDBCommits | None:
        """The strategy when the options name a DynamoDB table, else None (commits are create-only writes)."""
        resolved = {ALIASES.get(k, k): v for k, v in own.items() if v not in (None, "")}
        if not resolved.get(TABLE_NAME_OPTION):
            unused = sorted(k for k in own if own[k] not in (None, "") and ALIASES.get(k, k) != TABLE_NAME_OPTION)
            if unused:
                raise InvalidArgument(
                    f"storage option(s) {', '.join(unused)} need {TABLE_NAME_OPTION} (the DynamoDB table of the "
                    "commit log)",
                    table_uri,
                )
            return None
        return cls(table_uri, resolved, s3_options, policy)

    # -- DynamoDB requests -----------------------------------------------------------------------------------

    @property
    def client(self) -> Any:
        """A botocore DynamoDB client, made on first use (importing botocore costs ~0.1 s)."""
        if self._client is None:
            import botocore.session
            from botocore.config import Config

            session = botocore.session.Session(profile=self._profile)
            region = self.region or session.get_config_variable("region") or DEFAULT_REGION
            self.region = region
            self._client = session.create_client(
                "dynamodb",
                region_name=region,
                endpoint_url=self.endpoint,
                aws_access_key_id=self._credentials.get("key"),
                aws_secret_access_key=self._credentials.get("secret"),
                aws_session_token=self._credentials.get("token"),
                # our policy retries on top; botocore's own retries stay at its default for throttling
                config=Config(retries={"mode": "standard"}, connect_timeout=10, read_timeout=30),
            )
        return self._client

    def _call(self, operation: str, call: Callable[[], T]) -> T:
        """One DynamoDB request under the retry policy; what still fails becomes the table's error."""
        try:
            return retry_call(self.policy, call, transient=_transient)
        except Exception as exc:
            code = _error_code(exc)
            if code == "ConditionalCheckFailedException":
                raise
            if code == "ResourceNotFoundException":
                raise InvalidArgument(
                    f"DynamoDB table {self.table_name!r} (storage option {TABLE_NAME_OPTION}) does not exist in "
                    f"region {self.region}" + (f" at {redact_uri(self.endpoint)}" if self.endpoint else ""),
                    self.table_uri,
                ) from None
            if type(exc).__module__.split(".")[0] != "botocore" and not isinstance(exc, OSError):
                raise
            raise CommitStoreError(
                f"DynamoDB {operation} on table {self.table_name!r} failed: {describe(exc)}", self.table_uri
            ) from None

    def get_entry(self, file_name: str) -> CommitEntry | None:
        """The entry of one commit file (S3DynamoDBLogStore.getExternalEntry: a consistent GetItem)."""
        key = {"tablePath": {"S": self.table_uri}, "fileName": {"S": file_name}}
        response = self._call(
            "GetItem",
            lambda: self.client.get_item(TableName=self.table_name, Key=key, ConsistentRead=True),
        )
        item = response.get("Item")
        return CommitEntry.from_item(item) if item else None

    def latest_entry(self) -> CommitEntry | None:
        """The entry of the table's newest commit (getLatestExternalEntry: a consistent Query, newest first, 1)."""
        response = self._call(
            "Query",
            lambda: self.client.query(
                TableName=self.table_name,
                KeyConditionExpression="tablePath = :path",
                ExpressionAttributeValues={":path": {"S": self.table_uri}},
                ScanIndexForward=False,
                Limit=1,
                ConsistentRead=True,
            ),
        )
        items = response.get("Items") or []
        return CommitEntry.from_item(items[0]) if items else None

    def put_entry(self, entry: CommitEntry, *, overwrite: bool) -> None:
        """Put an entry; without ``overwrite``, only if none exists for its file (FileExistsError otherwise)."""
        kwargs: dict[str, Any] = {"TableName": self.table_name, "Item": entry.to_item()}
        if not overwrite:
            kwargs["ConditionExpression"] = "attribute_not_exists(fileName)"
        try:
            self._call("PutItem", lambda: self.client.put_item(**kwargs))
        except Exception as exc:
            if _error_code(exc) != "ConditionalCheckFailedException":
                raise
            # A retried put whose first try landed meets its own entry: ours, not a lost race.
            existing = self.get_entry(entry.file_name)
            if existing is None or existing.temp_path != entry.temp_path:
                raise FileExistsError(f"{LOG_DIR}/{entry.file_name}") from None

    # -- the protocol ------------------------------------------------------------------------------------------

    def write_commit(self, storage: Storage, path: str, data: bytes) -> None:
        """Write the commit file ``path`` (``_delta_log/N.json``) through the DynamoDB table.

        Raises:
            FileExistsError: another writer holds version N.
            CommitStoreError: the table's entries contradict the log (see steps 1 and 0 of the protocol).
            InvalidArgument: the DynamoDB table does not exist.
            StorageError: a request failed before the entry was put (nothing was committed).
        """
        version = commit_version(path)
        if version is None:
            raise ValueError(f"not a commit file: {path}")
        file_name = path.rsplit("/", 1)[1]
        if storage.exists(path):  # step 0
            raise FileExistsError(path)
        if version > 0:  # step 1
            prev_name = f"{version - 1:020d}.json"
            prev = self.get_entry(prev_name)
            if prev is not None and not prev.complete:
                self.fix(storage, prev)
            elif not storage.exists(f"{LOG_DIR}/{prev_name}"):
                raise CommitStoreError(
                    f"previous commit {LOG_DIR}/{prev_name} does not exist in the log, and the DynamoDB table "
                    f"{self.table_name!r} holds no incomplete entry to recover it from",
                    self.table_uri,
                )
        else:
            entry = self.get_entry(file_name)
            if entry is not None and entry.complete:  # 0.json is missing (step 0)
                raise CommitStoreError(
                    f"old entries for this table still exist in the DynamoDB table {self.table_name!r} (a table "
                    "deleted and created again at the same path): delete its items with this tablePath first",
                    self.table_uri,
                )
        temp_path = f"{TEMP_DIR}/{file_name}.{uuid.uuid4()}"  # step 2
        storage.write(f"{LOG_DIR}/{temp_path}", data)
        entry = CommitEntry(self.table_uri, file_name, temp_path, False)
        self.put_entry(entry, overwrite=False)
        crash_point("after_dynamodb_entry")
        try:
            self._copy(storage, path, data)  # step 3
        except FileExistsError:
            # N.json exists, so the entry has nothing left to do; if marking it fails, the next reader does it
            with contextlib.suppress(Exception):
                self._mark_complete(entry)
            raise
        except Exception as exc:
            log.warning(
                "deltalite: %s: version %d is committed in DynamoDB but copying it to the log failed (%s); the next "
                "reader or writer completes it",
                redact_uri(self.table_uri),
                version,
                describe(exc),
            )
            return
        try:
            self._mark_complete(entry)  # step 4
        except Exception as exc:
            log.warning(
                "deltalite: %s: version %d is in the log but marking its DynamoDB entry complete failed (%s); the "
                "next reader or writer does it",
                redact_uri(self.table_uri),
                version,
                describe(exc),
            )

    def _copy(self, storage: Storage, path: str, data: bytes) -> None:
        """Write ``data`` to N.json; a name already holding the same bytes is fine (a recovery copied it first),
        another content is FileExistsError (a writer outside the protocol took N)."""
        for attempt in range(1, self.policy.attempts + 1):
            try:
                if storage.atomic_create_only:
                    storage.put_if_absent(path, data)
                    return
                if not storage.exists(path):
                    storage.write(path, data)
                    return
            except FileExistsError:
                pass
            try:
                existing = storage.read(path)
            except FileNotFoundError:  # a concurrent create-only write still in flight (S3: 409): look again
                time.sleep(self.policy.delay(attempt))
                continue
            if existing != data:
                raise FileExistsError(path)
            return
        raise CommitStoreError(
            f"{path} stayed taken by a write in flight after {self.policy.attempts} attempts", self.table_uri
        )

    def _mark_complete(self, entry: CommitEntry) -> None:
        self.put_entry(entry.as_complete(), overwrite=True)

    def fix(self, storage: Storage, entry: CommitEntry) -> None:
        """Finish an incomplete entry (BaseExternalLogStore.fixDeltaLog): copy its temp file to N.json unless N.json
        exists, then mark the entry complete.

        Raises:
            CommitStoreError: the entry's temp file is gone.
        """
        if entry.complete:
            return
        target = f"{LOG_DIR}/{entry.file_name}"
        with _recovery_lock:
            if not storage.exists(target):
                try:
                    data = storage.read(f"{LOG_DIR}/{entry.temp_path}")
                except FileNotFoundError:
                    raise CommitStoreError(
                        f"the DynamoDB entry of {target} is incomplete and its temp file {LOG_DIR}/{entry.temp_path} "
                        "does not exist",
                        self.table_uri,
                    ) from None
                # FileExistsError: another content, the entry's writer lost N to a writer outside the protocol
                with contextlib.suppress(FileExistsError):
                    self._copy(storage, target, data)
                log.info("deltalite: %s: recovered %s from %s", redact_uri(self.table_uri), target, entry.temp_path)
            self._mark_complete(entry)

    def mode(self, storage: Storage) -> str:
        """What `Storage.commit_mode` reports."""
        return "dynamodb"

    def recover(self, storage: Storage) -> None:
        """Before the log is listed: finish the newest entry if its writer died before finishing it (``listFrom``)."""
        entry = self.latest_entry()
        if entry is not None and not entry.complete:
            self.fix(storage, entry)


# Tables already checked for signs of a DynamoDB writer in this process (the warning is said once per table).
_checked_tables: set[str] = set()
_checked_lock = threading.Lock()


def warn_if_dynamodb_writer(storage: Storage) -> None:
    """Before the first create-only commit of a table in this process: say so if ``_delta_log/.tmp/`` holds files,
    the temp files that delta-spark's S3DynamoDBLogStore writes (and never deletes)."""
    with _checked_lock:
        if storage.table_uri in _checked_tables:
            return
        _checked_tables.add(storage.table_uri)
    if storage.has_files_under(f"{LOG_DIR}/{TEMP_DIR}"):
        log.warning(
            "deltalite: %s: %s/%s/ holds files, a sign of writers that commit through a DynamoDB table (delta-spark's "
            "S3DynamoDBLogStore); they do not see our conditional-PUT commits and can overwrite them: set the "
            "storage option %s to their DynamoDB table (their spark.io.delta.storage.S3DynamoDBLogStore.ddb.tableName)",
            redact_uri(storage.table_uri),
            LOG_DIR,
            TEMP_DIR,
            TABLE_NAME_OPTION,
        )
