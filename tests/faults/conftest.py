"""Fixtures of the fault-injection suite: the ledger of injected faults, Spark in this process."""
from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from odf_core.engine import LocalEngine

from .ledger import SUMMARY_ENV, FaultLedger


@pytest.fixture(scope="session")
def fault_ledger() -> Iterator[FaultLedger]:
    ledger = FaultLedger()
    yield ledger
    path = os.environ.get(SUMMARY_ENV)
    if path:
        ledger.write(path)


@pytest.fixture
def engine(spark) -> LocalEngine:
    return LocalEngine.with_session(spark)
