"""A workspace: a directory (or object-store prefix) of datasets by name.

Layout: ``datasets/<name>/`` is one dataset (conformance §5 layout), ``keys/<dataset-id>.pem`` holds each dataset's
private key outside the dataset, so a dataset can be shared without leaking the proof of ownership.
``keys/chain-summary.key`` is the workspace's secret that authenticates the datasets' cached state (``info/summary``,
see ``odf_core.chain.summary``): kept outside every dataset, so editing a dataset cannot forge it.
"""
from __future__ import annotations

import logging
import os
import secrets
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import overload

from odf_core.chain import ChainState, MetadataChain, fold, validate_append
from odf_core.errors import DatasetExists, DatasetNotFound, OdfError
from odf_core.identity import DatasetAlias, DatasetID, DatasetName, DatasetRef, Multihash
from odf_core.metadata import (
    AddPushSource,
    DatasetSnapshot,
    MetadataBlock,
    MetadataEvent,
    Seed,
    SetPollingSource,
    SetTransform,
    Timestamp,
    TransformInput,
    encode_block,
)
from odf_core.chain.summary import MIN_KEY_BYTES
from odf_core.storage import DatasetLayout, ObjectNotFound, ObjectStore

log = logging.getLogger("odf.workspace")

WORKSPACE_DIR = ".odf"
DATASETS = "datasets"
KEYS = "keys"
SUMMARY_KEY_FILE = f"{KEYS}/chain-summary.key"


class WorkspaceNotFound(OdfError):
    pass


#: The object ``init`` writes: what tells a workspace from any other directory.
WORKSPACE_MARKER = "workspace.version"


def _key_file(dataset_id: DatasetID) -> str:
    """Where the workspace keeps a dataset's private key: outside every dataset."""
    return f"{KEYS}/{dataset_id.to_did_odf().removeprefix('did:odf:')}.pem"


@dataclass(frozen=True)
class DatasetHandle:
    """One dataset of a workspace: its name, store and chain."""

    name: DatasetName
    store: ObjectStore
    summary_key: bytes | None = field(default=None, repr=False, compare=False)

    @property
    def chain(self) -> MetadataChain:
        return MetadataChain(self.store, self.summary_key)

    def state(self) -> ChainState:
        return self.chain.state()


def find_workspace(start: str | os.PathLike | None = None) -> Path:
    """``.odf`` in ``start`` or the nearest parent directory (like git)."""
    p = Path(start or os.getcwd()).resolve()
    for d in (p, *p.parents):
        if (d / WORKSPACE_DIR).is_dir():
            return d / WORKSPACE_DIR
    raise WorkspaceNotFound(f"no {WORKSPACE_DIR} workspace in {p} or any parent directory: run 'odf init' first")


