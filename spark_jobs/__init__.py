"""The Spark engine: code that runs inside a Spark driver.

One spark-submit per request (:mod:`.submit`, the default), in-process (the ``odf`` CLI), or long-lived behind
``odf engine serve`` (:mod:`.server`, gRPC, the ODF engine protocol). Every path goes through :func:`.dispatch.handle`
with the typed requests of :mod:`odf_core.engine.protocol`.

* :mod:`.ingest` — read (one reader per ReadStep kind), preprocess, merge (one module per MergeStrategy);
* :mod:`.transform` — planning/classification, stateless and stateful execution, checkpoints, output;
* :mod:`.queries` — the spec's raw query and ad-hoc SQL;
* :mod:`.session`, :mod:`.errors`, :mod:`.columns`, :mod:`.parquet_files` — what both halves share.
"""
