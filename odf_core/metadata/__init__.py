"""ODF metadata model (v0.34.1 and what the current reference adds) and its YAML and FlatBuffers forms."""
from odf_core.metadata.engine_ops import *  # noqa: F403
from odf_core.metadata.events import *  # noqa: F403
from odf_core.metadata.events import METADATA_EVENT, MetadataEvent  # noqa: F401
from odf_core.metadata.flatbuffers_serde import block_hash, decode_block, encode_block  # noqa: F401
from odf_core.metadata.fragments import *  # noqa: F403
from odf_core.metadata.manifests import DatasetSnapshot, MetadataBlock  # noqa: F401
from odf_core.metadata.timestamp import Timestamp  # noqa: F401
