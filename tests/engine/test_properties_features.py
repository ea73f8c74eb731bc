"""Table properties (intervals, defaults, validation) and protocol features (legacy implication, readability).

Expected values are hand-computed from the Delta protocol (PROTOCOL.md, "Table Features" and the legacy
reader/writer version table) and from Delta's DeltaConfig defaults.
"""

from __future__ import annotations

import pytest

from airflow_provider_deltalite import DeltaTable
from airflow_provider_deltalite.engine.errors import InvalidTableProperty, ProtocolNotSupported
from airflow_provider_deltalite.engine.features import ProtocolView, ensure_readable, ensure_writable
from airflow_provider_deltalite.engine.properties import TableProperties, parse_interval_ms
from tests.helpers import CORPUS

SECOND = 1000
MINUTE = 60 * SECOND
HOUR = 60 * MINUTE
DAY = 24 * HOUR
WEEK = 7 * DAY

# -- parse_interval_ms ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("interval 7 days", 7 * DAY),
        ("interval 1 week", WEEK),
        ("2 days 3 hours", 2 * DAY + 3 * HOUR),
        ("interval 168 hours", 168 * HOUR),
        ("interval 30 days", 30 * DAY),
        ("interval 2 weeks", 2 * WEEK),
        ("INTERVAL 1 WEEK", WEEK),
        ("Interval 1 Day", DAY),
        ("1 day", DAY),
        ("interval 1 hour", HOUR),
        ("interval 90 minutes", 90 * MINUTE),
        ("interval 45 seconds", 45 * SECOND),
        ("interval 1 second", SECOND),
        ("interval 250 milliseconds", 250),
        ("interval 1 millisecond", 1),
        ("interval 3000 microseconds", 3),
        ("interval 0.5 seconds", 500),
        ("1.5 hours", 90 * MINUTE),
        ("interval 1 week 2 days 3 hours 4 minutes 5 seconds", WEEK + 2 * DAY + 3 * HOUR + 4 * MINUTE + 5 * SECOND),
        ("  interval   7   days  ", 7 * DAY),
        ("interval 0 days", 0),
        ("interval 1 day 1 day", 2 * DAY),
    ],
)
def test_parse_interval_ms(text: str, expected: int) -> None:
    assert parse_interval_ms(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "",
        "   ",
        "interval",
        "garbage",
        "7",
        "interval 5",
        "days",
        "interval days 7",
        "7 days garbage",
        "interval 1 day 2",
        "intervals 1 day",
        "interval 1 fortnight",
        "interval 1 month",  # months and years have no fixed length
        "interval 2 years",
        "1dayz",
        "interval 1e3 seconds",
        "1_000 seconds",
        "interval - 1 day",
        "interval 1,5 days",
    ],
)
def test_parse_interval_ms_rejects_garbage(text: str) -> None:
    with pytest.raises(ValueError):
        parse_interval_ms(text)


@pytest.mark.parametrize(("text", "expected"), [("interval 10 ms", 10), ("interval 3000 us", 3)])
def test_parse_interval_ms_abbreviations(text: str, expected: int) -> None:
    assert parse_interval_ms(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("interval 5 sec", 5 * SECOND),
        ("interval 5 secs", 5 * SECOND),
        ("interval 2 min", 2 * MINUTE),
        ("3 hrs", 3 * HOUR),
    ],
)
def test_parse_interval_ms_working_abbreviations(text: str, expected: int) -> None:
    assert parse_interval_ms(text) == expected


# -- TableProperties -----------------------------------------------------------------------------------------


def test_defaults_apply_when_unset() -> None:
    props = TableProperties({})
    assert props.explicit == {}
    assert props.interval_ms("delta.deletedFileRetentionDuration") == WEEK
    assert props.interval_ms("delta.logRetentionDuration") == 30 * DAY
    assert props.interval_ms("delta.checkpointRetentionDuration") == 2 * DAY
    assert props.positive_integer("delta.checkpointInterval") == 10
    assert props.integer("delta.dataSkippingNumIndexedCols") == 32
    assert props.boolean("delta.appendOnly") is False
    assert props.boolean("delta.enableExpiredLogCleanup") is True
    assert props.boolean("delta.enableDeletionVectors") is False
    assert props["delta.columnMapping.mode"] == "none"
    assert props.get("delta.no.such.property") is None
    assert props.boolean("delta.no.such.property") is False
    with pytest.raises(KeyError):
        props["delta.no.such.property"]


