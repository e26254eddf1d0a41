from __future__ import annotations

import pytest
from multiformats import multibase

from odf_core.errors import InvalidIdentifier
from odf_core.identity import ARROW0_SHA3_256, Multihash
from odf_core.storage import DatasetLayout, ObjectStore, canonical_multihash

MH = Multihash.sha3_256(b"block")
HEX = MH.to_multibase()


def test_keys_use_canonical_base16() -> None:
    assert HEX.startswith("f1620") and len(HEX) == 1 + 2 * 34
    upper = "F" + HEX[1:].upper()
    b58 = multibase.encode(MH.to_bytes(), "base58btc")
    assert b58.startswith("z")
    for form in (MH, HEX, upper, b58):
        assert DatasetLayout.block_key(form) == f"blocks/{HEX}"
        assert DatasetLayout.data_key(form) == f"data/{HEX}"
        assert DatasetLayout.checkpoint_key(form) == f"checkpoints/{HEX}"
    assert DatasetLayout.head_ref == "refs/head"
    assert DatasetLayout.info_key("summary") == "info/summary"
    assert canonical_multihash(b58) == HEX


@pytest.mark.parametrize("bad", ["", "abc", "f123", "fzz", "f1620ab", "../x", "zI0l", None, 7])
def test_invalid_multihash_text_rejected(bad: object) -> None:
    for make in (DatasetLayout.block_key, DatasetLayout.data_key, DatasetLayout.checkpoint_key):
        with pytest.raises(InvalidIdentifier):
            make(bad)  # type: ignore[arg-type]


def test_info_key_validated() -> None:
    assert DatasetLayout.info_key("cache/v1") == "info/cache/v1"
    for bad in ("../refs/head", "/abs", ""):
        with pytest.raises(InvalidIdentifier):
            DatasetLayout.info_key(bad)


def test_multihash_of_inverts_keys() -> None:
    other = Multihash(ARROW0_SHA3_256, bytes(32))
    for mh in (MH, other):
        for make in (DatasetLayout.block_key, DatasetLayout.data_key, DatasetLayout.checkpoint_key):
            assert DatasetLayout.multihash_of(make(mh)) == mh
    for bad in ("refs/head", "info/x", "blocks/nothex", "blocks", 5):
        with pytest.raises(InvalidIdentifier):
            DatasetLayout.multihash_of(bad)  # type: ignore[arg-type]


def test_layout_keys_are_valid_store_keys() -> None:
    store = ObjectStore.open("memory://layout-test")
    try:
        store.put_if_absent(DatasetLayout.block_key(MH), b"block")
        store.compare_and_swap_ref(DatasetLayout.head_ref, None, HEX)
        assert [DatasetLayout.multihash_of(k) for k in store.list(DatasetLayout.BLOCKS)] == [MH]
        assert Multihash.parse(store.get_ref(DatasetLayout.head_ref)) == MH
    finally:
        store.fs.rm(store.root, recursive=True)
