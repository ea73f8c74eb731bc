"""Airflow operators of deltalite, each a SparkSubmitOperator running one maintenance job:
`operators.optimize.OptimizeOperator`, `operators.zorder.ZOrderOperator`, `operators.vacuum.VacuumOperator`."""
