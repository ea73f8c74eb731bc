"""deltalite: an Apache Airflow provider for Delta Lake table maintenance, with its own Delta format engine.

The public Python API is re-exported here: `DeltaTable`, the options objects (and `WriterOptions`, how rewritten files
are encoded), the stats types and `ChangeSet`, and `DeltaLiteError`. They load on first use, because Airflow imports
this package (for `get_provider_info`) while it configures itself and must not pay for pyarrow then.

Example:
    >>> from airflow_provider_deltalite import DeltaTable
    >>> DeltaTable("/data/events").optimize(dry_run=True).num_bins  # doctest: +SKIP
    3
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from airflow_provider_deltalite.version import __version__

if TYPE_CHECKING:
    from airflow_provider_deltalite.engine.data_file_writer import WriterOptions
    from airflow_provider_deltalite.engine.errors import DeltaLiteError
    from airflow_provider_deltalite.maintenance.changes import ChangeSet
    from airflow_provider_deltalite.maintenance.checkpoint import CheckpointResult
    from airflow_provider_deltalite.maintenance.optimize_stats import OptimizeStats
    from airflow_provider_deltalite.maintenance.options import (
        ChangesOptions,
        OptimizeOptions,
        VacuumOptions,
        ZOrderOptions,
    )
    from airflow_provider_deltalite.maintenance.vacuum.stats import VacuumStats
    from airflow_provider_deltalite.table import DeltaTable

_EXPORTS = {
    "DeltaTable": "airflow_provider_deltalite.table",
    "OptimizeOptions": "airflow_provider_deltalite.maintenance.options",
    "ZOrderOptions": "airflow_provider_deltalite.maintenance.options",
    "VacuumOptions": "airflow_provider_deltalite.maintenance.options",
    "ChangesOptions": "airflow_provider_deltalite.maintenance.options",
    "OptimizeStats": "airflow_provider_deltalite.maintenance.optimize_stats",
    "VacuumStats": "airflow_provider_deltalite.maintenance.vacuum.stats",
    "ChangeSet": "airflow_provider_deltalite.maintenance.changes",
    "CheckpointResult": "airflow_provider_deltalite.maintenance.checkpoint",
    "DeltaLiteError": "airflow_provider_deltalite.engine.errors",
    "WriterOptions": "airflow_provider_deltalite.engine.data_file_writer",
}

__all__ = [
    "ChangeSet",
    "ChangesOptions",
    "CheckpointResult",
    "DeltaLiteError",
    "DeltaTable",
    "OptimizeOptions",
    "OptimizeStats",
    "VacuumOptions",
    "VacuumStats",
    "WriterOptions",
    "ZOrderOptions",
    "__version__",
    "get_provider_info",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_EXPORTS})


PACKAGE_NAME = "airflow-provider-deltalite"
INTEGRATION = "Delta Lake (deltalite)"


def get_provider_info() -> dict:
    """Provider metadata Airflow discovers through the `apache_airflow_provider` entry point.

    Airflow reads this while it configures itself, so it imports nothing from Airflow (the connection form comes
    from `hooks.connection_form`, which does not either).
    """
    from airflow_provider_deltalite.hooks.connection_form import CONN_FIELDS, UI_FIELD_BEHAVIOUR

    return {
        "package-name": PACKAGE_NAME,
        "name": INTEGRATION,
        "description": "Delta Lake table maintenance for Airflow: OPTIMIZE, Z-order, VACUUM and new-data sensors, "
        "run as PySpark jobs that carry their own Delta format engine.",
        "versions": [__version__],
        "integrations": [
            {
                "integration-name": INTEGRATION,
                "external-doc-url": "https://delta.io/",
                "tags": ["software"],
            }
        ],
        "hooks": [
            {
                "integration-name": INTEGRATION,
                "python-modules": [
                    "airflow_provider_deltalite.hooks.deltalite",
                    "airflow_provider_deltalite.hooks.spark_submit",
                ],
            }
        ],
        "operators": [
            {
                "integration-name": INTEGRATION,
                "python-modules": [
                    "airflow_provider_deltalite.operators.optimize",
                    "airflow_provider_deltalite.operators.zorder",
                    "airflow_provider_deltalite.operators.vacuum",
                    "airflow_provider_deltalite.operators.maintenance",
                ],
            }
        ],
        "sensors": [
            {
                "integration-name": INTEGRATION,
                "python-modules": ["airflow_provider_deltalite.sensors.new_version"],
            }
        ],
        "triggers": [
            {
                "integration-name": INTEGRATION,
                "python-modules": ["airflow_provider_deltalite.triggers.new_version"],
            }
        ],
        "connection-types": [
            {
                "connection-type": "deltalite",
                "hook-class-name": "airflow_provider_deltalite.hooks.deltalite.DeltaLiteHook",
                "hook-name": "Delta Lake (deltalite)",
                "ui-field-behaviour": UI_FIELD_BEHAVIOUR,
                "conn-fields": CONN_FIELDS,
            }
        ],
    }
