"""Airflow triggers of deltalite (`airflow_provider_deltalite.triggers.new_version.NewVersionTrigger`), and what the
trigger shares with `NewVersionSensor` (`triggers.new_data`: the poll, the typed new-data event, error events).

Nothing is imported here, so importing the package does not import Airflow.
"""
