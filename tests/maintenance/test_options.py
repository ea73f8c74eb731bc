"""The options objects: one validation per rule, the same values from keywords, rendered text and JSON."""

from __future__ import annotations

import math

import pytest

from airflow_provider_deltalite import ChangesOptions, OptimizeOptions, VacuumOptions, ZOrderOptions
from airflow_provider_deltalite.engine.errors import InvalidArgument


def test_defaults_and_json_round_trip() -> None:
    for cls in (OptimizeOptions, VacuumOptions, ChangesOptions):
        assert cls.from_json(cls().to_json()) == cls()
    z = ZOrderOptions(columns=["a", "b.c"], curve="hilbert", target_size=1 << 20)
    assert z.columns == ("a", "b.c")
    assert ZOrderOptions.from_json(z.to_json()) == z
    assert z.to_dict() == {
        "columns": ["a", "b.c"],
        "curve": "hilbert",
        "where": None,
        "target_size": 1048576,
        "dry_run": False,
        "num_ranges": 1000,
        "noise": True,
        "run_bytes": 16777216,
        "max_bytes_to_rewrite": None,
        "history_uri": None,
    }


def test_text_values_as_templates_render_them() -> None:
    assert OptimizeOptions.from_text(
        {"where": "None", "target_size": "268435456", "max_deleted_rows_ratio": "0.1", "dry_run": "TRUE"}
    ) == OptimizeOptions(target_size=268435456, max_deleted_rows_ratio=0.1, dry_run=True)
    assert OptimizeOptions.from_text({"min_row_group_size": "8388608"}).min_row_group_size == 8 * 1024 * 1024
    assert ZOrderOptions.from_text({"columns": "['x', 'y']"}).columns == ("x", "y")
    assert ZOrderOptions.from_text({"columns": '["x", "y"]'}).columns == ("x", "y")
    assert ZOrderOptions.from_text({"columns": "x, `a,b`"}).columns == ("x", "`a,b`")
    assert VacuumOptions.from_text(
        {"retention_hours": "24", "mode": "LITE", "enforce_retention_duration": "false"}
    ) == (VacuumOptions(retention_hours=24.0, mode="lite", enforce_retention_duration=False))
    assert ChangesOptions.from_text({"since": "41", "until": ""}) == ChangesOptions(since=41)


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda: OptimizeOptions(target_size=-5), "target_size must be a positive number of bytes, got -5"),
        (lambda: OptimizeOptions(batch_size=True), "batch_size must be a positive number of bytes, got True"),
        (lambda: OptimizeOptions(max_deleted_rows_ratio=2), "max_deleted_rows_ratio must be between 0 and 1, got 2"),
        (lambda: OptimizeOptions(dry_run="yes"), "dry_run must be true or false, got 'yes'"),
        (lambda: ZOrderOptions(columns="x"), "columns must be a list of column names, got 'x'"),
        (lambda: ZOrderOptions(columns=["x"], curve="peano"), "curve must be one of zorder, hilbert, got 'peano'"),
        (lambda: ZOrderOptions(columns=["x"], num_ranges=1), "num_ranges must be at least 2, got 1"),
        (lambda: ZOrderOptions(columns=["x"], run_bytes=0), "run_bytes must be positive, got 0"),
        (lambda: VacuumOptions(retention_hours=-1), "retention_hours must not be negative, got -1"),
        (lambda: VacuumOptions(retention_hours=math.inf), "retention_hours must be a finite number of hours, got inf"),
        (lambda: VacuumOptions(mode="quick"), "mode must be 'full' or 'lite', got 'quick'"),
        (lambda: ChangesOptions(since=-2), "since must be a version, or -1 for from the beginning, got -2"),
        (lambda: ChangesOptions(since=5, until=4), "until (4) must not be below since (5)"),
        (lambda: ChangesOptions(on_gap="skip"), "on_gap must be 'raise' or 'resume', got 'skip'"),
        (lambda: OptimizeOptions.from_text({"target_size": "5 GB"}), "target_size must be a whole number, got '5 GB'"),
        (
            lambda: ZOrderOptions.from_text({"columns": "[]"}),
            "columns must be a non-empty list of column names, got []",
        ),
        (lambda: VacuumOptions.build({"lite": True}), "unknown vacuum option 'lite'"),
        (lambda: OptimizeOptions.from_json("[1]"), "optimize options must be a JSON object"),
    ],
)
def test_bad_values_name_the_field(build, message: str) -> None:
    with pytest.raises(InvalidArgument) as info:
        build()
    assert str(info.value) == message


def test_builders_name_the_table() -> None:
    with pytest.raises(InvalidArgument) as info:
        VacuumOptions.build({"retention_hours": -2}, "/data/t")
    assert str(info.value) == "table /data/t: retention_hours must not be negative, got -2"
    with pytest.raises(InvalidArgument) as info:
        OptimizeOptions.from_text({"dry_run": "maybe"}, "s3://b/t")
    assert str(info.value) == "table s3://b/t: dry_run must be true or false, got 'maybe'"


def test_options_object_or_keywords_not_both() -> None:
    with pytest.raises(InvalidArgument) as info:
        OptimizeOptions.resolve(OptimizeOptions(), {"dry_run": True}, "/t")
    assert str(info.value) == "table /t: pass OptimizeOptions or keyword options, not both (got dry_run)"
    with pytest.raises(InvalidArgument) as info:
        OptimizeOptions.resolve(VacuumOptions(), {}, "/t")  # type: ignore[arg-type]
    assert str(info.value) == "table /t: options must be OptimizeOptions, got VacuumOptions"


def test_writer_options_are_exported_from_the_package_root() -> None:
    from airflow_provider_deltalite import WriterOptions
    from airflow_provider_deltalite.engine.data_file_writer import WriterOptions as engine_writer_options

    assert WriterOptions is engine_writer_options
    assert WriterOptions(compression="ZSTD").compression == "zstd"
    with pytest.raises(ValueError) as info:
        WriterOptions(compression="lzo")
    assert str(info.value) == "compression must be one of snappy, zstd, gzip, brotli, lz4, none, got 'lzo'"
