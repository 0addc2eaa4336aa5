"""The LevelDB log framing of W&B's ``.wandb`` files: header, 32 KiB blocks, chunks, CRC-32.

Layout (FORMATS.md §3)::

    header   7 bytes  b":W&B" | u16 0xBEE1 (little-endian) | u8 version 0
    blocks   32 KiB each (the first one starts with the header); each holds chunks
    chunk    u32 crc | u16 length | u8 type | data[length]      (little-endian)
             crc = zlib CRC-32 of the type byte + data; type FULL=1 FIRST=2 MIDDLE=3 LAST=4
             a block tail shorter than 7 bytes is zero padding

A record is one FULL chunk or FIRST, MIDDLE..., LAST. A crashed writer leaves a torn last chunk
or a zero-filled tail; a bad disk leaves a chunk whose CRC does not match. :func:`read_records`
keeps every complete record and describes each damaged stretch with its byte offset.
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass, field

import numpy as np

__all__ = ["BLOCK", "HEADER", "HeaderError", "Records", "read_records"]

BLOCK = 32 * 1024
#: Magic, then 0xBEE1 as a little-endian u16, then version 0.
HEADER = b":W&B" + struct.pack("<HB", 0xBEE1, 0)
_CHUNK_HEADER = 7
_FULL, _FIRST, _MIDDLE, _LAST = 1, 2, 3, 4
_unpack = struct.Struct("<IHB").unpack_from


class HeaderError(ValueError):
    """The bytes do not start with the ``.wandb`` header."""


@dataclass
class Records:
    """Complete record payloads as spans of ``blob``, each with the byte offset of its first
    chunk in the file, and the damage found.

    ``blob`` is the file's bytes (a FULL chunk's payload is read in place) followed by the
    records that spanned several chunks, joined.
    """

    blob: bytes = b""
    starts: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    ends: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    offsets: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    #: (byte offset, what is wrong there), in file order
    damage: list[tuple[int, str]] = field(default_factory=list)

    @property
    def payloads(self) -> list[bytes]:
        """Each record's bytes (copies; the readers use the spans)."""
        return [self.blob[a:b] for a, b in zip(self.starts.tolist(), self.ends.tolist())]


#: CRC-32 of each chunk type byte, the running start of a chunk's CRC.
_TYPE_CRC = {kind: zlib.crc32(bytes((kind,))) for kind in (_FULL, _FIRST, _MIDDLE, _LAST)}


def read_records(data: bytes) -> Records:
    """Every complete record in ``data`` (a whole ``.wandb`` file), and where it is damaged.

    Raises :class:`HeaderError` when the header is missing or of another version.

    >>> rec = b"hi"; crc = zlib.crc32(bytes([1]) + rec)
    >>> read_records(HEADER + struct.pack("<IHB", crc, 2, 1) + rec).payloads
    [b'hi']
    """
    if data[: len(HEADER)] != HEADER:
        raise HeaderError(_describe_header(data[: len(HEADER)]))
    out = Records()
    full: list[int] = []  # offsets of sound FULL chunks: the hot path keeps only these
    multi: list[tuple[int, bytes]] = []  # (offset of the FIRST chunk, record) of the others
    _scan(data, full, multi, out.damage)
    out.blob = data + b"".join(record for _, record in multi) if multi else data
    at = np.array(full, np.int64)
    buf = np.frombuffer(data, np.uint8)
    lengths = buf[at + 4].astype(np.int64) | buf[at + 5].astype(np.int64) << 8
    starts, offsets = at + _CHUNK_HEADER, at
    sizes = np.array([len(record) for _, record in multi], np.int64)
    extra_ends = len(data) + np.cumsum(sizes)
    starts = np.concatenate([starts, extra_ends - sizes])
    ends = np.concatenate([at + _CHUNK_HEADER + lengths, extra_ends])
    offsets = np.concatenate([offsets, np.array([o for o, _ in multi], np.int64)])
    order = np.argsort(offsets, kind="stable")  # file order
    out.starts, out.ends, out.offsets = starts[order], ends[order], offsets[order]
    return out


