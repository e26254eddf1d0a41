"""Multihash/multibase text, dataset IDs and names (conformance §3)."""
from __future__ import annotations

import pytest
from cryptography.hazmat.primitives import serialization
from hypothesis import given
from hypothesis import strategies as st

from odf_core.errors import InvalidIdentifier
from odf_core.identity import (
    DatasetAlias,
    DatasetID,
    DatasetName,
    DatasetRef,
    DatasetRefRemote,
    Multihash,
    parse_ref_any,
)

MH_TEXT = "f162008c3792b2a4deed1bd7ea2328fb5de5531eccf0fbfa04a7d800cdc267137c635"


def test_multihash_of_multihash_in_every_accepted_encoding():
    mh = Multihash.sha3_256(b"multihash")
    assert mh.to_multibase() == MH_TEXT
    assert Multihash.parse(MH_TEXT) == mh
    assert Multihash.parse("F" + MH_TEXT[1:].upper()) == mh
    assert Multihash.parse("zW1a3CNT52HXiJNniLkWMeev3CPRy9QiNRMWGyTrVNg4hY8") == mh


def test_logical_hash_code_prefix():
    assert Multihash(0x300016, bytes(32)).to_multibase().startswith("f9680c00120")


@pytest.mark.parametrize("bad", ["", "x1620", "f16", "f1620" + "00" * 31, "f1620" + "00" * 33, "fzz", "z0OIl", 42,
                                 None])
def test_invalid_multihash_text(bad):
    with pytest.raises(InvalidIdentifier):
        Multihash.parse(bad)


@given(st.binary(min_size=32, max_size=32))
def test_multihash_text_round_trip(digest):
    mh = Multihash(0x16, digest)
    assert Multihash.parse(str(mh)) == mh


def test_dataset_id_forms():
    did = "did:odf:fed012e6fcce36701dc791488e0d0b1745cc1e33a4c1c9fcc41c63bd343dbbe0970e6"
    a = DatasetID.parse(did)
    assert str(a) == did
    assert a.to_did_key() == "did:key:z6MkhaXgBZDvotDkL5257faiztiGiC2QtKLGpbnnEGta2doK"
    assert DatasetID.parse("did:key:z6MkhaXgBZDvotDkL5257faiztiGiC2QtKLGpbnnEGta2doK") == a
    assert DatasetID.parse("did:odf:z6MkhaXgBZDvotDkL5257faiztiGiC2QtKLGpbnnEGta2doK") == a
    assert DatasetID.parse(did.upper().replace("DID:ODF:F", "did:odf:F")) == a
    assert a.to_bytes()[:2] == b"\xed\x01"


@pytest.mark.parametrize("bad", [
    "did:odf:", "did:odf:xed01", "did:odf:fed01", "did:odf:f1620" + "00" * 32, "odf:fed01" + "00" * 32,
    "did:web:example.com", "did:odf:fed01" + "00" * 33, "did:odf:zzzz0", 7,
])
def test_invalid_dataset_ids(bad):
    with pytest.raises(InvalidIdentifier):
        DatasetID.parse(bad)


def test_new_keypair_private_key_matches_public_id():
    did, pem = DatasetID.new_keypair()
    key = serialization.load_pem_private_key(pem, password=None)
    pub = key.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    assert pub == did.public_key
    assert DatasetID.new_keypair()[0] != did


@pytest.mark.parametrize("ok", ["local.id-only", "user-name/local.id", "a", "A1.b-2.C3"])
def test_valid_aliases(ok):
    assert str(DatasetAlias.parse(ok)) == ok


@pytest.mark.parametrize("bad", [".invalid", "invalid-", "invalid--id", "invalid..id", "in^valid", "foo:bar",
                                 "under_score", "", "a/b/c", "../x", "/abs", "a/"])
def test_invalid_aliases(bad):
    with pytest.raises(InvalidIdentifier):
        DatasetAlias.parse(bad)


def test_names_are_case_insensitive_but_keep_spelling():
    a, b = DatasetAlias.parse("NY-NewYork/Cities"), DatasetAlias.parse("ny-newyork/cities")
    assert a == b and hash(a) == hash(b) and str(a) == "NY-NewYork/Cities"
    assert DatasetName("Foo") != DatasetName("foo2")


def test_refs():
    did = "did:odf:fed012126262ba49e1ba8392c26f7a39e1ba8d756c7469786d3365200c68402ff65dc"
    assert DatasetRef.parse(did).id == DatasetID.parse(did)
    assert str(DatasetRef.parse("acc/name").alias) == "acc/name"
    r = DatasetRefRemote.parse("repo.name/user-name/local.id")
    assert (str(r.repo), str(r.alias)) == ("repo.name", "user-name/local.id")
    assert DatasetRefRemote.parse(f"repo/{did}").id == DatasetID.parse(did)
    assert DatasetRefRemote.parse("https://opendata.ca/odf/census/").url
    assert isinstance(parse_ref_any("a/b/c"), DatasetRefRemote)
    with pytest.raises(InvalidIdentifier):
        DatasetRefRemote.parse("a/b/c/d")
