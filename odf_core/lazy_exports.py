"""A package's re-exported names, each loaded from its module on first use (PEP 562 module ``__getattr__``).

A command pays for the modules it uses: ``odf pull`` of a derivative imports :mod:`odf_core.ingest.staging`, and a
package ``__init__`` that imported every module it re-exports made it load the fetch and prepare machinery too
(benchmarks/RESULTS.md ``bench_step_cost``). ``from package import name`` and ``package.name`` work as before; a
submodule's own name is still the import system's (``from odf_core.ingest import transaction``).
"""
from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any


def lazy_exports(namespace: dict[str, Any], where: Mapping[str, str]) -> Callable[[str], Any]:
    """The ``__getattr__`` of the package whose ``globals()`` is ``namespace``: ``where`` maps each name to its module
    (relative to the package); a name is looked up once, then kept in the package's namespace."""
    package = namespace["__name__"]

    def __getattr__(name: str) -> Any:
        module = where.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f"{package}.{module}"), name)
        namespace[name] = value
        return value

    return __getattr__
