"""Incremental stateful transforms: a step costs its new input rows and the state, not the inputs' history.

The query's optimised plan is cut into segments and operators (:mod:`.plan`). A step turns each input's new slice
into a change (added rows; for a reduced input, -R/-C rows are removed rows), pushes it through the segments as two
ordinary evaluations and through each operator with its state (:mod:`.aggregate`), and ends with the change of the
query's output. The output state (the counted current output rows, as the full path keeps it) plus that change is
the new output state; the output slice is the difference of the two, written exactly as the full path writes it, so
the bytes of a slice do not depend on the path. All states are tables of the one checkpoint file (:mod:`.state`).

The first step, a checkpoint of the full path or of another plan (the query, the input schemas or this engine's
state layout changed) *rebuild*: the full path computes the output and the operators' states are computed from the
inputs' history, once.
"""
from __future__ import annotations

from pyspark.sql import SparkSession

from spark_jobs.transform.incremental.checkpoint import (
    CHECKPOINT_VERSION,
    eviction,
    load_states,
    reusable,
    write_checkpoint,
)
from spark_jobs.transform.incremental.frames import WEIGHT
from spark_jobs.transform.incremental.operators import initial_states, state_tables
from spark_jobs.transform.incremental.operators.aggregate import AFTER, BEFORE, group_pairs
from spark_jobs.transform.incremental.propagate import counted_change, output_change
from spark_jobs.transform.incremental.step import Step

__all__ = ["AFTER", "BEFORE", "CHECKPOINT_VERSION", "ENABLED_CONF", "WEIGHT", "Step", "counted_change", "enabled",
           "eviction", "group_pairs", "initial_states", "load_states", "output_change", "reusable", "state_tables",
           "write_checkpoint"]

ENABLED_CONF = "spark.odf.incremental.enabled"


def enabled(session: SparkSession) -> bool:
    return str(session.conf.get(ENABLED_CONF, "true")).lower() != "false"
