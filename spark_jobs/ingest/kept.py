"""Read results a long-lived engine keeps for the merge request of the same ingest transaction.

Through the engine, the Airflow Read task's rows stay in the engine (as Arrow on the driver, or as one parquet file
in the transaction's staging directory when they are large) under the transaction's name; the Merge task's request
uses them instead of reading the files again. Bounded: the oldest entries go first, and a merge that finds nothing
(the engine restarted, or the entry was evicted) simply reads again.
"""
from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from pyspark.sql.types import StructType

from spark_jobs.ingest.readers import SourceInfo


@dataclass
class KeptRead:
    schema: StructType  # Spark schema of the rows (event time, data, hidden columns)
    num_records: int
    sources: list[SourceInfo]
    table: Any = None  # pyarrow.Table on the driver, or
    path: str | None = None  # one parquet file (large or nested inputs)

    @property
    def nbytes(self) -> int:
        return int(self.table.nbytes) if self.table is not None else 0


class KeptReads:
    def __init__(self, max_entries: int = 64, max_bytes: int = 1 << 30):
        self.max_entries, self.max_bytes = max_entries, max_bytes
        self._items: OrderedDict[str, KeptRead] = OrderedDict()
        self._lock = threading.Lock()
        self.reused = 0  # merges that found their read (for logs and tests)

    def put(self, key: str, item: KeptRead) -> None:
        with self._lock:
            self._items.pop(key, None)
            self._items[key] = item
            while len(self._items) > self.max_entries or \
                    (len(self._items) > 1 and sum(i.nbytes for i in self._items.values()) > self.max_bytes):
                self._items.popitem(last=False)

    def take(self, key: str) -> KeptRead | None:
        """The kept read, removed: a merge consumes it (a retried merge reads again, which is always correct)."""
        with self._lock:
            item = self._items.pop(key, None)
            self.reused += item is not None
            return item

    def __len__(self) -> int:
        with self._lock:
            return len(self._items)
