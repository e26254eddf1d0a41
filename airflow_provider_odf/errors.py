"""Errors of the Airflow provider: every one is an :class:`~odf_core.errors.OdfError`, so it reads as one clear line."""
from __future__ import annotations

from odf_core.errors import OdfError


class OdfConnectionError(OdfError):
    """An ``odf`` or ``spark`` connection that is missing or unusable; the message names the connection id."""


class OdfDagDefinitionError(OdfError):
    """Snapshots or sidecar settings that cannot become DAGs; the message names the file, property path and problem."""


class OdfTaskError(OdfError):
    """A task could not do its step (e.g. no transaction handed over by the upstream task)."""
