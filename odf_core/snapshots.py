"""DatasetSnapshot files → a workspace: create new datasets, and bring existing ones in line with their snapshots.

One planner serves ``odf add`` (new datasets only; ``--exist-ok`` skips existing ones), ``odf add --update`` and the
Airflow ``odf__sync`` task (both also append what changed in existing datasets). :func:`plan_changes` validates
everything it can without Spark against the workspace as it is — each document (see :mod:`odf_core.snapshot_read`),
duplicate names, inputs, dependency cycles, the dataset kind, and every block that would be written through the
chain rules — and writes nothing. The CLI refuses the whole batch when anything is wrong; the sync applies what is
valid and reports the rest, so one broken snapshot does not stop the others.

What an update appends, per dataset, comparing the snapshot's last event of each kind with the chain's current
state: ``SetPollingSource``, ``AddPushSource`` (per source name), ``SetTransform`` (query evolution, validated by
Spark when applied), ``SetInfo``, ``SetLicense``, ``SetAttachments``, ``SetDataSchema`` (only columns may be added)
and ``SetVocab`` (only before the dataset has data: it renames the system columns of the data written so far).
Nothing is ever removed: an event that is no longer in the snapshot stays in force, and other event kinds
(``DisablePushSource`` ...) only apply when a dataset is created.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Literal

from odf_core.chain.rules import validate_append
from odf_core.chain.state import ChainState, fold
from odf_core.errors import ChainError, DatasetNotFound, MetadataError, OdfError
from odf_core.identity import DatasetAlias, DatasetID, DatasetRef, Multihash
from odf_core.metadata import (
    AddPushSource,
    DatasetSnapshot,
    MetadataBlock,
    MetadataEvent,
    Seed,
    SetAttachments,
    SetDataSchema,
    SetInfo,
    SetLicense,
    SetPollingSource,
    SetTransform,
    SetVocab,
    Timestamp,
)
from odf_core.snapshot_read import (  # noqa: F401  (re-exported: the public API of snapshot files)
    QueryCheck,
    SnapshotDoc,
    read_snapshot_file,
    resolve_relative_paths,
    snapshot_files,
)
from odf_core.workspace import DatasetHandle, Workspace

Mode = Literal["add", "exist_ok", "update"]


class DependencyCycle(OdfError):
    pass


# -- reading -----------------------------------------------------------------------------------------------------


def read_snapshot_files(files: Iterable[str | os.PathLike[str]], *,
                        check_query: QueryCheck | None = None) -> list[SnapshotDoc]:
    return [d for f in files for d in read_snapshot_file(f, check_query=check_query)]


def load_snapshot_files(files: Iterable[str | os.PathLike[str]], *,
                        check_query: QueryCheck | None = None) -> list[tuple[str, DatasetSnapshot]]:
    """Every snapshot of every file (multi-document files allowed); the first problem raises."""
    out = []
    for d in read_snapshot_files(files, check_query=check_query):
        if d.error is not None:
            raise d.error
        out.append((d.file, d.valid))
    return out


def input_names(snapshot: DatasetSnapshot) -> list[str]:
    """Keys of the inputs a snapshot names by alias (inputs given by ``did:odf:`` are not in a batch)."""
    names = []
    for ev in snapshot.metadata:
        if isinstance(ev, SetTransform):
            for i in ev.inputs:
                ref = DatasetRef.parse(i.dataset_ref)
                if ref.alias is not None:
                    names.append(ref.alias.name.key)
    return names


def _key(snapshot: DatasetSnapshot) -> str:
    return DatasetAlias.parse(snapshot.name).name.key


def _order(by_key: dict[str, DatasetSnapshot]) -> tuple[list[str], list[list[str]]]:
    """Keys with inputs first, and the dependency cycles found (their members are left out of the order)."""
    order: list[str] = []
    cycles: list[list[str]] = []
    state: dict[str, str] = {}
    for root in by_key:
        if root in state:
            continue
        stack: list[tuple[str, list[str]]] = [(root, [d for d in input_names(by_key[root]) if d in by_key])]
        state[root] = "visiting"
        while stack:
            key, deps = stack[-1]
            if deps:
                dep = deps.pop(0)
                if state.get(dep) == "visiting":
                    trail = [k for k, _ in stack]
                    cycles.append(trail[trail.index(dep):] + [dep])
                elif dep not in state:
                    state[dep] = "visiting"
                    stack.append((dep, [d for d in input_names(by_key[dep]) if d in by_key]))
                continue
            stack.pop()
            state[key] = "done"
            order.append(key)
    in_cycle = {k for c in cycles for k in c}
    return [k for k in order if k not in in_cycle], cycles


def dependency_order(snapshots: list[tuple[str, DatasetSnapshot]]) -> list[tuple[str, DatasetSnapshot]]:
    """Inputs before the datasets that use them; a cycle is an error naming its members."""
    by_key = {_key(s): (f, s) for f, s in snapshots}
    order, cycles = _order({k: s for k, (_, s) in by_key.items()})
    if cycles:
        raise DependencyCycle(f"dataset dependency cycle: {' -> '.join(cycles[0])}")
    return [by_key[k] for k in order]


# -- planning ----------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Change:
    """One write: create ``snapshot``'s dataset (``event`` None) or append ``event`` to it."""

    file: str
    name: str
    snapshot: DatasetSnapshot
    what: str  # e.g. "the polling source"; for a create: "created"
    event: MetadataEvent | None = None

    @property
    def message(self) -> str:
        if self.event is None:
            return f"added {self.name} from {self.file}"
        verb = "evolved" if isinstance(self.event, SetTransform) else "updated"
        return f"{verb} {self.what} of {self.name} from {self.file}"


