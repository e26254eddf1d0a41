"""Workspace: datasets by name, creation from snapshots, keys outside datasets, rename/delete."""
from __future__ import annotations

import os
import stat
import uuid

import pytest

from odf_core.errors import DatasetExists, DatasetNotFound, InvalidIdentifier, OdfError
from odf_core.identity import DatasetID
from odf_core.metadata import DatasetKind, DatasetSnapshot, Seed, SetTransform
from odf_core.metadata import AddPushSource, TransformInput, TransformSql
from odf_core.workspace import Workspace, find_workspace

from .chain.builders import root_snapshot


def derivative(name: str, *inputs: str, query: str = "select * from a") -> DatasetSnapshot:
    return DatasetSnapshot(name=name, kind=DatasetKind.DERIVATIVE, metadata=(
        SetTransform(inputs=tuple(TransformInput(dataset_ref=i) for i in inputs),
                     transform=TransformSql(engine="spark", query=query)),))


@pytest.fixture(params=["local", "memory"])
def ws(request, tmp_path):
    loc = str(tmp_path / ".odf") if request.param == "local" else f"memory://ws-{uuid.uuid4().hex}"
    return Workspace.init(loc)


def test_create_root_seed_then_events(ws):
    h = ws.create(root_snapshot("Cities.Population"))
    blocks = [b for _, b in h.chain.iter_blocks()][::-1]
    assert isinstance(blocks[0].event, Seed) and blocks[0].event.dataset_kind is DatasetKind.ROOT
    assert isinstance(blocks[1].event, AddPushSource)
    assert str(h.name) == "Cities.Population"
    assert ws.get("cities.population").name == h.name  # case-insensitive lookup, spelling kept
    assert ws.get(str(blocks[0].event.dataset_id)).name == h.name


def test_private_key_lives_outside_the_dataset(tmp_path):
    from cryptography.hazmat.primitives import serialization

    ws = Workspace.init(tmp_path / ".odf")
    h = ws.create(root_snapshot("a"))
    did = h.state().dataset_id
    assert not [k for k in h.store.list("") if k.endswith(".pem")]
    key = serialization.load_pem_private_key(ws.key_of(did), password=None)
    pub = key.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    assert DatasetID(pub) == did
    path = ws.store.local_path(f"keys/{str(did).removeprefix('did:odf:')}.pem")
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600


def test_derivative_inputs_resolve_to_ids_and_query_becomes_queries(ws):
    a = ws.create(root_snapshot("a"))
    d = ws.create(derivative("d", "A"))
    st = d.state()
    inp = st.transform.inputs[0]
    assert inp.dataset_ref == str(a.state().dataset_id) and inp.alias == "A"
    assert st.transform.transform.query is None and st.transform.transform.queries[0].query == "select * from a"


def test_derivative_with_missing_input_creates_nothing(ws):
    with pytest.raises(DatasetNotFound, match="input dataset 'nope' does not exist"):
        ws.create(derivative("d", "nope"))
    assert ws.list() == []


def test_existing_name_is_refused_case_insensitively(ws):
    h = ws.create(root_snapshot("abc"))
    head = h.chain.head()
    with pytest.raises(DatasetExists):
        ws.create(root_snapshot("ABC"))
    assert h.chain.head() == head and len(ws.list()) == 1


@pytest.mark.parametrize("bad", ["../x", "/abs", "a/../b", "in^valid", "a..b"])
def test_names_that_try_to_escape_are_refused(ws, bad):
    with pytest.raises((InvalidIdentifier, OdfError)):
        ws.create(root_snapshot("ok").replace(name=bad))
    with pytest.raises((InvalidIdentifier, OdfError)):
        ws.get(bad)
    assert ws.list() == []


def test_rename_and_delete(ws):
    ws.create(root_snapshot("a"))
    ws.create(derivative("d", "a"))
    with pytest.raises(OdfError, match="is an input of d"):
        ws.delete("a")
    ws.rename("a", "b")
    assert [str(h.name) for h in ws.list()] == ["b", "d"]
    # the derivative refers to its input by ID, so the rename does not break it
    assert ws.get("b").state().dataset_id.to_did_odf() == ws.get("d").state().transform.inputs[0].dataset_ref
    with pytest.raises(DatasetExists):
        ws.rename("b", "d")
    ws.delete("d")
    ws.delete("b")
    assert ws.list() == []


def test_find_workspace_walks_up(tmp_path):
    Workspace.init(tmp_path / ".odf")
    deep = tmp_path / "x" / "y"
    deep.mkdir(parents=True)
    assert find_workspace(deep) == tmp_path / ".odf"
    with pytest.raises(OdfError, match="odf init"):
        find_workspace("/")
