"""CRC-32C (Castagnoli) as TFRecord uses it, masked and plain.

The fast path is ``google_crc32c`` (a dependency; C with SSE4.2/ARMv8 CRC instructions). When
its wheel is missing, a numpy implementation gives the same answers: table-driven, one byte
per step for many records at once (fine for scalar logs, slow for megabyte-sized records).
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

try:
    import google_crc32c
except ImportError:  # pragma: no cover - exercised by tests that hide the wheel
    google_crc32c = None  # type: ignore[assignment]

__all__ = ["extend", "fast", "mask", "mask_array", "masked_crc32c", "masked_rows", "span_crcs",
           "unmask", "value"]

MASK_DELTA = 0xA282EAD8
U32 = 0xFFFFFFFF
_POLY = 0x82F63B78  # CRC-32C, bit-reflected


def fast() -> bool:
    """Whether the C implementation is there (then whole chains are checked in one pass)."""
    return google_crc32c is not None and getattr(google_crc32c, "implementation", "c") == "c"


def value(data: bytes) -> int:
    """The standard CRC-32C of ``data``.

    >>> hex(value(b"123456789"))
    '0xe3069283'
    """
    if google_crc32c is not None:
        return int(google_crc32c.value(bytes(data)))
    buf = np.frombuffer(bytes(data), np.uint8)
    return int(span_crcs(buf, np.array([0]), np.array([buf.size]))[0])


def extend(state: int, data: bytes) -> int:
    """The CRC-32C register ``state`` carried on over ``data``, by the C implementation (only
    where :func:`fast` says it is there)."""
    assert google_crc32c is not None
    return int(google_crc32c.extend(state, data))


def mask(crc: int) -> int:
    return (((crc >> 15) | (crc << 17)) + MASK_DELTA) & U32


def masked_crc32c(data: bytes) -> int:
    """TFRecord's masked CRC-32C of ``data``.

    >>> hex(masked_crc32c(b"123456789"))
    '0xc78ab0e5'
    """
    return mask(value(data))


def mask_array(crc: np.ndarray) -> np.ndarray:
    """Masked CRCs of an array of CRCs (uint32)."""
    crc = crc.astype(np.uint32)
    masked: np.ndarray = ((crc >> np.uint32(15)) | (crc << np.uint32(17))) + np.uint32(MASK_DELTA)
    return masked


def unmask(masked: np.ndarray) -> np.ndarray:
    """The CRCs behind an array of masked ones (uint32)."""
    rot = masked.astype(np.uint32) - np.uint32(MASK_DELTA)  # wraps modulo 2**32
    crcs: np.ndarray = (rot << np.uint32(15)) | (rot >> np.uint32(17))
    return crcs


@lru_cache(maxsize=1)
def _table() -> np.ndarray:
    table = np.arange(256, dtype=np.uint32)
    for _ in range(8):
        table = np.where(table & 1, (table >> 1) ^ _POLY, table >> 1).astype(np.uint32)
    return table


def masked_rows(rows: np.ndarray) -> np.ndarray:
    """Masked CRC-32C of each row of a (records × bytes) uint8 matrix.

    >>> int(masked_rows(np.frombuffer(b"123456789", np.uint8)[None, :])[0]) == masked_crc32c(
    ...     b"123456789")
    True
    """
    table = _table()
    crc = np.full(rows.shape[0], U32, np.uint32)
    for column in range(rows.shape[1]):
        crc = table[(crc ^ rows[:, column]) & 0xFF] ^ (crc >> 8)
    return mask_array(crc ^ np.uint32(U32))


def span_crcs(buf: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """Standard CRC-32C of each span ``buf[start:start + length]``, all spans at once: step j
    advances every span longer than j by its j-th byte."""
    table = _table()
    order = np.argsort(-lengths, kind="stable")
    begin, size = starts[order], lengths[order]
    crc = np.full(order.size, U32, np.uint32)
    longest = int(size[0]) if size.size else 0
    active = order.size
    for j in range(longest):
        while active and size[active - 1] <= j:
            active -= 1
        part = crc[:active]
        crc[:active] = table[(part ^ buf[begin[:active] + j]) & 0xFF] ^ (part >> 8)
    out = np.empty_like(crc)
    out[order] = crc ^ np.uint32(U32)
    return out
