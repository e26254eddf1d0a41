"""The ``flatbuffers`` package, loaded without numpy when nothing has loaded numpy yet.

``flatbuffers`` imports numpy at import time only for its numpy-vector helpers, which nothing here uses; numpy's
import is ~0.06-0.1 s of every command that reads a metadata block (issue #64). Its modules take numpy from
``flatbuffers.compat.import_numpy`` when they are imported, so that function answers None while they load. A process
that already has numpy (pyarrow, Spark's Python side) loads flatbuffers as usual. A later ``flatbuffers`` without
that function loads as usual too: only slower.
"""
from __future__ import annotations

import importlib.util
import os
import sys


def _load() -> None:
    if "flatbuffers" in sys.modules or "numpy" in sys.modules:
        return
    # ``flatbuffers.compat`` is loaded on its own first: importing it as usual would run the package's __init__,
    # which imports the modules that ask for numpy.
    spec = importlib.util.find_spec("flatbuffers")
    locations = spec.submodule_search_locations if spec is not None else None
    if not locations:
        return
    compat_spec = importlib.util.spec_from_file_location("flatbuffers.compat", os.path.join(locations[0], "compat.py"))
    if compat_spec is None or compat_spec.loader is None:
        return
    compat = importlib.util.module_from_spec(compat_spec)
    sys.modules["flatbuffers.compat"] = compat
    try:
        compat_spec.loader.exec_module(compat)
    except (ImportError, OSError):
        del sys.modules["flatbuffers.compat"]
        return
    original = getattr(compat, "import_numpy", None)
    if original is None:
        return
    compat.import_numpy = lambda: None  # type: ignore[attr-defined]
    try:
        import flatbuffers  # noqa: F401  (builder, encode, number_types: each asks compat once, on import)
    finally:
        compat.import_numpy = original  # type: ignore[attr-defined]


_load()

import flatbuffers  # noqa: E402
from flatbuffers import number_types  # noqa: E402

__all__ = ["flatbuffers", "number_types"]
