"""The C half of the event-file reader (codecs/_wire.c) against the numpy one: identical Walks
(every array) from protowire.walk, on the real event files of tests/data walked the way
_tensorboard_events.py walks them, on those files' bytes mutated (bit flips, zeroed stretches, cuts) and
on generated messages with what real files rarely hold: keys of several bytes, huge and
negative lengths, overlong varints, wire types that cannot be skipped, lanes running to the
buffer's last byte. The same for group_spans and for tfrecord's checked chains (frame). Then
the whole TensorBoard read gives the same frames with the C code and without it.

The generated messages are hand-made on purpose: they are the malformed input."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import runcompare as rc
from runcompare.errors import RuncompareError
from runcompare.sources.codecs import crc as crc32c
from runcompare.sources.codecs import protowire as pw
from runcompare.sources.codecs import tfrecord
from runcompare.sources.codecs.tfrecord import frame
from runcompare.sources.formats import _tensorboard_events as tfevents

from .conftest import DATA

EVENT_FILES = sorted(DATA.rglob("events.out.tfevents*"))
EVENT, SUMMARY, VALUE = {1, 2, 4, 5, 7, 8, 9}, 1, {1, 2, 3, 4, 5, 6, 8, 9}
METADATA, PLUGIN, TENSOR, SESSION = {1, 4}, {1}, {1, 4, 5, 6, 13}, {1}


def test_the_extension_is_built():
    assert pw._wire is not None, (
        "runcompare.sources.codecs._wire was not built: install a C compiler and the Python "
        "headers, then reinstall runcompare")


def both(buf, start, end, fields, repeated=None) -> pw.Walk:
    """Walk with C and with numpy, assert the Walks are identical, return the C one."""
    start, end = np.asarray(start, np.int64), np.asarray(end, np.int64)
    native = pw._walk_native(buf, start, end, set(fields), repeated)
    pure = pw._walk_numpy(buf, start, end, set(fields), repeated)
    assert native is not None
    assert list(native.fields) == list(pure.fields)
    for number, column in pure.fields.items():
        other = native.fields[number]
        assert (other._wire is None) == (column._wire is None), number
        for mine, theirs in zip(arrays(other), arrays(column)):
            assert mine.dtype == theirs.dtype and np.array_equal(mine, theirs), number
    assert native.bad.dtype == pure.bad.dtype and np.array_equal(native.bad, pure.bad)
    for mine, theirs in zip(native.rows, pure.rows):
        assert mine.dtype == theirs.dtype and np.array_equal(mine, theirs)
    assert native.bad.flags.writeable  # callers mark more lanes bad
    return native


def arrays(column: pw.Column) -> list[np.ndarray]:
    """wire, a, b, repeated, without allocating the lazy ones on the column itself."""
    fresh = pw.Column(column.size)
    return [getattr(column, "_" + name) if getattr(column, "_" + name) is not None
            else getattr(fresh, name) for name in ("wire", "a", "b", "repeated")]


def payloads(column: pw.Column, lanes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    lanes = lanes[column.has(2)[lanes]]
    return column.a[lanes], column.a[lanes] + column.b[lanes]


def walk_like_tfevents(buf: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> int:
    """Every walk _tensorboard_events.decode makes, each checked C against numpy; the lanes walked."""
    event = both(buf, starts, ends, EVENT)
    good = np.flatnonzero(~event.bad)
    both(buf, *payloads(event.fields[7], good), SESSION)
    summary = both(buf, *payloads(event.fields[5], good), set(), SUMMARY)
    lane, start, length = summary.rows
    keep = ~summary.bad[lane]
    value = both(buf, start[keep], start[keep] + length[keep], VALUE)
    live = np.flatnonzero(~value.bad)
    meta = both(buf, *payloads(value.fields[9], live), METADATA)
    both(buf, *payloads(meta.fields[1], np.flatnonzero(~meta.bad)), PLUGIN)
    both(buf, *payloads(value.fields[8], live), TENSOR)
    return starts.size + summary.rows[0].size


@pytest.mark.parametrize("file", EVENT_FILES, ids=lambda f: str(f.relative_to(DATA)))
def test_real_event_files_walk_the_same(file):
    buf = np.frombuffer(file.read_bytes(), np.uint8)
    frames = frame(buf)
    walk_like_tfevents(buf, frames.starts, frames.starts + frames.lengths)


def test_real_files_hold_every_kind_of_field_walked():
    """The real files exercise the fields _tensorboard_events reads (else the test above proves little)."""
    seen: set[tuple[int, int]] = set()
    for file in EVENT_FILES:
        buf = np.frombuffer(file.read_bytes(), np.uint8)
        frames = frame(buf)
        event = pw.walk(buf, frames.starts, frames.starts + frames.lengths, EVENT)
        seen |= {(n, w) for n, c in event.fields.items() for w in np.unique(c.wire) if w >= 0}
    assert {(1, 1), (2, 0), (5, 2), (4, 2), (7, 2)} <= seen


def real_records() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Every record of every real file in one buffer: bytes, starts, ends."""
    parts, starts, ends, offset = [], [], [], 0
    for file in EVENT_FILES:
        data = file.read_bytes()
        frames = frame(np.frombuffer(data, np.uint8))
        parts.append(data)
        starts.append(frames.starts + offset)
        ends.append(frames.starts + frames.lengths + offset)
        offset += len(data)
    return (np.frombuffer(b"".join(parts), np.uint8).copy(), np.concatenate(starts),
            np.concatenate(ends))


