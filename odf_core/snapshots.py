"""Adding DatasetSnapshots to a workspace as a batch: parse all, order by dependencies, then create."""
from __future__ import annotations

import os
from pathlib import Path
from typing import Iterable

from odf_core.errors import DatasetExists, OdfError
from odf_core.identity import DatasetAlias, DatasetRef
from odf_core.metadata import DatasetSnapshot, FetchStepFilesGlob, SetPollingSource, SetTransform
from odf_core.metadata.yaml_serde import iter_manifest_files
from odf_core.workspace import DatasetHandle, Workspace


class DependencyCycle(OdfError):
    pass


def load_snapshot_files(files: Iterable[Path]) -> list[tuple[str, DatasetSnapshot]]:
    """Every snapshot of every file (multi-document files allowed); the first bad file raises.

    A relative ``FilesGlob.path`` is taken relative to the folder of its YAML file, so a folder of snapshots and
    their data can be checked out anywhere (the block records the resolved absolute path).
    """
    out = []
    for f in files:
        for snap in iter_manifest_files(f, expected="DatasetSnapshot"):
            out.append((str(f), resolve_relative_paths(snap, Path(f).resolve().parent)))
    return out


def resolve_relative_paths(snapshot: DatasetSnapshot, base: Path) -> DatasetSnapshot:
    events = []
    for ev in snapshot.metadata:
        if isinstance(ev, SetPollingSource) and isinstance(ev.fetch, FetchStepFilesGlob):
            if not os.path.isabs(ev.fetch.path):
                ev = ev.replace(fetch=ev.fetch.replace(path=os.path.normpath(str(base / ev.fetch.path))))
        events.append(ev)
    return snapshot.replace(metadata=tuple(events))


def input_names(snapshot: DatasetSnapshot) -> list[str]:
    names = []
    for ev in snapshot.metadata:
        if isinstance(ev, SetTransform):
            for i in ev.inputs:
                ref = DatasetRef.parse(i.dataset_ref)
                if ref.alias is not None:
                    names.append(ref.alias.name.key)
    return names


def dependency_order(snapshots: list[tuple[str, DatasetSnapshot]]) -> list[tuple[str, DatasetSnapshot]]:
    """Inputs before the datasets that use them; a cycle is an error naming its members."""
    by_name = {DatasetAlias.parse(s.name).name.key: (f, s) for f, s in snapshots}
    order, state = [], {}

    def visit(key: str, trail: list[str]) -> None:
        if state.get(key) == "done":
            return
        if state.get(key) == "visiting":
            cycle = trail[trail.index(key):] + [key]
            raise DependencyCycle(f"dataset dependency cycle: {' -> '.join(cycle)}")
        state[key] = "visiting"
        for dep in input_names(by_name[key][1]):
            if dep in by_name:
                visit(dep, trail + [key])
        state[key] = "done"
        order.append(by_name[key])

    for key in by_name:
        visit(key, [])
    return order


def add_snapshots(ws: Workspace, snapshots: list[tuple[str, DatasetSnapshot]]) -> list[DatasetHandle]:
    seen = set()
    for f, s in snapshots:
        key = DatasetAlias.parse(s.name).name.key
        if key in seen:
            raise DatasetExists(f"{f}: dataset '{s.name}' is defined twice")
        seen.add(key)
        if ws.exists(DatasetAlias.parse(s.name).name):
            raise DatasetExists(f"{f}: dataset '{s.name}' already exists in workspace {ws.url}")
    created = []
    for f, s in dependency_order(snapshots):
        try:
            created.append(ws.create(s))
        except OdfError as e:
            raise type(e)(f"{f}: {e}") from None
    return created


def snapshot_files(folder: str | Path) -> list[Path]:
    """The YAML files of a snapshot folder and its subfolders, hidden ones (such as a ``.odf`` workspace) skipped:
    the same files the Airflow DAG factory makes DAGs of, so every DAG it builds gets its dataset."""
    root = Path(folder)
    return sorted(p for p in root.rglob("*")
                  if p.suffix.lower() in (".yaml", ".yml") and p.is_file()
                  and not any(part.startswith(".") for part in p.relative_to(root).parts))


def _same_transform(a: SetTransform, b: SetTransform) -> bool:
    def key(ev: SetTransform):
        return (ev.inputs, ev.transform.replace(version=None))

    return key(a) == key(b)


def sync_snapshots(ws: Workspace, folder: str | Path, *, engine) -> list[str]:
    """Bring the workspace in line with a folder of snapshots: add new datasets, evolve changed transforms and
    sources. Returns one message per change. Never deletes a dataset."""
    from odf_core.metadata import AddPushSource, SetInfo, SetLicense
    from odf_core.transform import set_transform

    snapshots = load_snapshot_files(snapshot_files(folder))
    new = [(f, s) for f, s in snapshots if not ws.exists(DatasetAlias.parse(s.name).name)]
    messages = [f"added {h.name} from {f}" for h, (f, _) in zip(add_snapshots(ws, new), dependency_order(new))]
    added = {DatasetAlias.parse(s.name).name.key for _, s in new}
    for f, snap in dependency_order(snapshots):
        if DatasetAlias.parse(snap.name).name.key in added:
            continue
        handle = ws.get(snap.name)
        state = handle.state()
        for ev in snap.metadata:
            if isinstance(ev, SetTransform):
                wanted = ws.normalize_event(ev, snap)
                if state.transform is None or not _same_transform(state.transform, wanted):
                    set_transform(ws, snap.name, ev, engine=engine)
                    messages.append(f"evolved the transform of {handle.name} from {f}")
            elif isinstance(ev, SetPollingSource) and ws.normalize_event(ev, snap) != state.polling_source:
                handle.chain.append_event(ws.normalize_event(ev, snap))
                messages.append(f"updated the polling source of {handle.name} from {f}")
            elif isinstance(ev, AddPushSource) and state.push_source(ev.source_name) != ws.normalize_event(ev, snap):
                handle.chain.append_event(ws.normalize_event(ev, snap))
                messages.append(f"updated push source '{ev.source_name}' of {handle.name} from {f}")
            elif isinstance(ev, SetInfo) and ev != state.info:
                handle.chain.append_event(ev)
                messages.append(f"updated the info of {handle.name}")
            elif isinstance(ev, SetLicense) and ev != state.license:
                handle.chain.append_event(ev)
                messages.append(f"updated the license of {handle.name}")
            state = handle.state()
    return messages
