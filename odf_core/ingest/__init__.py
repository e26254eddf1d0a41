"""Polling ingestion (``SetPollingSource``): the fetch and prepare steps that run before the Spark read/merge job.

Each step reads and writes only inside a per-transaction staging directory and records its outcome in a JSON
manifest there (``fetch.json``, ``prepare.json``), so a step can run in another process and be retried safely.
The steps themselves are :func:`odf_core.ingest.fetch.fetch` and :func:`odf_core.ingest.prepare.prepare`.

The names below load on first use (:mod:`odf_core.lazy_exports`): a derivative's transform imports
:mod:`.staging` only, not the fetch and prepare machinery.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from odf_core.lazy_exports import lazy_exports

_WHERE = {
    "FetchError": "errors", "IngestError": "errors", "ManifestError": "errors", "PrepareError": "errors",
    "FetchOptions": "fetch",
    "FetchedFile": "manifest", "FetchResult": "manifest", "read_fetch_manifest": "manifest",
    "read_prepare_manifest": "manifest",
    "IngestOptions": "options",
}
__all__ = ["FetchError", "FetchOptions", "FetchResult", "FetchedFile", "IngestError", "IngestOptions", "ManifestError",
           "PrepareError", "read_fetch_manifest", "read_prepare_manifest"]
__getattr__ = lazy_exports(globals(), _WHERE)

if TYPE_CHECKING:
    from odf_core.ingest.errors import FetchError, IngestError, ManifestError, PrepareError
    from odf_core.ingest.fetch import FetchOptions
    from odf_core.ingest.manifest import FetchedFile, FetchResult, read_fetch_manifest, read_prepare_manifest
    from odf_core.ingest.options import IngestOptions
