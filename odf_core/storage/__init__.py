"""Storage primitives under every dataset: atomic objects, compare-and-swap refs, the dataset key layout."""
from odf_core.storage.backends import STORAGE_CRASH_POINTS
from odf_core.storage.errors import ObjectNotFound, StoreEscape, UnsafeRefUpdate
from odf_core.storage.faults import crash_env, crash_point, was_killed
from odf_core.storage.keys import TEMP_PREFIX, validate_key, validate_prefix
from odf_core.storage.layout import DatasetLayout, canonical_multihash
from odf_core.storage.object_store import ObjectStore

__all__ = [
    "ObjectStore",
    "DatasetLayout",
    "canonical_multihash",
    "ObjectNotFound",
    "StoreEscape",
    "UnsafeRefUpdate",
    "crash_point",
    "crash_env",
    "was_killed",
    "STORAGE_CRASH_POINTS",
    "TEMP_PREFIX",
    "validate_key",
    "validate_prefix",
]
