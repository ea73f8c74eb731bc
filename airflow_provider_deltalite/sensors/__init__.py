"""Airflow sensors of deltalite (`airflow_provider_deltalite.sensors.new_version.NewVersionSensor`).

Nothing is imported here, so importing the package does not import Airflow.
"""
