"""`DeltaLiteSparkJobOperator`: the SparkSubmitOperator that runs one deltalite maintenance job.

What it adds to the Spark provider's operator, shared by `OptimizeOperator`, `ZOrderOperator` and `VacuumOperator`:

- the application is the job entry point (`airflow_provider_deltalite/jobs/driver.py`), and ``--py-files`` the
  engine zip built from the installed package, cached by content hash (`executors.engine_zip.build_package_zip`);
- the table URI and storage options come from a ``deltalite`` connection (`DeltaLiteHook`); credentials reach the
  driver only through the spark-submit process environment (local and client mode) or a file readable only by this
  user, shipped with ``--files`` and deleted afterwards (cluster mode): never through the command line;
- the templated arguments become the operation's options object (`maintenance.options`, ``from_text``: one error
  naming the argument and the table), which the job receives as one JSON document (``--options``);
- before a JVM starts, the operation is planned in this process (a dry run of the same maintenance function with the
  same options): bad arguments fail in a second with the engine's error, and when there is nothing worth doing the
  plan's stats are returned without starting Spark;
- the hook is built from the SparkSubmitOperator arguments the user passed (recorded here) and the rendered template
  fields, never from SparkSubmitOperator's private attributes, so a newer Spark provider's arguments pass through;
- the job writes its stats JSON to a result location (a private temp file when the driver runs here, ``result_uri``
  in cluster mode) which the operator reads, deletes and returns as a plain dict (XCom ``return_value``);
- a failed job fails the task with one line: the driver's ``deltalite: error: ...`` when it printed one;
- a ``spark_connect`` Spark connection (the Spark provider's type, `hooks.spark_connect`) runs the operation in this
  process instead (`jobs.connect_run`): no spark-submit and no JVM here, only the work items run on the server; the
  stats, the one-line failures and `on_kill` are the same, and the connection's token is masked.

Retries are safe: every run plans from the newest snapshot, so a retry after a committed OPTIMIZE finds nothing to
compact, and a retried VACUUM deletes what is still there.
"""

from __future__ import annotations

import inspect
import json
import os
import re
import shutil
import tempfile
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook
from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator
from airflow.providers.common.compat.sdk import mask_secret

from airflow_provider_deltalite.engine.errors import DeltaLiteError, InvalidArgument, StorageError, redact_uri
from airflow_provider_deltalite.engine.storage import delete_file, normalize_table_uri, read_bytes, uri_scheme
from airflow_provider_deltalite.executors.engine_zip import build_package_zip
from airflow_provider_deltalite.executors.spark_errors import first_line
from airflow_provider_deltalite.hooks.deltalite import DeltaLiteHook, InvalidConnection
from airflow_provider_deltalite.hooks.spark_connect import spark_connect_url
from airflow_provider_deltalite.hooks.spark_submit import (
    DEFAULT_SPARK_CONN_ID,
    ERROR_PREFIX,
    DeltaLiteSparkSubmitHook,
)
from airflow_provider_deltalite.jobs import driver
from airflow_provider_deltalite.jobs.connect_run import ConnectRun
from airflow_provider_deltalite.maintenance.option_values import optional_text, whole_number
from airflow_provider_deltalite.maintenance.options import MaintenanceOptions

if TYPE_CHECKING:
    from airflow.providers.common.compat.sdk import Context

    from airflow_provider_deltalite.table import DeltaTable

JOB_FILE = str(Path(driver.__file__).resolve())
STORAGE_OPTIONS_ENV = driver.STORAGE_OPTIONS_ENV
# Dry-run file lists are capped in XCom: it lives in the metadata database.
XCOM_FILE_LIST_LIMIT = 1000
_EXIT_CODE = re.compile(r"Error code is: (-?\d+)")
_UNSAFE = re.compile(r"[^A-Za-z0-9._=-]+")
# SparkSubmitHook's public constructor arguments: the SparkSubmitOperator arguments that reach the hook.
HOOK_ARGUMENTS = frozenset(inspect.signature(SparkSubmitHook.__init__).parameters) - {"self"}
# ...except those the operator decides itself.
_OPERATOR_ARGUMENTS = frozenset({"conn_id", "application_args"})
# The SparkSubmitOperator arguments that mean something on a Spark Connect session (its runtime settings).
_CONNECT_ARGUMENTS = frozenset({"conf"})


class DeltaLiteJobFailed(DeltaLiteError):
    """The Spark job of a deltalite operator failed: ``table ...: <command> job failed: <problem>``, where the problem
    is the driver's one-line error when it printed one, otherwise spark-submit's exit code and last line of output."""


