"""``odf gc``: remove what no dataset references — orphaned data, checkpoint and block files, temp files of crashed
writers, staging directories of finished or abandoned transactions — and nothing else.

Where orphans come from: a commit publishes its data and checkpoint files, then its block, then moves the head; a
commit that fails or is killed in between (a full disk, ``kill -9``) leaves files no block references. Deleting them
in the commit itself would not be safe (a concurrent retry of the same transaction may have found the same
content-addressed file in place and be about to reference it), so they wait for this collector.

Why it is safe while writers run:

* **Listing first, chain second.** Each dataset's files are listed *before* its chain is read, so every block
  appended before that read — and each file it references — is known. A file counts as referenced when any block
  of the chain from the head names it (data, checkpoint, the block itself).
* **Only old files.** A candidate must have been last modified more than ``min_age`` seconds ago, checked at listing
  and again just before it is removed. A writer either publishes its file fresh (young), or finds it already there
  and marks it as just used (``ObjectStore.put_*_if_absent`` touches it), so a file some writer is about to reference
  is young whatever its history. So an unreferenced old file is one whose writer published or found it more than
  ``min_age`` ago and has not moved the head since: ``min_age`` must exceed the longest time between a commit's
  first file and its head update (seconds in practice; the default is an hour).
* **The head is read again before each removal**, and blocks appended since are added to the referenced set.
* **Nothing is removed from a dataset whose chain cannot be read** (a corrupted or missing block, no head): that is
  a problem to report, not garbage.

Staging: a transaction's directory (local, see ``odf_core.ingest.staging.staging_root``) goes when nothing in it
changed for ``min_age`` seconds — committed ones keep only a few manifests for retried Airflow tasks, abandoned ones
(a killed process, a DAG run that gave up) whatever they staged. A task retried after that plans anew. Private keys
(``keys/``) and lock files are never touched.
"""
from __future__ import annotations

import os
import shutil
import time
from dataclasses import dataclass, field

from odf_core.errors import OdfError, os_errors
from odf_core.identity import Multihash
from odf_core.metadata import AddData, ExecuteTransform, Seed
from odf_core.storage import DatasetLayout, ObjectStore
from odf_core.workspace import DATASETS, Workspace

DEFAULT_MIN_AGE_S = 3600.0


@dataclass(frozen=True)
class Removal:
    """One thing removed (or, in a dry run, that would be): a path relative to the workspace, or an absolute path for
    staging outside it."""

    path: str
    size: int
    kind: str  # "data" | "checkpoint" | "block" | "temp" | "staging (committed)" | "staging (abandoned)"


@dataclass
class GcReport:
    dry_run: bool
    removed: list[Removal] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    @property
    def bytes_freed(self) -> int:
        return sum(r.size for r in self.removed)


def collect(ws: Workspace, *, min_age_s: float = DEFAULT_MIN_AGE_S, dry_run: bool = False) -> GcReport:
    """Remove (``dry_run``: only list) every unreferenced file of ``ws`` last modified more than ``min_age_s`` ago."""
    if min_age_s < 0:
        raise OdfError(f"--min-age must be >= 0 seconds, got {min_age_s}")
    report = GcReport(dry_run)
    cutoff = time.time() - min_age_s
    known_ids: set[str] = set()
    for name in ws.store.list_dirs(DATASETS):
        did = _collect_dataset(ws.store.child(f"{DATASETS}/{name}"), f"{DATASETS}/{name}", cutoff, report)
        if did:
            known_ids.add(did)
    for f in ws.store.remove_stale_temp_files(min_age_s, dry_run=dry_run):
        report.removed.append(Removal(f.key, f.size, "temp"))
    _collect_staging(ws, known_ids, cutoff, report)
    return report


# -- datasets -----------------------------------------------------------------------------------------------------

_FOLDERS = {DatasetLayout.DATA: "data", DatasetLayout.CHECKPOINTS: "checkpoint", DatasetLayout.BLOCKS: "block"}


def _collect_dataset(store: ObjectStore, where: str, cutoff: float, report: GcReport) -> str | None:
    """Collect one dataset directory; returns its dataset id (without ``did:odf:``) when its chain was read."""
    from odf_core.chain import MetadataChain

    listed = [f for folder in _FOLDERS for f in store.files(folder)]  # before the chain is read: see the docstring
    chain = MetadataChain(store)
    try:
        head = chain.head()
        if head is None:
            if listed and all(f.modified is not None and f.modified <= cutoff for f in listed):
                report.problems.append(f"{where} has no refs/head: left alone (if it is what an interrupted "
                                       "'odf add' left, delete the directory)")
            return None
        referenced, dataset_id = referenced_keys(chain, head, None)
    except OdfError as e:
        report.problems.append(f"{where}: cannot read its metadata chain, nothing removed from it: {e}")
        return None
    for f in listed:
        if f.key in referenced or f.modified is None or f.modified > cutoff:
            continue
        try:
            now_head = chain.head()
            if now_head != head:  # blocks appended since the walk: their files are referenced too
                more, _ = referenced_keys(chain, now_head, head)
                referenced |= more
                head = now_head
            if f.key in referenced:
                continue
            modified = store.modified(f.key)
            if modified is None or modified > cutoff:
                continue  # gone, or a writer just found it
            if not report.dry_run:
                store.delete(f.key)
        except OdfError as e:
            report.problems.append(f"{where}/{f.key}: not removed: {e}")
            continue
        report.removed.append(Removal(f"{where}/{f.key}", f.size, _FOLDERS[f.key.split("/", 1)[0]]))
    return dataset_id


