"""pandas only where a command uses it: pyarrow imports pandas (0.23 s, a third of a warm ``odf ingest``'s client
time) the first time it checks whether an object it is given is a pandas one — on nearly every array or table it
builds — although a command whose Spark runs in a long-lived engine never hands it one.

:func:`defer` (the CLI, once it knows its engine is remote) puts a finder first on ``sys.meta_path`` that answers
"not installed" for pandas: pyarrow's checks find no pandas and answer "not a pandas object", which is true (a
``sys.modules`` entry of None would not do: pyarrow's compiled import returns it). :func:`load` (before a table is
printed through pandas) removes the finder: pyarrow's explicit conversions (``Table.to_pandas``) retry the import
then. Nothing is deferred once pandas is imported, or in any other process (Airflow tasks, the engine, tests)."""
from __future__ import annotations

import sys
from importlib.abc import MetaPathFinder
from typing import Any


class _NoPandasYet(MetaPathFinder):
    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> None:
        if fullname == "pandas" or fullname.startswith("pandas."):
            raise ModuleNotFoundError("pandas is deferred in this process (odf_core.pandas_deferred)", name=fullname)
        return None


_FINDER = _NoPandasYet()


def defer() -> None:
    if "pandas" not in sys.modules and _FINDER not in sys.meta_path:
        sys.meta_path.insert(0, _FINDER)


def load() -> None:
    if _FINDER in sys.meta_path:
        sys.meta_path.remove(_FINDER)
