"""Only the chain is trusted: an edited ``info/summary`` is detected and rebuilt, never built upon.

Issue #12 item 3.
"""
from __future__ import annotations

import dataclasses
import json
import logging
import os
import stat

import pytest

from odf_core.chain import MetadataChain
from odf_core.chain.integrity import verify_integrity
from odf_core.chain.summary import SUMMARY_KEY
from odf_core.cli import main
from odf_core.commit import commit_data, describe_slice
from odf_core.errors import IntegrityError
from odf_core.ingest.transaction import begin, fetch
from odf_core.metadata import AddData, SetInfo, Timestamp
from odf_core.workspace import SUMMARY_KEY_FILE, Workspace

from .builders import T0, new_root, write_slice


def _commit_slice(h, tmp_path, n: int, day: int):
    """Commit ``n`` records the way ingestion does: the slice's offsets start at the state's next offset."""
    start = h.state().next_offset
    sf = describe_slice(write_slice(tmp_path / f"s{day}.parquet", start, n), "offset", start)
    return commit_data(h.chain, base_head=h.chain.head(), slice_file=sf, checkpoint_path=None,
                       system_time=Timestamp.parse(f"2024-01-{day:02d}T00:00:00Z"))


def _edit_summary(store, edit) -> None:
    """Edit the state fields of the stored summary (a header line + the state, or one JSON object), keeping the rest."""
    header, sep, body = store.get(SUMMARY_KEY).partition(b"\n")
    doc = json.loads(body if sep else header)
    edit(doc)
    edited = json.dumps(doc).encode()
    store.put(SUMMARY_KEY, header + sep + edited if sep else edited)


def _root_with_data(tmp_path):
    ws = Workspace.init(tmp_path / "ws")
    h = new_root(ws)
    _commit_slice(h, tmp_path, 4, 2)
    _commit_slice(h, tmp_path, 3, 3)
    assert h.state().last_offset == 6
    return ws, h


def _set_offsets(d: dict) -> None:
    d["last_offset"], d["num_records"], d["data_size"] = 99, 100, 1


def test_edited_offsets_are_not_linked_into_the_chain(tmp_path, caplog):
    ws, h = _root_with_data(tmp_path)
    _edit_summary(h.store, _set_offsets)
    h = Workspace.open(tmp_path / "ws").get("root")  # a later process
    with caplog.at_level(logging.WARNING, logger="odf.chain"):
        block = _commit_slice(h, tmp_path, 2, 4)
    ev = h.chain.get_block(block).event
    assert isinstance(ev, AddData) and ev.prev_offset == 6 and ev.new_data.offset_interval.start == 7
    assert any(SUMMARY_KEY in r.getMessage() and "MAC does not match" in r.getMessage() for r in caplog.records)
    st = h.state()
    assert (st.last_offset, st.num_records) == (8, 9) and st == h.chain.rebuild_state()
    report = verify_integrity(h.store)
    assert report.ok and report.records_checked == 9, report.summary()


def test_verify_reports_a_summary_that_disagrees_with_the_chain(tmp_path, capsys):
    _, h = _root_with_data(tmp_path)
    _edit_summary(h.store, _set_offsets)
    report = verify_integrity(h.store)
    assert not report.ok and report.block == h.chain.head()
    assert f"{SUMMARY_KEY} disagrees with the chain" in report.problem and "last_offset 99 vs 6" in report.problem
    code = main(["-w", str(tmp_path / "ws"), "verify", "--integrity", "root"])
    err = capsys.readouterr().err
    assert code == 1 and "info/summary disagrees with the chain" in err and len(err.strip().splitlines()) == 1
    # reading the dataset through its workspace rebuilds the cache; then verification passes
    assert main(["-w", str(tmp_path / "ws"), "list"]) == 0
    assert verify_integrity(h.store).ok


@pytest.mark.parametrize("content", [b"{not json", b'{"format": 2}\n{"head": "nonsense"}'])
def test_verify_reports_an_unreadable_summary(tmp_path, content):
    _, h = _root_with_data(tmp_path)
    h.store.put(SUMMARY_KEY, content)
    report = verify_integrity(h.store)
    assert not report.ok and f"{SUMMARY_KEY} cannot be used: unreadable (" in report.problem
    assert h.state() == h.chain.rebuild_state()  # and the cache is rebuilt on the next read
    assert verify_integrity(h.store).ok


