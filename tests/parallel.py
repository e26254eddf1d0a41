"""How the suite is shared among pytest-xdist workers (``./dev test`` runs ``-n 2``).

Tests are handed out one at a time, except where a fixture would otherwise be built twice or tests depend on the
ones before them:

- a file using a module- or class-scoped fixture goes to one worker whole, in its order (``airflow standalone`` of
  tests/e2e, a compiled DAG folder, the ``dag.test()`` layouts that build on each other);
- the users of one of ``SHARED_ONCE``'s session fixtures go to one worker together (one standalone Spark cluster,
  one podman service for the run, not one per worker).

``GROUPS`` lists them by file, because xdist's scheduler sees node ids only (its own ``xdist_group`` marks do not
reach it under pytest 9.2: pytest-xdist issue #1386); every run checks the list against the fixtures each test
really uses, so a new file with a module-scoped fixture fails collection until it is listed. The heavy groups come
first (``FIRST``), then the files of long tests (``EARLY``): a group of minutes, or a test of a minute, handed out
last would leave one worker running it alone at the end. A test
that looks at processes it did not start must look only at its own: another worker's engines and Spark jobs run at
the same time (docs/testing.md).
"""
from __future__ import annotations

import pytest

# session fixtures costing tens of seconds that only a few tests use: one worker runs all their users
SHARED_ONCE = ("spark_cluster", "podman")

# test file -> the group it belongs to: the file itself, or the SHARED_ONCE fixture its tests use
GROUPS: dict[str, str] = {
    **{path: path for path in (
        "tests/e2e/test_airflow_standalone.py",
        "tests/airflow_provider_odf/lineage/test_dags_test_events.py",
        "tests/airflow_provider_odf/test_dag_runs.py",
        "tests/airflow_provider_odf/plugins/test_ui_browser.py",
        "tests/airflow_provider_odf/dag_factory/test_stale.py",
        "tests/airflow_provider_odf/dag_factory/test_example_dags.py",
        "tests/airflow_provider_odf/dag_factory/test_whole_graph.py",
        "tests/airflow_provider_odf/test_compose.py",
        "tests/odf_core/engine/test_engine_raw_query.py",
        "tests/odf_core/engine/test_engine_security.py",
        "tests/odf_core/engine/test_engine_server.py",
        "tests/odf_core/hashing/test_hashing_parquet.py",
        "tests/odf_core/hashing/test_hashing_physical.py",
        "tests/odf_core/test_snapshots_spark.py",
        "tests/spark_jobs/test_sql_gate.py",
    )},
    "tests/airflow_provider_odf/test_spark_cluster.py": "spark_cluster",
    "tests/odf_core/test_cli_cluster.py": "spark_cluster",
    "tests/odf_core/ingest/test_fetch_container.py": "podman",
}

# groups measured at minutes: handed out first, longest first (docs/testing.md, time per directory)
FIRST = (
    "tests/e2e/test_airflow_standalone.py",
    "spark_cluster",
    "tests/airflow_provider_odf/test_dag_runs.py",
    "tests/airflow_provider_odf/lineage/test_dags_test_events.py",
    "tests/airflow_provider_odf/plugins/test_ui_browser.py",
    "tests/airflow_provider_odf/dag_factory/test_stale.py",
    "podman",
)

# then the files of long tests (tens of seconds each, minutes in all): in collection order they came last, and a
# worker still running one of them while the other had nothing left made the run's tail; quick tests fill it now
EARLY = (
    "tests/spark_jobs/test_transform_incremental.py",
    "tests/spark_jobs/test_transform_exact_sums.py",
    "tests/spark_jobs/test_transform_batching.py",
)


def file_of(nodeid: str) -> str:
    return nodeid.split("::", 1)[0]


def needed_group(item: pytest.Item) -> str | None:
    """The group a test's fixtures require (None: any worker may run it alone)."""
    info = getattr(item, "_fixtureinfo", None)
    if info is None:
        return None
    names = set(info.names_closure)
    for name in SHARED_ONCE:
        if name in names:
            return name
    for name in info.names_closure:
        if any(d.scope in ("module", "class", "package") for d in info.name2fixturedefs.get(name, ())):
            return file_of(item.nodeid)
    return None


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Check ``GROUPS`` against what the tests use, and put the heavy groups first, then the ``EARLY`` files."""
    missing = sorted({f"{file_of(i.nodeid)!r}: {g!r}" for i in items
                      if (g := needed_group(i)) is not None and GROUPS.get(file_of(i.nodeid)) != g})
    if missing:
        raise pytest.UsageError("tests/parallel.py: these files share a fixture among their tests; add them to "
                                "GROUPS: " + ", ".join(missing))

    def rank(item: pytest.Item) -> int:
        path = file_of(item.nodeid)
        group = GROUPS.get(path)
        if group in FIRST:
            return FIRST.index(group)
        return len(FIRST) + (EARLY.index(path) if path in EARLY else len(EARLY))

    items.sort(key=rank)  # stable: the order within a file and among the rest is kept


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log):
    """xdist's scope scheduler with ``GROUPS`` as the scopes (every other test a scope of its own), handing them
    out in collection order (``FIRST`` first) rather than largest first."""
    from xdist.scheduler import LoadScopeScheduling

    class GroupScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return GROUPS.get(file_of(nodeid), nodeid)

    config.option.loadscopereorder = False
    return GroupScheduling(config, log)