RECORDS = real_records()


@pytest.mark.parametrize("seed", range(12))
def test_mutated_event_bytes_walk_the_same(seed):
    rng = np.random.default_rng(seed)
    original, starts, ends = RECORDS
    buf = original.copy()
    at = rng.integers(0, buf.size, 200 + 400 * seed)
    buf[at] ^= (1 << rng.integers(0, 8, at.size)).astype(np.uint8)  # bit flips
    for begin in rng.integers(0, buf.size - 64, 20):  # zeroed stretches
        buf[begin:begin + rng.integers(1, 64)] = 0
    for begin in rng.integers(0, buf.size - 32, 20):  # garbage stretches
        buf[begin:begin + 32] = rng.integers(0, 256, 32)
    cut = rng.random(ends.size) < 0.1  # lanes cut short (or empty, or inverted)
    ends = np.where(cut, starts + rng.integers(-2, 40, ends.size), ends)
    assert walk_like_tfevents(buf, starts, ends) > starts.size
    event = both(buf, starts, ends, EVENT | {3, 6, 10, 16, 1000})
    assert event.bad.sum() > 0 and (~event.bad).sum() > 0  # both kinds of lanes met


def encode(value: int) -> bytes:
    out = bytearray()
    while True:
        byte, value = value & 0x7F, value >> 7
        if not value:
            return bytes(out + bytes([byte]))
        out.append(byte | 0x80)


NUMBERS = [1, 2, 3, 5, 8, 15, 16, 17, 127, 128, 2047, 2048, 1 << 20, (1 << 61) - 1]


def message(rng: np.random.Generator, depth: int = 0) -> bytes:
    """A message of random fields, valid or not."""
    out = bytearray()
    for _ in range(int(rng.integers(0, 8))):
        number = int(rng.choice(NUMBERS)) if rng.random() < 0.9 else int(rng.integers(0, 1 << 61))
        wire = int(rng.choice([0, 1, 2, 5])) if rng.random() < 0.93 else int(rng.integers(0, 8))
        out += encode(number << 3 | wire)
        if rng.random() < 0.03:  # a key written overlong: 0x80 0x80 ... 0x00
            out[-1:] = bytes([out[-1] | 0x80, 0x80, 0x00])
        if wire == 0:
            out += encode(int(rng.choice([0, 1, 300, 1 << 35, (1 << 64) - 1])))
            if rng.random() < 0.03:
                out += b"\xff" * 11  # a varint longer than 10 bytes
        elif wire == 1:
            out += rng.bytes(8)
        elif wire == 5:
            out += rng.bytes(4)
        elif wire == 2:
            inner = message(rng, depth + 1) if depth < 2 and rng.random() < 0.5 else rng.bytes(
                int(rng.integers(0, 12)))
            size = len(inner)
            roll = rng.random()
            if roll < 0.04:
                size = (1 << 64) - int(rng.integers(1, 40))  # negative: not advancing
            elif roll < 0.07:
                size = (1 << 63) + int(rng.integers(0, 1 << 20))  # past 2**63
            elif roll < 0.1:
                size = (1 << 62) + int(rng.integers(0, 1 << 20))  # wraps past int64
            elif roll < 0.14:
                size += int(rng.integers(1, 30))  # past the message's end
            out += encode(size) + inner
        else:
            out += rng.bytes(int(rng.integers(0, 4)))
    return bytes(out)


