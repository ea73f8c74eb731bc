"""deltalite: an Apache Airflow provider for Delta Lake table maintenance, with its own Delta format engine."""

from __future__ import annotations

__version__ = "0.1.0"


def get_provider_info() -> dict:
    """Provider metadata Airflow discovers through the `apache_airflow_provider` entry point."""
    return {
        "package-name": "airflow-provider-deltalite",
        "name": "Delta Lake maintenance (deltalite)",
        "description": "Delta Lake table maintenance for Airflow: OPTIMIZE, Z-order, VACUUM and new-data sensors, "
        "run as PySpark jobs that carry their own Delta format engine.",
        "versions": [__version__],
    }