@dataclass
class Plan:
    changes: list[Change] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)  # existing datasets left alone (exist_ok)
    problems: list[str] = field(default_factory=list)  # one line each, naming file, line, path and value

    def raise_problems(self) -> None:
        """The first problem as one line (with how many more there are), if there is any."""
        if self.problems:
            more = len(self.problems) - 1
            raise OdfError(self.problems[0] + (f" (and {more} more problem(s))" if more else ""))


_PLACEHOLDER_ID = DatasetID(bytes(32))  # the Seed of a simulated create (never written)


def _fake_hash(n: int) -> Multihash:
    return Multihash.sha3_256(n.to_bytes(8, "big"))


class _Simulated:
    """A chain state advanced block by block through the chain rules, without writing anything."""

    def __init__(self, state: ChainState):
        self.state = state
        self.n = 0

    def append(self, event: MetadataEvent) -> None:
        now = Timestamp.now()
        st = self.state
        block = MetadataBlock(system_time=max(now, st.system_time) if st.system_time else now,
                              prev_block_hash=st.head, sequence_number=st.sequence_number + 1, event=event)
        validate_append(st, block)
        self.n += 1
        self.state = fold(st, block, _fake_hash(self.n))


def _input_problem(ws: Workspace, doc: SnapshotDoc, creating: set[str]) -> MetadataError | None:
    for i, ev in enumerate(doc.valid.metadata):
        if not isinstance(ev, SetTransform):
            continue
        for j, inp in enumerate(ev.inputs):
            ref = DatasetRef.parse(inp.dataset_ref)
            if ref.alias is not None and ref.alias.name.key in creating:
                continue
            try:
                ws.get(ref)
            except DatasetNotFound:
                return doc.error_at("input dataset does not exist in the workspace (nor is it added with it)",
                                    f"content.metadata[{i}].inputs[{j}].datasetRef", inp.dataset_ref)
    return None


def _check_create(ws: Workspace, doc: SnapshotDoc, creating: set[str]) -> MetadataError | None:
    """What ``Workspace.create`` would refuse, found without writing: missing inputs and chain rules."""
    problem = _input_problem(ws, doc, creating)
    if problem is not None:
        return problem
    sim = _Simulated(ChainState())
    sim.append(Seed(dataset_id=_PLACEHOLDER_ID, dataset_kind=doc.valid.kind))
    for i, ev in enumerate(doc.valid.metadata):
        try:
            sim.append(ev)
        except ChainError as e:
            return doc.error_at(str(e), f"content.metadata[{i}]")
    return None


def _latest(snapshot: DatasetSnapshot) -> list[tuple[int, MetadataEvent]]:
    """The snapshot's last event of each synced kind (push sources: per name), in snapshot order."""
    last: dict[Any, tuple[int, MetadataEvent]] = {}
    for i, ev in enumerate(snapshot.metadata):
        if isinstance(ev, AddPushSource):
            last[(AddPushSource, ev.source_name)] = (i, ev)
        elif isinstance(ev, _SYNCED):
            last[type(ev)] = (i, ev)
    return sorted(last.values(), key=lambda x: x[0])


_SYNCED = (SetPollingSource, SetTransform, SetInfo, SetLicense, SetAttachments, SetDataSchema, SetVocab)


