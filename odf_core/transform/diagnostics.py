"""What the engine said of a transaction, for logs and ``odf explain``: its plan class, path, state and
the path of every operator."""
from __future__ import annotations

import logging

from odf_core.engine.protocol import (
    OdfTransformResponse,
)

log = logging.getLogger("odf.transform")


def log_diagnostics(dataset: str, response: OdfTransformResponse) -> None:
    d = response.diagnostics
    if d is None:
        return
    why = f" ({d.reason} is not row-wise)" if d.reason else ""
    path = f", {d.path} path" if d.path else ""
    state = f", {d.state_rows} state row(s)" if d.state_rows is not None else ""
    state += f" ({d.sizing})" if d.sizing else ""
    state += f", slice {d.slice}" if d.slice else ""
    state += f", history read: {d.history}" if d.history else ""
    log.info("%s: %s plan%s%s; %s output row(s)%s; %s", dataset, d.plan_class, why, path, d.output_rows, state,
             d.timings or "")
    for line in explain_lines(d.operators or ()):
        log.info("%s:   %s", dataset, line)
    for w in d.warnings or ():
        log.warning("%s: %s", dataset, w)


def explain_lines(operators) -> list[str]:
    """One indented line per operator: ``Aggregate  incremental  state per group ...``."""
    return [f"{'  ' * o.depth}{o.operator}: {o.path}" + (f" ({o.detail})" if o.detail else "") for o in operators]
