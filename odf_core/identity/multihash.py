"""Multihash values and their multibase text form (RFC-012: canonical output is base16 with prefix ``f``)."""
from __future__ import annotations

import hashlib
from dataclasses import dataclass

from odf_core.errors import InvalidIdentifier

SHA3_256 = 0x16
ARROW0_SHA3_256 = 0x300016  # logical hash of data (arrow-digest V0)
ODF_METADATA_BLOCK = 0x400000  # multicodec of a block manifest's kind
ED25519_PUB = 0xED


def varint_encode(n: int) -> bytes:
    """Unsigned LEB128 (multiformats varint). Hand-written: the library's version validates types at run time,
    which dominated block decoding in profiles."""
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def varint_decode(data: bytes, pos: int = 0) -> tuple[int, int]:
    """(value, position after it); at most 9 bytes as the multiformats spec allows."""
    value = shift = 0
    for i in range(pos, min(len(data), pos + 9)):
        b = data[i]
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            if b == 0 and i > pos:
                raise ValueError("non-minimal varint")
            return value, i + 1
        shift += 7
    raise ValueError("truncated or over-long varint")


def decode_multibase(text: str) -> bytes:
    """Decode the multibase encodings ODF accepts on input: ``f``/``F`` (base16) and ``z`` (base58btc)."""
    if not text or text[0] not in "fFz":
        raise InvalidIdentifier(f"unsupported multibase encoding in {text!r}: expected prefix 'f', 'F' or 'z'")
    if text[0] in "fF":
        body = text[1:]
        if len(body) % 2 or not all(c in "0123456789abcdefABCDEF" for c in body):
            raise InvalidIdentifier(f"invalid base16 text {text!r}")
        return bytes.fromhex(body)
    # imported only here: the package loads its whole multicodec table (~50 ms), which every command would pay
    # although ODF's canonical form, base16, needs none of it
    from multiformats import multibase

    try:
        return multibase.decode(text)
    except Exception as e:  # noqa: BLE001 - multiformats raises several types
        raise InvalidIdentifier(f"invalid base58btc text {text!r}: {e}") from None


@dataclass(frozen=True, slots=True)
class Multihash:
    """A self-describing hash: multicodec ``code`` of the algorithm plus the ``digest`` bytes."""

    code: int
    digest: bytes

    @classmethod
    def sha3_256(cls, data: bytes) -> "Multihash":
        return cls(SHA3_256, hashlib.sha3_256(data).digest())

    @classmethod
    def from_bytes(cls, data: bytes) -> "Multihash":
        """Parse the binary form ``varint(code) varint(len) digest``."""
        data = bytes(data)
        try:
            code, p1 = varint_decode(data)
            size, p2 = varint_decode(data, p1)
        except ValueError:
            raise InvalidIdentifier(f"invalid multihash bytes {data.hex()!r}") from None
        digest = data[p2:]
        if len(digest) != size:
            raise InvalidIdentifier(
                f"invalid multihash bytes {data.hex()!r}: header says {size} digest bytes, found {len(digest)}"
            )
        return cls(code, digest)

    @classmethod
    def from_multibase(cls, text: str) -> "Multihash":
        if not isinstance(text, str):
            raise InvalidIdentifier(f"multihash must be a string, got {text!r}")
        return cls.from_bytes(decode_multibase(text))

    parse = from_multibase

    def to_bytes(self) -> bytes:
        return varint_encode(self.code) + varint_encode(len(self.digest)) + self.digest

    def to_multibase(self) -> str:
        return "f" + self.to_bytes().hex()

    def __str__(self) -> str:
        return self.to_multibase()

    def __repr__(self) -> str:
        return f"Multihash({self.to_multibase()})"