def test_summary_of_an_older_head_is_still_caught_up(tmp_path):
    _, h = _root_with_data(tmp_path)
    old = h.store.get(SUMMARY_KEY)
    h.chain.append_event(SetInfo(description="later"), T0)
    h.store.put(SUMMARY_KEY, old)  # an authentic summary of the previous head
    assert verify_integrity(h.store).ok
    assert h.state().info.description == "later" and h.state() == h.chain.rebuild_state()


def test_chains_without_a_key_never_trust_the_summary(tmp_path):
    _, h = _root_with_data(tmp_path)
    _edit_summary(h.store, _set_offsets)
    bare = MetadataChain(h.store)  # a dataset opened without its workspace
    assert bare.state() == h.chain.rebuild_state() and bare.state().last_offset == 6
    before = h.store.get(SUMMARY_KEY)
    bare.append_event(SetInfo(description="bare"), T0)
    assert h.store.get(SUMMARY_KEY) == before  # nothing written that nobody could trust
    assert h.state().info.description == "bare"  # the workspace reader rebuilds past the edited cache


def test_append_checks_the_state_against_the_head_block(tmp_path):
    _, h = _root_with_data(tmp_path)
    head = h.chain.head()
    bogus = dataclasses.replace(h.state(), last_offset=99)
    start = 100
    sf = describe_slice(write_slice(tmp_path / "bogus.parquet", start, 2), "offset", start)
    h.store.put_file_if_absent(f"data/{sf.data_slice.physical_hash.to_multibase()}", sf.path)
    event = AddData(prev_offset=99, new_data=sf.data_slice)
    with pytest.raises(IntegrityError, match="refusing to append.*last_offset is 99.*gives 6"):
        h.chain.append_event(event, T0, state=bogus)
    assert h.chain.head() == head


def test_edited_polling_source_is_not_fetched(tmp_path):
    good, evil = tmp_path / "good", tmp_path / "evil"
    good.mkdir()
    evil.mkdir()
    (good / "a.csv").write_text("x\n1\n")
    (evil / "b.csv").write_text("x\n666\n")
    (tmp_path / "polled.yaml").write_text(f"""
kind: DatasetSnapshot
version: 1
content:
  name: polled
  kind: Root
  metadata:
    - kind: SetPollingSource
      fetch: {{kind: FilesGlob, path: "{good}/*.csv"}}
      read: {{kind: Csv, header: true, schema: ["x BIGINT"]}}
      merge: {{kind: Append}}
""")
    ws_dir = str(tmp_path / "ws")
    assert main(["-w", ws_dir, "init"]) == 0 and main(["-w", ws_dir, "add", str(tmp_path / "polled.yaml")]) == 0
    ws = Workspace.open(ws_dir)
    h = ws.get("polled")

    def point_elsewhere(d: dict) -> None:
        d["polling_source"]["fetch"]["path"] = f"{evil}/*.csv"

    _edit_summary(h.store, point_elsewhere)
    ws = Workspace.open(ws_dir)
    txn = begin(ws, "polled")
    result = fetch(ws, txn)
    assert [os.path.basename(f.name) for f in result.files] == ["a.csv"]
    assert ws.get("polled").state().polling_source.fetch.path == f"{good}/*.csv"


def test_summary_key_is_private_and_outside_every_dataset(tmp_path):
    ws = Workspace.init(tmp_path / "ws")
    h = new_root(ws)
    path = ws.store.local_path(SUMMARY_KEY_FILE)
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600 and len(bytes.fromhex(open(path).read())) == 32
    assert not h.store.root.startswith(os.path.dirname(path))
    # an older workspace without a key gets one on first use; its summaries are rebuilt once
    os.unlink(path)
    again = Workspace.open(tmp_path / "ws").get("root")
    assert again.state() == again.chain.rebuild_state() and os.path.exists(path)
    assert MetadataChain(again.store, again.summary_key).read_summary().authentic
