"""The two test tiers (``./dev test`` runs everything, ``./dev test --fast`` the tests without heavy processes plus a
sample of each heavy family) rest on markers; this plugin makes the markers true instead of a convention.

A test must carry the marker of each heavy thing it does — checked where it is done, not guessed from its name:

* ``spark``: it uses the session's Spark (the ``spark`` fixture, or any call into a JVM through py4j) or starts a
  JVM of its own (``spark-submit``, ``spark-class``, ``java``);
* ``cluster``: it uses the ``spark_cluster`` fixture;
* ``airflow``: it uses the migrated Airflow DB (``airflow_db``, ``migrated_airflow_db``) or starts an ``airflow``
  process (``e2e`` also covers that);
* ``slow``: it starts more than :data:`FAN_OUT` processes.

Fixture use is checked at collection (the run stops with the list of offenders); processes and JVM calls are seen
while the test runs (a Python audit hook on ``subprocess.Popen``, a counter on py4j's command channel) and fail the
test at teardown. Limit: a process started by a child process is not seen (its parent is, and counts).

``--fast`` selects the fast tier (``-m FAST_MARKEXPR``). Every run ends with the tier's total: how many tests ran,
the seconds they took and the run's wall time.
"""
from __future__ import annotations

import os
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

# The markers whose tests are left out of the fast tier (unless also marked fast_sample): the heavy families.
HEAVY = ("spark", "airflow", "e2e", "cluster", "slow")
FAST_MARKEXPR = "not (" + " or ".join(HEAVY) + ") or fast_sample"
FAN_OUT = 6  # a test starting more processes than this is a fan-out: marked slow
JVM_PROGRAMS = {"java", "spark-submit", "spark-class", "pyspark", "spark-shell", "spark-sql"}
FIXTURE_MARKERS = {"spark": "spark", "spark_cluster": "cluster", "airflow_db": "airflow",
                   "migrated_airflow_db": "airflow"}
# Tests measured slow (tens of seconds each under CI's load: property tests drawing 100+ examples, crash and race
# tests starting workers) in files whose markers are their owners': marked slow here, at collection. An entry is a
# node id, or its part before "[" for every parameter. Move the marker into the file when you next edit it.
MEASURED_SLOW = (
    "tests/odf_core/chain/test_crash.py::test_crash_then_retry_commits_exactly_once",
    "tests/odf_core/chain/test_concurrency.py::test_multi_process_append_race",
    "tests/odf_core/metadata/test_flatbuffers.py::test_each_event_type_round_trips",
    "tests/odf_core/metadata/test_flatbuffers.py::test_every_event_shape_round_trips_to_identical_bytes",
    "tests/odf_core/metadata/test_arrow_schema.py::test_appending_columns_is_always_allowed_and_survives_encoding",
    "tests/odf_core/metadata/test_arrow_schema.py::test_round_trip",
    "tests/odf_core/metadata/test_arrow_schema.py::test_decodes_schema_written_by_pyarrow",
    "tests/odf_core/metadata/test_arrow_schema.py::test_corrupted_bytes_give_decode_error_or_a_schema_never_a_crash",
    "tests/odf_core/hashing/test_hashing_logical.py::test_matches_reference_on_random_tables",
    "tests/odf_core/hashing/test_hashing_logical.py::test_long_columns_across_many_chunks_match_reference",
    "tests/odf_core/hashing/test_hashing_parquet.py::test_random_tables_round_trip",
    "tests/odf_core/hashing/test_hashing_parquet.py::test_memory_stays_at_about_one_row_group",
    "tests/odf_core/repository/test_s3_workspace.py::test_concurrent_writers_leave_a_linear_chain",
    "tests/airflow_provider_odf/dag_factory/test_parse_budget.py::"
    "test_200_snapshots_parse_inside_the_import_timeout_without_side_effects",
    "tests/dags_examples/demo_support/test_helpers.py::test_stop_kills_the_group_and_then_whatever_left_it",
)
# The fast tier's sample of each heavy family: cheap members that still start the family's machinery (one Spark
# session, an engine server, an airflow process, a crash worker, a property test). No cluster or e2e test: their
# setup alone (a standalone cluster, airflow standalone) costs minutes.
FAST_SAMPLE = (
    "tests/spark_jobs/test_ingest_merge.py::test_snapshot_conformance_example",
    "tests/conformance/test_reference_cases.py::test_reference_case[ledger_merge_to_empty]",
    "tests/docs/test_doc_examples.py::test_page_examples[troubleshooting.md]",
    "tests/odf_core/engine/test_engine_server.py::test_ingest_and_a_kept_read",
    "tests/odf_core/test_cli_pull_sql_options.py::test_sql_limit_and_interactive_statements_after_the_query",
    "tests/airflow_provider_odf/test_provider_info.py::test_airflow_providers_list_shows_the_provider",
    "tests/odf_core/chain/test_crash.py::test_crash_then_retry_commits_exactly_once[object.after_temp_write@1]",
    "tests/odf_core/metadata/test_flatbuffers.py::test_each_event_type_round_trips[AddData]",
)
# a marker that covers another: a cluster test is also a Spark one; e2e starts Airflow
IMPLIES = {"cluster": {"spark"}, "e2e": {"airflow"}}


