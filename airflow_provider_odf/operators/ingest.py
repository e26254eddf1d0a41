"""Ingest of a root dataset as Airflow tasks: Fetch → Prepare → Read → Merge → Commit, and push ingest.

Fetch begins the transaction with an id fixed by the DAG run, so a retry of any step finds the same staging area.
Only ``txn.to_ref()`` (a small JSON) travels through XCom; every later step re-opens the transaction from it.
When the source is up to date Fetch skips, and so does everything after it (no empty commit, no asset event).
"""
from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING, Any, Sequence

from airflow.sdk.exceptions import AirflowSkipException

from airflow_provider_odf.errors import OdfTaskError
from airflow_provider_odf.operators.base import DEFAULT_CONN, OdfBaseOperator, OdfCommittingOperator, txn_id

if TYPE_CHECKING:
    from airflow.providers.openlineage.extractors import OperatorLineage
    from airflow.sdk import Context

    from odf_core.metadata import Timestamp
    from odf_core.workspace import Workspace

UP_TO_DATE_KEY = "odf_up_to_date"
# How far a worker's clock may lag the metadata DB's: the bound of the search for an earlier try's block.
CLOCK_SKEW_MARGIN = timedelta(hours=1)


def _steps():
    from odf_core.ingest import transaction

    return transaction


class _IngestStepLineage:
    """Lineage of the steps before Commit: the polling source flows into the dataset (nothing committed yet)."""

    dataset: str
    lineage_namespace: str

    def odf_lineage(self, ws: "Workspace | None", failed: bool) -> "OperatorLineage":
        from airflow_provider_odf.lineage import openlineage as ol

        return ol.ingest_step(ws, self.lineage_namespace, self.dataset)


class OdfFetchOperator(_IngestStepLineage, OdfBaseOperator):
    """Begin the run's ingest transaction and fetch new source data into its staging area.

    :param source: name of the polling source (None: the dataset's only one).
    :param fetch_options: fields of ``odf_core.ingest.FetchOptions`` (e.g. ``{"timeout_s": 30, "glob_batch": True}``).
    """

    template_fields: Sequence[str] = ("dataset", "source", "fetch_options")

    def __init__(self, *, dataset: str, source: str | None = None, fetch_options: dict[str, Any] | None = None,
                 **kwargs: Any) -> None:
        super().__init__(dataset=dataset, **kwargs)
        self.source = source
        self.fetch_options = fetch_options

    def execute(self, context: "Context") -> dict[str, Any]:
        tx = _steps()
        tid = txn_id(context["dag"].dag_id, context["run_id"], self.dataset)
        from odf_core.ingest import FetchOptions

        ws = self.workspace()
        txn = tx.begin(ws, self.dataset, txn_id=tid, source=self.source)
        self.log.info("%s: transaction %s, staging in %s", self.dataset, txn.txn_id, txn.staging_dir)
        result = tx.fetch(ws, txn, FetchOptions(**(self.fetch_options or {})))
        if result.up_to_date:
            context["ti"].xcom_push(key=UP_TO_DATE_KEY, value=True)
            raise AirflowSkipException(f"{self.dataset}: the source is up to date, nothing to ingest")
        self.log.info("%s: fetched %d bytes in %d file(s)", self.dataset, result.bytes_fetched, len(result.files))
        return txn.to_ref()


class _ContinuesTransaction:
    """Mixin of the steps after Fetch: they find the transaction in the XCom of ``txn_from``."""

    dataset: str
    task_id: str
    txn_from: str | None

    def _fetch_task_id(self) -> str:
        if self.txn_from:
            return self.txn_from
        group = self.task_id.rpartition(".")[0]
        return f"{group}.fetch" if group else "fetch"

    def transaction(self, context: "Context") -> Any:
        ti, source = context["ti"], self._fetch_task_id()
        ref = ti.xcom_pull(task_ids=source)
        if ref is None:
            if ti.xcom_pull(task_ids=source, key=UP_TO_DATE_KEY):
                raise AirflowSkipException(f"{self.dataset}: the source was up to date, nothing to do")
            raise OdfTaskError(
                f"{self.dataset}: task '{source}' handed over no transaction (is txn_from right, did it run?)"
            )
        return _steps().IngestTransaction.from_ref(self.workspace(), ref)  # type: ignore[attr-defined]


class _TxnStep(_IngestStepLineage, _ContinuesTransaction, OdfBaseOperator):
    """A step that continues the transaction Fetch began.

    :param txn_from: task id whose XCom holds the transaction (default: ``fetch`` in this task's group).
    """

    def __init__(self, *, dataset: str, txn_from: str | None = None, **kwargs: Any) -> None:
        super().__init__(dataset=dataset, **kwargs)
        self.txn_from = txn_from


class OdfPrepareOperator(_TxnStep):
    """Prepare the fetched files (decompress, unpack) as the polling source says."""

    def execute(self, context: "Context") -> None:
        txn = self.transaction(context)
        files = _steps().prepare(self.workspace(), txn)
        self.log.info("%s: %d file(s) prepared", self.dataset, len(files))


class OdfReadOperator(_TxnStep):
    """Read the prepared files with Spark into the staged batch (schema, preprocess query)."""

    def execute(self, context: "Context") -> None:
        txn = self.transaction(context)
        result = _steps().read(self.workspace(), txn, self.engine())
        self.log.info("%s: %d record(s) read", self.dataset, result.num_records)


