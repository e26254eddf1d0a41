"""What a commit records of a Parquet slice: its ``DataSlice`` (logical and physical hash, offsets, size) and its
schema as ``SetDataSchema`` records it. Both sides of the engine boundary compute it here, with the same code: the
engine for the slice it just wrote (sent back as :class:`~odf_core.engine.protocol.SliceDescription`, so a warm
step's coordinator need not import pyarrow, issue #64), the coordinator for a slice nobody described."""
from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor

from odf_core.engine.protocol import SliceDescription
from odf_core.errors import IntegrityError
from odf_core.metadata import DataSlice, OffsetInterval


def describe(path: str, offset_column: str, expected_start: int) -> SliceDescription:
    """Hash the slice at ``path`` and check its offsets run consecutively from ``expected_start``."""
    import pyarrow.parquet as pq

    from odf_core.hashing import logical_hash_file, physical_hash
    from odf_core.metadata.arrow_schema import encode_arrow_schema, recorded_schema

    pf = pq.ParquetFile(path)
    offsets = pf.read(columns=[offset_column]).column(offset_column).to_numpy()
    n = len(offsets)
    if n == 0:
        raise IntegrityError(f"{path}: an empty slice must not be committed")
    if offsets[0] != expected_start or (n > 1 and not (offsets[1:] - offsets[:-1] == 1).all()):
        raise IntegrityError(
            f"{path}: offsets must run consecutively from {expected_start}, found {offsets[0]}..{offsets[-1]}"
        )
    # Both hashes read the whole file and spend their time in SHA3 and Parquet decoding, which release the GIL.
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="odf-physical-hash") as pool:
        physical = pool.submit(physical_hash, path)
        logical = logical_hash_file(path)
        data_slice = DataSlice(
            logical_hash=logical,
            physical_hash=physical.result(),
            offset_interval=OffsetInterval(start=int(offsets[0]), end=int(offsets[-1])),
            size=os.path.getsize(path),
        )
    return SliceDescription(data_slice=data_slice, schema=encode_arrow_schema(recorded_schema(pf.schema_arrow)))
