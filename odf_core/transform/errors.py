"""The errors of derivative transformations: each says which dataset and what to do."""
from __future__ import annotations

from typing import Callable

from odf_core.errors import OdfError


class TransformError(OdfError):
    pass


class InvalidQuery(TransformError):
    """The query is wrong for its inputs (syntax, analysis, output rules); the dataset is untouched."""


class EngineUpgradeNeeded(TransformError):
    """The derivative's transform was set for an engine that computes differently from the running one: the operator
    chooses, and the choice goes into the chain (``odf set-transform --upgrade-engine``)."""


def invalid_query(dataset: str) -> Callable[[str], InvalidQuery]:
    return lambda message: InvalidQuery(f"dataset '{dataset}': invalid query: {message}")
