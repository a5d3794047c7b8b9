"""CRC32C (Castagnoli) and TensorFlow's masked form of it, as TFRecord files, tables and
tensor bundles store them.

A CRC stored next to the data it covers is *masked* (rotated and offset) so that the CRC of a
string that itself holds CRCs is not trivially related to them (TF's ``crc32c::Mask``). The
checksum itself comes from ``google-crc32c`` (hardware-accelerated where the CPU has it).
"""

from __future__ import annotations

import google_crc32c

_MASK_DELTA = 0xA282EAD8
_U32 = 0xFFFFFFFF


def value(data) -> int:
    """The CRC32C of ``data`` (bytes-like)."""
    return google_crc32c.value(bytes(data) if not isinstance(data, bytes) else data)


def extend(crc: int, data) -> int:
    """The CRC32C of the bytes ``crc`` covered followed by ``data``."""
    return google_crc32c.extend(crc, bytes(data) if not isinstance(data, bytes) else data)


def mask(crc: int) -> int:
    """TF's masked CRC: rotate right by 15 bits and add a constant."""
    return ((((crc >> 15) | (crc << 17)) & _U32) + _MASK_DELTA) & _U32


def unmask(masked: int) -> int:
    """The CRC that ``mask`` turned into ``masked``."""
    rot = (masked - _MASK_DELTA) & _U32
    return ((rot >> 17) | (rot << 15)) & _U32


def masked_value(data) -> int:
    """``mask(value(data))``: what TF stores after a record or block."""
    return mask(value(data))
