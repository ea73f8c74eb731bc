"""deltalite: an Apache Airflow provider for Delta Lake table maintenance, with its own Delta format engine."""

from __future__ import annotations

__version__ = "0.1.0"

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
