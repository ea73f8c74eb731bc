"""`python -m airflow_provider_deltalite` runs the `deltalite` CLI."""

from airflow_provider_deltalite.cli import console_main

raise SystemExit(console_main())
