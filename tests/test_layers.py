"""The layering contract between the coordinator (``odf_core``), the engine (``spark_jobs``) and Airflow.

What both sides of the engine boundary share lives in ``odf_core.engine`` (protocol, wire, Spark settings, the
checkpoint format, the engine version, the error classes, what a commit records of a slice), ``odf_core.metadata``
and ``odf_core.hashing`` (the engine hashes the slices it writes); ``odf_core.errors`` is a shared
leaf (it imports nothing of the project). The engine imports nothing else of ``odf_core``, and ``odf_core`` imports
the engine only where it starts one. ARCHITECTURE.md draws the layers; this test keeps them so, reading every
import (module-level and function-local) from the source.
"""
from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

#: What the engine may import of odf_core (prefixes of dotted module names).
ENGINE_MAY_IMPORT = ("odf_core.engine", "odf_core.metadata", "odf_core.identity", "odf_core.hashing", "odf_core.errors")
#: The modules of odf_core.engine that start or reach an engine: the engine itself never needs them.
ENGINE_LAUNCHERS = ("odf_core.engine.local", "odf_core.engine.submit", "odf_core.engine.serve",
                    "odf_core.engine.remote", "odf_core.engine.spark_submit")
#: The only odf_core modules that may import spark_jobs: they start an engine (or name its files).
STARTS_AN_ENGINE = {"odf_core.engine.local", "odf_core.engine.spark_submit", "odf_core.engine.version"}


def _module_name(path: Path, root: Path = ROOT) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imports(path: Path, root: Path = ROOT) -> list[tuple[int, str]]:
    """Every module ``path`` imports, with the line, resolving relative imports."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    me = _module_name(path, root)
    package = me if path.name == "__init__.py" else me.rpartition(".")[0]
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join(anchor + ([base] if base else []))
            # ``from odf_core.engine import wire`` imports the module ``odf_core.engine.wire``, not the package's face
            subs = [f"{base}.{a.name}" for a in node.names if _is_module(root, f"{base}.{a.name}")]
            if len(subs) < len(node.names):
                found.append((node.lineno, base))
            found += [(node.lineno, s) for s in subs]
    return found


def _is_module(root: Path, name: str) -> bool:
    path = root / Path(*name.split("."))
    return path.with_suffix(".py").exists() or (path / "__init__.py").exists()


def _sources(package: str) -> list[Path]:
    return sorted((ROOT / package).rglob("*.py"))


def _under(name: str, prefixes: tuple[str, ...] | set[str]) -> bool:
    return any(name == p or name.startswith(p + ".") for p in prefixes)


def _shared_modules() -> list[Path]:
    """The files of odf_core the engine is allowed to import (and so must keep to the contract too)."""
    return [p for p in _sources("odf_core") if _under(_module_name(p), ENGINE_MAY_IMPORT)
            and not _under(_module_name(p), ENGINE_LAUNCHERS) and _module_name(p) != "odf_core.engine"]


def test_the_engine_imports_only_the_shared_contract_of_odf_core():
    bad = [f"{p.relative_to(ROOT)}:{line}: imports {name}"
           for p in _sources("spark_jobs") for line, name in _imports(p)
           if name.startswith("odf_core") and (not _under(name, ENGINE_MAY_IMPORT) or _under(name, ENGINE_LAUNCHERS)
                                               or name == "odf_core.engine")]
    assert bad == [], "spark_jobs may import only modules of odf_core.engine (not its launchers, nor the package's " \
                      "face, which re-exports them), odf_core.metadata, odf_core.identity, odf_core.hashing and " \
                      "odf_core.errors:\n" \
                      + "\n".join(bad)


def test_the_shared_contract_imports_nothing_beyond_itself():
    """Otherwise the engine would reach the coordinator through it (an import circle)."""
    bad = [f"{p.relative_to(ROOT)}:{line}: imports {name}"
           for p in _shared_modules() for line, name in _imports(p)
           if (name.startswith("odf_core") and not _under(name, ENGINE_MAY_IMPORT))
           or (name.startswith("spark_jobs") and _module_name(p) not in STARTS_AN_ENGINE)]
    assert bad == [], "\n".join(bad)


def test_errors_is_a_leaf():
    bad = [name for _, name in _imports(ROOT / "odf_core" / "errors.py") if name.startswith(("odf_core", "spark_jobs"))]
    assert bad == []


def test_odf_core_imports_the_engine_only_where_it_starts_one():
    bad = [f"{p.relative_to(ROOT)}:{line}: imports {name}"
           for p in _sources("odf_core") for line, name in _imports(p)
           if name.startswith("spark_jobs") and _module_name(p) not in STARTS_AN_ENGINE]
    assert bad == [], "\n".join(bad)


def test_neither_the_protocol_library_nor_the_engine_imports_airflow():
    bad = [f"{p.relative_to(ROOT)}:{line}: imports {name}"
           for pkg in ("odf_core", "spark_jobs") for p in _sources(pkg) for line, name in _imports(p)
           if _under(name, ("airflow", "airflow_provider_odf"))]
    assert bad == [], "\n".join(bad)


def test_the_checker_sees_function_local_and_relative_imports(tmp_path):
    """The checker itself: imports inside functions and relative imports are seen and resolved."""
    pkg = tmp_path / "spark_jobs" / "sub"
    pkg.mkdir(parents=True)
    (pkg / "bad.py").write_text("from . import helper\nfrom ..x import y\n"
                                "def f():\n    from odf_core.query import sql\n    return sql\n")
    names = [n for _, n in _imports(pkg / "bad.py", tmp_path)]
    assert names == ["spark_jobs.sub", "spark_jobs.x", "odf_core.query"]
    assert not _under("odf_core.query", ENGINE_MAY_IMPORT)