@pytest.mark.parametrize("seed", range(20))
def test_generated_messages_walk_the_same(seed):
    rng = np.random.default_rng(1000 + seed)
    messages = [message(rng) for _ in range(300)]
    data = b"".join(messages)
    buf = np.frombuffer(data, np.uint8)
    ends = np.cumsum([len(m) for m in messages])
    starts = ends - [len(m) for m in messages]
    garbage = rng.integers(0, max(1, buf.size - 1), 60)  # lanes starting anywhere
    starts = np.concatenate((starts, garbage, [max(0, buf.size - 3), buf.size - 1]))
    ends = np.concatenate((ends, np.minimum(garbage + rng.integers(-3, 50, 60), buf.size),
                           [buf.size, buf.size]))  # the last two end at the buffer's end
    for _ in range(6):
        fields = set(rng.choice(NUMBERS, int(rng.integers(0, 8))).tolist())
        repeated = None if rng.random() < 0.3 else int(rng.choice(NUMBERS))
        found = both(buf, starts, ends, fields, repeated)
    assert found.bad.any()


def test_a_field_that_does_not_advance_marks_its_lane_bad_and_stops_it():
    """A length of 2**64 - 11 brings the walk back to its key: numpy once looped forever."""
    data = b"\x08\x01\x0a" + encode((1 << 64) - 11) + b"\x08\x02"
    walked = both(np.frombuffer(data, np.uint8), [0], [len(data)], {1, 2})
    assert walked.bad.tolist() == [True] and walked.fields[2]._wire is None
    column = walked.fields[1]  # its second occurrence, kept though it broke the lane
    assert (column.wire.tolist(), column.a.tolist(), column.b.tolist()) == ([2], [13], [-11])
    assert column.repeated.tolist() == [True]


def test_rows_of_a_lane_that_turns_bad_are_kept_in_lane_order():
    one = b"\x0a\x01x" + b"\x0a\x01y"
    two = b"\x0a\x01z" + b"\x0a\x05w"  # the second value runs past the message
    buf = np.frombuffer(one + two + b"\x0a\x00", np.uint8)
    walked = both(buf, [3, 6, 12], [6, 12, 14], set(), 1)  # lanes out of file order
    assert [r.tolist() for r in walked.rows] == [[0, 1, 1, 2], [5, 8, 11, 14], [1, 1, 5, 0]]
    assert walked.bad.tolist() == [False, True, False]


def test_fields_that_never_occur_cost_nothing():
    buf = np.frombuffer(b"\x08\x01", np.uint8)
    walked = both(buf, [0, 2], [2, 2], {1, 2, 300})
    assert walked.fields[2]._wire is None and walked.fields[300]._wire is None
    assert walked.fields[1].wire.tolist() == [0, -1] and walked.fields[1]._b is None


def test_lanes_outside_the_buffer_go_to_numpy():
    buf = np.frombuffer(b"\x08\x01", np.uint8)
    assert pw._walk_native(buf, np.array([0]), np.array([3]), {1}, None) is None
    assert pw._walk_native(buf, np.array([-1]), np.array([2]), {1}, None) is None
    assert pw._walk_native(buf, np.array([2]), np.array([1]), {1}, None) is not None  # empty


@settings(max_examples=300, deadline=None)
@given(st.binary(min_size=1, max_size=200), st.lists(st.tuples(st.integers(0, 199),
                                                               st.integers(-2, 60)),
                                                     max_size=20),
       st.sets(st.sampled_from(NUMBERS), max_size=6), st.none() | st.sampled_from(NUMBERS))
def test_any_bytes_walk_the_same(data, lanes, fields, repeated):
    buf = np.frombuffer(data, np.uint8)
    starts = np.array([min(s, buf.size - 1) for s, _ in lanes], np.int64)
    ends = np.minimum(starts + [n for _, n in lanes], buf.size).astype(np.int64)
    both(buf, starts, ends, fields, repeated)


