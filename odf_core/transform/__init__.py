"""Derivative datasets: planning (``planning``), running and committing a transaction (``transaction``), query
evolution (``evolution``), which engine may run them (``engine_policy``), graph order (``graph``) and verification by
reproduction (``verify``)."""
from odf_core.engine.version import engine_version  # noqa: F401
from odf_core.transform.diagnostics import explain_lines  # noqa: F401
from odf_core.transform.errors import EngineUpgradeNeeded, InvalidQuery, TransformError  # noqa: F401
from odf_core.transform.evolution import explain, set_transform, upgrade_engine, validate_transform  # noqa: F401
from odf_core.transform.graph import upstream_order  # noqa: F401
from odf_core.transform.planning import input_without_data  # noqa: F401
from odf_core.transform.transaction import TransformResult, run  # noqa: F401
from odf_core.transform.verify import VerifyReport, verify  # noqa: F401
