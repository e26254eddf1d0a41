"""The prepare step of polling ingestion: apply ``PrepStep`` s in order to the fetched files.

Owns ``<staging>/prepare/`` and ``<staging>/prepare.json``; a retry empties them first and reads the fetched files,
which it never modifies.  Step ``k`` writes into ``prepare/step-k/``; intermediate outputs are deleted once the next
step has consumed them.  Each output keeps the event time and source-side name of the file it came from.
Output names drop a ``.gz`` suffix after Gzip and any compression suffix after Pipe, because Spark picks a codec
from the file name.  Without steps the fetched files pass through unchanged.
"""
from __future__ import annotations

import logging
import os
import re

from odf_core.ingest import decompress
from odf_core.ingest.errors import PrepareError
from odf_core.ingest.manifest import PREPARE_MANIFEST, FetchedFile, write_prepare_manifest
from odf_core.ingest.pipe import run_pipe
from odf_core.ingest.staging import remove_file, reset_dir, source_basename, staged_name
from odf_core.metadata import CompressionFormat, PrepStepDecompress, PrepStepPipe

PREPARE_DIR = "prepare"
DEFAULT_PIPE_TIMEOUT_S = 3600.0
PrepStep = PrepStepDecompress | PrepStepPipe

_log = logging.getLogger("odf.ingest")
_CODEC_SUFFIX = re.compile(r"\.(gz|gzip|bz2|xz|zst|zstd|lz4|snappy|deflate|br|z)$", re.IGNORECASE)


def prepare(
    steps: tuple[PrepStep, ...] | None,
    files: tuple[FetchedFile, ...],
    *,
    staging_dir: str,
    timeout_s: float = DEFAULT_PIPE_TIMEOUT_S,
) -> tuple[FetchedFile, ...]:
    """Prepared files in ingest order, also recorded in ``staging_dir/prepare.json``; ``timeout_s`` bounds each Pipe."""
    staging_dir = os.path.abspath(staging_dir)
    os.makedirs(staging_dir, exist_ok=True)
    remove_file(os.path.join(staging_dir, PREPARE_MANIFEST))
    root = reset_dir(os.path.join(staging_dir, PREPARE_DIR))

    current = tuple(files)
    for k, step in enumerate(steps or ()):
        step_dir = reset_dir(os.path.join(root, f"step-{k}"))
        produced: list[FetchedFile] = []
        for f in current:
            produced.extend(_apply(step, f, step_dir, len(produced), timeout_s))
        if k > 0:  # the previous step's outputs are ours to delete; the fetched files are not
            for f in current:
                remove_file(f.path)
        current = tuple(produced)
    write_prepare_manifest(staging_dir, current)
    _log.info("prepare done: %d files from %d fetched", len(current), len(files))
    return current


def _apply(step: PrepStep, f: FetchedFile, step_dir: str, index: int, timeout_s: float) -> list[FetchedFile]:
    if not os.path.isfile(f.path):
        raise PrepareError(f"fetched file {f.path} (from {f.name}) is missing from staging")
    base = source_basename(f.name)
    if isinstance(step, PrepStepDecompress):
        if step.format == CompressionFormat.GZIP:
            if step.sub_path is not None:
                _log.warning("Decompress Gzip ignores subPath %r", step.sub_path)
            dest = os.path.join(step_dir, staged_name(index, decompress.gunzipped_name(base)))
            decompress.gunzip(f.path, dest)
            return [FetchedFile(path=dest, event_time=f.event_time, name=f.name)]
        if step.format == CompressionFormat.ZIP:
            out = []
            for i, member in enumerate(decompress.select_members(f.path, step.sub_path)):
                dest = os.path.join(step_dir, staged_name(index + i, member.filename))
                decompress.extract_member(f.path, member, dest)
                out.append(FetchedFile(path=dest, event_time=f.event_time, name=f.name))
            return out
        raise PrepareError(f"Decompress: unsupported format {step.format!r} for {f.path}")
    if isinstance(step, PrepStepPipe):
        dest = os.path.join(step_dir, staged_name(index, _CODEC_SUFFIX.sub("", base) or base))
        run_pipe(tuple(step.command), f.path, dest, cwd=step_dir, timeout_s=timeout_s)
        return [FetchedFile(path=dest, event_time=f.event_time, name=f.name)]
    raise PrepareError(f"unsupported prepare step {type(step).__name__}")
