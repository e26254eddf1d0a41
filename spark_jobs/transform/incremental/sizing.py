"""How an incremental step runs its Spark jobs: planned for the rows it may shuffle, not adaptively.

An incremental step is many small queries over small frames (the new rows, the changes, the touched groups' states).
Adaptive execution runs each shuffle stage of each of them as its own job and re-plans between stages: on a
10k-group GROUP BY that is ~15 jobs and seconds of driver time per step, more than the data costs. A step knows
beforehand how many rows its shuffles can see at most (new rows, the state's rows and, when an operator may read
the inputs' history, the rows of the history slices it reads, all from footers), so it plans its shuffles itself:
adaptive execution off and one shuffle partition per :data:`ROWS_PER_PARTITION` rows, at least one per core, except
that a step of at most :data:`SMALL_STEP_ROWS` rows runs its shuffles in one partition (two tasks per stage for a
few thousand rows cost more than they share: ~0.1 s of a 10k-group GROUP BY step's ~0.4 s of Spark jobs) and, up to
:data:`INTERPRETED_ROWS` rows, without code generation (:data:`INTERPRETED`): a step is dozens of new plans, and
generating Java for each of them costs more than running its operators and expressions interpreted over a few
thousand rows. Past that, interpreting costs more than it saves (~8 µs a row: a 50k-group GROUP BY step with 10k
new rows took 1.94 s interpreted and 1.14 s compiled, both in one partition; the two cost the same at ~2-4k rows,
benchmarks/RESULTS.md ``bench_big_group_by``). Whole-stage code generation
off took 0.91x the CPU of tiny steps; the projections, predicates and orderings Spark still generated one by one then
were a fifth of the JVM's samples (most of it formatting and caching their source), and Spark's interpreted
versions of them (``spark.sql.codegen.factoryMode=NO_CODEGEN``, the setting Spark's own tests use to run every
expression interpreted) take a further ~10 % off, 0.83x of Spark's defaults together (benchmarks/RESULTS.md
``bench_small_step_codegen``; the results are the same either way: tests compare the bytes). A history counts from
the moment the step reads it (a min/max group to recompute, an operator by key): a step that reads none is planned
for its new rows and state only. Rebuilds and the full path keep adaptive execution (they read whole histories of
unknown shape); over a history of at most a small step's rows they too run interpreted.

``spark.odf.incremental.adaptive=true`` keeps adaptive execution for incremental steps too.

A step also looks up small frames derived from its change (the keys it touched, the hashes of rows output again) in
big ones (states, histories), and marks them to be broadcast: a broadcast frame is held whole by the driver and every
executor, so only a frame known to be small is (:meth:`StepSizing.broadcastable`): at most :data:`BROADCAST_ROWS`
rows (``spark.odf.incremental.broadcastRows``), bounded by the rows the step's shuffles can see (new rows, state,
the history read so far: a window's change includes rows of its state, a recomputed partition's the history), or
else counted.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Mapping, Sequence

from pyspark.sql import SparkSession

from spark_jobs.errors import EngineFailure
from spark_jobs.parquet_files import num_rows
from spark_jobs.transform.inputs import QueryInput

ADAPTIVE_CONF = "spark.odf.incremental.adaptive"
#: Rows per shuffle partition (~64-128 MB of typical rows, the size adaptive execution aims at).
ROWS_PER_PARTITION = 2_000_000
#: Up to this many rows a step's shuffles run in one partition (``spark.odf.incremental.smallStepRows``).
SMALL_STEP_ROWS = 100_000
SMALL_STEP_CONF = "spark.odf.incremental.smallStepRows"
#: Frames of a step's change up to this many rows are broadcast to the joins that look them up.
BROADCAST_ROWS = 1_000_000
BROADCAST_CONF = "spark.odf.incremental.broadcastRows"
#: Up to this many rows a small step also runs without code generation (``spark.odf.incremental.interpretedRows``).
INTERPRETED_ROWS = 4_000
INTERPRETED_CONF = "spark.odf.incremental.interpretedRows"
#: A small step's kept frames of at most this many rows are held as local relations (:meth:`.step.Step.keep`).
LOCAL_ROWS = 10_000
#: Spark's switch of whole-stage code generation: off while a step is small, the request's own value past that.
CODEGEN_CONF = "spark.sql.codegen.wholeStage"
#: How Spark makes each projection, predicate and ordering: generated code with an interpreted fallback
#: (``FALLBACK``, its default) or interpreted only (``NO_CODEGEN``). An internal setting of Spark (its tests run
#: expressions both ways with it); the engine pins its Spark version (odf_core/engine/version.py).
FACTORY_CONF = "spark.sql.codegen.factoryMode"
#: What a small step sets, and Spark's defaults (what a request that sets neither gets back past a small step).
INTERPRETED = {CODEGEN_CONF: "false", FACTORY_CONF: "NO_CODEGEN"}
COMPILED = {CODEGEN_CONF: "true", FACTORY_CONF: "FALLBACK"}


def rows_setting(session: SparkSession, conf: str, default: int) -> int:
    raw = str(session.conf.get(conf, str(default)))
    try:
        value = int(raw)
    except ValueError:
        value = -1
    if value < 0:
        raise EngineFailure(f"Spark setting {conf}: expected a number of rows (0 or more), got {raw!r}")
    return value


def partitions_for(rows: int, cores: int, small: int = SMALL_STEP_ROWS) -> int:
    """Shuffle partitions for a step whose shuffles see at most ``rows`` rows."""
    return 1 if rows <= small else max(cores, math.ceil(rows / ROWS_PER_PARTITION))


@dataclass
class StepSizing:
    """The step's shuffle plan on its own request session (other requests have their own sessions)."""

    session: SparkSession
    rows: int  # the most rows one of the step's shuffles can see so far
    partitions: int | None  # None: adaptive execution decides
    cores: int = 1
    small: int = SMALL_STEP_ROWS
    broadcast: int = BROADCAST_ROWS
    own: Mapping[str, str] = field(default_factory=lambda: dict(COMPILED))  # the request's code generation settings
    interpret: int = INTERPRETED_ROWS

    @property
    def interpreted(self) -> bool:
        """Whether the step's queries run without code generation (:data:`INTERPRETED`): a small step's of at most
        :attr:`interpret` rows."""
        return self.local_leaves and self.rows <= self.interpret

    @property
    def local_leaves(self) -> bool:
        """Whether the step's kept frames of at most :data:`LOCAL_ROWS` rows become local relations: a small step's
        (one partition; as planned so far: a history read later raises the rows)."""
        return self.partitions is not None and self.rows <= self.small

    def describe(self) -> str:
        if self.partitions is None:
            return "adaptive execution"
        off = "adaptive execution and code generation off" if self.interpreted else "adaptive execution off"
        return f"{self.partitions} shuffle partition(s) for up to {self.rows} row(s), {off}"

    def apply(self) -> None:
        if self.partitions is None:
            return
        self.session.conf.set("spark.sql.adaptive.enabled", "false")
        self.session.conf.set("spark.sql.shuffle.partitions", str(self.partitions))
        for k, v in (INTERPRETED if self.interpreted else self.own).items():
            self.session.conf.set(k, v)

    def cover(self, rows: int) -> None:
        """The step is about to read ``rows`` more (an input's history): later queries get partitions for them (and
        code generation past a small step). Spark reads the settings when a query runs, so raising them
        before the query's action is enough."""
        was_interpreted = self.interpreted
        self.rows += rows
        if self.partitions is not None:
            wanted = partitions_for(self.rows, self.cores, self.small)
            if wanted > self.partitions or self.interpreted != was_interpreted:  # rows only grow: never lowered
                self.partitions = wanted
                self.apply()

    def broadcastable(self, rows: int | None = None) -> bool | None:
        """Whether a frame derived from the step's change may be broadcast: with its count ``rows`` when that is
        known, else by the step's rows (None: they are past the limit, count the frame to know)."""
        if rows is not None:
            return rows <= self.broadcast
        return True if self.rows <= self.broadcast else None