def _scan(data: bytes, full: list[int], multi: list[tuple[int, bytes]],
          damage: list[tuple[int, str]]) -> None:
    """Walk the chunks: sound FULL chunks go to ``full`` (the hot loop does nothing else),
    assembled FIRST..LAST records to ``multi``, problems to ``damage``."""
    view, crc32, unpack, keep = memoryview(data), zlib.crc32, _unpack, full.append
    full_crc = _TYPE_CRC[_FULL]
    parts: list[bytes] = []
    start = -1  # offset of the FIRST chunk of the record being assembled
    pos, size = len(HEADER), len(data)
    while pos < size:
        left = BLOCK - pos % BLOCK
        if left >= _CHUNK_HEADER and pos + _CHUNK_HEADER <= size:
            crc, length, kind = unpack(data, pos)
            end = pos + _CHUNK_HEADER + length
            if kind == _FULL and start < 0 and length <= left - _CHUNK_HEADER \
                    and end <= size and crc32(view[pos + _CHUNK_HEADER:end], full_crc) == crc:
                keep(pos)
                pos = end
                continue
        elif left < _CHUNK_HEADER:
            pos += left  # zero padding at the end of a block
            continue
        else:
            damage.append((pos, f"torn chunk header ({size - pos} of 7 bytes)"))
            break
        problem = _problem(data, pos, crc, length, kind, left)
        if problem is not None:
            damage.append((pos, problem))
            if start >= 0:
                parts, start = _drop_partial(start, damage)
            if problem.startswith(("torn", "zero-filled")):
                break
            pos = end if problem.startswith("CRC") else pos + left
            continue
        chunk = data[pos + _CHUNK_HEADER:end]
        if kind in (_FULL, _FIRST):
            if start >= 0:
                parts, start = _drop_partial(start, damage)
            if kind == _FULL:
                keep(pos)
            else:
                parts, start = [chunk], pos
        elif start < 0:
            damage.append((pos, "continuation chunk without a first chunk; skipped"))
        elif kind == _MIDDLE:
            parts.append(chunk)
        else:
            multi.append((start, b"".join((*parts, chunk))))
            parts, start = [], -1
        pos = end
    if start >= 0:
        damage.append((start, "record cut off at the end of the file"))


def _problem(data: bytes, pos: int, crc: int, length: int, kind: int, left: int) -> str | None:
    """What is wrong with the chunk at ``pos``, or None when it is a sound FIRST/MIDDLE/LAST
    (or FULL) chunk."""
    size = len(data)
    end = pos + _CHUNK_HEADER + length
    if kind == 0 and length == 0 and crc == 0:
        rest = size - pos
        if not data[pos:].strip(b"\0"):
            return f"zero-filled tail ({rest} bytes)"
        return "zeroed chunk header; skipped to the next block"
    valid = kind in _TYPE_CRC
    if valid and end > size:
        return f"torn last chunk ({size - pos - _CHUNK_HEADER} of {length} bytes written)"
    if not valid or length > left - _CHUNK_HEADER:
        return f"bad chunk header (type {kind}, length {length}); skipped to the next block"
    if zlib.crc32(data[pos + _CHUNK_HEADER:end], _TYPE_CRC[kind]) != crc:
        return "CRC mismatch; chunk skipped"
    return None


def _drop_partial(start: int, damage: list[tuple[int, str]]) -> tuple[list[bytes], int]:
    """Forget a record whose FIRST chunk was seen but whose LAST never came."""
    damage.append((start, "record without its last chunk; dropped"))
    return [], -1


def _describe_header(head: bytes) -> str:
    if head[:4] == HEADER[:4]:
        return f"unsupported .wandb header {head.hex(' ')} (expected {HEADER.hex(' ')})"
    return f"no .wandb header (file starts with {head.hex(' ') or 'nothing'})"
