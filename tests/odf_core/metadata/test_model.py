"""The ``model`` decorator: every model class is a frozen, keyword-only dataclass with value equality and hashing."""
from __future__ import annotations

import dataclasses

import pytest

from odf_core.metadata.events import AddData, Seed
from odf_core.metadata.fragments import DatasetKind
from odf_core.metadata.schema import TABLES, Model, model


def test_model_classes_are_frozen_keyword_only_dataclasses() -> None:
    """Equality, hash, repr and the refusal of changes are Model's, over the fields dataclasses would compare, hash
    and show (none generated per class: each generated method is an exec at import)."""
    for cls in TABLES.values():
        params = vars(cls)["__dataclass_params__"]
        assert dataclasses.is_dataclass(cls) and not params.frozen, cls  # frozen by Model, not by dataclass
        assert (cls.__setattr__, cls.__delattr__) == (Model.__setattr__, Model.__delattr__), cls
        assert all(f.kw_only for f in dataclasses.fields(cls)), cls
        assert (cls.__eq__, cls.__hash__, cls.__repr__) == (Model.__eq__, Model.__hash__, Model.__repr__), cls
        fs = dataclasses.fields(cls)
        assert cls._odf_shown == tuple(f.name for f in fs if f.repr), cls


def test_equality_hash_and_repr_are_what_dataclasses_would_generate() -> None:
    @model
    class Pair(Model):
        a: int = 0
        b: tuple[int, ...] = ()
        seen: int = dataclasses.field(default=0, compare=False)

    @model
    class Twin(Model):
        a: int = 0
        b: tuple[int, ...] = ()
        seen: int = dataclasses.field(default=0, compare=False)

    @dataclasses.dataclass(frozen=True, kw_only=True)
    class Generated:
        a: int = 0
        b: tuple[int, ...] = ()
        seen: int = dataclasses.field(default=0, compare=False)

    x, y = Pair(a=1, b=(2,), seen=1), Pair(a=1, b=(2,), seen=2)
    assert x == y and hash(x) == hash(y) and hash(x) == hash(Generated(a=1, b=(2,)))  # ``seen`` is not compared
    assert x != Pair(a=1, b=(3,)) and x != Pair(a=2, b=(2,)) and x != Twin(a=1, b=(2,)) and x != (1, (2,))
    assert repr(x) == repr(Generated(a=1, b=(2,), seen=1)).replace("Generated", "Pair")
    assert len({x, y, Pair(a=1, b=(3,))}) == 2
    one = model(type("One", (Model,), {"__annotations__": {"a": "int"}, "a": 0}))
    none = model(type("Empty", (Model,), {}))
    assert one(a=1) == one(a=1) != one(a=2) and hash(one(a=1)) == hash((1,)) and none() == none()
    with pytest.raises(TypeError, match="derives from Model"):
        model(type("Plain", (), {}))


def test_model_instances_compare_by_value_hash_and_refuse_changes() -> None:
    a, b = AddData(prev_offset=3), AddData(prev_offset=3)
    assert a == b and hash(a) == hash(b) and a != AddData(prev_offset=4)
    with pytest.raises(dataclasses.FrozenInstanceError, match="cannot assign to field 'prev_offset'"):
        a.prev_offset = 5  # type: ignore[misc]  # the point of the test: a frozen field refuses assignment
    with pytest.raises(dataclasses.FrozenInstanceError, match="cannot assign to field 'other'"):
        a.other = 1  # type: ignore[attr-defined]  # nor can anything else be set, as on a frozen dataclass
    with pytest.raises(dataclasses.FrozenInstanceError, match="cannot delete field 'prev_offset'"):
        del a.prev_offset  # type: ignore[misc]
    assert a.prev_offset == 3 and vars(a) == vars(b)
    assert a.replace(prev_offset=5) == AddData(prev_offset=5)


def test_model_instances_copy_and_pickle_as_frozen_dataclasses_do() -> None:
    import copy
    import pickle

    from odf_core.metadata.fragments import OffsetInterval

    a = AddData(prev_offset=3)
    i = OffsetInterval(start=1, end=2)
    for x in (a, i):
        assert copy.copy(x) == x and copy.deepcopy(x) == x and pickle.loads(pickle.dumps(x)) == x


def test_model_constructor_is_keyword_only_and_required_fields_are_required() -> None:
    with pytest.raises(TypeError):
        AddData(None, 3)  # type: ignore[call-arg]  # the point of the test: positional arguments are refused
    with pytest.raises(TypeError):
        Seed(dataset_kind=DatasetKind.ROOT)  # type: ignore[call-arg]  # dataset_id is required
