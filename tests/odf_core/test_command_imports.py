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
    "pyarrow": "only hashing a slice no engine described, or writing an input's schema file the first time",
    "numpy": "only through pyarrow (flatbuffers' numpy helpers go unused: odf_core/metadata/flatbuffers_lib.py)",
    "fsspec": "only stores that are not a local directory",
    "google.protobuf.descriptor_pb2": "only when the gRPC messages are first built",
    "email.utils": "only HTTP dates (a URL source's Last-Modified)",
    "importlib.metadata": "only this installation's engine version (a warm engine gives its own)",
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
    assert {"odf_core.metadata.flatbuffers_serde", "odf_core.engine.protocol"} <= loaded  # the step's own work


# what cmd_pull of a derivative imports up to the engine's answer (the remote engine's client included)
DERIVATIVE_PULL_MODULES = ("odf_core.cli", "odf_core.progress", "odf_core.engine.remote", "odf_core.engine.autostart",
                           "odf_core.transform", "odf_core.repository.cli_support", "odf_core.commit")
NOT_ON_A_DERIVATIVES_PULL = {
    "odf_core.ingest.fetch": "only a root's polling source",
    "odf_core.ingest.prepare": "only a root's polling source",
    "odf_core.ingest.transaction": "only ingesting into a root",
    "odf_core.repository.sync": "only a replica's pull or a push",
    "odf_core.repository.transfer": "only a replica's pull or a push",
    "odf_core.engine.local": "only Spark in this process",
    "odf_core.engine.submit": "only spark-submit per request",
}


def test_a_derivatives_pull_leaves_out_ingest_transfers_and_other_engines():
    """Package ``__init__`` files load what they re-export on first use (odf_core.lazy_exports): importing
    ``odf_core.ingest.staging`` or ``odf_core.repository.registry`` no longer loads the whole package."""
    loaded = loaded_by(DERIVATIVE_PULL_MODULES)
    wrongly = {m: why for m, why in NOT_ON_A_DERIVATIVES_PULL.items() if m in loaded}
    assert not wrongly, f"imported on every pull of a derivative although needed {wrongly}"
    assert {"odf_core.transform.transaction", "odf_core.ingest.staging", "odf_core.repository.registry"} <= loaded


def test_lazily_exported_names_load_on_first_use():
    code = ("import sys; import odf_core.ingest as i, odf_core.repository as r, odf_core.engine as e; "
            "assert 'odf_core.ingest.fetch' not in sys.modules and 'odf_core.engine.local' not in sys.modules; "
            "print(i.FetchOptions.__module__, i.IngestError.__name__, r.pull_remote.__module__, r.Diverged.__module__, "
            "e.LocalEngine.__module__, e.SubmitEngine.__module__); "
            "from odf_core.ingest import read_prepare_manifest, transaction; print(transaction.__name__); "
            "import odf_core.ingest.fetch as f; print(callable(f.fetch))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["odf_core.ingest.options", "IngestError", "odf_core.repository.sync",
                                   "odf_core.repository.transfer", "odf_core.engine.local", "odf_core.engine.submit",
                                   "odf_core.ingest.transaction", "True"]
    with pytest.raises(AttributeError, match="module 'odf_core.ingest' has no attribute 'nothing'"):
        import odf_core.ingest

        odf_core.ingest.nothing  # noqa: B018


def test_the_lazy_parts_still_work(tmp_path):
    """base58btc ids, new key pairs, YAML in and out, the fetchers: each loads its library on first use."""
    from odf_core.identity import DatasetID
    from odf_core.identity.multihash import decode_multibase
    from odf_core.ingest.fetch import fetch
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


PYARROW_WORK = """
import sys
import pyarrow as pa, pyarrow.parquet as pq
t = pa.table({"o": pa.array([1, 2], pa.int64()), "t": pa.array([1, 2], pa.timestamp("ms", tz="UTC"))})
pq.write_table(t, sys.argv[1])
back = pq.read_table(sys.argv[1])
offsets = back.column("o").to_numpy()
print("pandas" in sys.modules and sys.modules["pandas"] is not None)
"""


def _run(code: str, *args: str) -> list[str]:
    done = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()


def test_a_remote_engines_command_builds_tables_without_pandas_and_prints_them_through_it(tmp_path):
    """pyarrow imports pandas (0.23 s) on the table work a step's client does (odf_core/pandas_deferred.py): the CLI
    defers it once its engine is remote, and a table printed afterwards still gets pandas' layout."""
    path = str(tmp_path / "t.parquet")
    assert _run(PYARROW_WORK, path) == ["True"]  # what pyarrow does on its own: the deferral below is what saves it
    deferred = ("import argparse, sys\nfrom odf_core.cli import _engine\n"
                "_engine(argparse.Namespace(engine='grpc://127.0.0.1:9', engine_token_file=None))\n" + PYARROW_WORK
                + "from odf_core.sql_shell import format_table\nprint(format_table(back))\n"
                "print('pandas' in sys.modules and sys.modules['pandas'] is not None)\n")
    out = _run(deferred, path)
    assert out[0] == "False", out  # the remote engine's client built, wrote, read and hashed-ready a table: no pandas
    assert out[1].split() == ["o", "t"] and out[2].split()[0] == "1" and out[-1] == "True", out


def test_spark_in_this_process_keeps_pandas_importable(tmp_path):
    """Without a remote engine nothing is deferred: Spark in the command's own process may use pandas."""
    code = ("import argparse, sys\nfrom odf_core.cli import _engine\n"
            "_engine(argparse.Namespace(engine=None, master='local[1]', conf=[]))\n" + PYARROW_WORK)
    assert _run(code, str(tmp_path / "t.parquet")) == ["True"]