def test_explicit_values_override_defaults() -> None:
    props = TableProperties(
        {
            "delta.deletedFileRetentionDuration": "interval 2 days",
            "delta.checkpointInterval": "5",
            "delta.appendOnly": "TRUE",
            "custom.key": "x",
        }
    )
    assert props.interval_ms("delta.deletedFileRetentionDuration") == 2 * DAY
    assert props.positive_integer("delta.checkpointInterval") == 5
    assert props.boolean("delta.appendOnly") is True
    assert props.interval_ms("delta.logRetentionDuration") == 30 * DAY
    assert props.explicit == {
        "delta.deletedFileRetentionDuration": "interval 2 days",
        "delta.checkpointInterval": "5",
        "delta.appendOnly": "TRUE",
        "custom.key": "x",
    }
    # the mapping shows defaults and explicit values together, explicit winning
    assert dict(props)["delta.checkpointInterval"] == "5"
    assert dict(props)["delta.isolationLevel"] == "Serializable"
    assert dict(props)["custom.key"] == "x"
    assert len(props) == 17  # 16 defaults + 1 custom key


@pytest.mark.parametrize("value", ["ten", "1.5", "", "10 commits", "0x10"])
def test_non_numeric_checkpoint_interval_is_invalid(value: str) -> None:
    props = TableProperties({"delta.checkpointInterval": value}, "/data/t")
    with pytest.raises(InvalidTableProperty) as info:
        props.positive_integer("delta.checkpointInterval")
    assert str(info.value) == f"table /data/t: property delta.checkpointInterval={value!r} is invalid: not an integer"
    with pytest.raises(InvalidTableProperty):
        props.integer("delta.checkpointInterval")


@pytest.mark.parametrize("value", ["0", "-3"])
def test_checkpoint_interval_below_one_is_invalid(value: str) -> None:
    props = TableProperties({"delta.checkpointInterval": value}, "/data/t")
    assert props.integer("delta.checkpointInterval") == int(value)
    with pytest.raises(InvalidTableProperty, match="must be at least 1"):
        props.positive_integer("delta.checkpointInterval")


@pytest.mark.parametrize(
    ("key", "value", "why"),
    [
        ("delta.logRetentionDuration", "forever", "not an interval"),
        ("delta.logRetentionDuration", "interval 1 month", "unknown interval unit 'month'"),
        ("delta.deletedFileRetentionDuration", "interval -1 day", "negative interval"),
        ("delta.appendOnly", "yes", "not a boolean"),
    ],
)
def test_other_invalid_properties(key: str, value: str, why: str) -> None:
    props = TableProperties({key: value}, "/data/t")
    getter = props.boolean if key == "delta.appendOnly" else props.interval_ms
    with pytest.raises(InvalidTableProperty) as info:
        getter(key)
    message = str(info.value)
    assert message.startswith(f"table /data/t: property {key}={value!r} is invalid: ")
    assert why in message
    assert "\n" not in message


def test_snapshot_properties_from_a_real_table() -> None:
    snap = DeltaTable(str(CORPUS / "delta-golden/dv-partitioned-with-checkpoint")).snapshot()
    assert snap.properties.explicit == {"delta.enableDeletionVectors": "true"}
    assert snap.properties.boolean("delta.enableDeletionVectors") is True
    assert snap.properties.positive_integer("delta.checkpointInterval") == 10


# -- ProtocolView --------------------------------------------------------------------------------------------

LEGACY_WRITER = {
    1: (),
    2: ("appendOnly", "invariants"),
    3: ("appendOnly", "invariants", "checkConstraints"),
    4: ("appendOnly", "invariants", "checkConstraints", "changeDataFeed", "generatedColumns"),
    5: ("appendOnly", "invariants", "checkConstraints", "changeDataFeed", "generatedColumns", "columnMapping"),
    6: (
        "appendOnly",
        "invariants",
        "checkConstraints",
        "changeDataFeed",
        "generatedColumns",
        "columnMapping",
        "identityColumns",
    ),
}


@pytest.mark.parametrize("writer", sorted(LEGACY_WRITER))
def test_legacy_writer_versions_imply_features(writer: int) -> None:
    view = ProtocolView.from_action({"minReaderVersion": 1, "minWriterVersion": writer})
    assert view.min_writer_version == writer
    assert view.reader_features == ()
    assert set(view.writer_features) == set(LEGACY_WRITER[writer])
    assert len(view.writer_features) == len(LEGACY_WRITER[writer])


def test_legacy_writer_two_is_append_only_and_invariants() -> None:
    view = ProtocolView.from_action({"minReaderVersion": 1, "minWriterVersion": 2})
    assert set(view.features) == {"appendOnly", "invariants"}
    assert view.has_feature("appendOnly") and view.has_feature("invariants")
    assert not view.has_feature("columnMapping")
    assert not view.has_feature("deletionVectors")


def test_legacy_reader_two_implies_column_mapping() -> None:
    view = ProtocolView.from_action({"minReaderVersion": 2, "minWriterVersion": 5})
    assert view.reader_features == ("columnMapping",)
    assert view.has_feature("columnMapping")
    assert "columnMapping" in view.features
    ensure_readable(view, "/data/t")  # column mapping is readable


