"""Key names of a dataset directory (conformance §5), so no other module spells them out.

``refs/head`` holds the head block's multihash text; ``blocks/<multihash>`` the block manifests;
``data/<physicalHash>`` and ``checkpoints/<physicalHash>`` the data and checkpoint files; ``info/`` is free for caches,
which anyone who can write the dataset can edit: a cache is checked against the chain before use (see
``odf_core.chain.summary``).
Hashes are always written in canonical multibase form (``f`` + lower-case base16), whatever form they came in.
"""
from __future__ import annotations

from typing import ClassVar

from odf_core.errors import InvalidIdentifier
from odf_core.identity.multihash import Multihash
from odf_core.storage.keys import validate_key


def canonical_multihash(mh: Multihash | str) -> str:
    """``f…`` text of a :class:`Multihash` or of any accepted multibase text; rejects anything else."""
    if isinstance(mh, Multihash):
        return mh.to_multibase()
    if isinstance(mh, str):
        return Multihash.parse(mh).to_multibase()
    raise InvalidIdentifier(f"expected a Multihash or its multibase text, got {mh!r}")


class DatasetLayout:
    """Namespace of the keys inside one dataset's store (use with ``ObjectStore.child(dataset_dir)``)."""

    head_ref: ClassVar[str] = "refs/head"
    REFS: ClassVar[str] = "refs"
    BLOCKS: ClassVar[str] = "blocks"
    DATA: ClassVar[str] = "data"
    CHECKPOINTS: ClassVar[str] = "checkpoints"
    INFO: ClassVar[str] = "info"

    @staticmethod
    def block_key(mh: Multihash | str) -> str:
        return f"{DatasetLayout.BLOCKS}/{canonical_multihash(mh)}"

    @staticmethod
    def data_key(physical_hash: Multihash | str) -> str:
        return f"{DatasetLayout.DATA}/{canonical_multihash(physical_hash)}"

    @staticmethod
    def checkpoint_key(physical_hash: Multihash | str) -> str:
        return f"{DatasetLayout.CHECKPOINTS}/{canonical_multihash(physical_hash)}"

    @staticmethod
    def info_key(name: str) -> str:
        """Key of a cache entry such as ``info/summary`` (``name`` may itself contain ``/``)."""
        return validate_key(f"{DatasetLayout.INFO}/{validate_key(name)}")

    @staticmethod
    def multihash_of(key: str) -> Multihash:
        """Inverse of the ``*_key`` functions: the multihash named by ``blocks/…``, ``data/…`` or ``checkpoints/…``."""
        folder, sep, name = key.partition("/") if isinstance(key, str) else ("", "", "")
        if not sep or folder not in (DatasetLayout.BLOCKS, DatasetLayout.DATA, DatasetLayout.CHECKPOINTS):
            raise InvalidIdentifier(f"key {key!r} does not name a block, data or checkpoint object")
        try:
            return Multihash.parse(name)
        except InvalidIdentifier as e:
            raise InvalidIdentifier(f"key {key!r} does not end in a multihash: {e}") from None
