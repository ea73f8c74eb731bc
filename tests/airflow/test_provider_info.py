"""Provider registration: the metadata is consistent and a fresh Airflow home lists the provider, hook and classes."""

from __future__ import annotations

import importlib
import inspect
import json
import subprocess
import sys
from importlib.metadata import metadata
from pathlib import Path

from packaging.utils import canonicalize_name

from airflow_provider_deltalite import __version__, get_provider_info

AIRFLOW = Path(sys.executable).with_name("airflow")
PACKAGE = "airflow-provider-deltalite"


def _modules(info: dict, key: str) -> list[str]:
    return [m for entry in info[key] for m in entry["python-modules"]]


def _classes(module_name: str) -> list[str]:
    module = importlib.import_module(module_name)
    return sorted(name for name, obj in vars(module).items() if inspect.isclass(obj) and obj.__module__ == module_name)


def test_package_name_is_the_canonical_distribution_name() -> None:
    info = get_provider_info()
    assert info["package-name"] == canonicalize_name(metadata("airflow-provider-deltalite")["Name"])
    assert info["versions"] == [__version__]


def test_every_registered_module_imports_and_holds_the_public_classes() -> None:
    info = get_provider_info()
    assert {m: _classes(m) for m in _modules(info, "hooks")} == {
        "airflow_provider_deltalite.hooks.deltalite": ["DeltaLiteHook", "InvalidConnection"],
        "airflow_provider_deltalite.hooks.spark_submit": ["DeltaLiteSparkSubmitHook"],
    }
    assert {m: _classes(m) for m in _modules(info, "operators")} == {
        "airflow_provider_deltalite.operators.optimize": ["OptimizeOperator"],
        "airflow_provider_deltalite.operators.zorder": ["ZOrderOperator"],
        "airflow_provider_deltalite.operators.vacuum": ["VacuumOperator"],
        "airflow_provider_deltalite.operators.maintenance": ["DeltaMaintenanceOperator"],
    }
    assert _modules(info, "sensors") == ["airflow_provider_deltalite.sensors.new_version"]
    assert "NewVersionSensor" in _classes("airflow_provider_deltalite.sensors.new_version")
    assert _modules(info, "triggers") == ["airflow_provider_deltalite.triggers.new_version"]
    assert "NewVersionTrigger" in _classes("airflow_provider_deltalite.triggers.new_version")


def test_connection_type_matches_the_hook() -> None:
    from airflow_provider_deltalite.hooks.deltalite import DeltaLiteHook

    [conn] = get_provider_info()["connection-types"]
    module, _, name = conn["hook-class-name"].rpartition(".")
    assert getattr(importlib.import_module(module), name) is DeltaLiteHook
    assert (conn["connection-type"], conn["hook-name"]) == (DeltaLiteHook.conn_type, DeltaLiteHook.hook_name)
    assert inspect.signature(DeltaLiteHook).parameters[DeltaLiteHook.conn_name_attr].default == "deltalite_default"


def _airflow(home: Path, *args: str) -> list | dict:
    from airflow_provider_deltalite.demo import airflow_env

    out = subprocess.run(
        [str(AIRFLOW), *args, "-o", "json"],
        env=airflow_env(home, home / "dags"),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout)


def test_a_fresh_airflow_home_lists_the_provider_its_hook_and_classes(tmp_path: Path) -> None:
    listed = _airflow(tmp_path, "providers", "list")
    assert [p for p in listed if p["package_name"] == "airflow-provider-deltalite"] == [
        {
            "package_name": "airflow-provider-deltalite",
            "description": get_provider_info()["description"].rstrip("."),
            "version": __version__,
        }
    ]
    [full] = _airflow(tmp_path, "providers", "get", "airflow-provider-deltalite", "--full")
    expected = get_provider_info()
    expected["description"] = expected["description"].rstrip(".")  # Airflow trims the trailing period
    # and copies the distribution's "Documentation" project URL in
    expected["documentation-url"] = "https://github.com/deltalite/airflow-provider-deltalite#readme"
    assert full == expected
    widgets = [w for w in _airflow(tmp_path, "providers", "widgets") if w["package_name"] == PACKAGE]
    assert sorted(w["connection_parameter_name"] for w in widgets) == sorted(
        f"extra__deltalite__{name}" for name in expected["connection-types"][0]["conn-fields"]
    )
    hooks = [h for h in _airflow(tmp_path, "providers", "hooks") if h["connection_type"] == "deltalite"]
    assert hooks == [
        {
            "connection_type": "deltalite",
            "class": "airflow_provider_deltalite.hooks.deltalite.DeltaLiteHook",
            "conn_id_attribute_name": "deltalite_conn_id",
            "package_name": "airflow-provider-deltalite",
            "hook_name": "Delta Lake (deltalite)",
        }
    ]
