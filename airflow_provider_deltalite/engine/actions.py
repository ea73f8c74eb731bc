"""Action names and the Arrow shapes deltalite uses for actions (in commits and in checkpoints), in one place."""

from __future__ import annotations

import pyarrow as pa

ADD = "add"
REMOVE = "remove"
METADATA = "metaData"
PROTOCOL = "protocol"
TXN = "txn"
DOMAIN_METADATA = "domainMetadata"
COMMIT_INFO = "commitInfo"
CDC = "cdc"
CHECKPOINT_METADATA = "checkpointMetadata"
SIDECAR = "sidecar"

NON_FILE_ACTIONS = (METADATA, PROTOCOL, TXN, DOMAIN_METADATA, COMMIT_INFO, CDC, CHECKPOINT_METADATA, SIDECAR)

DELETION_VECTOR = pa.struct(
    [
        ("storageType", pa.string()),
        ("pathOrInlineDv", pa.string()),
        ("offset", pa.int32()),
        ("sizeInBytes", pa.int32()),
        ("cardinality", pa.int64()),
    ]
)
STRING_MAP = pa.map_(pa.string(), pa.string())


def add_fields(partition_struct: pa.StructType) -> list[pa.Field]:
    """The fields of an `add` as deltalite keeps them; partitionValues is a struct of the physical partition columns."""
    return [
        pa.field("path", pa.string()),
        pa.field("partitionValues", partition_struct),
        pa.field("size", pa.int64()),
        pa.field("modificationTime", pa.int64()),
        pa.field("dataChange", pa.bool_()),
        pa.field("stats", pa.string()),
        pa.field("deletionVector", DELETION_VECTOR),
        pa.field("baseRowId", pa.int64()),
        pa.field("defaultRowCommitVersion", pa.int64()),
        pa.field("clusteringProvider", pa.string()),
    ]


def remove_fields(partition_struct: pa.StructType) -> list[pa.Field]:
    """The fields of a `remove` (tombstone) as deltalite keeps them."""
    return [
        pa.field("path", pa.string()),
        pa.field("deletionTimestamp", pa.int64()),
        pa.field("dataChange", pa.bool_()),
        pa.field("extendedFileMetadata", pa.bool_()),
        pa.field("partitionValues", partition_struct),
        pa.field("size", pa.int64()),
        pa.field("stats", pa.string()),
        pa.field("deletionVector", DELETION_VECTOR),
        pa.field("baseRowId", pa.int64()),
        pa.field("defaultRowCommitVersion", pa.int64()),
    ]


def partition_struct(physical_columns: list[str]) -> pa.StructType:
    """A struct of raw (string) partition values keyed by physical column name."""
    return pa.struct([pa.field(c, pa.string()) for c in physical_columns])


def json_read_schema(partition_columns: list[str]) -> pa.Schema:
    """The explicit schema for parsing commit files with pyarrow: only add and remove; everything else ignored."""
    ps = partition_struct(partition_columns)
    return pa.schema([pa.field(ADD, pa.struct(add_fields(ps))), pa.field(REMOVE, pa.struct(remove_fields(ps)))])


# The Arrow shapes of non-file actions and removes in a checkpoint (field names and types as Spark writes them).

_STRING_LIST = pa.list_(pa.string())
TXN_TYPE = pa.struct([("appId", pa.string()), ("version", pa.int64()), ("lastUpdated", pa.int64())])
PROTOCOL_TYPE = pa.struct(
    [
        ("minReaderVersion", pa.int32()),
        ("minWriterVersion", pa.int32()),
        ("readerFeatures", _STRING_LIST),
        ("writerFeatures", _STRING_LIST),
    ]
)
METADATA_TYPE = pa.struct(
    [
        ("id", pa.string()),
        ("name", pa.string()),
        ("description", pa.string()),
        ("format", pa.struct([("provider", pa.string()), ("options", STRING_MAP)])),
        ("schemaString", pa.string()),
        ("partitionColumns", _STRING_LIST),
        ("configuration", STRING_MAP),
        ("createdTime", pa.int64()),
    ]
)
DOMAIN_METADATA_TYPE = pa.struct([("domain", pa.string()), ("configuration", pa.string()), ("removed", pa.bool_())])
CHECKPOINT_METADATA_TYPE = pa.struct([("version", pa.int64()), ("tags", STRING_MAP)])
SIDECAR_TYPE = pa.struct(
    [("path", pa.string()), ("sizeInBytes", pa.int64()), ("modificationTime", pa.int64()), ("tags", STRING_MAP)]
)
CHECKPOINT_REMOVE_TYPE = pa.struct(
    [
        ("path", pa.string()),
        ("deletionTimestamp", pa.int64()),
        ("dataChange", pa.bool_()),
        ("extendedFileMetadata", pa.bool_()),
        ("partitionValues", STRING_MAP),
        ("size", pa.int64()),
        ("deletionVector", DELETION_VECTOR),
        ("baseRowId", pa.int64()),
        ("defaultRowCommitVersion", pa.int64()),
    ]
)
