"""Which engine may run a derivative: the recorded and the running engine must compute the same
(docs/upgrading.md); otherwise the operator records the upgrade in the chain."""
from __future__ import annotations

import logging

from odf_core.engine.version import describe as describe_engine
from odf_core.engine.version import same_semantics
from odf_core.metadata import (
    TransformSql,
)
from odf_core.workspace import Workspace

from odf_core.transform.errors import EngineUpgradeNeeded

log = logging.getLogger("odf.transform")


def upgrade_command(ws: Workspace, dataset: str) -> str:
    """The exact command that records the running engine for ``dataset`` (named in errors, run by operators)."""
    return f"odf --workspace {ws.url} set-transform --upgrade-engine {dataset}"


def check_engine_semantics(ws: Workspace, dataset: str, transform: TransformSql, running: str) -> None:
    """A run goes ahead when the recorded and the running engine compute the same (docs/upgrading.md); a different
    build with the same semantics only changes the provenance digest."""
    if same_semantics(transform.version, running):
        if transform.version and transform.version != running:
            log.info("%s: transform recorded for engine %s, running %s (same semantics %s)", dataset,
                     transform.version, running, describe_engine(running))
        return
    raise EngineUpgradeNeeded(
        f"dataset '{dataset}': its transform was set for engine {describe_engine(transform.version)} but this engine "
        f"is {describe_engine(running)}, which may compute different results; to run it with this engine "
        f"(recorded in the chain), run: {upgrade_command(ws, dataset)}")