def _same_transform(a: SetTransform, b: SetTransform) -> bool:
    return (a.inputs, a.transform.replace(version=None)) == (b.inputs, b.transform.replace(version=None))


def _plan_update(ws: Workspace, doc: SnapshotDoc, creating: set[str]) -> tuple[list[Change], MetadataError | None]:
    """The events that bring an existing dataset in line with its snapshot, each checked by the chain rules."""
    snap = doc.valid
    handle = ws.get(snap.name)
    state = handle.state()
    if snap.kind != state.kind:
        assert state.kind is not None  # set by the Seed
        return [], doc.error_at(f"dataset '{handle.name}' is a {state.kind.value} dataset in the workspace: its kind "
                                "cannot change (delete or rename it first)", "content.kind", snap.kind.value)
    sim = _Simulated(state)
    changes = []
    for i, ev in _latest(snap):
        where = f"content.metadata[{i}]"
        wanted: MetadataEvent = ev
        if isinstance(ev, SetTransform):
            problem = _input_problem(ws, doc, creating)
            if problem is not None:
                return [], problem
            if not any(k in creating for k in input_names(snap)):  # else: nothing to compare with yet
                wanted = ws.normalize_event(ev, snap)
                if state.transform is not None and _same_transform(state.transform, wanted):
                    continue
            what = "the transform"
        elif isinstance(ev, SetPollingSource):
            wanted = ws.normalize_event(ev, snap)
            if wanted == state.polling_source:
                continue
            what = "the polling source"
        elif isinstance(ev, AddPushSource):
            wanted = ws.normalize_event(ev, snap)
            if wanted == state.push_source(ev.source_name):
                continue
            what = f"push source '{ev.source_name}'"
        elif isinstance(ev, SetDataSchema):
            if ev.schema == state.schema:
                continue
            what = "the data schema"
        else:
            current = {SetInfo: state.info, SetLicense: state.license, SetAttachments: state.attachments,
                       SetVocab: state.set_vocab}[type(ev)]
            if ev == current:
                continue
            if isinstance(ev, SetVocab) and state.last_offset is not None:
                return [], doc.error_at("the vocabulary cannot change once the dataset has data (it names the "
                                        "columns of the data already written)", where)
            what = {SetInfo: "the info", SetLicense: "the license", SetAttachments: "the attachments",
                    SetVocab: "the vocabulary"}[type(ev)]
        try:
            sim.append(wanted)
        except ChainError as e:
            return [], doc.error_at(str(e), where)
        # A transform is kept as written: apply_changes has Spark validate (and normalize) it.
        changes.append(Change(doc.file, str(handle.name), snap, what, ev if isinstance(ev, SetTransform) else wanted))
    return changes, None


def plan_changes(ws: Workspace, docs: list[SnapshotDoc], mode: Mode = "add") -> Plan:
    """What adding ``docs`` to ``ws`` would write, and every problem found on the way; writes nothing.

    ``mode``: ``add`` refuses existing datasets, ``exist_ok`` skips them, ``update`` appends what changed. A
    dataset with a problem is left out, and so is a new dataset whose input is left out.
    """
    plan = Plan()
    bad: set[str] = set()
    groups: dict[str, list[SnapshotDoc]] = {}
    for d in docs:
        if d.error is not None:
            plan.problems.append(str(d.error))
            if d.key:
                bad.add(d.key)
        else:
            groups.setdefault(_key(d.valid), []).append(d)
    good: dict[str, SnapshotDoc] = {}
    for key, group in groups.items():
        if len(group) > 1 or key in bad:
            where = "; ".join(sorted({f"'{d.valid.name}' in {d.file}" for d in group}))
            extra = " (and in a file with a problem)" if key in bad else ""
            plan.problems.append(f"dataset '{group[0].valid.name}' is defined more than once: {where}{extra}")
            bad.add(key)
        else:
            good[key] = group[0]
    order, cycles = _order({k: d.valid for k, d in good.items()})
    for cycle in cycles:
        files = ", ".join(sorted({good[k].file for k in cycle}))
        plan.problems.append(f"dataset dependency cycle: {' -> '.join(cycle)} (files: {files})")
        bad.update(cycle)

    existing = {str(h.name).lower() for h in ws.list()}
    creating: set[str] = set()
    for key in order:
        doc = good[key]
        exists = key in existing
        held = [i for i in input_names(doc.valid) if i in bad and i not in existing]
        if held and not exists:
            plan.problems.append(f"{doc.file}: dataset '{doc.valid.name}' is not added: its input "
                                 f"'{held[0]}' has a problem (see it)")
            bad.add(key)
            continue
        if exists and mode == "add":
            plan.problems.append(str(doc.error_at(f"dataset '{doc.valid.name}' already exists in workspace "
                                                  f"{ws.url} (--exist-ok skips it, --update updates it)",
                                                  "content.name")))
            bad.add(key)
        elif exists and mode == "exist_ok":
            plan.skipped.append(f"{doc.valid.name}: already exists, skipped ({doc.file})")
        elif exists:
            changes, problem = _plan_update(ws, doc, creating)
            if problem is not None:
                plan.problems.append(str(problem))
                bad.add(key)
            plan.changes += changes
        else:
            problem = _check_create(ws, doc, creating)
            if problem is not None:
                plan.problems.append(str(problem))
                bad.add(key)
                continue
            creating.add(key)
            plan.changes.append(Change(doc.file, doc.valid.name, doc.valid, "created"))
    return plan