def test_legacy_versions_ignore_feature_lists() -> None:
    view = ProtocolView.from_action(
        {"minReaderVersion": 1, "minWriterVersion": 2, "readerFeatures": ["x"], "writerFeatures": ["y"]}
    )
    assert view.reader_features == ()
    assert set(view.writer_features) == {"appendOnly", "invariants"}


def test_table_features_protocol_uses_the_lists() -> None:
    view = ProtocolView.from_action(
        {
            "minReaderVersion": 3,
            "minWriterVersion": 7,
            "readerFeatures": ["deletionVectors", "columnMapping"],
            "writerFeatures": ["deletionVectors", "columnMapping", "appendOnly"],
        }
    )
    assert view.reader_features == ("deletionVectors", "columnMapping")
    assert view.writer_features == ("deletionVectors", "columnMapping", "appendOnly")
    assert view.features == ("deletionVectors", "columnMapping", "appendOnly")
    assert view.to_dict() == {
        "minReaderVersion": 3,
        "minWriterVersion": 7,
        "readerFeatures": ["deletionVectors", "columnMapping"],
        "writerFeatures": ["deletionVectors", "columnMapping", "appendOnly"],
    }
    ensure_readable(view, "/data/t")


def test_writer_seven_with_legacy_reader() -> None:
    view = ProtocolView.from_action({"minReaderVersion": 1, "minWriterVersion": 7, "writerFeatures": ["appendOnly"]})
    assert (view.reader_features, view.writer_features) == ((), ("appendOnly",))


def test_missing_versions_default_to_one() -> None:
    view = ProtocolView.from_action({})
    assert (view.min_reader_version, view.min_writer_version, view.features) == (1, 1, ())


# -- ensure_readable / ensure_writable -----------------------------------------------------------------------


def test_reader_version_four_is_not_readable() -> None:
    view = ProtocolView.from_action({"minReaderVersion": 4, "minWriterVersion": 7})
    with pytest.raises(ProtocolNotSupported) as info:
        ensure_readable(view, "/data/t")
    assert info.value.features == ("minReaderVersion=4",)
    assert str(info.value) == "table /data/t: minReaderVersion 4 is not supported (deltalite reads up to 3)"


def test_unknown_reader_feature_is_not_readable() -> None:
    view = ProtocolView.from_action(
        {
            "minReaderVersion": 3,
            "minWriterVersion": 7,
            "readerFeatures": ["deletionVectors", "someFutureFeature"],
            "writerFeatures": ["deletionVectors", "someFutureFeature"],
        }
    )
    with pytest.raises(ProtocolNotSupported) as info:
        ensure_readable(view, "/data/t")
    assert info.value.features == ("someFutureFeature",)
    assert str(info.value) == "table /data/t: unsupported reader feature 'someFutureFeature'"


def test_known_but_unreadable_reader_feature_explains_why() -> None:
    view = ProtocolView.from_action(
        {"minReaderVersion": 3, "minWriterVersion": 7, "readerFeatures": ["catalogManaged"], "writerFeatures": []}
    )
    with pytest.raises(ProtocolNotSupported) as info:
        ensure_readable(view, "/data/t")
    assert info.value.features == ("catalogManaged",)
    assert "'catalogManaged' (commits go through a catalog)" in str(info.value)


def test_unknown_writer_only_feature_is_readable_but_not_writable() -> None:
    view = ProtocolView.from_action(
        {"minReaderVersion": 1, "minWriterVersion": 7, "writerFeatures": ["appendOnly", "someFutureWriterFeature"]}
    )
    ensure_readable(view, "/data/t")
    with pytest.raises(ProtocolNotSupported) as info:
        ensure_writable(view, "/data/t")
    assert info.value.features == ("someFutureWriterFeature",)


def test_writer_version_eight_is_readable_but_not_writable() -> None:
    view = ProtocolView.from_action({"minReaderVersion": 1, "minWriterVersion": 8})
    ensure_readable(view)
    with pytest.raises(ProtocolNotSupported) as info:
        ensure_writable(view, "/data/t")
    assert info.value.features == ("minWriterVersion=8",)


def test_icebergcompat_is_readable_but_not_writable() -> None:
    # icebergCompat is refused for the whole table (rowTracking is written: engine/row_tracking.py)
    view = ProtocolView.from_action(
        {"minReaderVersion": 3, "minWriterVersion": 7, "readerFeatures": [], "writerFeatures": ["icebergCompatV2"]}
    )
    ensure_readable(view, "/data/t")
    with pytest.raises(ProtocolNotSupported, match="the Iceberg metadata would go stale"):
        ensure_writable(view, "/data/t")
