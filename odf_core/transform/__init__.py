"""Derivative datasets: planning, running and committing Spark SQL transformations, and verifying them."""
from odf_core.transform.coordinator import (  # noqa: F401
    InvalidQuery,
    TransformError,
    TransformResult,
    VerifyReport,
    explain,
    explain_lines,
    input_without_data,
    run,
    set_transform,
    upstream_order,
    validate_transform,
    verify,
)
from odf_core.transform.engine_version import engine_version  # noqa: F401
