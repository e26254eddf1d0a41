"""End-to-end tests against a real ``airflow standalone``: a failing test shows the standalone log and the failed
task logs, so CI output explains what went wrong."""
from __future__ import annotations

import pytest


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if report.failed and report.when == "call":
        for value in item.funcargs.values():
            failure_report = getattr(value, "failure_report", None)
            if callable(failure_report):
                report.sections.append(("airflow standalone: log tail and failed task logs", failure_report()))
