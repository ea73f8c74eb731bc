"""Airflow operators of deltalite, each a SparkSubmitOperator running one maintenance job:
`operators.optimize.OptimizeOperator`, `operators.zorder.ZOrderOperator`, `operators.vacuum.VacuumOperator`,
`operators.maintenance.DeltaMaintenanceOperator` (plans in the worker, runs what the plan chose)."""
