"""Dataset identities: ``did:odf:`` + multibase(``ed25519-pub`` multicodec + public key)."""
from __future__ import annotations

from dataclasses import dataclass

from odf_core.errors import InvalidIdentifier
from odf_core.identity.multihash import decode_multibase

_ED25519_PREFIX = b"\xed\x01"
_DID_ODF = "did:odf:"
_DID_KEY = "did:key:"


@dataclass(frozen=True, slots=True)
class DatasetID:
    """Globally unique dataset identity derived from an ed25519 public key (32 bytes)."""

    public_key: bytes

    def __post_init__(self):
        if len(self.public_key) != 32:
            raise InvalidIdentifier(f"ed25519 public key must be 32 bytes, got {len(self.public_key)}")

    @classmethod
    def from_bytes(cls, data: bytes) -> "DatasetID":
        """Parse the binary form stored in blocks: ``ED 01`` + 32 key bytes."""
        data = bytes(data)
        if not data.startswith(_ED25519_PREFIX) or len(data) != 34:
            raise InvalidIdentifier(f"invalid dataset id bytes {data.hex()!r}: expected ed01 + 32-byte ed25519 key")
        return cls(data[2:])

    @classmethod
    def parse(cls, text: str) -> "DatasetID":
        """Accept ``did:odf:f…``/``F…``/``z…`` and the equivalent ``did:key:z…``."""
        if not isinstance(text, str):
            raise InvalidIdentifier(f"dataset id must be a string, got {text!r}")
        if text.startswith(_DID_ODF):
            body = text[len(_DID_ODF):]
        elif text.startswith(_DID_KEY):
            body = text[len(_DID_KEY):]
        else:
            raise InvalidIdentifier(f"invalid dataset id {text!r}: expected 'did:odf:' prefix")
        try:
            return cls.from_bytes(decode_multibase(body))
        except InvalidIdentifier as e:
            raise InvalidIdentifier(f"invalid dataset id {text!r}: {e}") from None

    @classmethod
    def is_did(cls, text: str) -> bool:
        return isinstance(text, str) and text.startswith(_DID_ODF)

    @classmethod
    def new_keypair(cls) -> tuple["DatasetID", bytes]:
        """Create a fresh identity; returns it and the private key as PKCS#8 PEM (to keep outside the dataset)."""
        # imported here: only creating a dataset needs a key, and every command that reads ids would pay ~20 ms
        from cryptography.hazmat.primitives import serialization
        from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

        key = Ed25519PrivateKey.generate()
        pub = key.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
        pem = key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
        return cls(pub), pem

    def to_bytes(self) -> bytes:
        return _ED25519_PREFIX + self.public_key

    def to_did_odf(self) -> str:
        return _DID_ODF + "f" + self.to_bytes().hex()

    def to_did_key(self) -> str:
        from multiformats import multibase  # see decode_multibase: only base58btc needs the package

        return _DID_KEY + multibase.encode(self.to_bytes(), "base58btc")

    def __str__(self) -> str:
        return self.to_did_odf()

    def __repr__(self) -> str:
        return f"DatasetID({self.to_did_odf()})"