# -- the whole read ----------------------------------------------------------------------

def read(folder: Path) -> tuple[pl.DataFrame, list[str]] | str:
    """A folder's scalars and findings as the TensorBoard source gives them, or its error."""
    try:
        run = rc.load(folder, source="tensorboard", cache=False)
    except RuncompareError as error:
        return str(error)
    return run.scalars, [f.message for f in run.findings]


def native_mode(monkeypatch, on: bool) -> None:
    monkeypatch.setattr(pw, "NATIVE", on)
    monkeypatch.setattr(tfrecord, "NATIVE", on and bool(pw._wire.FAST_CRC))


FOLDERS = sorted({f.parent for f in EVENT_FILES})


@pytest.mark.parametrize("folder", FOLDERS, ids=lambda f: str(f.relative_to(DATA)))
def test_the_tensorboard_read_is_the_same_with_and_without_the_c_walker(folder, monkeypatch):
    called = []
    native_walk = pw._walk_native

    def counting(*args):
        called.append(True)
        return native_walk(*args)

    monkeypatch.setattr(pw, "_walk_native", counting)
    native_mode(monkeypatch, True)  # also under RUNCOMPARE_PURE=1
    native = read(folder)
    assert called or "no readable TensorBoard event" in native  # no record: nothing walked
    native_mode(monkeypatch, False)
    called.clear()
    pure = read(folder)
    assert not called
    if isinstance(pure, str):
        assert native == pure
        return
    assert not isinstance(native, str)
    assert native[0].equals(pure[0]) and native[1] == pure[1]
    for file in folder.glob("events.out.tfevents*"):
        native_mode(monkeypatch, True)
        mine = tfevents.decode(file.read_bytes())
        native_mode(monkeypatch, False)
        theirs = tfevents.decode(file.read_bytes())
        assert mine.scalars.equals(theirs.scalars)
        assert (mine.starts, mine.texts, mine.hparams, mine.skipped, mine.damage) == (
            theirs.starts, theirs.texts, theirs.hparams, theirs.skipped, theirs.damage)


# -- group_spans -------------------------------------------------------------------------

def groups_both(buf, start, length) -> tuple[np.ndarray, list[bytes]]:
    """group_spans with C and with numpy, asserted identical; the C result."""
    start, length = np.asarray(start, np.int64), np.asarray(length, np.int64)
    found = pw._wire.group(buf, start, length)
    assert found is not None
    if start.size == 0:  # group_spans answers before either path
        assert found == (bytearray(), bytearray())
        return pw.group_spans(buf, start, length)
    codes, uniques = pw.group_spans(buf, start, length)  # C, unless RUNCOMPARE_PURE=1
    pure_codes, pure_uniques = pw._group_numpy(buf, start, length)
    assert codes.dtype == pure_codes.dtype == np.uint32
    assert np.array_equal(codes, pure_codes) and uniques == pure_uniques
    assert np.array_equal(np.frombuffer(found[0], np.uint32), pure_codes)
    slow_codes, slow_uniques = pw._group_slow(buf, start, length)  # the plain definition
    assert np.array_equal(codes, slow_codes) and uniques == slow_uniques
    return codes, uniques


@pytest.mark.parametrize("file", EVENT_FILES, ids=lambda f: str(f.relative_to(DATA)))
def test_real_tags_group_the_same(file):
    buf = np.frombuffer(file.read_bytes(), np.uint8)
    frames = frame(buf)
    event = pw.walk(buf, frames.starts, frames.starts + frames.lengths, EVENT)
    summary = pw.walk(buf, *payloads(event.fields[5], np.flatnonzero(~event.bad)), set(),
                      repeated=SUMMARY)
    _, start, length = summary.rows
    value = pw.walk(buf, start, start + length, VALUE)
    live = ~value.bad & value.fields[1].has(2)
    groups_both(buf, np.where(live, value.fields[1].a, 0), np.where(live, value.fields[1].b, 0))


