"""Airflow triggers of deltalite (`airflow_provider_deltalite.triggers.new_version.NewVersionTrigger`).

Nothing is imported here, so importing the package does not import Airflow.
"""
