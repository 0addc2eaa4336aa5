"""Fuzz tests (hypothesis) of the .wandb block reader and the protobuf decoders.

Properties: any bytes give complete records or damage notes, never an exception other than
HeaderError (missing header) or ProtoError (bad protobuf); records framed by a writer come back
exactly, across 32 KiB block boundaries; a cut file gives a prefix of the records; the bulk
(numpy) history decoder agrees with the plain Python one on any input, including mutations of
real history records.
"""

from __future__ import annotations

import mmap
import random
import struct
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from runcompare.sources.codecs.leveldb import (
    BLOCK,
    HEADER,
    HeaderError,
    read_records,
    read_records_sequential,
)
from runcompare.sources.codecs.protowire import ProtoError, fields
from runcompare.sources.formats.wandb import _history as wandb_history
from runcompare.sources.formats.wandb._history import decode_history, record_types
from runcompare.sources.formats.wandb._proto import history_items, record_kind

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


def same_records(data: bytes) -> None:
    """The bulk reader (on bytes and, in place, on a bytearray) agrees with the chunk-by-chunk
    reference: the same payloads at the same offsets, the same damage."""
    expected = read_records_sequential(data)
    mapped = mmap.mmap(-1, len(data))
    mapped[:] = data
    for copy in (data, bytearray(data), mapped):
        got = read_records(copy)
        assert got.payloads == expected.payloads
        assert got.offsets.tolist() == expected.offsets.tolist()
        assert got.damage == expected.damage


@FAST
@given(payload_lists, st.lists(st.tuples(st.integers(min_value=0), st.integers(1, 255)),
                               max_size=8), st.integers(min_value=0), st.booleans())
def test_bulk_framing_matches_sequential_reader(payloads: list[bytes],
                                                flips: list[tuple[int, int]], cut: int,
                                                zero_tail: bool) -> None:
    data = bytearray(frame(payloads))
    for at, mask in flips:
        pos = len(HEADER) + at % max(1, len(data) - len(HEADER))
        if pos < len(data):
            data[pos] ^= mask
    data = data[:len(HEADER) + cut % (len(data) - len(HEADER) + 1)]
    if zero_tail:
        data += bytes(cut % (2 * BLOCK))
    same_records(bytes(data))


@FAST
@given(st.lists(st.integers(0, 40_000), max_size=30), st.integers(0, 2**32),
       st.integers(min_value=0), st.integers(0, 3))
def test_bulk_framing_matches_sequential_reader_on_many_blocks(
        sizes: list[int], seed: int, at: int, damage: int) -> None:
    """Many records over many blocks, with one kind of damage somewhere in the middle: a
    flipped data byte, a zeroed chunk header, a zeroed stretch or a garbage header."""
    data = bytearray(frame([_payload(size % 900 if i % 3 else size, seed + i)
                            for i, size in enumerate(sizes)]))
    pos = len(HEADER) + at % max(1, len(data) - len(HEADER))
    if damage == 1 and pos < len(data):
        data[pos] ^= 0x5A
    elif damage == 2:
        data[pos:pos + 7] = bytes(len(data[pos:pos + 7]))
    elif damage == 3:
        data[pos:pos + 300] = bytes(len(data[pos:pos + 300]))
    same_records(bytes(data))


def test_bulk_crc_check_over_many_stretches_finds_the_first_bad_chunk() -> None:
    """Six MiB of records, CRCs checked a MiB at a time by threads: a flipped byte late, early,
    or in two stretches at once is found at the same chunk as the sequential reader finds it."""
    good = frame([_payload(700 + i % 5 * 3000, i) for i in range(1500)])
    assert len(good) > 6 * (1 << 20)
    for positions in ([5_500_000], [1_200_000], [4_000_000, 2_100_000], [len(good) - 3]):
        data = bytearray(good)
        for pos in positions:
            data[pos] ^= 0x21
        same_records(bytes(data))


