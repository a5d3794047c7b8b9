"""CRC32C (Castagnoli) and TensorFlow's masked form of it, as TFRecord files, tables and
tensor bundles store them.

A CRC stored next to the data it covers is *masked* (rotated and offset) so that the CRC of a
string that itself holds CRCs is not trivially related to them (TF's ``crc32c::Mask``). The
checksum itself comes from ``google-crc32c`` (hardware-accelerated where the CPU has it).
"""

from __future__ import annotations

import functools

_MASK_DELTA = 0xA282EAD8
_U32 = 0xFFFFFFFF


@functools.cache
def _library():
    # Imported on first use, so that ``import dflab`` works in an environment installed
    # before this dependency was added; a checksum then names what to install.
    try:
        import google_crc32c
    except ImportError as e:
        raise ImportError(f"dflab's TFRecord files and checkpoints need the google-crc32c "
                          f"package (pip install 'google-crc32c>=1.5'): {e}") from e
    return google_crc32c


def value(data) -> int:
    """The CRC32C of ``data`` (bytes-like)."""
    return _library().value(bytes(data) if not isinstance(data, bytes) else data)


def extend(crc: int, data) -> int:
    """The CRC32C of the bytes ``crc`` covered followed by ``data``."""
    return _library().extend(crc, bytes(data) if not isinstance(data, bytes) else data)


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
