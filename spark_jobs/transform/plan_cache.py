"""Plans of stateful queries that a long-lived driver has already made, by everything that determines them.

Planning a stateful step analyses and optimises the query twice (over the new slices, to classify it, and over
empty stand-ins of the inputs, for the incremental plan) and walks both plans through py4j: ~0.1 s of every step,
the same for every step of a query. A driver that serves many steps (the engine server, the in-process engine)
keeps the result of the first one and reuses it while the query, the input schemas, the vocabularies and the
session's SQL settings stay the same: the classification and the incremental plan are structural (they never
depend on a step's rows), so a cached plan is exactly the one the step would make. A stateless query keeps its
inspection only (purity, classification, layout: ~0.2 s of py4j calls walking its plans, issue #64): its steps still
build the query over their slices, through the SQL gate, every time. One process-wide LRU of :data:`SIZE` entries.
"""
from __future__ import annotations

import hashlib
import json
import threading
from collections import OrderedDict
from typing import Any, Sequence

from pyspark.sql import SparkSession

from spark_jobs.session import settings

SIZE = 32
_PLANS: "OrderedDict[str, Any]" = OrderedDict()
_LOCK = threading.Lock()


def plan_key(session: SparkSession, transform: Any, schemas: Sequence[Any], aliases: Sequence[str],
             vocabs: Sequence[Any], vocab: Any) -> str:
    """What a stateful step's plan depends on: the queries, each input's alias, schema (with its input marker) and
    vocabulary, the output vocabulary, and the session's ``spark.sql.*`` / ``spark.odf.*`` settings."""
    conf = {k: v for k, v in settings(session).items() if k.startswith(("spark.sql.", "spark.odf."))}
    text = json.dumps({
        "engine": str(transform.engine).lower(),
        "queries": [[q.alias, q.query] for q in transform.steps()],
        "inputs": [[a, s.json(), repr(v)] for a, s, v in zip(aliases, schemas, vocabs)],
        "vocab": repr(vocab),
        "conf": sorted(conf.items()),
    }, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def get(key: str) -> Any | None:
    with _LOCK:
        found = _PLANS.get(key)
        if found is not None:
            _PLANS.move_to_end(key)
        return found


def put(key: str, plan: Any) -> None:
    with _LOCK:
        _PLANS[key] = plan
        _PLANS.move_to_end(key)
        while len(_PLANS) > SIZE:
            _PLANS.popitem(last=False)


def clear() -> None:
    with _LOCK:
        _PLANS.clear()
