"""FetchStep::FilesGlob over real directories, across several transactions."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from odf_core.ingest import FetchError, FetchOptions, read_fetch_manifest
from odf_core.ingest.fetch import fetch
from odf_core.metadata import (
    EventTimeSourceFromMetadata,
    EventTimeSourceFromPath,
    FetchStepFilesGlob,
    SourceOrdering,
    SourceState,
    Timestamp,
)

SYSTEM_TIME = Timestamp.parse("2030-01-01T00:00:00Z")
FROM_DATE = EventTimeSourceFromPath(pattern=r"(\d{4}-\d{2}-\d{2})")


def _write(d: Path, *names: str) -> None:
    d.mkdir(parents=True, exist_ok=True)
    for n in names:
        (d / n).write_text(f"content of {n}\n")


def _rounds(step: FetchStepFilesGlob, staging_root: Path, **opts) -> list[list[tuple[str, Timestamp | None]]]:
    """Run transactions until up to date, carrying the state like the commit step would."""
    state: SourceState | None = None
    out = []
    for i in range(10):
        staging = staging_root / f"tx{i}"
        r = fetch(step, staging_dir=str(staging), source_state=state, system_time=SYSTEM_TIME,
                  already_ingested=state is not None, options=FetchOptions(**opts))
        assert read_fetch_manifest(str(staging)) == r
        if r.up_to_date:
            assert r.new_source_state == state and not r.has_more
            return out
        for f in r.files:
            assert Path(f.path).read_text() == f"content of {os.path.basename(f.name)}\n"
        out.append([(os.path.basename(f.name), f.event_time) for f in r.files])
        assert r.new_source_state == SourceState(
            source_name="default", kind="odf/etag", value=os.path.basename(r.files[-1].name)
        )
        assert r.has_more == (i < 2 if not opts.get("glob_batch") else False)
        state = r.new_source_state
    raise AssertionError("never up to date")


def ts(day: str) -> Timestamp:
    return Timestamp.parse(f"{day}T00:00:00Z")


def test_by_name_one_file_per_transaction(tmp_path: Path) -> None:
    src = tmp_path / "src"
    _write(src, "data-2024-01-03.csv", "data-2024-01-01.csv", "data-2024-01-02.csv", "notes.txt")
    step = FetchStepFilesGlob(path=f"{src}/data-*.csv", event_time=FROM_DATE)
    assert _rounds(step, tmp_path / "st") == [
        [("data-2024-01-01.csv", ts("2024-01-01"))],
        [("data-2024-01-02.csv", ts("2024-01-02"))],
        [("data-2024-01-03.csv", ts("2024-01-03"))],
    ]


def test_new_files_after_the_last_are_picked_up(tmp_path: Path) -> None:
    src = tmp_path / "src"
    _write(src, "data-2024-01-01.csv")
    step = FetchStepFilesGlob(path=f"{src}/*.csv", event_time=FROM_DATE)
    kw = dict(system_time=SYSTEM_TIME, already_ingested=True)
    first = fetch(step, staging_dir=str(tmp_path / "a"), source_state=None, **kw)
    assert not first.has_more
    _write(src, "data-2024-01-02.csv", "data-2023-12-31.csv")  # the older name sorts before: never ingested
    second = fetch(step, staging_dir=str(tmp_path / "b"), source_state=first.new_source_state, **kw)
    assert [os.path.basename(f.name) for f in second.files] == ["data-2024-01-02.csv"] and not second.has_more


def test_by_name_batch_mode(tmp_path: Path) -> None:
    src = tmp_path / "src"
    _write(src, "data-2024-01-03.csv", "data-2024-01-01.csv", "data-2024-01-02.csv")
    step = FetchStepFilesGlob(path=f"{src}/data-*.csv", event_time=FROM_DATE, order=SourceOrdering.BY_NAME)
    assert _rounds(step, tmp_path / "st", glob_batch=True) == [
        [
            ("data-2024-01-01.csv", ts("2024-01-01")),
            ("data-2024-01-02.csv", ts("2024-01-02")),
            ("data-2024-01-03.csv", ts("2024-01-03")),
        ]
    ]


def test_by_event_time(tmp_path: Path) -> None:
    src = tmp_path / "src"
    _write(src, "a_20240103.csv", "b_20240101.csv", "c_20240102.csv")
    # Java SimpleDateFormat style, as the spec documents timestampFormat.
    step = FetchStepFilesGlob(
        path=f"{src}/*.csv",
        event_time=EventTimeSourceFromPath(pattern=r"_(\d{8})\.csv$", timestamp_format="yyyyMMdd"),
        order=SourceOrdering.BY_EVENT_TIME,
    )
    assert _rounds(step, tmp_path / "st") == [
        [("b_20240101.csv", ts("2024-01-01"))],
        [("c_20240102.csv", ts("2024-01-02"))],
        [("a_20240103.csv", ts("2024-01-03"))],
    ]
    assert _rounds(step, tmp_path / "batch", glob_batch=True) == [
        [
            ("b_20240101.csv", ts("2024-01-01")),
            ("c_20240102.csv", ts("2024-01-02")),
            ("a_20240103.csv", ts("2024-01-03")),
        ]
    ]


def test_by_event_time_needs_from_path(tmp_path: Path) -> None:
    _write(tmp_path / "src", "x.csv")
    step = FetchStepFilesGlob(path=f"{tmp_path}/src/*.csv", order=SourceOrdering.BY_EVENT_TIME)
    with pytest.raises(FetchError, match="ByEventTime needs eventTime FromPath"):
        fetch(step, staging_dir=str(tmp_path / "s"), source_state=None, system_time=SYSTEM_TIME, already_ingested=False)


def test_recursive_glob_and_default_event_times(tmp_path: Path) -> None:
    src = tmp_path / "src"
    _write(src / "2024" / "01", "p1.json")
    _write(src / "2024" / "02", "p2.json")
    os.utime(src / "2024" / "02" / "p2.json", ns=(1_600_000_000_000_000_000,) * 2)
    kw = dict(staging_dir=str(tmp_path / "s"), source_state=None, system_time=SYSTEM_TIME, already_ingested=False,
              options=FetchOptions(glob_batch=True))
    default = fetch(FetchStepFilesGlob(path=f"{src}/**/*.json"), **kw)
    assert [(os.path.basename(f.name), f.event_time) for f in default.files] == [
        ("p1.json", SYSTEM_TIME), ("p2.json", SYSTEM_TIME)  # the reference default for globs: system time
    ]
    meta = fetch(FetchStepFilesGlob(path=f"{src}/**/*.json", event_time=EventTimeSourceFromMetadata()), **kw)
    assert meta.files[1].event_time == Timestamp.from_millis(1_600_000_000_000)


def test_empty_match_is_up_to_date_but_missing_directory_is_an_error(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    kw = dict(source_state=None, system_time=SYSTEM_TIME, already_ingested=False)
    r = fetch(FetchStepFilesGlob(path=f"{tmp_path}/empty/*.csv"), staging_dir=str(tmp_path / "s1"), **kw)
    assert r.up_to_date and r.files == ()
    with pytest.raises(FetchError, match=f"directory {tmp_path}/missing does not exist"):
        fetch(FetchStepFilesGlob(path=f"{tmp_path}/missing/*.csv"), staging_dir=str(tmp_path / "s2"), **kw)
    with pytest.raises(FetchError, match="must be absolute"):
        fetch(FetchStepFilesGlob(path="relative/*.csv"), staging_dir=str(tmp_path / "s3"), **kw)


def test_file_not_matching_the_event_time_pattern(tmp_path: Path) -> None:
    _write(tmp_path / "src", "data-2024-01-01.csv", "data-latest.csv")
    step = FetchStepFilesGlob(path=f"{tmp_path}/src/*.csv", event_time=FROM_DATE)
    with pytest.raises(FetchError, match=r"does not match 'data-latest\.csv'"):
        fetch(step, staging_dir=str(tmp_path / "s"), source_state=None, system_time=SYSTEM_TIME,
              already_ingested=False)


def test_rerun_same_transaction_gives_same_result(tmp_path: Path) -> None:
    _write(tmp_path / "src", "a.csv", "b.csv")
    step = FetchStepFilesGlob(path=f"{tmp_path}/src/*.csv")
    kw = dict(staging_dir=str(tmp_path / "s"), source_state=None, system_time=SYSTEM_TIME, already_ingested=False)
    first = fetch(step, **kw, options=FetchOptions(glob_batch=True))
    retry = fetch(step, **kw)  # e.g. retried with other options: only its own outputs remain
    assert [f.name for f in retry.files] == [first.files[0].name]
    assert sorted(os.listdir(tmp_path / "s" / "fetch")) == [os.path.basename(retry.files[0].path)]
    assert sorted(os.listdir(tmp_path / "src")) == ["a.csv", "b.csv"]
