"""A dataset's files as the engine reads them: a local path (the object itself when the store is local, else a copy
in the transaction's scratch directory), and checkpoints checked against the hash their block records.

A checkpoint is state the next transaction builds on (the Ledger's seen keys, the Snapshot's rows, a stateful
query's output): one that was edited after it was committed would silently corrupt every slice after it, so it is
checked before use, like the chain's own caches are.
"""
from __future__ import annotations

import os
import shutil

from odf_core.errors import IntegrityError
from odf_core.metadata import Checkpoint
from odf_core.storage import DatasetLayout, ObjectStore


def engine_path(store: ObjectStore, key: str, scratch: str) -> str:
    """A path the engine can open for ``key``: the object itself on a local store, else a copy under ``scratch``."""
    path = store.local_path(key)
    if path:
        return path
    target = os.path.join(scratch, key.replace("/", "_"))
    if not os.path.exists(target):
        os.makedirs(scratch, exist_ok=True)
        with store.open_read(key) as src, open(target + ".tmp", "wb") as dst:
            shutil.copyfileobj(src, dst)
        os.replace(target + ".tmp", target)
    return target


def checkpoint_path(store: ObjectStore, checkpoint: Checkpoint, scratch: str) -> str:
    """The previous checkpoint's path, after checking its bytes hash to what the chain records."""
    from odf_core.hashing import physical_hash

    key = DatasetLayout.checkpoint_key(checkpoint.physical_hash)
    path = engine_path(store, key, scratch)
    actual = physical_hash(path)
    if actual != checkpoint.physical_hash:
        raise IntegrityError(f"{store.url}: checkpoint {checkpoint.physical_hash} is corrupted: its bytes hash to "
                             f"{actual}; nothing was read from it (run 'odf verify --integrity')")
    return path
