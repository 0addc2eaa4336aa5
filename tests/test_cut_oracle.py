"""Every format's real test logs cut, bit-flipped and zeroed (issue: damaged, hostile and odd
input), held to an oracle: the same file cut at its last complete record.

For a file cut at offset ``c``, ``b`` is the end of the last whole record before ``c`` (a TFRecord
record, a ``.wandb`` record's last chunk, a ``trainer_state.json`` log entry, a line). Then:

* formats of framed records: the cut file reads exactly as the file cut at ``b``, with a
  warning whenever ``c`` fell inside a record;
* line formats, where a last line without its newline may be whole (many real logs end so):
  what the cut file reads lies between what the file cut at ``b`` reads and what the whole file
  reads (no point lost before the damage, none invented), and a cut inside a number is a
  ``damaged-input`` warning;
* a cut before the first whole record may be a clear error (:class:`InputError`, or
  :class:`MissingInfoError` for a step no line tells), nothing else.

Bit flips and zeroed stretches may change what a line says, but they raise nothing but
:class:`InputError`; in the CRC-checked formats (TensorBoard, ``.wandb``) they invent nothing
and are reported.
"""

from __future__ import annotations

import json
import random
import re
import shutil

import pytest

from runcompare.errors import InputError, MissingInfoError
from runcompare.sources import REGISTRY

from .conftest import DATA, SAMPLES

WANDB_RUN = next((DATA / "hf_global32" / "wandb").glob("offline-run-*"))

#: (format, run folder, the file in it that is damaged, how its records end).
CASES = [
    ("tensorboard", DATA / "tensorboard" / "torch_simple", None, "tfrecord"),
    ("tensorboard", DATA / "tensorboard" / "tf2", None, "tfrecord"),
    ("wandb", WANDB_RUN, next(WANDB_RUN.glob("*.wandb")).name, "wandb"),
    ("hf-trainer", DATA / "hf_global32", "trainer_state.json", "log_history"),
    ("hf-stdout", SAMPLES / "attn", "train.log", "lines"),
    ("megatron", DATA / "text" / "megatron_ramp", "train.log", "lines"),
    ("nanogpt", DATA / "text" / "nanogpt", "train.log", "lines"),
    ("torchtitan", DATA / "text" / "torchtitan", "train.log", "lines"),
    ("text", DATA / "text" / "kv", "train.log", "lines"),
    ("text", DATA / "text" / "colon", "train.log", "lines"),
    ("jsonl", DATA / "jsonl" / "plain", "metrics.jsonl", "lines"),
    ("lightning", DATA / "lightning" / "lightning_logs" / "version_0", "metrics.csv", "lines"),
    ("wandb-export", DATA / "wandb_export" / "api", "plain.csv", "lines"),
]
#: Cases read at their file, not their folder (a folder of several exports is several runs).
BY_FILE = {"wandb-export"}
FRAMED = {"tfrecord", "wandb", "log_history"}


def _ids(case):
    fmt, folder, _, _ = case
    return f"{fmt}-{folder.name}"


def _points(raw):
    return {(m, s, v) for m, s, v in raw.scalars.select("metric", "step", "value").iter_rows()}


def _read(fmt, path):
    """What ``fmt`` reads at ``path``, or the clear error it gives (a missing step is one)."""
    try:
        return REGISTRY[fmt].read_at(path)
    except (InputError, MissingInfoError) as exc:
        return exc


def _ends(data: bytes, how: str) -> list[int]:
    """Where the whole records of ``data`` end, in order (the oracle's cut points)."""
    if how == "lines":
        return [m.end() for m in re.finditer(rb"\n", data)]
    if how == "tfrecord":  # u64 length, u32 crc, data, u32 crc
        ends, pos = [], 0
        while pos + 12 <= len(data):
            end = pos + 12 + int.from_bytes(data[pos:pos + 8], "little") + 4
            if end > len(data):
                break
            ends.append(end)
            pos = end
        return ends
    if how == "wandb":  # LevelDB log: 7-byte file header, 32 KiB blocks of 7-byte chunk headers
        ends, pos = [], 7
        while pos + 7 <= len(data):
            left = 32768 - pos % 32768
            if left < 7:
                pos += left
                continue
            length, kind = int.from_bytes(data[pos + 4:pos + 6], "little"), data[pos + 6]
            end = pos + 7 + length
            if end > len(data):
                break
            if kind in (1, 4):  # a FULL record, or the LAST chunk of one
                ends.append(end)
            pos = end
        return ends
    assert how == "log_history"  # each entry of the list, as the JSON decoder reads it
    text = data.decode()
    decoder, ends = json.JSONDecoder(), []
    pos = text.index("[", text.index('"log_history"')) + 1
    while True:
        while text[pos] in " \n\r\t,":
            pos += 1
        if text[pos] == "]":
            return ends
        _, pos = decoder.raw_decode(text, pos)
        ends.append(len(text[:pos].encode()))


