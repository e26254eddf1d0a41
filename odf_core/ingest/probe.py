"""Does a polling source have something new? A cheap check for sensors, without fetching any data.

HTTP sources get a conditional ``HEAD`` request, ``file://`` and glob sources a look at file names and times.
When a source cannot be probed cheaply (containers, servers refusing HEAD) the answer is "yes": the fetch step then
finds out for real and commits nothing if nothing changed.
"""
from __future__ import annotations

import glob
import logging
import os
import urllib.error
import urllib.request
from urllib.parse import unquote, urlparse

from odf_core.ingest.source_state import (
    etag_state,
    http_date,
    parse_http_date,
    last_modified_state,
    prev_etag,
    prev_last_modified,
)
from odf_core.metadata import FetchStepFilesGlob, FetchStepUrl, SourceCachingForever, Timestamp
from odf_core.workspace import Workspace

log = logging.getLogger("odf.ingest")


def has_new_data(ws: Workspace, dataset: str, *, timeout_s: float = 30.0) -> bool:
    state = ws.get(dataset).state()
    src = state.polling_source
    if src is None:
        return False
    prev = state.source_state("default")
    step = src.fetch
    if isinstance(getattr(step, "cache", None), SourceCachingForever) and (prev or state.data_blocks):
        return False
    if isinstance(step, FetchStepUrl):
        url = urlparse(step.url)
        if url.scheme == "file":
            path = unquote(url.path)
            if not os.path.exists(path):
                return False
            mtime = Timestamp.from_millis(int(os.stat(path).st_mtime * 1000))
            return prev is None or last_modified_state(mtime) != prev
        return _probe_http(step, prev, timeout_s)
    if isinstance(step, FetchStepFilesGlob):
        last = prev_etag(prev)
        names = [os.path.basename(p) for p in glob.glob(step.path, recursive=True) if os.path.isfile(p)]
        return any(last is None or n > last for n in names)
    return True  # containers: only running them tells


def _probe_http(step: FetchStepUrl, prev, timeout_s: float) -> bool:
    headers = {h.name: h.value for h in step.headers or ()}
    etag, lm = prev_etag(prev), prev_last_modified(prev)
    if etag is not None:
        headers["If-None-Match"] = etag
    elif lm is not None:
        headers["If-Modified-Since"] = http_date(lm)
    req = urllib.request.Request(step.url, headers=headers, method="HEAD")
    try:
        with urllib.request.urlopen(req, timeout=timeout_s) as resp:
            new_etag = resp.headers.get("ETag")
            new_lm = resp.headers.get("Last-Modified")
    except urllib.error.HTTPError as e:
        if e.code == 304:
            return False
        log.info("HEAD %s answered %s: assuming new data", step.url, e.code)
        return True
    except OSError as e:
        log.info("HEAD %s failed (%s): assuming new data", step.url, e)
        return True
    if prev is None:
        return True
    if new_etag:
        return etag_state(new_etag) != prev
    if new_lm and (modified := parse_http_date(new_lm)) is not None:
        return last_modified_state(modified) != prev
    return True
