"""Spark on a workspace on S3 (moto's server on loopback): ingest stages locally and uploads its objects at the
commit; a derivative transform reads its inputs through local copies; verification re-runs the transform; and an
ingest planned on a head that another writer moved fails with one clear line, leaving the dataset as it was."""
from __future__ import annotations

from pathlib import Path

import pytest

from odf_core.chain.integrity import verify_integrity
from odf_core.engine import LocalEngine
from odf_core.errors import DatasetChanged
from odf_core.ingest import transaction as tx
from odf_core.metadata import (
    AddPushSource,
    DatasetKind,
    DatasetSnapshot,
    MergeStrategyAppend,
    ReadStepNdJson,
    SetTransform,
    TransformInput,
    TransformSql,
)
from odf_core.transform import run as run_transform, verify
from odf_core.workspace import Workspace

SOURCE = AddPushSource(source_name="app", read=ReadStepNdJson(schema=("city STRING", "rating INT")),
                       merge=MergeStrategyAppend())


def _file(tmp_path: Path, name: str, *rows: tuple[str, int]) -> str:
    path = tmp_path / name
    path.write_text("".join(f'{{"city": "{c}", "rating": {r}}}\n' for c, r in rows))
    return str(path)


@pytest.mark.spark
def test_ingest_transform_verify_and_a_concurrent_commit_on_s3(s3_server, spark, tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("ODF_STAGING_DIR", str(tmp_path / "staging"))
    engine = LocalEngine.with_session(spark)
    ws = Workspace.init(f"s3://{s3_server.bucket()}/ws")
    ws.create(DatasetSnapshot(name="ratings", kind=DatasetKind.ROOT, metadata=(SOURCE,)))
    first = tx.push(ws, "ratings", _file(tmp_path, "a.ndjson", ("Oslo", 4), ("Riga", 5)), engine=engine)
    assert first.num_records == 2
    ws.create(DatasetSnapshot(name="good", kind=DatasetKind.DERIVATIVE, metadata=(SetTransform(
        inputs=(TransformInput(dataset_ref="ratings"),),
        transform=TransformSql(engine="spark",
                               query="select event_time, city, rating from ratings where rating > 4")),)))
    out = run_transform(ws, "good", engine=engine)
    assert out is not None and out.num_records == 1

    # A transaction planned on the head, then another writer commits first: the planned one is refused.
    txn = tx.begin(ws, "ratings", source="app")
    tx.stage_push_file(txn, _file(tmp_path, "b.ndjson", ("Kyiv", 3)))
    tx.merge(ws, txn, engine, with_read=True)
    tx.push(ws, "ratings", _file(tmp_path, "c.ndjson", ("Lima", 6)), engine=engine)
    head = ws.get("ratings").chain.head()
    with pytest.raises(DatasetChanged, match=rf"^dataset 'ratings' changed concurrently \(head now {head}\); retry$"):
        tx.commit(ws, txn)
    assert ws.get("ratings").chain.head() == head

    assert run_transform(ws, "good", engine=engine).num_records == 1
    for name in ("ratings", "good"):
        report = verify_integrity(ws.get(name).store)
        assert report.ok, report.problem
    assert verify(ws, "good", engine=engine).ok