@pytest.mark.parametrize("seed", range(10))
def test_random_spans_group_the_same(seed):
    """Small alphabets (many equal strings, many of equal length), empty spans, spans at the
    buffer's end, long ones (several 8-byte words), and over 64 distinct strings (the table
    grows)."""
    rng = np.random.default_rng(seed)
    buf = np.frombuffer(rng.integers(0, 2 + seed, 5000, dtype=np.uint8).tobytes(), np.uint8)
    length = rng.integers(0, [3, 9, 17, 40][seed % 4], 4000)
    start = rng.integers(0, buf.size - length + 1)
    start[:5], length[:5] = buf.size - length[:5], length[:5]  # flush with the end
    codes, uniques = groups_both(buf, start, length)
    assert len(uniques) == int(codes.max()) + 1


def test_spans_outside_the_buffer_go_to_numpy():
    buf = np.frombuffer(b"abc", np.uint8)
    assert pw._wire.group(buf, np.array([2]), np.array([2])) is None
    assert pw._wire.group(buf, np.array([-1]), np.array([1])) is None
    assert pw._wire.group(buf, np.array([0]), np.array([-1])) is None
    assert pw._wire.group(buf, np.array([3]), np.array([0])) is not None


# -- TFRecord chains ---------------------------------------------------------------------

def test_crc32c_is_the_standard_one():
    rng = np.random.default_rng(0)
    for size in [*range(40), 1000, 4099]:
        data = rng.bytes(size)
        assert pw._wire.crc32c(data) == crc32c.value(data)
    assert pw._wire.crc32c(b"123456789") == 0xE3069283


def frames_both(data: bytes) -> tfrecord.Frames:
    """frame with the C chains and with numpy's (google_crc32c's chain CRC, and every record's
    CRCs one by one), asserted identical; the C result."""
    buf = np.frombuffer(data, np.uint8)
    results = []
    for native, spans in [(True, False), (False, False), (False, True)]:
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(tfrecord, "NATIVE", native)
            if spans:
                patch.setattr(tfrecord, "_verify", tfrecord._verify_spans)
            results.append(tfrecord.frame(buf))
    for other in results[1:]:
        assert np.array_equal(results[0].starts, other.starts)
        assert np.array_equal(results[0].lengths, other.lengths)
        assert results[0].starts.dtype == other.starts.dtype == np.int64
        assert results[0].lengths.dtype == other.lengths.dtype == np.int64
        assert results[0].damage == other.damage
    return results[0]


SEED_FILES = [f.read_bytes() for f in EVENT_FILES]


@pytest.mark.parametrize("file", EVENT_FILES, ids=lambda f: str(f.relative_to(DATA)))
def test_real_files_frame_the_same(file):
    frames_both(file.read_bytes())


@pytest.mark.parametrize("seed", range(30))
def test_damaged_files_frame_the_same(seed):
    damaged(seed)


def damaged(seed: int) -> set[str]:
    """Frame a real file damaged at random with C and numpy; the kinds of damage found.

    Flipped bytes (in lengths, CRCs and data), cuts, inserted garbage, deleted and repeated
    stretches."""
    rng = np.random.default_rng(seed)
    data = bytearray(SEED_FILES[seed % len(SEED_FILES)])
    for _ in range(int(rng.integers(1, 6))):
        kind = rng.choice(["flip", "cut", "insert", "delete", "repeat", "header"])
        at = int(rng.integers(0, max(len(data), 1)))
        if kind == "flip" and data:
            data[at] ^= int(rng.integers(1, 256))
        elif kind == "cut":
            del data[at:]
        elif kind == "insert":
            data[at:at] = rng.bytes(int(rng.integers(1, 40)))
        elif kind == "delete":
            del data[at:at + int(rng.integers(1, 30))]
        elif kind == "repeat":
            data[at:at] = data[at:at + int(rng.integers(1, 200))]
        elif data:  # a huge length with its CRC made to hold
            length = int(rng.integers(1 << 40, 1 << 63)).to_bytes(8, "little")
            data[at:at] = length + tfrecord.masked_crc32c(length).to_bytes(4, "little")
    frames = frames_both(bytes(data))
    return {d.reason.split(" (")[0].split(";")[0].lstrip("0123456789 ") for d in frames.damage}


def test_the_damaged_files_hold_every_kind_of_damage():
    kinds = set().union(*(damaged(seed) for seed in range(30)))
    assert {"CRC mismatch in a record's data", "bytes of garbage",
            "truncated last record"} <= kinds
