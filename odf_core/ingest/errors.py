"""Errors of the fetch and prepare steps of polling ingestion (all :class:`~odf_core.errors.OdfError`)."""
from __future__ import annotations

from odf_core.errors import OdfError


class IngestError(OdfError):
    """Base of the ingest step errors."""


class FetchError(IngestError):
    """A source that cannot be fetched: names the URL, path, image or file and what went wrong."""


class PrepareError(IngestError):
    """A fetched file that cannot be prepared: names the file, the step and what went wrong."""


class ManifestError(IngestError):
    """A step manifest in the staging directory that is missing or malformed (e.g. fetch did not finish)."""
