"""Moving a dataset to or from a repository from Airflow: the ``odf push`` / ``odf pull URL`` of a task.

Thin: the transfer is :mod:`odf_core.repository` (missing objects only, each checked against its hash, the head moved
last by compare-and-swap). An ``s3://`` remote uses the credentials of the ``odf`` connection's ``aws_conn_id``
(else the worker's ``AWS_*`` variables), like an S3 workspace does.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal, Sequence

from airflow_provider_odf.errors import OdfTaskError
from airflow_provider_odf.operators.base import OdfBaseOperator

if TYPE_CHECKING:
    from airflow.providers.openlineage.extractors import OperatorLineage
    from airflow.sdk import Context
    from odf_core.workspace import Workspace

Direction = Literal["push", "pull"]


class OdfRepositorySyncOperator(OdfBaseOperator):
    """Push ``dataset`` to ``remote`` (or pull it from there).

    :param direction: ``push`` (workspace -> remote) or ``pull`` (remote -> workspace, as ``dataset``).
    :param remote: a URL (``file://``, ``s3://``, ``http(s)://`` for pulls), ``REPO/NAME`` of a repository registered
        with ``odf repo add``, or ``REPO`` alone (then ``REPO/<dataset>``). None: the dataset's remembered remote.
    :param force: replace a destination head that is not an ancestor of the source's (divergence).
    """

    template_fields: Sequence[str] = ("dataset", "remote")
    ui_color = "#e0f2fe"

    def __init__(self, *, dataset: str, direction: Direction = "push", remote: str | None = None,
                 force: bool = False, **kwargs: Any) -> None:
        if direction not in ("push", "pull"):
            raise ValueError(f"OdfRepositorySyncOperator direction must be 'push' or 'pull', got {direction!r}")
        super().__init__(dataset=dataset, **kwargs)
        self.direction = direction
        self.remote = remote
        self.force = force

    def _target(self) -> str | None:
        if self.remote is None or "://" in self.remote or "/" in self.remote:
            return self.remote
        return f"{self.remote}/{self.dataset}"  # a registered repository's name

    def execute(self, context: "Context") -> dict[str, Any]:
        from odf_core.errors import OdfError
        from odf_core.repository import pull_remote, push
        from odf_core.repository.registry import tracked_remote
        from odf_core.repository.sync import describe

        ws = self.workspace()
        options = self.hook.s3_options()
        try:
            if self.direction == "push":
                result = push(ws, self.dataset, self._target(), force=self.force, storage_options=options)
            else:
                source = self._target() or tracked_remote(ws, self.dataset)
                if source is None:
                    raise OdfError(f"dataset '{self.dataset}' has no remote to pull from: set remote")
                _, result = pull_remote(ws, source, self.dataset, force=self.force, storage_options=options)
        except OdfError as e:
            raise OdfTaskError(f"{self.direction} {self.dataset}: {e}") from None
        self.log.info("%s %s: %s -> %s: %s", self.direction, self.dataset, result.src, result.dst, describe(result))
        return {"dataset": self.dataset, "direction": self.direction, "src": result.src, "dst": result.dst,
                "old_head": result.old_head, "head": result.new_head, "blocks": result.new_blocks,
                "objects": result.copied, "bytes": result.nbytes}

    def odf_lineage(self, ws: "Workspace | None", failed: bool) -> "OperatorLineage":
        from airflow.providers.openlineage.extractors import OperatorLineage

        return OperatorLineage()
