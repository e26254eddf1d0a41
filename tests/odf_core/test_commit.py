"""Committing a slice from the engine's description of it (odf_core/commit.py, issue #64): trusted only for the bytes
the coordinator hashes itself, and recording exactly what describing the file here records."""
from __future__ import annotations

import logging

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from odf_core import commit
from odf_core.commit import commit_data, describe_slice, described_slice, ensure_schema
from odf_core.engine.slice_description import describe as slice_description
from odf_core.errors import IntegrityError
from odf_core.ingest.transaction import _described
from odf_core.metadata import SetDataSchema, Timestamp
from odf_core.metadata.arrow_fb_verify import top_level_fields
from odf_core.metadata.arrow_schema import decode_arrow_schema, encode_arrow_schema, recorded_schema
from odf_core.metadata.yaml_serde import to_data
from odf_core.engine.protocol import MergeOutcome
from odf_core.workspace import Workspace

from .chain.builders import T0, new_root, slice_table, write_slice


def refuse_to_describe(*args, **kwargs):
    raise AssertionError("the coordinator described the slice itself")


def test_the_engines_description_of_the_same_file_is_committed_as_it_is(tmp_path, monkeypatch):
    path = write_slice(tmp_path / "s.parquet", 0, 3)
    engine_said = slice_description(path, "offset", 0)
    monkeypatch.setattr(commit, "describe_slice", refuse_to_describe)  # the engine's description is used as it is
    got = described_slice(path, "offset", 0, engine_said)
    assert got.data_slice == engine_said.data_slice and got.schema == engine_said.schema


def test_what_the_engine_says_equals_what_the_coordinator_computes(tmp_path):
    path = write_slice(tmp_path / "s.parquet", 5, 4)
    mine = describe_slice(path, "offset", 5)
    said = slice_description(path, "offset", 5)
    assert (said.data_slice, said.schema) == (mine.data_slice, mine.schema)
    assert said.schema == encode_arrow_schema(recorded_schema(pq.read_schema(path)))


@pytest.mark.parametrize("change", ["other file", "other start"])
def test_a_description_that_does_not_fit_the_file_is_not_trusted(tmp_path, caplog, change):
    """Another file's description (other bytes: the physical hash differs) or one for other offsets: the
    coordinator describes the file itself and commits what the file holds."""
    path = write_slice(tmp_path / "s.parquet", 0, 3)
    other = write_slice(tmp_path / "o.parquet", 0, 3, system_ms=1)
    said = slice_description(other if change == "other file" else write_slice(tmp_path / "p.parquet", 7, 3),
                             "offset", 0 if change == "other file" else 7)
    with caplog.at_level(logging.WARNING, logger="odf_core.commit"):
        got = described_slice(path, "offset", 0, said)
    assert got.data_slice == describe_slice(path, "offset", 0).data_slice != said.data_slice
    assert "is not the slice the engine described" in caplog.text


def test_no_description_describes_the_file_here_and_still_checks_its_offsets(tmp_path):
    path = write_slice(tmp_path / "s.parquet", 3, 2)
    assert described_slice(path, "offset", 3, None).data_slice == describe_slice(path, "offset", 3).data_slice
    with pytest.raises(IntegrityError, match="offsets must run consecutively from 0"):
        described_slice(path, "offset", 0, None)


def test_a_merge_record_of_an_earlier_build_has_no_description(tmp_path):
    """merge.json written before the engine described slices: the commit hashes the slice itself."""
    assert _described({"numRecords": 2, "offsetInterval": {"start": 0, "end": 1}}) is None
    said = slice_description(write_slice(tmp_path / "s.parquet", 0, 2), "offset", 0)
    record = to_data(MergeOutcome(num_records=2, slice=said))
    assert _described(record) == said
    assert _described({**record, "slice": {"dataSlice": "not a table"}}) is None


def _schemas(ws_path):
    h = new_root(Workspace.init(ws_path))
    return h, [b.event for _, b in h.chain.iter_blocks() if isinstance(b.event, SetDataSchema)]


def test_the_first_slice_records_its_schema_and_the_same_bytes_add_nothing(tmp_path):
    h, before = _schemas(tmp_path / "ws")
    assert before == []
    path = write_slice(tmp_path / "s0.parquet", 0, 2)
    commit_data(h.chain, base_head=h.chain.head(), slice_file=described_slice(path, "offset", 0, None),
                checkpoint_path=None, system_time=T0)
    path = write_slice(tmp_path / "s1.parquet", 2, 2)
    commit_data(h.chain, base_head=h.chain.head(), slice_file=described_slice(
        path, "offset", 2, slice_description(path, "offset", 2)), checkpoint_path=None, system_time=T0)
    schemas = [b.event for _, b in h.chain.iter_blocks() if isinstance(b.event, SetDataSchema)]
    assert len(schemas) == 1
    assert decode_arrow_schema(schemas[0].schema) == recorded_schema(pq.read_schema(path))


def test_other_bytes_of_the_same_columns_add_no_schema_but_a_new_column_does(tmp_path):
    """The dataset's schema bytes may come from another writer (nullability, field order of the FlatBuffer): the
    same names and types are the same schema; an added column is an evolution the chain records."""
    h = new_root(Workspace.init(tmp_path / "ws"))
    path = write_slice(tmp_path / "s0.parquet", 0, 2)
    commit_data(h.chain, base_head=h.chain.head(), slice_file=describe_slice(path, "offset", 0),
                checkpoint_path=None, system_time=T0)
    state = h.chain.state()
    schema = decode_arrow_schema(state.schema)
    required = pa.schema([pa.field(f.name, f.type, nullable=False) for f in schema])
    assert encode_arrow_schema(required) != bytes(state.schema)
    assert ensure_schema(h.chain, state, encode_arrow_schema(required), Timestamp.parse("2024-02-01T00:00:00Z")) \
        is state
    wider = slice_table(2, 2, extra={"w": pa.array(["x", "y"])}).schema
    after = ensure_schema(h.chain, state, encode_arrow_schema(recorded_schema(wider)),
                          Timestamp.parse("2024-02-01T00:00:00Z"))
    assert after.head != state.head and top_level_fields(after.schema)[-1] == ("w", True)


@pytest.mark.parametrize("schema", [
    pa.schema([pa.field("a", pa.int64(), False), pa.field("b", pa.string())]),
    pa.schema([pa.field("s", pa.struct([pa.field("x", pa.int32(), False)]), False),
               pa.field("l", pa.list_(pa.float64())), pa.field("", pa.timestamp("ms", tz="UTC"), False)]),
    pa.schema([]),
])
def test_top_level_fields_read_names_and_nullability_as_pyarrow_does(schema):
    encoded = encode_arrow_schema(schema)
    assert top_level_fields(encoded) == tuple((f.name, f.nullable) for f in decode_arrow_schema(encoded))


def test_top_level_fields_refuse_a_truncated_schema():
    from odf_core.errors import DecodeError

    encoded = encode_arrow_schema(pa.schema([pa.field("a", pa.int64())]))
    with pytest.raises(DecodeError, match="Arrow schema FlatBuffer"):
        top_level_fields(encoded[: len(encoded) // 2])