def referenced_keys(chain, head: Multihash | None, stop: Multihash | None) -> tuple[set[str], str | None]:
    """Keys of the blocks from ``head`` back to ``stop`` (excluded) and of every file they reference; and the dataset
    id (without ``did:odf:``) when the walk reached the Seed."""
    keys: set[str] = set()
    dataset_id = None
    for h, block in chain.iter_blocks(head, stop):
        keys.add(DatasetLayout.block_key(h))
        ev = block.event
        if isinstance(ev, (AddData, ExecuteTransform)):
            if ev.new_data is not None:
                keys.add(DatasetLayout.data_key(ev.new_data.physical_hash))
            if ev.new_checkpoint is not None:
                keys.add(DatasetLayout.checkpoint_key(ev.new_checkpoint.physical_hash))
        if isinstance(ev, Seed):
            dataset_id = ev.dataset_id
    return keys, (str(dataset_id).removeprefix("did:odf:") if dataset_id is not None else None)


# -- staging ------------------------------------------------------------------------------------------------------


def _collect_staging(ws: Workspace, known_ids: set[str], cutoff: float, report: GcReport) -> None:
    """Transaction directories under ``<staging root>/<dataset id>/`` with nothing changed since ``cutoff``.

    Staging inside the workspace belongs to it entirely (also the directories of deleted datasets); a shared staging
    root (``$ODF_STAGING_DIR``, the user's cache) only for this workspace's datasets."""
    from odf_core.ingest.staging import staging_root
    from odf_core.ingest.transaction import COMMIT_FILE

    root = staging_root(ws)
    inside = ws.store.local_path("staging")
    own_all = inside is not None and os.path.realpath(root) == os.path.realpath(inside)
    try:
        id_dirs = sorted(e.name for e in os.scandir(root) if e.is_dir(follow_symlinks=False))
    except FileNotFoundError:
        return
    except OSError as e:
        report.problems.append(f"staging {root}: cannot list it: {e.strerror or e}")
        return
    ws_root = ws.store.root if ws.store.is_local else None
    for did in id_dirs:
        if not own_all and did not in known_ids:
            continue
        id_dir = os.path.join(root, did)
        try:
            entries = sorted(os.scandir(id_dir), key=lambda e: e.name)
        except OSError:
            continue  # removed meanwhile
        for entry in entries:
            if not entry.is_dir(follow_symlinks=False):
                continue
            try:
                newest, size = _activity(entry.path)
            except FileNotFoundError:
                continue  # removed meanwhile
            if newest > cutoff:
                continue
            committed = os.path.exists(os.path.join(entry.path, COMMIT_FILE))
            shown = os.path.relpath(entry.path, ws_root) if ws_root and own_all else entry.path
            if not report.dry_run:
                try:
                    with os_errors("deleting", entry.path):
                        shutil.rmtree(entry.path)
                except OdfError as e:
                    report.problems.append(f"staging {shown}: not removed: {e}")
                    continue
            report.removed.append(Removal(shown, size, f"staging ({'committed' if committed else 'abandoned'})"))
        if not report.dry_run:
            try:
                os.rmdir(id_dir)  # only when empty
            except OSError:
                pass


def _activity(directory: str) -> tuple[float, int]:
    """The newest modification time under ``directory`` (itself included) and the bytes of its files."""
    newest = os.lstat(directory).st_mtime
    size = 0
    for d, dirs, files in os.walk(directory):
        for n in dirs + files:
            try:
                st = os.lstat(os.path.join(d, n))
            except FileNotFoundError:
                continue
            newest = max(newest, st.st_mtime)
            if n in files:
                size += st.st_size
    return newest, size


def format_report(report: GcReport) -> list[str]:
    """What ``odf gc`` prints on stdout: one line per removal, then the total."""
    verb = "would remove" if report.dry_run else "removed"
    lines = [f"{verb} {r.path} ({r.kind}, {r.size} bytes)" for r in report.removed]
    freed = "would free" if report.dry_run else "freed"
    lines.append(f"{len(report.removed)} item(s) {verb}, {report.bytes_freed} bytes {freed}")
    return lines
