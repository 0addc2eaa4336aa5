"""Fuzz tests (hypothesis) of the .wandb block reader and the protobuf decoders.

Properties: any bytes give complete records or damage notes, never an exception other than
HeaderError (missing header) or ProtoError (bad protobuf); records framed by a writer come back
exactly, across 32 KiB block boundaries; a cut file gives a prefix of the records; the bulk
(numpy) history decoder agrees with the plain Python one on any input, including mutations of
real history records.
"""

from __future__ import annotations

import random
import struct
import zlib
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from runcompare.sources.leveldb_log import BLOCK, HEADER, HeaderError, read_records
from runcompare.sources.wandb_history import decode_history, record_types
from runcompare.sources.wandb_proto import ProtoError, fields, history_items, record_kind

REAL = sorted((Path(__file__).parent / "data" / "wandb" / "project").glob("wandb/*/*.wandb"))
FAST = settings(max_examples=100, deadline=None,
                suppress_health_check=[HealthCheck.too_slow])


def frame(payloads: list[bytes]) -> bytes:
    """LevelDB-log framing as wandb writes it (a test writer: FULL or FIRST/MIDDLE/LAST chunks,
    block tails under 7 bytes zero-padded)."""
    out = bytearray(HEADER)
    for payload in payloads:
        rest, first = payload, True
        while True:
            left = BLOCK - len(out) % BLOCK
            if left < 7:
                out += bytes(left)
                continue
            piece, rest = rest[:left - 7], rest[left - 7:]
            kind = (1 if first else 4) if not rest else (2 if first else 3)
            crc = zlib.crc32(bytes((kind,)) + piece)
            out += struct.pack("<IHB", crc, len(piece), kind) + piece
            first = False
            if not rest:
                break
    return bytes(out)


def _payload(size: int, seed: int) -> bytes:
    return random.Random(seed).randbytes(size)


#: Mostly small records, some larger than a 32 KiB block (cheap to generate: sizes and seeds).
payload_lists = st.lists(st.builds(_payload, st.integers(0, 300) | st.integers(30_000, 70_000),
                                   st.integers(0, 2**32)), max_size=10)


@FAST
@given(payload_lists)
def test_framed_records_come_back(payloads: list[bytes]) -> None:
    records = read_records(frame(payloads))
    assert records.payloads == payloads and records.damage == []


@FAST
@given(payload_lists, st.integers(min_value=0))
def test_cut_file_gives_a_prefix(payloads: list[bytes], cut: int) -> None:
    data = frame(payloads)
    cut = len(HEADER) + cut % (len(data) - len(HEADER) + 1)
    records = read_records(data[:cut])
    got = records.payloads
    assert got == payloads[:len(got)]
    if len(got) < len(payloads) and not records.damage:  # cut between two records
        assert read_records(data).offsets[len(got)] >= cut - 7 or cut % BLOCK > BLOCK - 7


@FAST
@given(payload_lists, st.lists(st.tuples(st.integers(min_value=0), st.integers(1, 255)),
                               min_size=1, max_size=8))
def test_corruption_never_invents_records(payloads: list[bytes],
                                          flips: list[tuple[int, int]]) -> None:
    data = bytearray(frame(payloads))
    for at, mask in flips:
        pos = len(HEADER) + at % max(1, len(data) - len(HEADER))
        if pos < len(data):
            data[pos] ^= mask
    for payload in read_records(bytes(data)).payloads:
        assert payload in payloads


@FAST
@given(st.binary(max_size=2000))
def test_any_bytes_after_the_header(data: bytes) -> None:
    records = read_records(HEADER + data)
    assert len(records.starts) == len(records.ends) == len(records.offsets)
    with pytest.raises(HeaderError):
        read_records(b"\0" + data)


def reference(bodies: list[bytes]) -> tuple[list[tuple[int, str, str]], list[int]]:
    items, errors = [], []
    for row, body in enumerate(bodies):
        try:
            items += [(row, k, v) for k, v in history_items(body)]
        except ProtoError:
            errors.append(row)
    return items, errors


def bulk(bodies: list[bytes]) -> tuple[list[tuple[int, str, str]], list[int]]:
    blob = b"".join(bodies)
    ends = np.cumsum([len(b) for b in bodies], dtype=np.int64)
    starts = ends - np.array([len(b) for b in bodies], dtype=np.int64)
    frame, errors = decode_history(blob, starts, ends)
    return list(frame.iter_rows()), [row for row, _ in errors]


def _real_bodies() -> list[bytes]:
    bodies = []
    for file in REAL:
        for payload in read_records(file.read_bytes()).payloads:
            found = record_kind(payload)
            if found and found[0] == 2:
                bodies.append(found[1])
    return bodies


REAL_BODIES = _real_bodies()


@FAST
@given(st.lists(st.binary(max_size=200), max_size=8))
def test_bulk_history_decoder_matches_python_on_random_bytes(bodies: list[bytes]) -> None:
    assert bulk(bodies) == reference(bodies)


@FAST
@given(st.lists(st.tuples(st.integers(0, len(REAL_BODIES) - 1), st.integers(min_value=0),
                          st.integers(0, 255)), max_size=6), st.integers(0, 40))
def test_bulk_history_decoder_matches_python_on_mutated_real_records(
        mutations: list[tuple[int, int, int]], cut: int) -> None:
    bodies = [bytearray(b) for b in REAL_BODIES[:40]]
    for index, at, value in mutations:
        body = bodies[index % len(bodies)]
        if body:
            body[at % len(body)] = value
    if bodies and cut:
        bodies[cut % len(bodies)] = bodies[cut % len(bodies)][:-(cut % 7 + 1)]
    bodies_bytes = [bytes(b) for b in bodies]
    assert bulk(bodies_bytes) == reference(bodies_bytes)


def test_bulk_history_decoder_matches_python_on_real_records() -> None:
    assert REAL_BODIES and bulk(REAL_BODIES) == reference(REAL_BODIES)


@FAST
@given(st.lists(st.binary(max_size=300), max_size=10))
def test_record_types_match_python(payloads: list[bytes]) -> None:
    blob = b"".join(payloads)
    ends = np.cumsum([len(p) for p in payloads], dtype=np.int64)
    starts = ends - np.array([len(p) for p in payloads], dtype=np.int64)
    kinds, body_at, body_end = record_types(np.frombuffer(blob, np.uint8), starts, ends)
    for i, payload in enumerate(payloads):
        if kinds[i] < 0:
            continue  # left to the Python decoder
        try:
            found = record_kind(payload)
        except ProtoError:
            pytest.fail(f"bulk accepted a record the reference rejects: {payload!r}")
        if found is None:
            assert kinds[i] == 0
        else:
            assert (kinds[i], blob[body_at[i]:body_end[i]]) == (found[0], found[1])


@FAST
@given(st.binary(max_size=500))
def test_protobuf_decoders_raise_only_proto_errors(data: bytes) -> None:
    for decode in (lambda b: list(fields(b)), record_kind, history_items):
        try:
            decode(data)
        except ProtoError:
            pass
