"""Polling ingestion (``SetPollingSource``): the fetch and prepare steps that run before the Spark read/merge job.

Each step reads and writes only inside a per-transaction staging directory and records its outcome in a JSON
manifest there (``fetch.json``, ``prepare.json``), so a step can run in another process and be retried safely.
"""
from odf_core.ingest.errors import FetchError, IngestError, ManifestError, PrepareError  # noqa: F401
from odf_core.ingest.fetch import FetchOptions, fetch  # noqa: F401
from odf_core.ingest.manifest import (  # noqa: F401
    FetchedFile,
    FetchResult,
    read_fetch_manifest,
    read_prepare_manifest,
)
from odf_core.ingest.options import IngestOptions  # noqa: F401
from odf_core.ingest.prepare import prepare  # noqa: F401