def test_bulk_framing_matches_sequential_reader_on_real_files() -> None:
    for file in REAL:
        data = file.read_bytes()
        same_records(data)
        for cut in range(len(HEADER), len(data), max(1, len(data) // 97)):
            same_records(data[:cut])


def reference(bodies: list[bytes]) -> tuple[list[tuple[int, str, str]], list[int]]:
    items, errors = [], []
    for row, body in enumerate(bodies):
        try:
            items += [(row, k, v) for k, v in history_items(body)]
        except ProtoError:
            errors.append(row)
    return items, errors


@contextmanager
def _split_everything() -> Iterator[None]:
    """Cut the work of the bulk decoders in parts from two items on."""
    whole, wandb_history._PART = wandb_history._PART, 1
    try:
        yield
    finally:
        wandb_history._PART = whole


def bulk(bodies: list[bytes]) -> tuple[list[tuple[int, str, str]], list[int]]:
    blob = b"".join(bodies)
    ends = np.cumsum([len(b) for b in bodies], dtype=np.int64)
    starts = ends - np.array([len(b) for b in bodies], dtype=np.int64)
    frame, errors = decode_history(blob, starts, ends)
    with _split_everything():  # decoded in parts by threads, as a large file is
        split, split_errors = decode_history(blob, starts, ends)
    assert split.equals(frame) and split_errors == errors
    return list(frame.select("row", "key", "value_json").iter_rows()), [row for row, _ in errors]


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


def _history_item(key: bytes, value: bytes, *, tag: int = 0x12) -> bytes:
    def field(number_tag: bytes, data: bytes) -> bytes:
        return number_tag + _varint(len(data)) + data

    return field(b"\x0a", field(bytes((tag,)), key) + field(b"\x82\x01", value))


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        out.append(n & 0x7F | (0x80 if n > 0x7F else 0))
        n >>= 7
        if not n:
            return bytes(out)


@FAST
@given(st.lists(st.lists(st.tuples(
    st.sampled_from(["loss", "train/metric_0", "train/global_step", "a" * 40, "eval/bleu_score",
                     "train/num_input_tokens_seen", "métrique/perte", "損失", "x" * 24,
                     "y" * 25, "z" * 32, "w" * 33]) | st.text(max_size=40),
    st.sampled_from(["0.5", "-0.18827687350820005", "1.7959471937752678e+09", "NaN",
                     '{"a": 1}', '"texte"', '"ü"']) | st.text(max_size=50),
    st.booleans()), max_size=12), max_size=12),
    st.lists(st.integers(min_value=0), max_size=3))
def test_bulk_history_decoder_matches_python_on_varied_texts(
        records: list[list[tuple[str, str, bool]]], bad: list[int]) -> None:
    """Keys and values of every length around the 12/16/24/32-byte thresholds, repeated keys,
    non-ASCII and (by a flipped byte) invalid UTF-8: the bulk decoder agrees with Python.
    (Each record ends in 34 bytes of another field, so that texts are read as whole words.)"""
    bodies = [b"".join(_history_item(k.encode(), v.encode(), tag=0x12 if nested else 0x0A)
                       for k, v, nested in items) + b"\x12\x02\x08\x01\x1a\x1e" + bytes(30)
              for items in records]
    blob = bytearray(b"".join(bodies))
    for at in bad:
        if blob:
            blob[at % len(blob)] |= 0x80
    cut, out = 0, []
    for body in bodies:
        out.append(bytes(blob[cut:cut + len(body)]))
        cut += len(body)
    assert bulk(out) == reference(out)


def test_bulk_history_decoder_matches_python_on_real_records() -> None:
    assert REAL_BODIES and bulk(REAL_BODIES) == reference(REAL_BODIES)


@FAST
@given(st.lists(st.binary(max_size=300), max_size=10))
def test_record_types_match_python(payloads: list[bytes]) -> None:
    blob = b"".join(payloads)
    ends = np.cumsum([len(p) for p in payloads], dtype=np.int64)
    starts = ends - np.array([len(p) for p in payloads], dtype=np.int64)
    kinds, body_at, body_end = record_types(np.frombuffer(blob, np.uint8), starts, ends)
    with _split_everything():  # typed in parts by threads, as a large file is
        split = record_types(np.frombuffer(blob, np.uint8), starts, ends)
    assert all((a == b).all() for a, b in zip(split, (kinds, body_at, body_end)))
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
