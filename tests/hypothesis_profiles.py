"""The suite's Hypothesis profiles, chosen by ``HYPOTHESIS_PROFILE`` (default ``ci``): how many examples each
property test draws, and whether the draws are the same on every run.

Two kinds of property tests share a profile: cheap ones (pure Python, their own ``max_examples``, or the profile's
``max_examples``) and Spark ones (tests/spark_jobs: every example is a chain of real Spark steps, seconds each), which
take ``spark_examples`` generated examples (times the test's ``scale``) through :func:`spark_property`.
Hypothesis's first example is its simplest input, so the Spark strategies force at least two steps with new rows
(``splits(..., min_steps=2)``) and each test asserts that some generated example took an incremental step
(``transform_support.PathLog``).

- ``ci``: derandomized (the same examples on every run, no ``.hypothesis/`` database: CI keeps none), 1 generated
  example per Spark family (the simplest: two transactions, so one incremental step; the families' fixed examples
  take more), scaled up where a test has few families (key ranges: 2, exact sums: 4 random floating-point
  changelogs). The budget: about 25 s per family on a loaded 2-core machine.
- ``dev``: a new random seed each run, failures replayed from the local database, 1 generated Spark example.
- ``thorough``: 30 generated Spark examples and 500 for the cheap tests: minutes per Spark family, for changes to the
  incremental engine.
"""
from __future__ import annotations

import os
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from hypothesis import HealthCheck, seed, settings

F = TypeVar("F", bound=Callable)

ENV = "HYPOTHESIS_PROFILE"
DEFAULT = "ci"
# a Spark property test runs under function-scoped fixtures (the session's spark, tmp_path_factory) and its
# examples take seconds: not a problem here
SLOW = [HealthCheck.function_scoped_fixture, HealthCheck.too_slow, HealthCheck.data_too_large]


@dataclass(frozen=True)
class Profile:
    spark_examples: int  # generated examples per Spark property test
    max_examples: int  # for property tests that set no count of their own
    derandomize: bool


PROFILES = {
    "ci": Profile(spark_examples=1, max_examples=100, derandomize=True),
    "dev": Profile(spark_examples=1, max_examples=100, derandomize=False),
    "thorough": Profile(spark_examples=30, max_examples=500, derandomize=False),
}


def selected() -> str:
    return os.environ.get(ENV, DEFAULT)


def load() -> None:
    """Register every profile and load the selected one (from tests/conftest.py, before test modules import)."""
    for name, p in PROFILES.items():
        extra = {"database": None} if p.derandomize else {}
        settings.register_profile(name, max_examples=p.max_examples, derandomize=p.derandomize, deadline=None,
                                  print_blob=True, **extra)
    name = selected()
    if name not in PROFILES:
        raise ValueError(f"{ENV}={name!r}: not a profile of tests/hypothesis_profiles.py ({', '.join(PROFILES)})")
    settings.load_profile(name)


def spark_property(key: str, scale: int = 1) -> Callable[[F], F]:
    """The settings of a Spark property test (above its ``@given``): the selected profile's ``spark_examples`` times
    ``scale`` (for a test with few families or no fixed example). Under
    a derandomized profile each ``key`` (a family's name) gets fixed examples of its own: Hypothesis seeds a
    derandomized test by its code alone, the same for every parameter of a parametrized test."""
    profile = PROFILES[selected()]

    def apply(test: F) -> F:
        test = settings(max_examples=profile.spark_examples * scale, deadline=None, suppress_health_check=SLOW)(test)
        return seed(zlib.crc32(key.encode()))(test) if profile.derandomize else test

    return apply
