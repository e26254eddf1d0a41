"""The metadata chain: append rules, folded state, storage."""
from odf_core.chain.metadata_chain import CHAIN_CRASH_POINTS, MetadataChain
from odf_core.chain.rules import validate_append
from odf_core.chain.state import ChainState, fold

__all__ = ["MetadataChain", "ChainState", "fold", "validate_append", "CHAIN_CRASH_POINTS"]
