"""Shared fixtures and hooks: one local Spark session for the whole test run (JVM start-up is the dominant cost), and
a loud notice at the end of a run when paths were skipped because a tool is missing on this machine."""
from __future__ import annotations

import logging
import os
import shutil
import sys
import tempfile
from pathlib import Path

import pytest

from odf_core.engine.spark_conf import DRIVER_CONF
from tests.hypothesis_profiles import load as load_hypothesis_profile

load_hypothesis_profile()  # HYPOTHESIS_PROFILE (tests/hypothesis_profiles.py), before any test module is imported

# the tiers' markers are checked against what each test really does (tests/tiers.py)
pytest_plugins = ["tests.tiers", "tests.parallel"]

# spark-submit and the pyspark launcher are found through the venv's bin directory.
_VENV_BIN = str(Path(sys.executable).parent)
if _VENV_BIN not in os.environ.get("PATH", "").split(os.pathsep):
    os.environ["PATH"] = _VENV_BIN + os.pathsep + os.environ.get("PATH", "")
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)

# The tests' JVMs: tiny data in thousands of small Spark jobs, on 2 cores shared by two workers. Half of a JVM's CPU
# went to the JIT's C2 compiler (the generated code of every new plan) and a sixth to G1's own threads; the client
# compiler only (with a code cache big enough that it is never swept) and the serial collector halve the JVM's CPU
# for the same tests at about the same wall time alone (docs/testing.md, "The tests' JVMs"). Through
# SPARK_SUBMIT_OPTS, which Spark's launcher gives every driver JVM it starts: this session's, and those of the
# commands, engines, spark-submit jobs and Airflow tasks that the tests start (they inherit the environment).
# ODF_TEST_JVM_OPTIONS replaces them ("" for Java's defaults: benchmarks/bench_test_jvm.py compares the two).
TEST_JVM_OPTIONS = os.environ.get("ODF_TEST_JVM_OPTIONS",
                                  "-XX:TieredStopAtLevel=1 -XX:ReservedCodeCacheSize=240m -XX:+UseSerialGC")
if TEST_JVM_OPTIONS not in os.environ.get("SPARK_SUBMIT_OPTS", ""):  # xdist's workers inherit the controller's
    os.environ["SPARK_SUBMIT_OPTS"] = f"{TEST_JVM_OPTIONS} {os.environ.get('SPARK_SUBMIT_OPTS', '')}".strip()

# The fresh drivers the tests start (commands without an engine, spark-submit steps, Airflow tasks) share one JVM
# class archive per run (odf_core/engine/class_archive.py): the first writes it as it exits, later ones start ~3 s
# sooner. The controller makes the directory (xdist's workers inherit it) and removes it at the end.
_ARCHIVE_DIR_MADE = None
if "ODF_JVM_ARCHIVE_DIR" not in os.environ:
    _ARCHIVE_DIR_MADE = os.environ["ODF_JVM_ARCHIVE_DIR"] = tempfile.mkdtemp(prefix="odf-test-jvm-")


def pytest_unconfigure(config):
    if _ARCHIVE_DIR_MADE and not hasattr(config, "workerinput"):
        shutil.rmtree(_ARCHIVE_DIR_MADE, ignore_errors=True)

SPARK_CONF = {
    "spark.sql.ansi.enabled": "true",
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.parquet.outputTimestampType": "TIMESTAMP_MILLIS",
    "spark.sql.shuffle.partitions": "2",
    "spark.default.parallelism": "2",
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.driver.memory": "2g",
    "spark.sql.codegen.cache.maxEntries": DRIVER_CONF["spark.sql.codegen.cache.maxEntries"],
    "spark.python.sql.dataFrameDebugging.enabled": DRIVER_CONF["spark.python.sql.dataFrameDebugging.enabled"],
}


@pytest.fixture(scope="session")
def spark():
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.master("local[2]").appName("odf-tests")
    for k, v in SPARK_CONF.items():
        builder = builder.config(k, v)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    yield session
    from spark_jobs.transform import plan_cache

    plan_cache.clear()  # the plans' JVM objects are released while the gateway is still up, not at exit
    session.stop()
    # py4j says at INFO that it closes each connection, from their finalizers at interpreter exit: by then the
    # handlers' streams (pytest's captures) are closed, and logging printed a "Logging error" after the summary
    logging.getLogger("py4j").setLevel(logging.WARNING)




@pytest.fixture(scope="session")
def spark_cluster(tmp_path_factory: pytest.TempPathFactory):
    """One Spark standalone cluster (master + worker from the installed pyspark) for the whole session, started on
    first use and stopped at the end; the teardown fails if any of its JVMs (executors included) survives."""
    from tests.spark_cluster import start_spark_cluster

    cluster = start_spark_cluster(tmp_path_factory.mktemp("spark-cluster"))
    yield cluster
    cluster.stop()
    assert cluster.leftovers() == [], f"JVMs of the Spark test cluster still running: {cluster.leftovers()}"

# -- paths skipped for a missing tool -------------------------------------------------------------------------------

PODMAN_SKIP = "needs podman"  # start of the skip reason of every test that needs a podman service
PODMAN_INSTALL = ("sudo apt-get install -y podman runc busybox-static   (Debian/Ubuntu; .ci/run does this), then run "
                  "the tests again")


def _skip_reason(report: pytest.TestReport) -> str:
    longrepr = report.longrepr
    if isinstance(longrepr, tuple) and len(longrepr) == 3:
        return str(longrepr[2]).removeprefix("Skipped: ")
    return str(longrepr or "")


def pytest_terminal_summary(terminalreporter, exitstatus, config) -> None:
    """A skipped container test is easy to mistake for a passed one in a long run: list them in a block of its own."""
    skipped = [r for r in terminalreporter.stats.get("skipped", []) if _skip_reason(r).startswith(PODMAN_SKIP)]
    if not skipped:
        return
    tr = terminalreporter
    tr.write_sep("!", f"{len(skipped)} CONTAINER TESTS DID NOT RUN", red=True, bold=True)
    tr.write_line(f"{_skip_reason(skipped[0])}", red=True, bold=True)
    tr.write_line("FetchStep::Container (fetch through a Docker-API engine) is NOT tested on this machine. Skipped:",
                  red=True)
    for r in skipped:
        tr.write_line(f"    {r.nodeid}")
    tr.write_line(f"To test these paths: {PODMAN_INSTALL}", bold=True)
    tr.write_sep("!", red=True, bold=True)


@pytest.fixture
def odf_cli(tmp_path):
    """``odf`` commands run in this process, in ``tmp_path`` (tests/cli_process.py)."""
    from tests.cli_process import OdfCli

    return OdfCli(tmp_path, {}, process=False)


@pytest.fixture
def odf_process(tmp_path):
    """The real ``odf`` console script, run in child processes in ``tmp_path`` (tests/cli_process.py)."""
    from tests.cli_process import OdfCli

    return OdfCli(tmp_path, {}, process=True)


@pytest.fixture(scope="session")
def s3_server():
    """One moto S3 server on loopback for the whole session (tests/s3_server.py); the AWS_* variables point at it
    for this process and its children while the session runs."""
    from tests.s3_server import start_s3_server

    server = start_s3_server()
    saved = {k: os.environ.get(k) for k in ("AWS_ENDPOINT_URL", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY",
                                            "AWS_DEFAULT_REGION", "AWS_PROFILE")}
    os.environ.update({k: v for k, v in server.env({}).items()})
    os.environ.pop("AWS_PROFILE", None)
    yield server
    for k, v in saved.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v
    server.stop()
