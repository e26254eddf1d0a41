"""Hypothesis strategies for every model type, derived from the wire specs (so new types are covered for free)."""
from __future__ import annotations

from hypothesis import strategies as st

from odf_core.identity import DatasetID, Multihash
from odf_core.metadata.data_schema import ExtraAttributes
from odf_core.metadata.schema import W, Wire, fields_of, table, union
from odf_core.metadata.timestamp import Timestamp

_MIN_NS = -62135596800 * 10**9  # 0001-01-01
_MAX_NS = 253402300799 * 10**9 + 999_999_999  # 9999-12-31T23:59:59.999999999

text = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=12)
names = st.from_regex(r"[a-z][a-z0-9]{0,6}(-[a-z0-9]{1,4})?(\.[a-z0-9]{1,5}){0,2}", fullmatch=True)


def multihashes() -> st.SearchStrategy[Multihash]:
    return st.one_of(
        st.builds(Multihash, st.just(0x16), st.binary(min_size=32, max_size=32)),
        st.builds(Multihash, st.just(0x300016), st.binary(min_size=32, max_size=32)),
    )


def dataset_ids() -> st.SearchStrategy[DatasetID]:
    return st.builds(DatasetID, st.binary(min_size=32, max_size=32))


def timestamps() -> st.SearchStrategy[Timestamp]:
    return st.builds(Timestamp, st.integers(_MIN_NS, _MAX_NS))


def for_wire(w: Wire, depth: int = 0) -> st.SearchStrategy:
    k = w.kind
    if k is W.STR:
        if w.fmt == "dataset-ref":
            return st.one_of(names, dataset_ids().map(str), st.tuples(names, names).map("/".join))
        if w.fmt == "dataset-alias":
            return names
        return text
    if k in (W.U64, W.U64N):
        return st.integers(0, 2**64 - 1)
    if k is W.U32:
        return st.integers(0, 2**32 - 1)
    if k is W.I64:
        return st.integers(-(2**63), 2**63 - 1)
    if k is W.I32:
        return st.integers(-(2**31), 2**31 - 1)
    if k is W.BOOLN:
        return st.booleans()
    if k in (W.ENUM, W.ENUMN, W.ENUMN16):
        return st.sampled_from(list(w.ref))
    if k is W.MULTIHASH:
        return multihashes()
    if k is W.DATASET_ID:
        return dataset_ids()
    if k is W.BYTES:
        return st.binary(max_size=40)
    if k is W.TIMESTAMP:
        return timestamps()
    if k is W.TABLE:
        return for_type(table(w.ref), depth + 1)
    if k is W.UNION:
        variants = union(w.ref).variants
        if depth >= _MAX_DEPTH:  # recursive unions (DataType): only the variants that end the recursion
            variants = tuple(v for v in variants if not _recursive(v)) or variants
        return st.one_of([for_type(v, depth + 1) for v in variants])
    if k is W.LIST:
        return st.lists(for_wire(w.ref, depth + 1), max_size=3 if depth < 2 else 1).map(tuple)
    raise AssertionError(k)


_MAX_DEPTH = 6
_JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53), 2**53) | text,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(text, inner, max_size=3),
    max_leaves=6,
)


def _recursive(cls: type) -> bool:
    return any(f.wire.kind in (W.UNION, W.LIST, W.TABLE) for f in fields_of(cls))


def for_type(cls: type, depth: int = 0) -> st.SearchStrategy:
    if cls is ExtraAttributes:  # its one field is JSON object text
        return st.dictionaries(names.map(lambda n: f"example.org/{n}"), _JSON, max_size=3).map(ExtraAttributes.of)
    kw = {}
    for f in fields_of(cls):
        s = for_wire(f.wire, depth)
        kw[f.name] = s if f.required else st.one_of(st.none(), s)
    return st.builds(cls, **kw)
