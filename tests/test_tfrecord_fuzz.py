"""Random and mutated bytes never crash the TensorBoard decoder; only runcompare's own
errors reach the caller, and whatever is kept from a damaged file has a valid CRC."""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from runcompare.errors import RuncompareError
from runcompare.sources import REGISTRY
from runcompare.sources.codecs import crc as crc32c
from runcompare.sources.codecs import tfrecord
from runcompare.sources.formats import _tensorboard_events as tfevents

from .conftest import DATA

TB = DATA / "tensorboard"
SEEDS = [f.read_bytes() for f in sorted(TB.rglob("*tfevents*")) if "damaged" not in f.parts]
FUZZ = settings(max_examples=80, deadline=None,
                suppress_health_check=[HealthCheck.too_slow])


@st.composite
def mutated(draw: st.DrawFn) -> bytes:
    """A real event file with a few bytes flipped, cut, inserted, deleted or repeated."""
    data = bytearray(draw(st.sampled_from(SEEDS)))
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(["flip", "cut", "insert", "delete", "repeat"]))
        at = draw(st.integers(0, max(len(data) - 1, 0)))
        if kind == "flip" and data:
            data[at] ^= draw(st.integers(1, 255))
        elif kind == "cut":
            del data[at:]
        elif kind == "insert":
            data[at:at] = draw(st.binary(min_size=1, max_size=40))
        elif kind == "delete":
            del data[at:at + draw(st.integers(1, 30))]
        else:
            data[at:at] = data[at:at + draw(st.integers(1, 60))]
    return bytes(data)


def _check(data: bytes) -> None:
    decoded = tfevents.decode(data)
    frame = decoded.scalars
    assert frame.get_column("event").is_between(0, max(decoded.events - 1, 0)).all()
    frames = tfrecord.frame(np.frombuffer(data, np.uint8))
    for start, length in zip(frames.starts.tolist(), frames.lengths.tolist()):
        stored = int.from_bytes(data[start + length:start + length + 4], "little")
        assert tfrecord.masked_crc32c(data[start:start + length]) == stored


@FUZZ
@given(st.binary(max_size=400))
def test_random_bytes(data):
    _check(data)


@FUZZ
@given(mutated())
def test_mutated_real_files(data):
    _check(data)


@FUZZ
@given(mutated())
def test_reading_a_damaged_run_raises_only_our_errors(data):
    with tempfile.TemporaryDirectory() as folder:
        Path(folder, "events.out.tfevents.1700000000.host.1.0").write_bytes(data)
        try:
            raw = REGISTRY["tensorboard"].read_at(Path(folder))
        except RuncompareError:
            return
        assert raw.points == raw.scalars.height


def test_unchanged_real_files_keep_every_record():
    for data in SEEDS:
        frames = tfrecord.frame(np.frombuffer(data, np.uint8))
        assert frames.damage == []
        assert int(frames.starts[-1] + frames.lengths[-1] + 4) == len(data)


def test_without_the_crc_wheel_the_same_records_are_kept(monkeypatch):
    files = sorted(TB.rglob("*tfevents*"))
    fast = [tfrecord.frame(np.frombuffer(f.read_bytes(), np.uint8)) for f in files]
    monkeypatch.setattr(crc32c, "google_crc32c", None)
    assert not crc32c.fast() and crc32c.masked_crc32c(b"123456789") == 0xC78AB0E5
    for file, expected in zip(files, fast):
        frames = tfrecord.frame(np.frombuffer(file.read_bytes(), np.uint8))
        assert frames.starts.tolist() == expected.starts.tolist(), file
        assert frames.damage == expected.damage, file
