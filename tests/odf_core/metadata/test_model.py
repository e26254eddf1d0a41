"""The ``model`` decorator: every model class is a frozen, keyword-only dataclass with value equality and hashing."""
from __future__ import annotations

import dataclasses

import pytest

from odf_core.metadata.events import AddData, Seed
from odf_core.metadata.fragments import DatasetKind
from odf_core.metadata.schema import TABLES


def test_model_classes_are_frozen_keyword_only_dataclasses() -> None:
    for cls in TABLES.values():
        params = vars(cls)["__dataclass_params__"]
        assert dataclasses.is_dataclass(cls) and params.frozen and params.eq, cls
        assert all(f.kw_only for f in dataclasses.fields(cls)), cls


def test_model_instances_compare_by_value_hash_and_refuse_changes() -> None:
    a, b = AddData(prev_offset=3), AddData(prev_offset=3)
    assert a == b and hash(a) == hash(b) and a != AddData(prev_offset=4)
    with pytest.raises(dataclasses.FrozenInstanceError):
        a.prev_offset = 5  # type: ignore[misc]  # the point of the test: a frozen field refuses assignment
    assert a.replace(prev_offset=5) == AddData(prev_offset=5)


def test_model_constructor_is_keyword_only_and_required_fields_are_required() -> None:
    with pytest.raises(TypeError):
        AddData(None, 3)  # type: ignore[call-arg]  # the point of the test: positional arguments are refused
    with pytest.raises(TypeError):
        Seed(dataset_kind=DatasetKind.ROOT)  # type: ignore[call-arg]  # dataset_id is required
