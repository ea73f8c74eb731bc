"""The table of Delta table features deltalite knows, and the checks that a protocol can be read or written."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from airflow_provider_deltalite.engine.errors import CorruptLog, ProtocolNotSupported

MAX_READER_VERSION = 3
MAX_WRITER_VERSION = 7


@dataclass(frozen=True)
class FeatureInfo:
    """What deltalite does with one table feature.

    Attributes:
        name: the feature name as written in the protocol.
        reader_writer: True for reader+writer features, False for writer-only ones.
        read: deltalite reads tables with this feature correctly.
        write: deltalite's maintenance writer handles it (issue 3 fills in the writer side).
        legacy_writer_version: the writer version that implies it in legacy protocols, if any.
        legacy_reader_version: the reader version that implies it in legacy protocols, if any.
        note: why a feature is refused, shown in the error.
    """

    name: str
    reader_writer: bool
    read: bool
    write: bool
    legacy_writer_version: int | None = None
    legacy_reader_version: int | None = None
    note: str = ""


def _f(name: str, rw: bool, read: bool, write: bool, lw: int | None = None, lr: int | None = None, note: str = ""):
    return FeatureInfo(name, rw, read, write, lw, lr, note)


FEATURES: dict[str, FeatureInfo] = {
    f.name: f
    for f in (
        _f("appendOnly", False, True, True, lw=2),
        _f("invariants", False, True, True, lw=2),
        _f("checkConstraints", False, True, True, lw=3),
        _f("changeDataFeed", False, True, True, lw=4),
        _f("generatedColumns", False, True, True, lw=4),
        _f("columnMapping", True, True, True, lw=5, lr=2),
        _f("identityColumns", False, True, True, lw=6),
        _f("deletionVectors", True, True, True),
        _f("timestampNtz", True, True, True),
        _f("v2Checkpoint", True, True, True),
        _f("vacuumProtocolCheck", True, True, True),
        _f("typeWidening", True, True, True),
        _f("typeWidening-preview", True, True, True),
        _f("domainMetadata", False, True, True),
        # new files get row ids at commit time and rewrites preserve them (engine/row_tracking.py)
        _f("rowTracking", False, True, True),
        _f("inCommitTimestamp", False, True, True),
        _f("inCommitTimestamp-preview", False, True, True),
        _f("clustering", False, True, True),
        _f("liquid", False, True, True),  # the Databricks preview of clustering (domain delta.liquid)
        _f("allowColumnDefaults", False, True, True),
        _f("checkpointProtection", False, True, False),
        _f("collations", False, True, False, note="string comparisons use a collation"),
        _f("collations-preview", False, True, False, note="string comparisons use a collation"),
        _f("icebergCompatV1", False, True, False, note="the Iceberg metadata would go stale"),
        _f("icebergCompatV2", False, True, False, note="the Iceberg metadata would go stale"),
        _f("icebergCompatV3", False, True, False, note="the Iceberg metadata would go stale"),
        _f("icebergWriterCompatV1", False, True, False, note="the Iceberg metadata would go stale"),
        _f("icebergWriterCompatV3", False, True, False, note="the Iceberg metadata would go stale"),
        _f("materializePartitionColumns", False, True, False),
        # variant values pass through as stored; shredded ones are read (and rewritten) unshredded
        _f("variantType", True, True, True),
        _f("variantType-preview", True, True, True),
        _f("variantShredding", True, True, True),
        _f("variantShredding-preview", True, True, True),
        # geometry/geography values pass through as stored WKB, with a null count and no bounds in the stats
        _f("geospatial", True, True, True),
        _f("catalogManaged", True, False, False, note="commits go through a catalog"),
        _f("catalogOwned-preview", True, False, False, note="commits go through a catalog"),
        _f("coordinatedCommits-preview", False, True, False, note="commits go through a coordinator"),
    )
}


@dataclass(frozen=True)
class ProtocolView:
    """A validated view of a protocol action: versions and the effective feature sets."""

    min_reader_version: int
    min_writer_version: int
    reader_features: tuple[str, ...]
    writer_features: tuple[str, ...]

    @classmethod
    def from_action(cls, protocol: Mapping[str, Any], table_uri: str | None = None) -> ProtocolView:
        """Build from a `protocol` action, deriving legacy implied features for old versions.

        Raises:
            CorruptLog: a version that is not a positive integer, or a feature list that is not a list of strings.
        """
        reader = _protocol_version(protocol, "minReaderVersion", table_uri)
        writer = _protocol_version(protocol, "minWriterVersion", table_uri)
        if reader >= 3:
            reader_features = _feature_list(protocol, "readerFeatures", table_uri)
        else:
            reader_features = tuple(
                f.name for f in FEATURES.values() if f.legacy_reader_version and f.legacy_reader_version <= reader
            )
        if writer >= 7:
            writer_features = _feature_list(protocol, "writerFeatures", table_uri)
        else:
            writer_features = tuple(
                f.name for f in FEATURES.values() if f.legacy_writer_version and f.legacy_writer_version <= writer
            )
        return cls(reader, writer, reader_features, writer_features)

    @property
    def features(self) -> tuple[str, ...]:
        """Every feature the table supports (reader features are also writer features)."""
        return tuple(dict.fromkeys(self.reader_features + self.writer_features))

    def has_feature(self, name: str) -> bool:
        """Whether the protocol lists (or implies) ``name``."""
        return name in self.reader_features or name in self.writer_features

    def to_dict(self) -> dict[str, Any]:
        """The protocol as shown by `describe`."""
        return {
            "minReaderVersion": self.min_reader_version,
            "minWriterVersion": self.min_writer_version,
            "readerFeatures": list(self.reader_features),
            "writerFeatures": list(self.writer_features),
        }


def _describe(names: list[str]) -> str:
    parts = []
    for name in names:
        info = FEATURES.get(name)
        parts.append(f"'{name}' ({info.note})" if info and info.note else f"'{name}'")
    return ", ".join(parts)


def ensure_readable(protocol: ProtocolView, table_uri: str | None = None) -> None:
    """Raise ProtocolNotSupported when the table needs a reader feature or version deltalite lacks."""
    if protocol.min_reader_version > MAX_READER_VERSION:
        raise ProtocolNotSupported(
            f"minReaderVersion {protocol.min_reader_version} is not supported (deltalite reads up to "
            f"{MAX_READER_VERSION})",
            table_uri,
            features=(f"minReaderVersion={protocol.min_reader_version}",),
        )
    unsupported = [n for n in protocol.reader_features if not (n in FEATURES and FEATURES[n].read)]
    if unsupported:
        raise ProtocolNotSupported(
            f"unsupported reader feature {_describe(unsupported)}", table_uri, features=tuple(unsupported)
        )


def ensure_writable(protocol: ProtocolView, table_uri: str | None = None) -> None:
    """Raise ProtocolNotSupported when the table needs a writer feature or version deltalite lacks."""
    ensure_readable(protocol, table_uri)
    if protocol.min_writer_version > MAX_WRITER_VERSION:
        raise ProtocolNotSupported(
            f"minWriterVersion {protocol.min_writer_version} is not supported",
            table_uri,
            features=(f"minWriterVersion={protocol.min_writer_version}",),
        )
    unsupported = [n for n in protocol.features if not (n in FEATURES and FEATURES[n].write)]
    if unsupported:
        raise ProtocolNotSupported(
            f"unsupported writer feature {_describe(unsupported)}", table_uri, features=tuple(unsupported)
        )


def _protocol_version(protocol: Mapping[str, Any], key: str, table_uri: str | None) -> int:
    value = protocol.get(key)
    if value is None:
        return 1
    # bool is an int in Python; a JSON true is not a version
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise CorruptLog(f"the protocol action has an invalid {key}: {value!r}", table_uri)
    return value


def _feature_list(protocol: Mapping[str, Any], key: str, table_uri: str | None) -> tuple[str, ...]:
    value = protocol.get(key)
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(f, str) for f in value):
        raise CorruptLog(f"the protocol action's {key} is not a list of feature names: {value!r}", table_uri)
    return tuple(value)