# -- applying ----------------------------------------------------------------------------------------------------


@dataclass
class Applied:
    messages: list[str] = field(default_factory=list)
    created: list[DatasetHandle] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)  # changes refused while applying (e.g. by Spark)


def apply_changes(ws: Workspace, plan: Plan, *, engine: Any = None, atomic: bool = False,
                  on_change: Callable[[Change, DatasetHandle], None] | None = None) -> Applied:
    """Write the planned changes in order. Transform evolutions are validated by Spark first (against the inputs
    and the output schema already written), before anything is written: a refused one leaves its dataset as it is
    and, with ``atomic``, the whole workspace (nothing is written); otherwise the other changes go ahead.

    (A transform whose inputs are only created by this batch has nothing to be checked against yet: like
    ``set_transform``, it is validated on the inputs' first data.)"""
    from odf_core.transform import validate_transform

    out = Applied()
    failed: set[str] = set()
    validated: dict[int, MetadataEvent] = {}
    for i, ch in enumerate(plan.changes):
        if isinstance(ch.event, SetTransform) and not _has_new_input(ch, plan):
            try:
                if engine is None:
                    raise OdfError("evolving a transform needs an engine to validate the query")
                validated[i] = validate_transform(ws, ch.name, ch.event, engine=engine)
            except OdfError as e:
                out.failures.append(f"{ch.file}: {e}")
                failed.add(_key(ch.snapshot))
    if atomic and out.failures:
        return out
    for i, ch in enumerate(plan.changes):
        key = _key(ch.snapshot)
        if key in failed:
            continue
        try:
            if ch.event is None:
                handle = ws.create(ch.snapshot)
                out.created.append(handle)
            else:
                handle = ws.get(ch.name)
                if isinstance(ch.event, SetTransform) and i not in validated:
                    validated[i] = validate_transform(ws, ch.name, ch.event, engine=engine)
                handle.chain.append_event(validated.get(i, ch.event))
        except OdfError as e:
            out.failures.append(f"{ch.file}: {e}")
            failed.add(key)
            continue
        out.messages.append(ch.message)
        if on_change is not None:
            on_change(ch, handle)
    return out


def _has_new_input(change: Change, plan: Plan) -> bool:
    created = {_key(c.snapshot) for c in plan.changes if c.event is None}
    return any(k in created for k in input_names(change.snapshot))


def add_snapshots(ws: Workspace, snapshots: list[tuple[str, DatasetSnapshot]]) -> list[DatasetHandle]:
    """Create the datasets of a batch of snapshots, inputs first; nothing is created if any of them is invalid."""
    docs = [SnapshotDoc(f, snapshot=s, name=s.name) for f, s in snapshots]
    plan = plan_changes(ws, docs, "add")
    plan.raise_problems()
    return apply_changes(ws, plan).created


@dataclass
class SyncResult:
    messages: list[str]  # one per change written
    problems: list[str]  # snapshots left out (and changes refused), one line each


def sync_snapshots(ws: Workspace, folder: str | Path, *, engine: Any,
                   check_query: QueryCheck | None = None) -> SyncResult:
    """Bring the workspace in line with a folder of snapshots: add new datasets, append what changed in existing
    ones. A snapshot with a problem is left out (and reported); everything else is synced. Never deletes."""
    plan = plan_changes(ws, read_snapshot_files(snapshot_files(folder), check_query=check_query), "update")
    applied = apply_changes(ws, plan, engine=engine)
    return SyncResult(applied.messages, plan.problems + applied.failures)
