"""`ZOrderOperator`: cluster a Delta table's files along a Z-order or Hilbert curve, as a PySpark job."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from airflow_provider_deltalite.maintenance.options import ZOrderOptions
from airflow_provider_deltalite.operators.base import DeltaLiteSparkJobOperator

if TYPE_CHECKING:
    from airflow_provider_deltalite.table import DeltaTable


class ZOrderOperator(DeltaLiteSparkJobOperator):
    """Cluster a Delta table along a Z-order or Hilbert curve over ``columns``; returns OptimizeStats (with
    ``zOrderStats``) as a dict. Partitions already clustered on the same columns and curve are skipped; when all are,
    no JVM starts and ``skippedReason`` says so. See `DeltaLiteSparkJobOperator` for the common arguments.

    Args:
        columns: the clustering columns (a list, or a comma-separated string) (templated).
        curve: ``zorder`` (default) or ``hilbert`` (templated).
        where: a predicate on partition columns choosing the partitions (templated).
        target_size: bytes per output file (default ``delta.targetFileSize``, else 1 GiB) (templated).
        max_bytes_to_rewrite: read at most this many input bytes; the partitions that do not fit wait for a later
            run and the stats count them (``numBinsDeferred``, ``bytesDeferred``) (templated).

    Example:
        >>> ZOrderOperator(task_id="cluster", table_uri="/data/flows", columns=["src_ip", "dst_ip"],
        ...                curve="hilbert")  # doctest: +SKIP
    """

    command = "zorder"
    options_class = ZOrderOptions
    template_fields: Sequence[str] = (
        *DeltaLiteSparkJobOperator.template_fields,
        "columns",
        "curve",
        "where",
        "target_size",
        "max_bytes_to_rewrite",
    )

    def __init__(
        self,
        *,
        columns: Sequence[str] | str,
        curve: str = "zorder",
        where: str | None = None,
        target_size: int | str | None = None,
        max_bytes_to_rewrite: int | str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.columns = columns
        self.curve = curve
        self.where = where
        self.target_size = target_size
        self.max_bytes_to_rewrite = max_bytes_to_rewrite

    def option_values(self) -> dict[str, Any]:
        return {
            "columns": self.columns,
            "curve": self.curve,
            "where": self.where,
            "target_size": self.target_size,
            "max_bytes_to_rewrite": self.max_bytes_to_rewrite,
        }

    def plan(self, table: DeltaTable, options: ZOrderOptions) -> tuple[dict[str, Any], str | None] | None:
        from airflow_provider_deltalite.maintenance.clustering.zorder import zorder

        stats = zorder(table, dataclasses.replace(options, dry_run=True)).to_dict()
        if stats["numFilesRemoved"] == 0:
            return stats, "nothing to cluster: every partition is already clustered on these columns"
        return None
