"""Identities and references: multihashes, dataset IDs, names, aliases and refs."""
from odf_core.identity.dataset_id import DatasetID
from odf_core.identity.multihash import ARROW0_SHA3_256, ODF_METADATA_BLOCK, SHA3_256, Multihash

__all__ = ["DatasetID", "Multihash", "SHA3_256", "ARROW0_SHA3_256", "ODF_METADATA_BLOCK"]
from odf_core.identity.names import (
    AccountName,
    DatasetAlias,
    DatasetName,
    DatasetRef,
    DatasetRefRemote,
    RepoName,
    parse_ref_any,
)

__all__ += ["AccountName", "DatasetAlias", "DatasetName", "DatasetRef", "DatasetRefRemote", "RepoName", "parse_ref_any"]
