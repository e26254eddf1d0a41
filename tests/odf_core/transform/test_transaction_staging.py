"""A derivative's transaction staging: distinct transaction ids never share a directory.

One naming rule with ingest.
"""
from __future__ import annotations

import os

from odf_core.ingest.staging import staging_name
from odf_core.metadata import AddPushSource, DatasetKind, DatasetSnapshot, MergeStrategyAppend, ReadStepNdJson
from odf_core.metadata import SetTransform, TransformInput, TransformSql
from odf_core.transform.transaction import transaction_staging
from odf_core.workspace import Workspace


def test_ids_that_clean_up_alike_get_their_own_staging(tmp_path):
    ws = Workspace.init(tmp_path / ".odf")
    ws.create(DatasetSnapshot(name="root", kind=DatasetKind.ROOT, metadata=(
        AddPushSource(source_name="s", read=ReadStepNdJson(), merge=MergeStrategyAppend()),)))
    d = ws.create(DatasetSnapshot(name="d", kind=DatasetKind.DERIVATIVE, metadata=(SetTransform(
        inputs=(TransformInput(dataset_ref="root"),), transform=TransformSql(engine="spark", query="select 1")),)))
    state = d.state()
    ids = ["dag/run/d", "dag_run_d", "dag:run:d", "a" * 130, "a" * 131]
    dirs = {transaction_staging(ws, state, i) for i in ids}
    assert len(dirs) == len(ids)  # before: the transform only replaced characters, and the first three collided
    assert transaction_staging(ws, state, "plain-id_1.2") == os.path.join(
        os.path.dirname(transaction_staging(ws, state, "x")), "transform-plain-id_1.2")  # a safe id is kept as is
    assert all(len(os.path.basename(p)) <= 10 + 120 for p in dirs)
    assert staging_name("dag/run/d") != staging_name("dag_run_d")
