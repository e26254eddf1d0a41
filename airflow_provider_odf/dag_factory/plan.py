"""A folder of DatasetSnapshot files → which DAGs to build, in dependency order, and what is wrong.

Pure (no Airflow, no workspace): every problem becomes one :class:`Problem` naming the file (and line) and the
dataset it stops, and only excludes the datasets it concerns — a broken document, a duplicate name, a missing
input, a cycle, or an input that is itself excluded. Everything else is planned.
"""
from __future__ import annotations

import heapq
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable

from odf_core.errors import OdfError
from odf_core.identity import DatasetAlias, DatasetRef
from odf_core.metadata import AddPushSource, DatasetKind, SetInfo, SetPollingSource, SetTransform
from odf_core.snapshot_read import SnapshotDoc, read_snapshot_file
from odf_core.snapshot_read import snapshot_files as odf_snapshot_files

DAG_PREFIX = "odf__"
SYNC_DAG_ID = f"{DAG_PREFIX}sync"
GRAPH_DAG_ID = f"{DAG_PREFIX}graph"
ERRORS_DAG_ID = f"{DAG_PREFIX}definition_errors"
RESERVED_DAG_IDS = {SYNC_DAG_ID, GRAPH_DAG_ID, ERRORS_DAG_ID}


def dag_id_of(name: str) -> str:
    """``odf__<name>`` with dots and dashes as underscores (Airflow ids keep the spelling of the snapshot)."""
    return DAG_PREFIX + re.sub(r"[.-]", "_", name)


@dataclass(frozen=True)
class DatasetPlan:
    """What a DAG needs to know about one dataset (read from its snapshot, never from the workspace)."""

    name: str
    file: str
    kind: str  # "root" | "derivative"
    source: str | None = None  # roots: "polling" | "push" | None (no source yet)
    inputs: tuple[str, ...] = ()  # derivatives: input names as written in the snapshot
    description: str | None = None

    @property
    def key(self) -> str:
        return self.name.lower()

    @property
    def input_keys(self) -> tuple[str, ...]:
        return tuple(i.lower() for i in self.inputs)

    @property
    def dag_id(self) -> str:
        return dag_id_of(self.name)

    @property
    def manual(self) -> bool:
        """A root without a polling source: its data is pushed, so its DAG runs when triggered."""
        return self.kind == "root" and self.source != "polling"


@dataclass(frozen=True)
class Problem:
    """Why something is not scheduled: one line naming the file (and line). ``dataset`` is the dataset it stops,
    as its snapshot names it; None for a problem of the folder (a file without a readable name, a reserved name)."""

    message: str
    dataset: str | None = None

    @property
    def dag_id(self) -> str:
        """The DAG that shows this problem: the dataset's own DAG id, or the folder's problem DAG."""
        if self.dataset is None or dag_id_of(self.dataset) in RESERVED_DAG_IDS:
            return ERRORS_DAG_ID
        return dag_id_of(self.dataset)


@dataclass
class FolderPlan:
    folder: str
    datasets: list[DatasetPlan] = field(default_factory=list)  # buildable, inputs before their users
    problems: list[Problem] = field(default_factory=list)
    files: int = 0
    seen: dict[str, str] = field(default_factory=dict)  # key -> name of every dataset read, built or not

    @property
    def errors(self) -> list[str]:
        return [p.message for p in self.problems]

    def get(self, key: str) -> DatasetPlan | None:
        return next((d for d in self.datasets if d.key == key), None)


def snapshot_files(folder: Path) -> list[Path]:
    """YAML files under ``folder``, hidden directories (such as a ``.odf`` workspace) excluded, sorted — the very
    files the ``odf__sync`` task adds to the workspace."""
    return odf_snapshot_files(folder)


def _inputs(doc: SnapshotDoc) -> tuple[str, ...]:
    names = []
    for i, ev in enumerate(doc.valid.metadata):
        if isinstance(ev, SetTransform):
            for j, inp in enumerate(ev.inputs):
                ref = DatasetRef.parse(inp.dataset_ref)
                if ref.alias is None or ref.alias.account is not None:
                    raise doc.error_at("cannot be scheduled on without a workspace: refer to the input by its "
                                       "dataset name", f"content.metadata[{i}].inputs[{j}].datasetRef",
                                       inp.dataset_ref)
                names.append(str(ref.alias.name))
    return tuple(dict.fromkeys(names))