def markers_of(item: pytest.Item) -> set[str]:
    names = {m.name for m in item.iter_markers()}
    for name in list(names):
        names |= IMPLIES.get(name, set())
    return names


def fixtures_of(item: pytest.Item) -> set[str]:
    """The fixtures a test uses, directly or through other fixtures (a parametrized argument is not one)."""
    params = getattr(getattr(item, "callspec", None), "params", {})
    return {n for n in getattr(item, "fixturenames", ()) if n not in params}


def fixture_violations(item: pytest.Item) -> list[str]:
    """The markers a test lacks for the fixtures it uses (directly or through other fixtures)."""
    have = markers_of(item)
    used = fixtures_of(item)
    return sorted({f"uses fixture {name!r} without @pytest.mark.{marker}" for name, marker in FIXTURE_MARKERS.items()
                   if name in used and marker not in have})


def classify(args: object) -> str | None:
    """``jvm``, ``airflow`` or None for a child process's argv (a list or a string, as ``subprocess.Popen`` takes)."""
    words = args.split() if isinstance(args, (str, bytes)) else [str(a) for a in (args or ())]
    words = [w.decode() if isinstance(w, bytes) else w for w in words]
    words = [w for w in words if not _stand_in(w)]
    names = [Path(w).name for w in words]
    if any(n in JVM_PROGRAMS for n in names) or any("spark-submit " in w or "spark-class " in w for w in words):
        return "jvm"
    if "airflow" in names or any(words[i:i + 2] == ["-m", "airflow"] for i in range(len(words))):
        return "airflow"
    return None


def _stand_in(word: str) -> bool:
    """A test's own script under the temp directory named like a real program (a fake ``spark-submit`` that sleeps,
    an ``airflow`` that only makes children): not the program."""
    return os.path.isabs(word) and Path(word).is_relative_to(tempfile.gettempdir()) and Path(word).name in (
        JVM_PROGRAMS | {"airflow"})


@dataclass
class Watch:
    """What the running test did: its child processes (by kind) and its JVM calls."""

    item: pytest.Item
    children: list[tuple[str | None, str]] = field(default_factory=list)
    jvm_calls: int = 0
    counting: bool = True  # JVM calls are counted during setup and call, not teardown (session fixtures stop there)

    def violations(self) -> list[str]:
        have = markers_of(self.item)
        out = []
        if "spark" not in have:
            jvm = [cmd for kind, cmd in self.children if kind == "jvm"]
            if jvm:
                out.append(f"started a JVM without @pytest.mark.spark: {jvm[0]}")
            if self.jvm_calls:
                out.append(f"made {self.jvm_calls} calls into Spark's JVM without @pytest.mark.spark")
        if "airflow" not in have:
            af = [cmd for kind, cmd in self.children if kind == "airflow"]
            if af:
                out.append(f"started an Airflow process without @pytest.mark.airflow: {af[0]}")
        if len(self.children) > FAN_OUT and not have & set(HEAVY):
            out.append(f"started {len(self.children)} processes (more than {FAN_OUT}) without @pytest.mark.slow")
        return out


_watch: Watch | None = None
_lock = threading.Lock()


def _audit(event: str, args: tuple) -> None:
    if event != "subprocess.Popen" or _watch is None:
        return
    argv = args[1] if len(args) > 1 and args[1] is not None else args[0]
    text = argv if isinstance(argv, str) else " ".join(str(a) for a in (argv or ()))
    with _lock:
        if _watch is not None:
            _watch.children.append((classify(argv), text[:200]))