class OdfMergeOperator(_TxnStep):
    """Merge the staged batch with the dataset's history (merge strategy) into the new data slice.

    :param duplicates: Ledger sources, rows repeating the primary key of an earlier row of the same input: ``first``
        (default) keeps the first per key and reports how many were dropped; ``error`` fails the task (nothing is
        committed). See ``odf_core.ingest.IngestOptions``.
    """

    template_fields: Sequence[str] = ("dataset", "duplicates")

    def __init__(self, *, dataset: str, duplicates: str = "first", **kwargs: Any) -> None:
        super().__init__(dataset=dataset, **kwargs)
        self.duplicates = duplicates

    def execute(self, context: "Context") -> None:
        from odf_core.ingest import IngestOptions

        txn = self.transaction(context)
        result = _steps().merge(self.workspace(), txn, self.engine(), options=IngestOptions(self.duplicates))
        interval = result.offset_interval
        where = f"offsets {interval[0]}..{interval[1]}" if interval else "no new records"
        self.log.info("%s: %d record(s) after merge, %s%s", self.dataset, result.num_records, where,
                      result.duplicates_note())


class OdfCommitOperator(_ContinuesTransaction, OdfCommittingOperator):
    """Commit the transaction (data, checkpoint, source state) as one block and emit the dataset's Asset event.

    :param txn_from: task id whose XCom holds the transaction (default: ``fetch`` in this task's group).
    """

    def __init__(self, *, dataset: str, txn_from: str | None = None, **kwargs: Any) -> None:
        super().__init__(dataset=dataset, **kwargs)
        self.txn_from = txn_from
        self.duplicates_dropped: int | None = None  # set by execute: what lineage reports

    def execute(self, context: "Context") -> dict[str, Any]:
        txn = self.transaction(context)
        result = _steps().commit(self.workspace(), txn)
        return _report_commit(self, result, context)

    def odf_lineage(self, ws: "Workspace | None", failed: bool) -> "OperatorLineage":
        from airflow_provider_odf.lineage import openlineage as ol

        return ol.committed(ws, self.lineage_namespace, self.dataset, self.committed_block,
                            inputs=ol.source_input(ws, self.dataset), duplicates_dropped=self.duplicates_dropped)


class OdfPushIngestOperator(OdfCommittingOperator):
    """Ingest a file or folder through a push source (e.g. a DAG triggered with ``{"path": ...}``), exactly once.

    The push's idempotency key is fixed by (DAG, run, task, map index) and recorded in the committed block: a retry,
    or a clear, of a try that committed finds that block and ingests nothing, however the head moved since and on
    whichever worker it runs (``odf_core.ingest.push_keys``).  To push the same path again, trigger a new run.

    :param path: file, folder or URL to ingest (templated, e.g. ``{{ params.path }}``).
    :param source: push source name (None: the dataset's only one).
    :param duplicates: Ledger sources: ``first`` or ``error``, as :class:`OdfMergeOperator`'s.
    """

    template_fields: Sequence[str] = ("dataset", "path", "source", "duplicates")

    def __init__(self, *, dataset: str, path: str, source: str | None = None, odf_conn_id: str = DEFAULT_CONN,
                 duplicates: str = "first", **kwargs: Any) -> None:
        super().__init__(dataset=dataset, odf_conn_id=odf_conn_id, **kwargs)
        self.path = path
        self.source = source
        self.duplicates = duplicates
        self.duplicates_dropped: int | None = None  # set by execute: what lineage reports

    def execute(self, context: "Context") -> dict[str, Any]:
        if not self.path or not str(self.path).strip():
            raise OdfTaskError(f"{self.dataset}: no path to push (trigger the DAG with {{\"path\": ...}})")
        key = push_key(context, self.dataset)
        self.log.info("%s: pushing %s (source %s, transaction %s)", self.dataset, self.path,
                      self.source or "<default>", key)
        from odf_core.ingest import IngestOptions

        result = _steps().push(self.workspace(), self.dataset, str(self.path), source=self.source or None,
                               engine=self.engine(), txn_id=key,
                               not_before=first_try_bound(context), options=IngestOptions(self.duplicates))
        if result.already_ingested:
            self.log.info("%s: already ingested in block %s by an earlier try (transaction %s): nothing pushed",
                          self.dataset, result.block_hash, key)
        return _report_commit(self, result, context)

    def odf_lineage(self, ws: "Workspace | None", failed: bool) -> "OperatorLineage":
        from airflow_provider_odf.lineage import openlineage as ol

        return ol.committed(ws, self.lineage_namespace, self.dataset, self.committed_block,
                            inputs=ol.path_input(self.path), duplicates_dropped=self.duplicates_dropped)


def push_key(context: "Context", dataset: str) -> str:
    """The idempotency key of a push task instance: every try of it (and only of it) has the same key."""
    ti = context["ti"]
    map_index = getattr(ti, "map_index", None)
    more = [ti.task_id] + ([str(map_index)] if map_index is not None and map_index >= 0 else [])
    return txn_id(context["dag"].dag_id, context["run_id"], dataset, *more)


def first_try_bound(context: "Context") -> "Timestamp | None":
    """No try of this task started before its DAG run's ``run_after`` (the scheduler starts no run earlier and a
    clear keeps it), less :data:`CLOCK_SKEW_MARGIN` for the worker's clock; None when the run does not say."""
    run_after = getattr(context.get("dag_run"), "run_after", None)
    if run_after is None:
        return None
    from odf_core.metadata import Timestamp

    return Timestamp.from_datetime(run_after - CLOCK_SKEW_MARGIN)


def _report_commit(op: OdfCommittingOperator, result: Any, context: "Context") -> dict[str, Any]:
    if getattr(result, "block_hash", None) is None:
        raise AirflowSkipException(f"{op.dataset}: nothing new to commit, head stays {result.head}")
    # lineage: only when some were; the task log already has odf.ingest's WARNING with a key (no second line)
    op.duplicates_dropped = getattr(result, "duplicates_dropped", 0) or None
    return op.report_commit(context, result)