def describe(doc: SnapshotDoc) -> DatasetPlan:
    snapshot = doc.valid
    alias = DatasetAlias.parse(snapshot.name)
    events = snapshot.metadata
    info = next((e for e in reversed(events) if isinstance(e, SetInfo)), None)
    description = info.description if info is not None else None
    if snapshot.kind == DatasetKind.ROOT:
        source = ("polling" if any(isinstance(e, SetPollingSource) for e in events)
                  else "push" if any(isinstance(e, AddPushSource) for e in events) else None)
        return DatasetPlan(str(alias.name), doc.file, "root", source=source, description=description)
    return DatasetPlan(str(alias.name), doc.file, "derivative", inputs=_inputs(doc), description=description)


def _read(files: Iterable[Path], problems: list[Problem]) -> tuple[list[DatasetPlan], dict[str, SnapshotDoc]]:
    """Plans of the valid snapshots, and the broken documents whose dataset name could still be read."""
    plans: list[DatasetPlan] = []
    broken: dict[str, SnapshotDoc] = {}
    for f in files:
        try:
            docs = read_snapshot_file(f)
        except Exception as e:  # noqa: BLE001 - a bug must not hide the other files' DAGs either
            problems.append(Problem(f"{f}: {type(e).__name__}: {e}"))
            continue
        for doc in docs:
            try:
                if doc.error is not None:
                    raise doc.error
                plans.append(describe(doc))
            except OdfError as e:
                text = str(e)
                problems.append(Problem(text if text.startswith(doc.file) else f"{doc.file}: {text}", doc.name))
                if doc.key:
                    broken.setdefault(doc.key, doc)
    return plans, broken


def _drop_clashes(plans: list[DatasetPlan], broken: dict[str, SnapshotDoc],
                  problems: list[Problem]) -> list[DatasetPlan]:
    """Two snapshots of one dataset (also when one of them is broken), or two names with one DAG id: none of them
    is built."""
    bad: set[int] = set()
    for i, d in enumerate(plans):
        if d.key in broken:
            problems.append(Problem(f"{d.key}: defined by more than one snapshot (names are case-insensitive): "
                                    f"'{d.name}' in {d.file}; '{broken[d.key].name}' in {broken[d.key].file} "
                                    "(which has a problem)", d.name))
            bad.add(i)
    for problem, key in (("defined by more than one snapshot (names are case-insensitive)", lambda d: d.key),
                         ("datasets whose names give the same DAG id", lambda d: d.dag_id)):
        groups: dict[str, list[int]] = {}
        for i, d in enumerate(plans):
            if i not in bad:
                groups.setdefault(key(d), []).append(i)
        for k, idx in groups.items():
            if len(idx) > 1:
                who = "; ".join(f"'{plans[i].name}' in {plans[i].file}" for i in idx)
                for name in dict.fromkeys(plans[i].name for i in idx):
                    problems.append(Problem(f"{k}: {problem}: {who}", name))
                bad.update(idx)
    for i, d in enumerate(plans):
        if i not in bad and d.dag_id in RESERVED_DAG_IDS:
            problems.append(Problem(f"{d.file}: dataset '{d.name}': DAG id '{d.dag_id}' is reserved for the "
                                    "factory's own DAG", d.name))
            bad.add(i)
    return [d for i, d in enumerate(plans) if i not in bad]


