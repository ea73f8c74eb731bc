"""`ZOrderOperator`: cluster a Delta table's files along a Z-order or Hilbert curve, as a PySpark job."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from airflow_provider_deltalite.engine.errors import InvalidArgument
from airflow_provider_deltalite.operators.spark_job import DeltaLiteSparkJobOperator, optional_text, whole_number

if TYPE_CHECKING:
    from airflow_provider_deltalite.table import DeltaTable


def column_names(value: Any, table_uri: str | None) -> list[str]:
    """Clustering columns from a list, a JSON list, or a comma-separated string (as rendered templates give)."""
    if isinstance(value, str):
        text = value.strip()
        if text.startswith("["):
            try:
                value = json.loads(text)
            except json.JSONDecodeError:
                # a Python list rendered by Jinja: ['a', 'b']
                value = [part.strip().strip("'\"") for part in text.strip("[]").split(",")]
        else:
            value = [part.strip() for part in text.split(",")]
    if not isinstance(value, list | tuple) or not value or not all(isinstance(c, str) and c.strip() for c in value):
        raise InvalidArgument(f"columns must be a non-empty list of column names, got {value!r}", table_uri)
    return [c.strip() for c in value]


def _quoted(name: str) -> str:
    # the job reads a comma-separated list; backquotes keep a name with a comma (or dot) whole
    return f"`{name}`" if "," in name or "." in name or "`" in name else name


class ZOrderOperator(DeltaLiteSparkJobOperator):
    """Cluster a Delta table along a Z-order or Hilbert curve over ``columns``; returns OptimizeStats (with
    ``zOrderStats``) as a dict. Partitions already clustered on the same columns and curve are skipped; when all are,
    no JVM starts and ``skippedReason`` says so. See `DeltaLiteSparkJobOperator` for the common arguments.

    Args:
        columns: the clustering columns (a list, or a comma-separated string) (templated).
        curve: ``zorder`` (default) or ``hilbert`` (templated).
        where: a predicate on partition columns choosing the partitions (templated).
        target_size: bytes per output file (default ``delta.targetFileSize``, else 1 GiB) (templated).

    Example:
        >>> ZOrderOperator(task_id="cluster", table_uri="/data/flows", columns=["src_ip", "dst_ip"],
        ...                curve="hilbert")  # doctest: +SKIP
    """

    command = "zorder"
    template_fields: Sequence[str] = (
        *DeltaLiteSparkJobOperator.template_fields,
        "columns",
        "curve",
        "where",
        "target_size",
    )

    def __init__(
        self,
        *,
        columns: Sequence[str] | str,
        curve: str = "zorder",
        where: str | None = None,
        target_size: int | str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.columns = columns
        self.curve = curve
        self.where = where
        self.target_size = target_size

    def _options(self, table_uri: str | None) -> dict[str, Any]:
        return {
            "curve": optional_text(self.curve) or "zorder",
            "where": optional_text(self.where),
            "target_size": whole_number("target_size", self.target_size, table_uri),
        }

    def job_arguments(self, table_uri: str) -> list[str]:
        columns = column_names(self.columns, table_uri)
        args = [f"--by={','.join(_quoted(c) for c in columns)}"]
        for key, value in self._options(table_uri).items():
            if value is not None:
                args.append(f"--{key.replace('_', '-')}={value}")
        return args

    def plan(self, table: DeltaTable) -> tuple[dict[str, Any], str | None] | None:
        columns = column_names(self.columns, table.uri)
        stats = table.zorder(columns, dry_run=True, **self._options(table.uri)).to_dict()
        if stats["numFilesRemoved"] == 0:
            return stats, "nothing to cluster: every partition is already clustered on these columns"
        return None