@pytest.fixture
def damaged(tmp_path):
    """A copy of a case's run folder, and a function writing bytes over its damaged file."""
    def make(case):
        fmt, folder, name, how = case
        run = tmp_path / folder.name
        shutil.copytree(folder, run)
        for checkpoint in run.glob("checkpoint-*"):  # their states would stand in for the root's
            shutil.rmtree(checkpoint)
        if name is None:
            name = next(p.name for p in sorted(run.iterdir()) if "tfevents" in p.name)
        target = run / name
        data = target.read_bytes()

        def write(content: bytes):
            target.write_bytes(content)
            return _read(fmt, target if fmt in BY_FILE else run)
        return run, data, write
    return make


def _cuts(data: bytes, ends: list[int], seed: str) -> list[int]:
    rng = random.Random(seed)
    inside = [rng.randrange(1, len(data)) for _ in range(14)]
    near_end = [len(data) - 1, len(data) - 3]
    at_ends = rng.sample(ends, min(2, len(ends)))
    return sorted(set(inside + near_end + at_ends))


@pytest.mark.parametrize("case", CASES, ids=_ids)
def test_a_cut_file_reads_as_the_file_cut_at_its_last_whole_record(damaged, case):
    fmt, _, _, how = case
    run, data, write = damaged(case)
    whole = write(data)
    assert not isinstance(whole, Exception), whole
    everything = _points(whole)
    ends = _ends(data, how)
    for cut in _cuts(data, ends, f"{fmt}{run.name}"):
        last = max([e for e in ends if e <= cut], default=0)
        oracle = write(data[:last]) if last else InputError("nothing whole")
        got = write(data[:cut])
        where = f"{fmt} {run.name} cut at {cut} of {len(data)} (last whole record ends at {last})"
        refused = (InputError, MissingInfoError)
        if isinstance(got, refused):  # a clear error only where nothing whole came before
            assert isinstance(oracle, refused) or not _points(oracle), where
            continue
        points = _points(got)
        before = set() if isinstance(oracle, refused) else _points(oracle)
        if how in FRAMED:
            assert points == before, where
            if cut != last and data[cut:].strip():  # inside a record, not at its end
                assert any(f.level == "warning" for f in got.findings), where
        else:
            assert before <= points <= everything, (where, sorted(points - everything)[:3],
                                                    sorted(before - points)[:3])
            in_number = data[cut - 1:cut].isdigit() and data[cut:cut + 1] in b"0123456789.eE"
            if in_number and cut != len(data):
                assert "damaged-input" in {f.code for f in got.findings}, where


def _flip(data: bytes, rng: random.Random) -> bytes:
    out = bytearray(data)
    for _ in range(3):
        at = rng.randrange(len(out))
        out[at] ^= 1 << rng.randrange(8)
    return bytes(out)


def _zero(data: bytes, rng: random.Random) -> bytes:
    at = rng.randrange(len(data))
    size = rng.choice([4, 64, 1024])
    return data[:at] + bytes(min(size, len(data) - at)) + data[at + size:]


@pytest.mark.parametrize("damage", [_flip, _zero], ids=["bit flips", "zeroed stretch"])
@pytest.mark.parametrize("case", CASES, ids=_ids)
def test_flipped_bits_and_zeroed_stretches_raise_nothing_but_a_clear_error(damaged, case,
                                                                            damage):
    fmt, _, _, how = case
    run, data, write = damaged(case)
    everything = _points(write(data))
    rng = random.Random(f"{fmt}{run.name}{damage.__name__}")
    for _ in range(8):
        got = write(damage(data, rng))  # anything but InputError fails the test here
        if isinstance(got, (InputError, MissingInfoError)) or how not in ("tfrecord", "wandb"):
            continue
        points = _points(got)
        assert points <= everything, (fmt, run.name, sorted(points - everything)[:3])
        if points != everything:
            assert any(f.level == "warning" for f in got.findings), (fmt, run.name)
