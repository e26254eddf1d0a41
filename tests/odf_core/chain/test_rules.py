"""Every chain rule of conformance §5 refuses a bad block and leaves the dataset exactly as it was."""
from __future__ import annotations

import re

import pytest

from odf_core.chain import MetadataChain
from odf_core.chain.integrity import verify_integrity
from odf_core.commit import commit_data, describe_slice
from odf_core.errors import ChainError
from odf_core.identity import DatasetID, Multihash
from odf_core.metadata import (
    AddData,
    Checkpoint,
    DataSlice,
    DatasetSnapshot,
    DisablePollingSource,
    DisablePushSource,
    ExecuteTransform,
    MetadataBlock,
    OffsetInterval,
    Seed,
    SetInfo,
    SetTransform,
    SourceState,
    Timestamp,
)
from odf_core.metadata.fragments import DatasetKind, ExecuteTransformInput, TransformInput, TransformSql
from odf_core.workspace import Workspace

from .builders import T0, new_root, write_slice

T1 = Timestamp.parse("2024-01-02T00:00:00Z")
MH = Multihash.sha3_256(b"x")


@pytest.fixture
def ds(tmp_path):
    ws = Workspace.init(tmp_path / "ws")
    h = new_root(ws)
    chain = h.chain
    # one real data slice so offsets, schema and watermark rules have something to check against
    sf = describe_slice(write_slice(tmp_path / "s0.parquet", 0, 10), "offset", 0)
    commit_data(chain, base_head=chain.head(), slice_file=sf, checkpoint_path=None, system_time=T1,
                new_watermark=Timestamp.parse("2024-01-01T12:00:00Z"))
    return h


def _block(chain: MetadataChain, event, **over):
    st = chain.state()
    kw = dict(system_time=T1, prev_block_hash=st.head, sequence_number=st.sequence_number + 1, event=event)
    kw.update(over)
    return MetadataBlock(**kw)


def _slice(start, end):
    return DataSlice(logical_hash=MH, physical_hash=MH, offset_interval=OffsetInterval(start=start, end=end), size=1)


