"""Keys can never escape the store root, whichever method receives them."""
from __future__ import annotations

from pathlib import Path

import pytest

from odf_core.errors import InvalidIdentifier
from odf_core.storage import ObjectStore, validate_key, validate_prefix

BAD_KEYS = {
    "../x": "not allowed",
    "/etc/passwd": "absolute path",
    "a/../../b": "not allowed",
    "a\\b": "backslash",
    "..\\..\\x": "backslash",
    "a/./b": "not allowed",
    "a//b": "empty path component",
    "a/": "empty path component",
    "": "must not be empty",
    "a\x00b": "NUL",
    "blocks/.tmp-1-x": "reserved",
    ".hidden": "reserved",
    "a b": "may only contain",
    "caf\u00e9": "may only contain",
    "x" * 201: "longer than",
}


@pytest.mark.parametrize("key", list(BAD_KEYS))
def test_bad_keys_rejected_by_every_method(key: str, tmp_path: Path) -> None:
    root = tmp_path / "root"
    store = ObjectStore.open(str(root))
    src = tmp_path / "src"
    src.write_bytes(b"s")
    calls = [
        lambda: store.get(key),
        lambda: store.open_read(key),
        lambda: store.exists(key),
        lambda: store.size(key),
        lambda: store.delete(key),
        lambda: store.local_path(key),
        lambda: store.url_of(key),
        lambda: store.put(key, b"x"),
        lambda: store.put_if_absent(key, b"x"),
        lambda: store.put_file_if_absent(key, src),
        lambda: store.get_ref(key),
        lambda: store.compare_and_swap_ref(key, None, "fa"),
    ]
    for call in calls:
        with pytest.raises(InvalidIdentifier, match=BAD_KEYS[key]) as e:
            call()
        assert repr(key)[:40].rstrip("'") in str(e.value)  # the message names the key
    assert sorted(p.name for p in tmp_path.iterdir()) == ["src"]  # nothing written anywhere, not even the root


@pytest.mark.parametrize("prefix", ["../x", "/etc", "a/../../b", "a\\b", "a//b", ".."])
def test_bad_prefixes_rejected(prefix: str, tmp_path: Path) -> None:
    store = ObjectStore.open(str(tmp_path / "root"))
    for call in (store.list, store.delete_prefix, store.child):
        with pytest.raises(InvalidIdentifier, match="invalid key prefix"):
            call(prefix)


def test_good_keys_and_prefixes() -> None:
    for key in ("refs/head", "blocks/f1620abc", "info/summary.json", "did:odf:fed01/x", "a-b_c+d=e@f,g~h"):
        assert validate_key(key) == key
    assert validate_prefix("") == "" and validate_prefix("blocks/") == "blocks"
    with pytest.raises(InvalidIdentifier, match="must be a string"):
        validate_key(b"bytes")  # type: ignore[arg-type]
