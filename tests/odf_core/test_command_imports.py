"""What a tiny step's ``odf`` process imports (issue #64): the modules an ``odf ingest`` and an ``odf pull`` of a
derivative load against a long-lived engine leave out the libraries only other commands need, each of which cost
every command tens of milliseconds before any work; and those commands still find them when they need them."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from odf_core.errors import MetadataError

ROOT = Path(__file__).resolve().parents[2]

# what cmd_ingest / cmd_pull import up to the engine's answer (the remote engine's client included)
STEP_MODULES = ("odf_core.cli", "odf_core.ingest.transaction", "odf_core.progress", "odf_core.engine.remote",
                "odf_core.transform", "odf_core.repository.cli_support", "odf_core.commit")
NOT_ON_THE_STEP_PATH = {
    "multiformats": "base58btc ids only (did:key); ODF's canonical base16 is decoded by hand",
    "cryptography": "only a new dataset's key pair",
    "yaml": "only YAML files (snapshots, manifests shown by `odf log`, repos.yaml)",
    "http.client": "only fetching a URL source or a remote repository",
    "urllib.request": "only fetching a URL source",
    "pyspark": "only Spark in this process",
}


def loaded_by(modules: tuple[str, ...]) -> set[str]:
    code = (f"import sys; import {', '.join(modules)}; import json; "
            "print(json.dumps(sorted(sys.modules)))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert done.returncode == 0, done.stderr
    return set(json.loads(done.stdout))


def test_a_tiny_steps_imports_leave_out_what_only_other_commands_need():
    loaded = loaded_by(STEP_MODULES)
    wrongly = {m: why for m, why in NOT_ON_THE_STEP_PATH.items() if m in loaded}
    assert not wrongly, f"imported on every ingest/pull although needed {wrongly}"
    assert "pyarrow" in loaded  # the step's own work (hashing the slice) is there


def test_the_lazy_parts_still_work(tmp_path):
    """base58btc ids, new key pairs, YAML in and out, the fetchers: each loads its library on first use."""
    from odf_core.identity import DatasetID
    from odf_core.identity.multihash import decode_multibase
    from odf_core.ingest import fetch
    from odf_core.metadata.yaml_serde import dump_data, read_manifest_docs

    did, pem = DatasetID.new_keypair()
    assert pem.startswith(b"-----BEGIN PRIVATE KEY-----")
    did_key = did.to_did_key()
    assert did_key.startswith("did:key:z") and DatasetID.parse(did_key) == did
    assert decode_multibase("z" + did_key.removeprefix("did:key:z")) == did.to_bytes()
    assert dump_data({"a": "2024-01-01T00:00:00Z"}) == "a: 2024-01-01T00:00:00Z\n"
    snapshot = tmp_path / "s.yaml"
    snapshot.write_text("kind: DatasetSnapshot\nversion: 1\ncontent:\n  name: a\n  kind: Root\n  size: 3\n")
    (doc,) = read_manifest_docs(snapshot)
    assert doc.error is not None and f"{snapshot}:6:" in str(doc.error), doc.error  # the line, from YAML's nodes
    snapshot.write_text("kind: DatasetSnapshot\nkind: MetadataBlock\n")
    with pytest.raises(MetadataError, match=":2: .*duplicate key"):
        read_manifest_docs(snapshot)
    assert callable(fetch)