def new_rows(inputs: Sequence[QueryInput]) -> int:
    return sum(iv.end - iv.start + 1 for iv in (i.request.offset_interval for i in inputs) if iv is not None)


def interpreted_rows(session: SparkSession) -> int:
    """Up to how many rows a step runs interpreted: ``interpretedRows``, and never past ``smallStepRows``."""
    return min(rows_setting(session, INTERPRETED_CONF, INTERPRETED_ROWS),
               rows_setting(session, SMALL_STEP_CONF, SMALL_STEP_ROWS))


def interpret_small_history(session: SparkSession, rows: int) -> bool:
    """A full step (a rebuild, the full path) over a history of at most :func:`interpreted_rows` rows runs without
    code generation too (it keeps adaptive execution); whether it does."""
    if rows > interpreted_rows(session):
        return False
    for k, v in INTERPRETED.items():
        session.conf.set(k, v)
    return True


def size_stateless_step(session: SparkSession, inputs: Sequence[QueryInput]) -> str | None:
    """A stateless step over at most the small step's new rows runs as a small incremental step does: unless
    ``spark.odf.incremental.adaptive=true``, without adaptive execution and with one shuffle partition (its plan runs
    in one partition anyway: :func:`.stateless.pair_corrections`), and up to :func:`interpreted_rows` rows interpreted
    (:data:`INTERPRETED`). A one-row projection's step compiled whole-stage code for its one write job and planned it
    adaptively: 0.81x its time without (benchmarks/RESULTS.md ``bench_engine_step``). Returns what it set (None: a
    bigger step keeps the request's settings)."""
    rows = new_rows(inputs)
    if rows > rows_setting(session, SMALL_STEP_CONF, SMALL_STEP_ROWS):
        return None
    interpreted = rows <= interpreted_rows(session)
    if interpreted:
        for k, v in INTERPRETED.items():
            session.conf.set(k, v)
    if str(session.conf.get(ADAPTIVE_CONF, "false")).lower() == "true":
        return f"up to {rows} new row(s), code generation off" if interpreted else None
    session.conf.set("spark.sql.adaptive.enabled", "false")
    session.conf.set("spark.sql.shuffle.partitions", "1")
    off = "adaptive execution and code generation off" if interpreted else "adaptive execution off"
    return f"1 shuffle partition(s) for up to {rows} new row(s), {off}"


def size_step(session: SparkSession, inputs: Sequence[QueryInput], state_path: str | None) -> StepSizing:
    """The step's shuffle partitions for its new rows and state; histories are added as the step reads them."""
    rows = new_rows(inputs) + (num_rows(state_path) if state_path else 0)
    broadcast = rows_setting(session, BROADCAST_CONF, BROADCAST_ROWS)
    if str(session.conf.get(ADAPTIVE_CONF, "false")).lower() == "true":
        return StepSizing(session, rows, None, broadcast=broadcast)
    cores = max(1, session.sparkContext.defaultParallelism)
    small = rows_setting(session, SMALL_STEP_CONF, SMALL_STEP_ROWS)
    sizing = StepSizing(session, rows, partitions_for(rows, cores, small), cores, small, broadcast,
                        {k: str(session.conf.get(k, v)) for k, v in COMPILED.items()}, interpreted_rows(session))
    sizing.apply()
    return sizing
