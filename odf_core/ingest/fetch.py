"""The fetch step of polling ingestion: bring new source data into the staging directory.

Owns ``<staging>/fetch/`` (data files), ``<staging>/container-out/`` and ``<staging>/fetch.json``; a retry empties
them first and writes the manifest last, and nothing outside the staging directory is written.  The result depends
only on the source and on the state recorded in the chain (``source_state``, ``already_ingested``), which the
commit step changes, so re-running an uncommitted fetch is safe.
"""
from __future__ import annotations

import dataclasses
import logging
import os

from odf_core.ingest.errors import FetchError
from odf_core.ingest.manifest import FETCH_MANIFEST, FetchedFile, FetchResult, write_fetch_manifest
from odf_core.ingest.options import FetchOptions
from odf_core.ingest.source_state import check_kind
from odf_core.ingest.staging import remove_file, reset_dir
from odf_core.metadata import fragments
from odf_core.metadata import (
    FetchStepContainer,
    FetchStepFilesGlob,
    FetchStepUrl,
    SourceCachingForever,
    SourceState,
    Timestamp,
)

__all__ = ["FetchOptions", "FetchResult", "FetchedFile", "fetch", "FETCH_DIR", "CONTAINER_OUT_DIR"]

FETCH_DIR = "fetch"
CONTAINER_OUT_DIR = "container-out"
# every fetch step of the schema; the ones not implemented (Mqtt, EthereumLogs) raise FetchError
FetchStep = fragments.FetchStep

_log = logging.getLogger("odf.ingest")


def fetch(
    step: FetchStep,
    *,
    staging_dir: str,
    source_state: SourceState | None,
    system_time: Timestamp,
    already_ingested: bool,
    options: FetchOptions = FetchOptions(),
) -> FetchResult:
    """Fetch what is new at the source into ``staging_dir`` and record the result in ``staging_dir/fetch.json``.

    ``source_state``: the latest ``newSourceState`` of this source in the chain; ``already_ingested``: whether the
    dataset ever ingested from this source (for ``cache: Forever``).
    """
    # imported here, not with this module: a push or a derivative's pull never fetches, and the HTTP/TLS clients
    # would cost each such command tens of milliseconds of imports
    from odf_core.ingest.fetch_container import fetch_container
    from odf_core.ingest.fetch_glob import fetch_glob
    from odf_core.ingest.fetch_url import fetch_url, up_to_date

    staging_dir = os.path.abspath(staging_dir)
    os.makedirs(staging_dir, exist_ok=True)
    remove_file(os.path.join(staging_dir, FETCH_MANIFEST))
    out_dir = reset_dir(os.path.join(staging_dir, FETCH_DIR))
    state = check_kind(source_state)

    if isinstance(getattr(step, "cache", None), SourceCachingForever) and already_ingested:
        _log.info("source is cached forever and was already ingested: up to date")
        result = up_to_date(source_state)
    elif isinstance(step, FetchStepUrl):
        result = fetch_url(step, out_dir=out_dir, state=state, system_time=system_time, options=options)
    elif isinstance(step, FetchStepFilesGlob):
        result = fetch_glob(step, out_dir=out_dir, state=state, system_time=system_time, options=options)
    elif isinstance(step, FetchStepContainer):
        work_dir = os.path.join(staging_dir, CONTAINER_OUT_DIR)
        result = fetch_container(step, out_dir=out_dir, work_dir=work_dir, state=state, options=options)
    else:
        raise FetchError(f"unsupported fetch step {type(step).__name__}")

    if result.up_to_date and result.new_source_state != source_state:
        result = dataclasses.replace(result, new_source_state=source_state)
    write_fetch_manifest(staging_dir, result)
    _log.info(
        "fetch done: up_to_date=%s files=%d bytes=%d has_more=%s state=%s",
        result.up_to_date,
        len(result.files),
        result.bytes_fetched,
        result.has_more,
        result.new_source_state,
    )
    return result
