"""The errors' wire format: every DeltaLiteError subclass survives `to_payload` -> JSON -> `from_payload` with its
class, message and attributes, and a payload naming anything else is refused without importing it."""

from __future__ import annotations

import builtins
import importlib
import inspect
import json
from typing import Any

import pytest

from airflow_provider_deltalite.engine import errors
from airflow_provider_deltalite.engine.errors import (
    ConcurrentAppend,
    DeltaLiteError,
    LogGap,
    ProtocolNotSupported,
    TableNotFound,
    VersionNotFound,
)

URI = "s3://bucket/events"

# The keyword arguments of the subclasses that take more than (problem, table_uri); the others take just those.
EXTRA: dict[str, dict[str, Any]] = {
    "VersionNotFound": {"earliest": 3, "latest": 9},
    "ProtocolNotSupported": {"features": ("deletionVectors", "minReaderVersion=4")},
    "ConcurrentModification": {"winning_version": 7, "winning_operation": "OPTIMIZE"},
    "LogGap": {"since": 3, "oldest_available": 10},
    "TableRecreated": {"since": 12, "latest": 2, "table_id": "5f0c"},
    "MissingDependency": {"package": "plotly", "extra": "html"},
    "InvalidPolicy": {"key": "min_input_files"},
    "CatalogTableNotFound": {"database": "sales", "table": "orders"},
}

ERROR_CLASSES = sorted(
    (cls for _, cls in inspect.getmembers(errors, inspect.isclass) if issubclass(cls, DeltaLiteError)),
    key=lambda cls: cls.__name__,
)


def _example(cls: type[DeltaLiteError]) -> DeltaLiteError:
    kwargs = next((EXTRA[base.__name__] for base in cls.__mro__ if base.__name__ in EXTRA), {})
    return cls("something went wrong", URI, **kwargs)


def _travel(payload: dict[str, Any]) -> dict[str, Any]:
    return json.loads(json.dumps(payload))  # what a Spark record or a trigger event carries


@pytest.mark.parametrize("cls", ERROR_CLASSES, ids=lambda cls: cls.__name__)
def test_every_error_class_round_trips_with_its_class_message_and_attributes(cls: type[DeltaLiteError]) -> None:
    original = _example(cls)
    rebuilt = DeltaLiteError.from_payload(_travel(original.to_payload()))
    assert type(rebuilt) is cls
    assert (str(rebuilt), rebuilt.args) == (str(original), original.args)
    assert vars(rebuilt) == vars(original)


def test_the_payload_names_the_class_and_keeps_the_attributes_as_json() -> None:
    assert ProtocolNotSupported("needs features", URI, features=("a", "b")).to_payload() == {
        "error": "airflow_provider_deltalite.engine.errors.ProtocolNotSupported",
        "message": f"table {URI}: needs features",
        "problem": "needs features",
        "table_uri": URI,
        "details": {"features": ["a", "b"]},
    }
    conflict = ConcurrentAppend("files were added", URI, winning_version=7)
    assert conflict.to_payload()["details"] == {"winning_version": 7, "winning_operation": None}
    # the problem already names the winning commit; rebuilding must not name it twice
    assert str(DeltaLiteError.from_payload(conflict.to_payload())) == str(conflict)


def test_attributes_that_are_not_json_values_are_left_out() -> None:
    error = TableNotFound("gone", URI)
    error.handle = object()  # type: ignore[attr-defined]
    error._private = 1  # type: ignore[attr-defined]
    assert error.to_payload()["details"] == {}


def test_the_table_uri_stays_redacted() -> None:
    error = TableNotFound("gone", "s3://key:secret@bucket/t?token=x")
    payload = error.to_payload()
    assert (payload["table_uri"], payload["message"]) == ("s3://bucket/t", "table s3://bucket/t: gone")
    assert "secret" not in json.dumps(payload)


def test_from_payload_on_a_subclass_accepts_only_its_own_subclasses() -> None:
    payload = VersionNotFound("version 5 does not exist", URI, latest=4).to_payload()
    assert type(VersionNotFound.from_payload(payload)) is VersionNotFound
    with pytest.raises(ValueError, match="is not a LogGap class"):
        LogGap.from_payload(payload)


def test_extra_keys_of_an_event_are_ignored() -> None:
    payload = {"status": "error", **LogGap("removed", URI, since=1, oldest_available=4).to_payload()}
    rebuilt = DeltaLiteError.from_payload(payload)
    assert (type(rebuilt), rebuilt.since, rebuilt.oldest_available) == (LogGap, 1, 4)  # type: ignore[attr-defined]


class _OutsideError(DeltaLiteError):
    """A DeltaLiteError subclass that is not defined in the package."""


@pytest.mark.parametrize(
    "path",
    [
        "builtins.OSError",  # not a DeltaLiteError
        "os.system",
        "airflow_provider_deltalite.engine.storage.TableNotFound",  # a name another module imports, not the class's
        "airflow_provider_deltalite.engine.errors.redact_uri",
        "airflow_provider_deltalite.engine.errors",
        f"{_OutsideError.__module__}.{_OutsideError.__qualname__}",  # ours by base class, defined elsewhere
        "some_module_nobody_has.DeltaLiteError",
        "",
    ],
)
def test_a_payload_naming_another_class_or_module_is_refused_without_importing_it(
    path: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    payload = {**TableNotFound("gone", URI).to_payload(), "error": path}

    def no_import(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError(f"imported {args[0]!r} while rebuilding an error")

    monkeypatch.setattr(importlib, "import_module", no_import)
    monkeypatch.setattr(builtins, "__import__", no_import)
    try:
        with pytest.raises(ValueError) as err:
            DeltaLiteError.from_payload(payload)
    finally:
        monkeypatch.undo()
    assert "is not a DeltaLiteError class of airflow_provider_deltalite" in str(err.value)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"problem": None}, "needs 'error' and 'problem' strings"),
        ({"table_uri": 3}, "needs 'error' and 'problem' strings"),
        ({"details": [1]}, "details of an error payload must be a mapping"),
        ({"details": {"problem": "other"}}, "'problem' is not an attribute"),
        ({"details": {"__class__": "x"}}, "'__class__' is not an attribute"),
        ({"details": {"since": {"nested": 1}}}, "holds dict, not a JSON value"),
    ],
)
def test_a_malformed_payload_is_refused(change: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        DeltaLiteError.from_payload({**LogGap("removed", URI, since=1, oldest_available=4).to_payload(), **change})
    with pytest.raises(ValueError, match="must be a mapping"):
        DeltaLiteError.from_payload(["not", "a", "mapping"])  # type: ignore[arg-type]


def test_extended_keeps_the_class_and_attributes() -> None:
    error = VersionNotFound("version 1 was removed", URI, earliest=5, latest=9).extended("pass a later version")
    assert type(error) is VersionNotFound
    assert (str(error), error.earliest, error.latest) == (
        f"table {URI}: version 1 was removed; pass a later version",
        5,
        9,
    )
