"""Airflow hooks of deltalite (`airflow_provider_deltalite.hooks.deltalite.DeltaLiteHook`).

Nothing is imported here: `connection_form` must stay importable without Airflow, for `get_provider_info`.
"""