WM = Timestamp.parse("2024-01-01T12:00:00Z")
CASES = {
    "wrong sequence number": (lambda c: _block(c, SetInfo(), sequence_number=c.state().sequence_number + 5),
                              "sequenceNumber"),
    "wrong prev hash": (lambda c: _block(c, SetInfo(), prev_block_hash=MH), "prevBlockHash"),
    "no prev hash": (lambda c: _block(c, SetInfo(), prev_block_hash=None), "prevBlockHash"),
    "second seed": (lambda c: _block(c, Seed(dataset_id=DatasetID(bytes(32)), dataset_kind=DatasetKind.ROOT)), "Seed"),
    "system time goes back": (lambda c: _block(c, SetInfo(), system_time=T0), "systemTime"),
    "decreasing watermark": (lambda c: _block(c, AddData(prev_offset=9,
                                                         new_watermark=Timestamp.parse("2023-01-01T00:00:00Z"))),
                             "watermark decreases"),
    "watermark not carried": (lambda c: _block(c, AddData(prev_offset=9, new_data=_slice(10, 12))), "must be carried"),
    "offset gap": (lambda c: _block(c, AddData(prev_offset=9, new_data=_slice(11, 12), new_watermark=WM)),
                   "offset gap"),
    "offset overlap": (lambda c: _block(c, AddData(prev_offset=9, new_data=_slice(5, 12), new_watermark=WM)),
                       "offset overlap"),
    "empty interval": (lambda c: _block(c, AddData(prev_offset=9, new_data=_slice(10, 9), new_watermark=WM)), "empty"),
    "wrong prevOffset": (lambda c: _block(c, AddData(prev_offset=3, new_data=_slice(10, 12), new_watermark=WM)),
                         "prevOffset"),
    "wrong prevCheckpoint": (lambda c: _block(c, AddData(prev_offset=9, prev_checkpoint=MH, new_watermark=WM,
                                                        new_checkpoint=Checkpoint(physical_hash=MH, size=1))),
                             "prevCheckpoint"),
    "changes nothing": (lambda c: _block(c, AddData(prev_offset=9, new_watermark=WM)), "changes nothing"),
    "transform in root": (lambda c: _block(c, SetTransform(inputs=(TransformInput(dataset_ref="a"),),
                                                           transform=TransformSql(engine="spark", query="select 1"))),
                          "only allowed in derivative"),
    "execute transform in root": (lambda c: _block(c, ExecuteTransform(query_inputs=())), "only allowed in derivative"),
    "disable unknown push source": (lambda c: _block(c, DisablePushSource(source_name="nope")), "no push source"),
    "disable polling source of a push-only root": (lambda c: _block(c, DisablePollingSource()),
                                                   "DisablePollingSource: the dataset has no active polling source"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_bad_block_is_refused_and_dataset_unchanged(ds, case):
    make, fragment = CASES[case]
    chain = ds.chain
    head_before = chain.head()
    files_before = sorted(ds.store.list(""))
    with pytest.raises(ChainError, match=fragment):
        chain.append(make(chain))
    assert chain.head() == head_before
    assert sorted(k for k in ds.store.list("") if k != "info/summary") == sorted(
        k for k in files_before if k != "info/summary")
    assert verify_integrity(ds.store).ok


def test_data_before_schema_is_refused(tmp_path):
    ws = Workspace.init(tmp_path / "ws")
    h = new_root(ws)
    with pytest.raises(ChainError, match="before any SetDataSchema"):
        h.chain.append(_block(h.chain, AddData(new_data=_slice(0, 1))))


def test_first_block_must_be_seed(tmp_path):
    from odf_core.storage import ObjectStore

    chain = MetadataChain(ObjectStore.open(str(tmp_path / "d")))
    with pytest.raises(ChainError, match="first block must be a Seed"):
        chain.append(MetadataBlock(system_time=T0, sequence_number=0, event=SetInfo()))
    assert chain.head() is None


def test_valid_appends_continue_the_chain(ds):
    chain = ds.chain
    st = chain.state()
    h = chain.append_event(AddData(prev_offset=9, new_watermark=WM,
                                   new_source_state=SourceState(source_name="default", kind="odf/etag", value="1")),
                           T1)
    assert chain.head() == h and chain.state().source_state("default").value == "1"
    assert chain.state().sequence_number == st.sequence_number + 1


@pytest.mark.parametrize("over, fragment", [
    (dict(sequence_number=1), "the Seed block must have sequenceNumber 0 and no prevBlockHash (got 1, None)"),
    (dict(prev_block_hash=MH), f"the Seed block must have sequenceNumber 0 and no prevBlockHash (got 0, {MH})"),
])
def test_seed_must_start_at_zero_without_a_parent(tmp_path, over, fragment):
    from odf_core.storage import ObjectStore

    chain = MetadataChain(ObjectStore.open(str(tmp_path / "d")))
    seed = Seed(dataset_id=DatasetID(bytes(32)), dataset_kind=DatasetKind.ROOT)
    with pytest.raises(ChainError, match=re.escape(fragment)):
        chain.append(MetadataBlock(system_time=T0, event=seed, **{"sequence_number": 0, **over}))
    assert chain.head() is None and chain.store.list("") == []


# -- derivative datasets: SetTransform and the per-input rules of ExecuteTransform ---------------------------------

B1, B2 = Multihash.sha3_256(b"input block 1"), Multihash.sha3_256(b"input block 2")


@pytest.fixture
def deriv(ds, tmp_path):
    """A derivative of the root ``ds`` that has processed the root up to block B1 / offset 9."""
    ws = Workspace.open(str(tmp_path / "ws"))
    h = ws.create(DatasetSnapshot(name="deriv", kind=DatasetKind.DERIVATIVE, metadata=(
        SetTransform(inputs=(TransformInput(dataset_ref="root"),),
                     transform=TransformSql(engine="spark", query="select * from root")),)), system_time=T0)
    root_id = ds.chain.state().dataset_id
    h.chain.append_event(ExecuteTransform(query_inputs=(
        ExecuteTransformInput(dataset_id=root_id, new_block_hash=B1, new_offset=9),)), T1)
    assert h.chain.state().transform_input(root_id).new_offset == 9
    return h, root_id


def _input(root_id, **kw):
    return ExecuteTransform(query_inputs=(ExecuteTransformInput(dataset_id=root_id, **kw),))


DERIVATIVE_CASES = {
    "input prevBlockHash is not the last processed block":
        (lambda r: _input(r, prev_block_hash=None, new_block_hash=B2, prev_offset=9, new_offset=12),
         "prevBlockHash None is not the last processed block " + str(B1)),
    "input prevBlockHash names another block":
        (lambda r: _input(r, prev_block_hash=B2, new_block_hash=B2, prev_offset=9, new_offset=12),
         f"prevBlockHash {B2} is not the last processed block {B1}"),
    "input prevOffset is not the last processed offset":
        (lambda r: _input(r, prev_block_hash=B1, new_block_hash=B2, prev_offset=5, new_offset=12),
         "prevOffset 5 is not the last processed offset 9"),
    "input prevOffset missing":
        (lambda r: _input(r, prev_block_hash=B1, new_block_hash=B2, new_offset=12),
         "prevOffset None is not the last processed offset 9"),
    "SetTransform without inputs":
        (lambda r: SetTransform(inputs=(), transform=TransformSql(engine="spark", query="select 1")),
         "SetTransform: a transform needs at least one input"),
    "AddData in a derivative": (lambda r: AddData(new_watermark=WM), "AddData is only allowed in root datasets"),
}


@pytest.mark.parametrize("case", list(DERIVATIVE_CASES))
def test_bad_derivative_block_is_refused_and_dataset_unchanged(deriv, case):
    h, root_id = deriv
    make, fragment = DERIVATIVE_CASES[case]
    head_before = h.chain.head()
    files_before = sorted(k for k in h.store.list("") if k != "info/summary")
    with pytest.raises(ChainError, match=re.escape(fragment)):
        h.chain.append(_block(h.chain, make(root_id)))
    assert h.chain.head() == head_before
    assert sorted(k for k in h.store.list("") if k != "info/summary") == files_before
    assert verify_integrity(h.store).ok


def test_execute_transform_continuing_each_input_is_accepted(deriv):
    h, root_id = deriv
    h.chain.append(_block(h.chain, _input(root_id, prev_block_hash=B1, new_block_hash=B2, prev_offset=9,
                                          new_offset=12)))
    assert h.chain.state().transform_input(root_id).new_offset == 12
    assert verify_integrity(h.store).ok