def _count_jvm_calls() -> None:
    """Wrap py4j's one command channel: every call into the JVM except the finalizers' deletes (those run whenever
    Python's garbage collector gets to an object, in any later test)."""
    try:
        from py4j.java_gateway import GatewayClient
    except ImportError:  # no pyspark: nothing to count
        return
    send = GatewayClient.send_command
    if getattr(send, "_odf_counted", False):
        return

    def counted(self, command, *args, **kwargs):
        w = _watch
        if w is not None and w.counting and not command.startswith("m\nd\n"):
            w.jvm_calls += 1
        return send(self, command, *args, **kwargs)

    counted._odf_counted = True  # type: ignore[attr-defined]
    GatewayClient.send_command = counted


_config: pytest.Config | None = None
_jvm_starts: dict[str, int] = {}  # test file -> JVMs its tests started (spark-submit, engines, clusters)


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--fast", action="store_true",
                     help=f"the fast tier (./dev test --fast): -m {FAST_MARKEXPR!r}")


def pytest_configure(config: pytest.Config) -> None:
    if config.getoption("fast"):
        if config.option.markexpr:
            raise pytest.UsageError("--fast is a marker expression of its own: use it without -m")
        config.option.markexpr = FAST_MARKEXPR
    sys.addaudithook(_audit)  # cannot be removed: it only records while a test runs
    _count_jvm_calls()
    global _config
    _config = config
    config._odf_tier_seconds = 0.0  # type: ignore[attr-defined]
    config._odf_tier_started = time.monotonic()  # type: ignore[attr-defined]


def _listed(nodeid: str, entries: tuple[str, ...]) -> bool:
    return nodeid in entries or nodeid.split("[", 1)[0] in entries


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The measured list and the sample become markers before ``-m`` selects (this hook runs first)."""
    for item in items:
        if _listed(item.nodeid, MEASURED_SLOW):
            item.add_marker("slow")
        if _listed(item.nodeid, FAST_SAMPLE):
            item.add_marker("fast_sample")


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    """A heavy fixture without its marker fails the test before the fixture starts anything."""
    problems = fixture_violations(item)
    if problems:
        pytest.fail(f"{item.nodeid}: the test's markers do not say what it does (tests/tiers.py):\n  "
                    + "\n  ".join(problems), pytrace=False)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem):
    global _watch
    _count_jvm_calls()  # pyspark may have been imported only now
    _watch = Watch(item)
    try:
        yield
    finally:
        _watch = None


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem):
    if _watch is not None:
        _watch.counting = False
    yield


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call):
    outcome = yield
    report = outcome.get_result()
    if call.when != "teardown" or _watch is None or _watch.item is not item:
        return
    jvms = sum(kind == "jvm" for kind, _ in _watch.children)
    if jvms:  # travels with the report to the xdist controller: the summary counts the run's JVM starts
        report.user_properties.append(("odf_jvm_starts", jvms))
    problems = _watch.violations()
    if problems and report.passed:
        report.outcome = "failed"
        report.longrepr = f"{item.nodeid}: the test's markers do not say what it does (tests/tiers.py):\n  " + \
                          "\n  ".join(problems)


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """Every phase's time, counted where the reports arrive (the xdist controller gets its workers' reports)."""
    if _config is not None:
        _config._odf_tier_seconds += report.duration  # type: ignore[attr-defined]
        path = report.nodeid.split("::", 1)[0]
        for name, value in report.user_properties:
            if name == "odf_jvm_starts":
                _jvm_starts[path] = _jvm_starts.get(path, 0) + value


def pytest_terminal_summary(terminalreporter, exitstatus, config: pytest.Config) -> None:
    """The tier's total, next to the slowest tests: the budget (docs/testing.md) is kept from these numbers."""
    stats = terminalreporter.stats
    ran = len({r.nodeid for k in ("passed", "failed", "skipped", "xfailed", "xpassed", "error")
               for r in stats.get(k, []) if isinstance(r, pytest.TestReport)})
    tier = "fast" if (config.option.markexpr or "").strip() == FAST_MARKEXPR else (
        f"-m {config.option.markexpr!r}" if config.option.markexpr else "full")
    wall = time.monotonic() - config._odf_tier_started  # type: ignore[attr-defined]
    terminalreporter.write_sep("=", f"tier {tier}: {ran} tests, {config._odf_tier_seconds:.0f} s in tests, "
                                    f"{wall / 60:.1f} min wall")
    if _jvm_starts:  # a JVM start costs 10-20 s of CPU: the first place to look when the budget is tight
        top = sorted(_jvm_starts.items(), key=lambda kv: -kv[1])[:8]
        terminalreporter.write_line(f"JVMs started by tests: {sum(_jvm_starts.values())}; most: "
                                    + ", ".join(f"{path} {n}" for path, n in top))