class Workspace:
    def __init__(self, store: ObjectStore):
        self.store = store
        self._summary_key: bytes | None = None
        self._summary_key_loaded = False

    @classmethod
    def open(cls, location: str | os.PathLike) -> "Workspace":
        store = ObjectStore.open(location)
        return cls(store)

    @classmethod
    def init(cls, location: str | os.PathLike) -> "Workspace":
        store = ObjectStore.open(location)
        store.put(WORKSPACE_MARKER, b"1")
        return cls(store)  # the summary key is created with the first dataset handle

    # -- the key that authenticates cached chain state --------------------------------------------------------

    def summary_key(self) -> bytes | None:
        """The workspace's summary key, created on first use (by the first dataset handle; older workspaces have none).

        None when it cannot be created (a read-only store): datasets then fold their chains instead of trusting a
        summary. Racing creators agree: the first published key wins and everyone reads that one.
        """
        if not self._summary_key_loaded:
            self._summary_key = self._load_summary_key()
            self._summary_key_loaded = True
        return self._summary_key

    def _load_summary_key(self) -> bytes | None:
        try:
            raw = self.store.get(SUMMARY_KEY_FILE)
        except ObjectNotFound:
            try:
                self.store.put_if_absent(SUMMARY_KEY_FILE, secrets.token_hex(32).encode(), private=True)
                raw = self.store.get(SUMMARY_KEY_FILE)
            except OdfError as e:
                log.warning("workspace %s: cannot create %s (%s): cached dataset state will not be used",
                            self.url, SUMMARY_KEY_FILE, e)
                return None
        try:
            key = bytes.fromhex(raw.decode("ascii").strip())
        except (UnicodeDecodeError, ValueError):
            key = b""
        if len(key) < MIN_KEY_BYTES:
            raise OdfError(f"workspace {self.url}: {SUMMARY_KEY_FILE} is not a key of at least {MIN_KEY_BYTES} "
                           "hex-encoded bytes; delete it to create a new one (cached dataset state is then rebuilt "
                           "once)")
        return key

    def _handle(self, name: DatasetName | str, ds_dir: str) -> DatasetHandle:
        return DatasetHandle(DatasetName(str(name)), self.store.child(f"{DATASETS}/{ds_dir}"), self.summary_key())

    @property
    def url(self) -> str:
        return self.store.url

    # -- lookup -------------------------------------------------------------------------------------------------

    def _dataset_dirs(self) -> list[str]:
        """Directories of ``datasets/`` with a head (one level: the datasets' own files are not walked)."""
        names = [n for n in self.store.list_dirs(DATASETS)
                 if self.store.exists(f"{DATASETS}/{n}/{DatasetLayout.head_ref}")]
        return sorted(names, key=str.lower)

    def list(self) -> list[DatasetHandle]:
        return [self._handle(n, n) for n in self._dataset_dirs()]

    def _dir_of(self, name: DatasetName) -> str | None:
        for n in self._dataset_dirs():
            if n.lower() == name.key:
                return n
        return None

    def get(self, ref: str | DatasetRef | DatasetAlias | DatasetName | DatasetID) -> DatasetHandle:
        """Resolve a name, alias or ``did:odf:`` reference to a dataset of this workspace."""
        r = DatasetRef.parse(ref) if isinstance(ref, str) else ref
        if isinstance(r, DatasetRef):
            named = r.id if r.id is not None else r.alias
            assert named is not None  # a reference is an id or an alias
            r = named
        if isinstance(r, DatasetID):
            for h in self.list():
                if h.state().dataset_id == r:
                    return h
            raise DatasetNotFound(f"no dataset with id {r} in workspace {self.url}")
        if isinstance(r, DatasetAlias):
            if r.account is not None:
                raise OdfError(f"dataset {r}: accounts are not supported in a single-tenant workspace")
            r = r.name
        d = self._dir_of(r)
        if d is None:
            raise DatasetNotFound(f"dataset '{r}' does not exist in workspace {self.url}")
        return self._handle(d, d)

    def exists(self, name: str | DatasetName) -> bool:
        return self._dir_of(DatasetName(str(name))) is not None

    # -- create / rename / delete -------------------------------------------------------------------------------

    def create(self, snapshot: DatasetSnapshot, system_time: Timestamp | None = None) -> DatasetHandle:
        """A new dataset from a snapshot: Seed with a fresh identity, then the snapshot's events.

        Every block is validated before anything is written; the dataset only becomes visible when its head is
        published, so a failure leaves the workspace as it was.
        """
        alias = DatasetAlias.parse(snapshot.name)
        if alias.account is not None:
            raise OdfError(f"dataset {snapshot.name}: accounts are not supported in a single-tenant workspace")
        name = alias.name
        if self._dir_of(name) is not None:
            raise DatasetExists(f"dataset '{name}' already exists in workspace {self.url}")
        dataset_id, private_key = DatasetID.new_keypair()
        events: list[MetadataEvent] = [Seed(dataset_id=dataset_id, dataset_kind=snapshot.kind)]
        events += [self.normalize_event(ev, snapshot) for ev in snapshot.metadata]
        system_time = system_time or Timestamp.now()

        blocks, state = [], ChainState()
        for ev in events:
            block = MetadataBlock(
                system_time=system_time,
                prev_block_hash=state.head,
                sequence_number=state.sequence_number + 1,
                event=ev,
            )
            try:
                validate_append(state, block)
            except OdfError as e:
                raise type(e)(f"dataset '{name}': {e}") from None
            raw = encode_block(block)
            h = Multihash.sha3_256(raw)
            blocks.append((h, raw))
            state = fold(state, block, h)

        self.store.put(_key_file(dataset_id), private_key, private=True)
        self._chmod_private(_key_file(dataset_id))
        handle = self._handle(name, str(name))
        for h, raw in blocks:
            handle.store.put_if_absent(DatasetLayout.block_key(h), raw)
        # Publishing the head makes the dataset exist; a concurrent creator of the same name loses the CAS.
        handle.store.compare_and_swap_ref(DatasetLayout.head_ref, None, str(state.head))
        handle.chain._write_summary(state)
        return handle

    def _chmod_private(self, key: str) -> None:
        path = self.store.local_path(key)
        if path:
            os.chmod(path, 0o600)

    @overload
    def normalize_event(self, ev: SetTransform, snapshot: DatasetSnapshot) -> SetTransform: ...

    @overload
    def normalize_event(self, ev: MetadataEvent, snapshot: DatasetSnapshot) -> MetadataEvent: ...

    def normalize_event(self, ev: MetadataEvent, snapshot: DatasetSnapshot) -> MetadataEvent:
        """Snapshot conveniences become canonical block content (``query`` → ``queries``, inputs → dataset IDs)."""
        if isinstance(ev, (SetPollingSource, AddPushSource)) and ev.preprocess is not None:
            return ev.replace(preprocess=ev.preprocess.normalized())
        if isinstance(ev, SetTransform):
            inputs = []
            for i, inp in enumerate(ev.inputs):
                try:
                    target = self.get(inp.dataset_ref)
                except DatasetNotFound:
                    raise DatasetNotFound(
                        f"dataset '{snapshot.name}': content.metadata SetTransform.inputs[{i}].datasetRef: "
                        f"input dataset '{inp.dataset_ref}' does not exist in the workspace"
                    ) from None
                did = target.state().seeded_id
                inputs.append(TransformInput(dataset_ref=did.to_did_odf(), alias=inp.alias or inp.dataset_ref))
            transform = ev.transform.normalized()
            if transform.engine.lower() == "spark" and transform.version is None:
                from odf_core.engine.version import engine_version

                transform = transform.replace(version=engine_version())
            return ev.replace(inputs=tuple(inputs), transform=transform)
        return ev

    def key_of(self, dataset_id: DatasetID) -> bytes:
        return self.store.get(_key_file(dataset_id))

    def rename(self, ref: str, new_name: str) -> DatasetHandle:
        h = self.get(ref)
        new = DatasetName(new_name)
        existing = self._dir_of(new)
        if existing is not None and existing != str(h.name):
            raise DatasetExists(f"dataset '{new}' already exists in workspace {self.url}")
        src, dst = h.store.root, self.store.child(f"{DATASETS}/{new}").root
        if src != dst:
            tmp = self.store.child(f"{DATASETS}/{new}-{uuid.uuid4().hex[:8]}").root if existing else dst
            self.store.fs.mv(src, tmp, recursive=True)
            if tmp != dst:
                self.store.fs.mv(tmp, dst, recursive=True)
        return self.get(str(new))

    def delete(self, ref: str, *, force: bool = False) -> None:
        h = self.get(ref)
        did = h.state().dataset_id
        if not force and did is not None:  # always set: get() finds only datasets with a head (a Seed)
            users = [
                str(o.name) for o in self.list()
                if o.name != h.name and (t := o.state().transform) is not None
                and any(i.dataset_ref == did.to_did_odf() for i in t.inputs)
            ]
            if users:
                raise OdfError(f"dataset '{h.name}' is an input of {', '.join(users)}: delete those first")
        self.store.delete_prefix(f"{DATASETS}/{h.name}")