def _cycles(by_key: dict[str, DatasetPlan]) -> list[list[str]]:
    """Strongly connected components that are cycles (Tarjan, iterative: input chains may be long), each as a
    closed path a -> b -> a."""
    edges = {k: [i for i in d.input_keys if i in by_key] for k, d in by_key.items()}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(by_key):
        if root in index:
            continue
        work = [(root, 0)]  # (node, next edge to look at)
        while work:
            v, start = work.pop()
            if start == 0:
                index[v] = low[v] = len(index)
                stack.append(v)
                on_stack.add(v)
            for j in range(start, len(edges[v])):
                w = edges[v][j]
                if w not in index:
                    work += [(v, j + 1), (w, 0)]
                    break
                if w in on_stack:
                    low[v] = min(low[v], index[w])
            else:
                if low[v] == index[v]:
                    comp = []
                    while True:
                        w = stack.pop()
                        on_stack.discard(w)
                        comp.append(w)
                        if w == v:
                            break
                    if len(comp) > 1 or v in edges[v]:
                        found.append(_closed_path(sorted(comp), edges))
                if work:  # back in the parent: it reaches whatever v reaches
                    parent = work[-1][0]
                    low[parent] = min(low[parent], low[v])
    return found


def _closed_path(comp: list[str], edges: dict[str, list[str]]) -> list[str]:
    """Shortest walk from the first member back to itself inside its component (for the error message)."""
    start, members = comp[0], set(comp)
    prev: dict[str, str] = {}
    frontier = [start]
    while frontier:
        nxt = []
        for v in frontier:
            for w in edges[v]:
                if w == start:
                    back = [v]
                    while back[-1] != start:
                        back.append(prev[back[-1]])
                    return back[::-1] + [start]
                if w in members and w not in prev:
                    prev[w] = v
                    nxt.append(w)
        frontier = nxt
    return comp + [start]  # unreachable for a real cycle


def _order(by_key: dict[str, DatasetPlan]) -> list[DatasetPlan]:
    """Inputs before their users (Kahn), alphabetical among equals so DAG files parse the same every time."""
    users: dict[str, list[str]] = {k: [] for k in by_key}
    waiting = {k: 0 for k in by_key}
    for k, d in by_key.items():
        for i in set(d.input_keys):
            users[i].append(k)
            waiting[k] += 1
    ready = [k for k, n in waiting.items() if n == 0]
    heapq.heapify(ready)
    order = []
    while ready:
        k = heapq.heappop(ready)
        order.append(by_key[k])
        for u in users[k]:
            waiting[u] -= 1
            if waiting[u] == 0:
                heapq.heappush(ready, u)
    return order


def plan_folder(folder: str | Path) -> FolderPlan:
    """Read every snapshot under ``folder`` and keep what can become a DAG."""
    root = Path(folder)
    plan = FolderPlan(str(root))
    if not root.is_dir():
        plan.problems.append(Problem(f"{root}: snapshot folder does not exist"))
        return plan
    files = snapshot_files(root)
    plan.files = len(files)
    read, broken = _read(files, plan.problems)
    plan.seen = {**{k: d.name for k, d in broken.items() if d.name}, **{d.key: d.name for d in read}}
    plans = _drop_clashes(read, broken, plan.problems)
    by_key = {d.key: d for d in plans}

    for d in plans:
        for name in d.inputs:
            if name.lower() not in plan.seen:
                plan.problems.append(Problem(f"{d.file}: dataset '{d.name}': input '{name}' has no valid "
                                             f"DatasetSnapshot in {root}", d.name))
    for path in _cycles(by_key):
        files_in = ", ".join(sorted({by_key[k].file for k in path}))
        names = " -> ".join(by_key[k].name for k in path)
        for k in dict.fromkeys(path):
            plan.problems.append(Problem(f"dataset dependency cycle: {names} (files: {files_in})", by_key[k].name))
        for k in path:
            by_key.pop(k, None)
    # Drop whatever depends on a missing or dropped input, until nothing changes.
    changed = True
    while changed:
        changed = False
        for k, d in list(by_key.items()):
            missing = [n for n in d.inputs if n.lower() not in by_key]
            if missing:
                del by_key[k]
                changed = True
                dropped = [n for n in missing if n.lower() in plan.seen]
                if dropped:
                    plan.problems.append(Problem(
                        f"{d.file}: dataset '{d.name}': not scheduled: its input "
                        f"{', '.join(repr(n) for n in dropped)} is not scheduled either (see its problem)", d.name))
    plan.datasets = _order(by_key)
    return plan