def threshold(name: str, value: Any, table_uri: str | None) -> int | None:
    """An operator-only threshold (a rendered whole number, at least 0; the engine does not know it), or None."""
    try:
        number = whole_number(name, value)
    except InvalidArgument as exc:
        raise InvalidArgument(exc.problem, table_uri) from None
    if number is not None and number < 0:
        raise InvalidArgument(f"{name} must be at least 0, got {number!r}", table_uri)
    return number


def result_name(context: Mapping[str, Any]) -> str:
    """A result file name unique to the task instance and stable across its tries (a resumed job finds it)."""
    ti = context.get("ti")
    parts = [
        getattr(ti, "dag_id", None) or "dag",
        getattr(ti, "run_id", None) or "run",
        getattr(ti, "task_id", None) or "task",
    ]
    map_index = getattr(ti, "map_index", -1)
    if isinstance(map_index, int) and map_index >= 0:
        parts.append(str(map_index))
    return "/".join(_UNSAFE.sub("_", str(p)) for p in parts) + ".json"


class DeltaLiteSparkJobOperator(SparkSubmitOperator):
    """Base of the deltalite operators: runs ``driver.py <command>`` on a table with spark-submit.

    Args:
        table_uri: the table: an absolute path or URI, a Glue name (``glue://database/table``, resolved here to its
            location), or a path or name relative to the connection's base URI (templated).
        deltalite_conn_id: the ``deltalite`` connection with the base URI and storage credentials; None (default)
            uses the table URI as given with the environment's credentials (templated).
        spark_conn_id: the Spark connection (default ``spark_default``: ``local[*]`` when it is not defined). A
            connection of the Spark provider's ``spark_connect`` type runs the operation from this process through
            Spark Connect (no spark-submit, no JVM here); ``conf`` then holds runtime settings of the session, and
            the other spark-submit arguments do not apply.
        result_uri: where the job writes its stats in cluster deploy mode, a location the driver and this worker
            both reach (``s3://bucket/deltalite-results``); the file is read and deleted. Unset in local and client
            mode: a private temp file is used (templated).
        preflight: plan in this process before starting Spark (default True): bad arguments fail at once, and
            "nothing to do" is decided without a JVM. Turn off only for tables whose snapshot is too big for the
            worker (a skip threshold still plans in process: it asks for exactly that).
        pyspark_python: the Python that executors run (``PYSPARK_PYTHON`` and ``spark.pyspark.python``), e.g.
            ``./environment/bin/python`` with a packed virtualenv in ``archives``; default: this interpreter for a
            local or standalone master, the cluster's default otherwise.
        engine_zip_dir: where the engine zip is cached (default: a private directory under the temp dir).
        history_uri: the operations history Delta table each operation appends a row to (default: the connection's
            ``history_uri`` field, else none); a location that cannot hold it fails the task before Spark
            (templated).
        **kwargs: SparkSubmitOperator's arguments (``conf``, ``executor_memory``, ``archives``, ``deploy_mode``...)
            and BaseOperator's. ``application``, ``application_args`` and ``conn_id`` are set by the operator.
    """

    command: ClassVar[str] = ""
    options_class: ClassVar[type[MaintenanceOptions]] = MaintenanceOptions
    # the operator-only argument that lets `plan` skip the job (a whole number, at least 0), if the operator has one
    threshold_field: ClassVar[str | None] = None
    template_fields: Sequence[str] = (
        *SparkSubmitOperator.template_fields,
        "table_uri",
        "deltalite_conn_id",
        "spark_conn_id",
        "result_uri",
        "history_uri",
    )
    ui_color = "#00add4"

    def __init__(
        self,
        *,
        table_uri: str | None = None,
        deltalite_conn_id: str | None = None,
        spark_conn_id: str = DEFAULT_SPARK_CONN_ID,
        result_uri: str | None = None,
        preflight: bool = True,
        pyspark_python: str | None = None,
        engine_zip_dir: str | None = None,
        name: str | None = None,
        history_uri: str | None = None,
        **kwargs: Any,
    ) -> None:
        for reserved in ("application", "application_args", "conn_id"):
            if reserved in kwargs:
                hint = " (use spark_conn_id)" if reserved == "conn_id" else ""
                raise TypeError(f"{type(self).__name__} sets {reserved} itself{hint}")
        # The hook's arguments as the user gave them, with default_args filled in as Airflow fills them in for
        # SparkSubmitOperator's own signature; the templated ones are read from the rendered fields instead.
        default_args = kwargs.get("default_args") or {}
        self.spark_submit_arguments: dict[str, Any] = {
            key: kwargs[key] if key in kwargs else default_args[key]
            for key in HOOK_ARGUMENTS - _OPERATOR_ARGUMENTS
            if key in kwargs or key in default_args
        }
        super().__init__(
            application=JOB_FILE, conn_id=spark_conn_id, name=name or f"deltalite-{self.command}", **kwargs
        )
        self.table_uri = table_uri
        self.deltalite_conn_id = deltalite_conn_id
        self.spark_conn_id = spark_conn_id
        self.result_uri = result_uri
        self.preflight = preflight
        self.pyspark_python = pyspark_python
        self.engine_zip_dir = engine_zip_dir
        self.history_uri = history_uri
        self._history_uri: str | None = None  # the argument, else the connection's ``history_uri`` field
        self.resolved_table_uri: str | None = None
        self.stats: dict[str, Any] | None = None
        self._storage_options: dict[str, Any] = {}
        self._options: MaintenanceOptions | None = None
        self._threshold: int | None = None  # `threshold_field`'s value, converted when the task resolves
        self._spark_conn_id = DEFAULT_SPARK_CONN_ID
        self._submit_hook: DeltaLiteSparkSubmitHook | None = None
        self._connect_url: str | None = None
        self._connect_run: ConnectRun | None = None
        self._scratch: str | None = None
        self._result: str | None = None
        self._context: Mapping[str, Any] = {}

    # -- what subclasses provide --------------------------------------------------------------------------------

    def option_values(self) -> dict[str, Any]:
        """The (rendered) operator arguments that are options of the operation, by option name."""
        raise NotImplementedError

    def plan(self, table: DeltaTable, options: Any) -> tuple[dict[str, Any], str | None] | None:
        """Plan in process with the job's ``options``: ``(stats, reason)`` to return without starting Spark
        (``reason`` None when the plan itself is the answer, e.g. a dry run), or None to run the job."""
        return None

    def completed(self, result: dict[str, Any]) -> dict[str, Any]:
        """The task's result (XCom ``return_value``) from the job's or the plan's stats with ``skippedReason``, after
        the job ended or was skipped: a subclass may reshape or add to it (the default returns it as it is)."""
        return result

    def has_threshold(self) -> bool:
        """True when a skip threshold is set: `plan` then runs even with ``preflight=False``."""
        return self.threshold_field is not None and optional_text(getattr(self, self.threshold_field)) is not None

    def options(self, table_uri: str | None) -> MaintenanceOptions:
        """The operation's options object from the rendered arguments; raises InvalidArgument naming the table."""
        try:
            values = self.option_values()
        except InvalidArgument as exc:
            raise InvalidArgument(exc.problem, table_uri) from None
        if self._history_uri and "history_uri" in self.options_class.field_names():
            values = {**values, "history_uri": self._history_uri}
        return self.options_class.from_text(values, table_uri)

    # -- execution ----------------------------------------------------------------------------------------------

    # SparkSubmitOperator.execute returns None; ours returns the stats, which Airflow pushes as the XCom return_value.
    def execute(self, context: Context) -> dict[str, Any]:  # type: ignore[override]
        """Plan, then (if there is work) submit the job, and return its stats as a plain dict."""
        uri = self.resolve(context)
        if self.preflight or self.has_threshold():
            from airflow_provider_deltalite.table import DeltaTable

            decided = self.plan(DeltaTable(uri, storage_options=self._storage_options), self._options)
            if decided is not None:
                return self._finish(*decided)
        if self._connect_url is not None:
            return self._finish(self._run_over_connect(uri, self._connect_url), None)
        try:
            try:
                super().execute(context)
            except DeltaLiteError:
                raise
            except Exception as exc:
                raise self._failure(exc) from None
            stats = self._read_result()
        finally:
            self._cleanup()
        return self._finish(stats, None)

    def resolve(self, context: Context) -> str:
        """Read the connection and the rendered arguments (no Spark yet); returns the table's location (a catalog
        name resolved through its catalog).

        Raises:
            InvalidConnection: the deltalite connection is missing or malformed.
            InvalidArgument: an argument does not convert to its type.
            CatalogTableNotFound, NotADeltaTable, CatalogError: a catalog name cannot be resolved.
        """
        self._context = context
        # every execution resolves the Spark connection afresh: SparkSubmitOperator builds its hook only when it has
        # none, and a hook kept from an earlier run would carry that run's result path, options and credentials file
        self._hook = None
        self._submit_hook = None
        self._spark_conn_id = optional_text(self.spark_conn_id) or DEFAULT_SPARK_CONN_ID
        self._connect_url = spark_connect_url(self._spark_conn_id)
        hook = DeltaLiteHook(optional_text(self.deltalite_conn_id))
        # a catalog name (glue://db/table) is resolved here, in the worker: the Spark job gets the location
        uri, self._storage_options = hook.resolve_table(optional_text(self.table_uri))
        self.resolved_table_uri = uri
        self._history_uri = optional_text(self.history_uri) or hook.history_uri()
        if self._history_uri:
            # a history location that cannot hold the history fails the task here, before Spark and any write
            from airflow_provider_deltalite.maintenance.history import check_history_table
            from airflow_provider_deltalite.maintenance.history.record import same_store_options

            check_history_table(self._history_uri, same_store_options(uri, self._storage_options, self._history_uri))
        self._options = self.options(uri)
        field = self.threshold_field
        self._threshold = None if field is None else threshold(field, getattr(self, field), uri)
        return uri

    def hook_arguments(self) -> dict[str, Any]:
        """SparkSubmitHook's arguments: those the user passed, the rendered template fields, and the Spark
        connection; the operator adds the engine zip, the application arguments and the credentials route."""
        arguments = dict(self.spark_submit_arguments)
        for field in SparkSubmitOperator.template_fields:
            if field in HOOK_ARGUMENTS and field not in _OPERATOR_ARGUMENTS:
                arguments[field] = getattr(self, field)  # rendered (conf also carries the OpenLineage injection)
        arguments["conn_id"] = self._spark_conn_id
        return arguments

    def _get_hook(self) -> DeltaLiteSparkSubmitHook:
        """The hook SparkSubmitOperator runs: built from `hook_arguments`, plus the engine zip, the job arguments and
        the credentials route. SparkSubmitOperator makes its hook here and nowhere else; this override reads none of
        its attributes, so what it passes to its own hook cannot go missing here."""
        zip_path = build_package_zip(self.engine_zip_dir)
        arguments = self.hook_arguments()
        arguments["py_files"] = ",".join(p for p in (zip_path, arguments.get("py_files")) if p)
        hook = DeltaLiteSparkSubmitHook(**arguments, pyspark_python=optional_text(self.pyspark_python))
        self._submit_hook = hook
        uri = self.resolved_table_uri
        self._scratch = tempfile.mkdtemp(prefix="deltalite-job-")  # 0700: results and credentials of this run
        result_base = optional_text(self.result_uri)
        if result_base is None and not hook.driver_runs_here:
            raise InvalidArgument(
                "cluster deploy mode needs result_uri, a location both the driver and the Airflow worker reach "
                "(e.g. s3://bucket/deltalite-results)",
                uri,
            )
        self._result = (
            f"{result_base.rstrip('/')}/{result_name(self._context)}"
            if result_base
            else os.path.join(self._scratch, "result.json")
        )
        assert self._options is not None  # resolve() ran
        args = [self.command, "--table", uri or "", "--result", self._result, "--options", self._options.to_json()]
        files = arguments.get("files")
        process_env: dict[str, str] = {}
        if self._storage_options:
            text = json.dumps(self._storage_options)
            mask_secret(text)
            if hook.driver_runs_here:
                process_env[STORAGE_OPTIONS_ENV] = text
            else:
                # The driver runs elsewhere: ship a file only this user can read (YARN localises it next to the
                # driver); it is deleted when the job ends.
                name = f"deltalite-storage-options-{uuid.uuid4().hex}.json"
                path = os.path.join(self._scratch, name)
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
                with os.fdopen(fd, "w", encoding="utf-8") as handle:
                    handle.write(text)
                files = ",".join(p for p in (files, path) if p)
                args += ["--storage-options-file", name]
        hook.set_job(args, files, process_env)
        return hook

    def _run_over_connect(self, uri: str, url: str) -> dict[str, Any]:
        """Run the operation here with its work items on the Spark Connect server; its stats. Any failure is one
        `DeltaLiteJobFailed` line, as a failed spark-submit job's."""
        ignored = sorted(self.spark_submit_arguments.keys() - _CONNECT_ARGUMENTS)
        if ignored:
            self.log.warning("spark-submit arguments ignored on Spark Connect: %s", ", ".join(ignored))
        from airflow_provider_deltalite.table import DeltaTable

        assert self._options is not None  # resolve() ran
        run = self._connect_run = ConnectRun(url, getattr(self, "name", None) or f"deltalite-{self.command}", self.conf)
        try:
            return run.run(self.command, DeltaTable(uri, storage_options=self._storage_options), self._options)
        except DeltaLiteError as exc:
            # the table is named once, by this error: the problem of an error about the table, the whole message
            # of one about something else (the server)
            line = exc.problem if exc.table_uri == redact_uri(normalize_table_uri(uri)) else str(exc)
            raise DeltaLiteJobFailed(f"{self.command} job failed: {line}", uri) from None
        except Exception as exc:
            raise DeltaLiteJobFailed(f"{self.command} job failed: {first_line(exc)}", uri) from None
        finally:
            self._connect_run = None

    def on_kill(self) -> None:
        """Stop the Spark application (the whole spark-submit process group, and the driver on a cluster; on
        Spark Connect: interrupt the run's queries and stop its session), then delete this run's credentials and
        result files."""
        try:
            run = self._connect_run
            if run is not None:
                run.kill()
            elif self._submit_hook is not None:
                super().on_kill()
        finally:
            self._cleanup()

    # -- results and failures -----------------------------------------------------------------------------------

    def _result_options(self, uri: str) -> dict[str, Any]:
        """The table's storage options when the result is on the table's store (its credentials), else none."""
        same_store = uri_scheme(uri) == uri_scheme(self.resolved_table_uri or "")
        return dict(self._storage_options) if same_store else {}

    def _read_result(self) -> dict[str, Any]:
        uri = self._result
        assert uri is not None
        options = self._result_options(uri)
        try:
            text = read_bytes(uri, options).decode("utf-8")
        except FileNotFoundError:
            raise DeltaLiteJobFailed(
                f"the {self.command} job ended without writing its result to {uri}", self.resolved_table_uri
            ) from None
        try:
            delete_file(uri, options)
        except (OSError, StorageError) as exc:
            self.log.warning("could not delete the job result %s: %s", uri, exc)
        stats = json.loads(text)
        if not isinstance(stats, dict):
            raise DeltaLiteJobFailed(f"the {self.command} job wrote a result that is not a JSON object", None)
        return stats

    def _failure(self, exc: BaseException) -> DeltaLiteError:
        hook = self._submit_hook
        if hook is not None and hook.error_lines:
            line = hook.error_lines[-1][len(ERROR_PREFIX) :]
            # The driver names the table as this operator does: keep one "table ...:" prefix, ours.
            uri = self.resolved_table_uri
            prefix = f"table {redact_uri(normalize_table_uri(uri))}: " if uri else None
            if prefix and line.startswith(prefix):
                line = line[len(prefix) :]
            return DeltaLiteJobFailed(f"{self.command} job failed: {line}", self.resolved_table_uri)
        message = str(exc)
        code = _EXIT_CODE.search(message)
        if code is not None:
            last = hook.output_tail[-1] if hook is not None and hook.output_tail else "no output"
            return DeltaLiteJobFailed(
                f"{self.command} job failed: spark-submit exited with code {code.group(1)}; last output: {last}",
                self.resolved_table_uri,
            )
        first = message.strip().splitlines()[0] if message.strip() else type(exc).__name__
        return DeltaLiteJobFailed(f"{self.command} job failed: {first}", self.resolved_table_uri)

    def _cleanup(self) -> None:
        scratch, self._scratch = self._scratch, None
        if scratch:
            shutil.rmtree(scratch, ignore_errors=True)

    def _finish(self, stats: Mapping[str, Any], reason: str | None) -> dict[str, Any]:
        out = {k: v for k, v in stats.items() if k != "plan"}
        for key in ("filesToDelete", "dirsToDelete"):
            listed = out.get(key)
            if isinstance(listed, list) and len(listed) > XCOM_FILE_LIST_LIMIT:
                out[key] = listed[:XCOM_FILE_LIST_LIMIT]
                out[f"{key}Truncated"] = True
        out["skippedReason"] = reason
        out = self.completed(out)
        self.stats = out
        if reason is not None:
            self.log.info("deltalite %s skipped without starting Spark: %s", self.command, reason)
        return out

    # -- OpenLineage --------------------------------------------------------------------------------------------

    def get_openlineage_facets_on_complete(self, task_instance: Any) -> Any:
        """The table as input and output dataset and a ``deltalite`` run facet with the stats (None without the
        OpenLineage provider)."""
        from airflow_provider_deltalite.operators.lineage import operator_lineage

        uri = self.resolved_table_uri or optional_text(self.table_uri)
        if uri is None:
            return None
        return operator_lineage(uri, self.command.upper(), self.stats)


__all__ = [
    "DeltaLiteJobFailed",
    "DeltaLiteSparkJobOperator",
    "InvalidConnection",
    "threshold",
]
