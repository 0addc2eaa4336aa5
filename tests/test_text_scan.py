"""The native line scanner (sources/textlog/_scan.c, sources/textlog/layout.py): what it reads equals what the
polars parsers read, on the real text logs and on the benchmark's formats."""

from __future__ import annotations

import math
import re
import struct
import sys

import numpy as np
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from runcompare.sources.formats import hf_stdout, megatron, nanogpt
from runcompare.sources.textlog import layout as _layout
from runcompare.sources.textlog import lines as _lines
from runcompare.sources.textlog.values import timestamp

from .conftest import DATA, ROOT, SAMPLES, decimal_tokens

sys.path.insert(0, str(ROOT / "benchmarks"))
import text_ingest

MEGATRON = [DATA / "text" / "megatron_ramp", DATA / "text" / "megatron_restart"]
HF = [SAMPLES / "attn", SAMPLES / "mamba", DATA / "text" / "hf4x_attn", DATA / "hf_ddp",
      DATA / "hf_tokens", DATA / "hf_global32", DATA / "hf_resumed", DATA / "hf_resumed_noskip"]


def test_the_scanner_is_built():
    assert _layout._scan is not None, (
        "runcompare.sources.textlog._scan was not built: install a C compiler and the Python headers, "
        "then reinstall runcompare")
    assert _layout.NATIVE


def _scan(data: bytes, program: list[_layout.Piece], slots: int):
    count, matched, values, rest, rest_lines = _layout._scan.scan(
        data, _layout._compile([*program, ("end", "")]), slots)
    return (count, np.frombuffer(matched, np.int64).tolist(),
            np.frombuffer(values, np.float64).reshape(-1, slots).tolist() if slots else [], rest,
            np.frombuffer(rest_lines, np.int64).tolist())


def test_a_malformed_program_is_refused():
    for program, slots in [(b"\x01\x05\x00ab", 0), (b"\x63", 0), (b"\x03", 2), (b"\x01", 0)]:
        with pytest.raises(ValueError, match="malformed program"):
            _layout._scan.scan(b"1\n", program, slots)


def test_lines_are_counted_as_the_csv_reader_counts_them():
    for data in [b"a\nb\n", b"a\nb", b"\n\n\n", b"x\r\ny\r\n", b"1\x1f2\n\n3", b"\xff\xfe\n1\n"]:
        frame = pl.read_csv(data, **_lines._CSV)
        count, matched, _, rest, rest_lines = _scan(data, [("num", "")], 1)
        assert count == frame.height, data
        assert sorted(matched + rest_lines) == list(range(count))
        assert rest.count(b"\n") == len(rest_lines)


def test_a_line_matches_only_when_the_program_reads_it_to_its_end():
    program = [("lit", "step"), ("ws", " "), ("int", "1"), ("lit", ":"), ("ws", " "),
               ("lit", "loss="), ("num", "2.5")]
    data = (b"step 7: loss=2.25\nstep 8: loss=2.25 extra\nstep  9: loss=-1e-3  \n"
            b"step 1.5: loss=1\nstep 9:loss=1\n")
    count, matched, values, rest, rest_lines = _scan(data, program, 2)
    assert (count, matched, values) == (5, [0, 2], [[7, 2.25], [9, -0.001]])
    # a ws is one space or more: where the sample had one, a parser's " " or \s+ wants one
    assert rest == b"step 8: loss=2.25 extra\nstep 1.5: loss=1\nstep 9:loss=1\n"
    assert rest_lines == [1, 3, 4]


def test_skips_and_timestamps():
    program = [("skipto", "| "), ("int", "3"), ("lit", "/"), ("int", "9"), ("upto", "\r["),
               ("lit", "\r["), ("ts", ""), ("lit", "]")]
    data = "30%|███ | 3/9 [00:01]\r 40%|████ | 4/9\r[2024-02-29 23:59:59.25]\n".encode()
    _, matched, values, _, _ = _scan(data, program, 3)
    assert matched == [0] and values == [[3, 9, 1709251199.25]]
    for bad in [b"| 3/9\r[2024-02-30 00:00:00]\n", b"| 3/9\r[2023-02-29 00:00:00]\n",
                b"| 3/9\r[2024-01-01 24:00:00]\n", b"| 3/9\r[2024-01-01 00:00:00.1234567]\n"]:
        assert _scan(bad, program, 3)[1] == [], bad


def test_guards_offsets_and_literals_of_common_bytes():
    program = [("not", "| 0/"), ("not", " = "), ("skipto", "| "), ("int", "5"), ("upto", "{'"),
               ("pos", ""), ("lit", "{'loss': "), ("num", "2"), ("lit", "}")]
    lines = ["50%|█████     | 5/10 [00:01, 9.1it/s]\r{'loss': 2.5}",  # read
             "  0%|          | 0/10 [00:00<?, ?it/s]\r 50%|█████     | 5/10 [00:01]\r{'loss': 1}",
             "50%|█████     | 5/10 [00:01]\r Num examples = 64 {'loss': 3}",  # guarded
             "50%|█████     | 5/10 [00:01]\r{'loss': 3} trailing"]  # not read to its end
    count, matched, values, _, rest_lines = _scan("\n".join(lines).encode(), program, 3)
    offset = len(lines[0].encode()) - len("{'loss': 2.5}")
    assert (count, matched, values, rest_lines) == (4, [0], [[5, offset, 2.5]], [1, 2, 3])
    # a literal of common bytes only (digits, | and /) is found 16 bytes at a time
    long = ("9" * 40 + "| 1/2 " + "7" * 40 + "| 10/ ").encode()
    hit = _scan(long + b"\n", [("skipto", "| 10/"), ("lit", " ")], 0)
    assert hit[1] == [0] and _scan(long + b"\n", [("not", "| 10/")], 0)[1] == []


@settings(max_examples=300, deadline=None)
@given(st.floats(allow_nan=False, allow_infinity=False, width=64),
       st.sampled_from(["{!r}", "{:.6E}", "{:.4g}", "{:.3f}", "{:e}", "{:.17g}"]))
def test_numbers_are_read_as_polars_casts_them(value, form):
    text = form.format(value)  # up to 313 characters ("{:.3f}" of 1e308)
    _, matched, values, _, _ = _scan(text.encode() + b"\n", [("num", "")], 1)
    expected = pl.Series([text]).cast(pl.Float64, strict=False)[0]
    assert matched == [0]
    assert values[0][0] == expected or (math.isnan(expected) and math.isnan(values[0][0]))


def test_numbers_of_every_exponent_are_read_as_python_reads_them():
    """The scanner rounds as the JSON reader does (_decimal.h): numbers of every exponent, of
    more digits than 19 (left to strtod), with leading zeros in the whole part and in the
    fraction, and the text forms JSON has not ("5.", "007.5")."""
    tokens = decimal_tokens(5, ("0", "007", "1", "12345678")) + ["5.", "0", "-0", "1e999"]
    data = "".join(f"{token}\n" for token in tokens).encode()
    _, matched, values, _, _ = _scan(data, [("num", "")], 1)
    assert matched == list(range(len(tokens)))
    assert [struct.pack("<d", row[0]) for row in values] == [
        struct.pack("<d", float(token)) for token in tokens]


def test_timestamps_are_read_as_polars_reads_them():
    stamps = ["1970-01-01 00:00:00", "2024-03-01 09:00:08", "1999-12-31T23:59:59,5",
              "2100-02-28 12:00:00.000001", "1969-07-20 20:17:40"]
    frame = pl.DataFrame({"t": stamps})
    expected = frame.select(timestamp(pl.col("t"))).to_series().to_list()
    got = [_scan(s.encode() + b"\n", [("ts", "")], 1)[2][0][0] for s in stamps]
    assert got == expected


def _both(read, path, monkeypatch, *, chunk=None):
    """``read(path)`` with the scanner, and without it (in chunks of ``chunk`` bytes if
    given); also how many rows the scanner gave."""
    if chunk:
        monkeypatch.setattr(_lines, "CHUNK_BYTES", chunk)
    scanned = []
    real_scan = _layout.scan

    def counting(data, layout):
        out = real_scan(data, layout)
        scanned.append(out[1].height)
        return out

    monkeypatch.setattr(_layout, "scan", counting)
    monkeypatch.setattr(_layout, "NATIVE", True)  # also under RUNCOMPARE_PURE=1
    native = read(path)
    monkeypatch.setattr(_layout, "NATIVE", False)
    pure = read(path)
    monkeypatch.setattr(_layout, "NATIVE", True)
    return native, pure, sum(scanned)


def _same(native, pure):
    """The same points (in any order: the scanner's come one metric after another), facts,
    restarts and findings."""
    assert native.scalars.sort(pl.all()).equals(pure.scalars.sort(pl.all()), null_equal=True)
    assert native.facts == pure.facts and native.leg_starts == pure.leg_starts
    assert [(f.code, f.message) for f in native.findings] == \
        [(f.code, f.message) for f in pure.findings]


@pytest.mark.parametrize("path", MEGATRON, ids=lambda p: p.name)
@pytest.mark.parametrize("chunk", [None, 700])
def test_megatron_logs_read_the_same_with_and_without_the_scanner(path, chunk, monkeypatch):
    native, pure, scanned = _both(megatron.read, path, monkeypatch, chunk=chunk)
    _same(native, pure)
    lines = sum(1 for line in path.joinpath("train.log").open(errors="replace")
                if re.search(r"iteration\s+\d+\s*/", line) and "|" in line
                and "loss at" not in line)  # train lines, as the parser tells them
    unparsed = sum(int(re.search(r": (\d+) lines? looked like", f.message)[1])
                   for f in pure.findings if f.code == "unparsed-lines")
    assert scanned == lines - unparsed  # all but the damaged train lines took the scanner


def test_the_benchmark_megatron_log_reads_the_same(tmp_path, monkeypatch):
    log = tmp_path / "megatron.log"
    text_ingest.write_megatron(log, 3000)
    native, pure, scanned = _both(megatron.read, log, monkeypatch, chunk=64 << 10)
    _same(native, pure)
    assert scanned == 3000 and native.points == 30_000


@pytest.mark.parametrize(("read", "log", "old", "new"), [
    (nanogpt.read, "nanogpt", b"iter 30: loss", b"iter -30: loss"),
    (megatron.read, "megatron_ramp", b"iteration       30/", b"iteration      -30/"),
    (hf_stdout.read, "hf4x_attn", b"\r{'loss': 2.145", b"\r(  \r{'loss': 2.145"),
    (nanogpt.read, "nanogpt", b"iter 360: loss 1.0078, time 33.01ms, mfu 11.20%",
     b"iter 360: loss 1.0078, time 33.01ms, mfu  11.20%"),
])
def test_an_odd_line_reads_the_same_with_and_without_the_scanner(tmp_path, monkeypatch, read,
                                                                 log, old, new):
    """Malformed input, a copy of the real log with one line edited: a step given a minus
    sign (the parsers' steps are digits, so the scanner's are too: it read -30 as a step that
    went back, a restart that dropped the points before it); a ``(`` before a Trainer dict
    (the parser takes it for a dict printed inside a call, not a log entry, and so does the
    scanner now: it read the dict); two spaces before a number (the scanner took them, the
    parser's single space did not: now both do)."""
    text = (DATA / "text" / log / "train.log").read_bytes()
    assert text.count(old) == 1
    (tmp_path / "train.log").write_bytes(text.replace(old, new))
    native, pure, _ = _both(read, tmp_path, monkeypatch)
    _same(native, pure)
    assert native.scalars.get_column("step").min() >= 0


@pytest.mark.parametrize("chunk", [None, 500])
def test_nanogpt_logs_read_the_same_with_and_without_the_scanner(chunk, monkeypatch):
    path = DATA / "text" / "nanogpt"
    native, pure, scanned = _both(nanogpt.read, path, monkeypatch, chunk=chunk)
    _same(native, pure)
    lines = sum(1 for line in path.joinpath("train.log").open() if line.startswith("iter "))
    assert scanned == lines and pure.scalars.filter(metric="train/loss").height == lines


@pytest.mark.parametrize("reuse", [False, True, "no pread"])
def test_chunks_cover_the_file_whatever_its_end(tmp_path, reuse, monkeypatch):
    if reuse == "no pread":  # as on Windows
        monkeypatch.delattr(_lines.os, "pread")
        monkeypatch.delattr(_lines.os, "preadv")
    lines = [f"line {i} " + "x" * (i % 7) for i in range(200)]
    for text in ("\n".join(lines), "\n".join(lines) + "\n", "y" * 5000 + "\n" + "z" * 10):
        log = tmp_path / "log.txt"
        log.write_text(text)
        with log.open("rb") as handle:
            read = _lines._reader(handle, 300, reuse=reuse is True)
            chunks = [bytes(read(span)) for span in _lines._spans(handle, 300)]
        assert b"".join(chunks) == text.encode()
        assert all(chunk.endswith(b"\n") for chunk in chunks[:-1])


@pytest.mark.parametrize("path", HF, ids=lambda p: f"{p.parent.name}/{p.name}")
@pytest.mark.parametrize("chunk", [None, 600])
def test_hf_stdout_reads_the_same_with_and_without_the_scanner(path, chunk, monkeypatch):
    native, pure, scanned = _both(hf_stdout.read, path, monkeypatch, chunk=chunk)
    _same(native, pure)
    dicts = pure.scalars.filter(metric="train/loss").height
    # a leg's first dict shares its line with the bar at 0 (| 0/): the parser reads that one
    assert scanned >= dicts - 2 * len(set(pure.scalars.get_column("leg"))) - 1


def test_the_benchmark_hf_stdout_reads_the_same(tmp_path, monkeypatch):
    log = tmp_path / "train.log"
    total = text_ingest.write_hf(log, 300_000)
    native, pure, scanned = _both(hf_stdout.read, log, monkeypatch, chunk=64 << 10)
    _same(native, pure)
    assert native.points == total // 10 * 4 and scanned == total // 10


def _mutated(data: bytes, rng) -> bytes:
    """``data`` with one kind of damage: a cut, flipped bits, a zeroed stretch, non-UTF-8 bytes
    inside a line or at its end, garbage at a line's end, or a line duplicated."""
    at = rng.randrange(1, len(data))
    kind = rng.randrange(6)
    if kind == 0:
        return data[:at]
    if kind == 1:
        out = bytearray(data)
        for _ in range(4):
            spot = rng.randrange(len(out))
            out[spot] ^= 1 << rng.randrange(8)
        return bytes(out)
    if kind == 2:
        return data[:at] + bytes(min(64, len(data) - at)) + data[at + 64:]
    end = data.find(b"\n", at)
    end = len(data) if end < 0 else end
    if kind == 3:  # inside the line (a key, a number) or at its end
        spot = rng.choice([at, end])
        return data[:spot] + rng.choice([b"\xff", b"\xc3", b" \xff\xfe\xe2\x82"]) + data[spot:]
    if kind == 4:
        return data[:end] + b" | x: 1.5e| garbage %%" + data[end:]
    start = data.rfind(b"\n", 0, at) + 1
    return data[:end + 1] + data[start:end + 1] + data[end + 1:]


DIFFERENTIAL = [(megatron.read, path) for path in MEGATRON] + [
    (nanogpt.read, DATA / "text" / "nanogpt"), (hf_stdout.read, SAMPLES / "attn"),
    (hf_stdout.read, DATA / "text" / "hf4x_attn")]


@pytest.mark.parametrize("chunk", [None, 4096, 700])
@pytest.mark.parametrize(("read", "path"), DIFFERENTIAL,
                         ids=lambda v: getattr(v, "name", getattr(v, "__module__", "")))
def test_mutated_logs_read_the_same_with_and_without_the_scanner(read, path, chunk, tmp_path,
                                                                  monkeypatch):
    """The differential over damaged real logs: whatever the damage, and wherever the chunk
    borders fall, the native scanner and the polars parsers read the same points, facts and
    findings, or refuse alike."""
    import random

    from runcompare.errors import RuncompareError

    rng = random.Random(f"{path.name}{chunk}")
    data = (path / "train.log").read_bytes()
    log = tmp_path / "train.log"
    for _ in range(16):
        log.write_bytes(_mutated(data, rng))
        outcomes = []
        for native in (True, False):
            monkeypatch.setattr(_layout, "NATIVE", native)
            if chunk:
                monkeypatch.setattr(_lines, "CHUNK_BYTES", chunk)
            try:
                outcomes.append(read(tmp_path))
            except RuncompareError as exc:
                outcomes.append(str(exc))
        native_read, pure_read = outcomes
        if isinstance(native_read, str) or isinstance(pure_read, str):
            assert native_read == pure_read
        else:
            _same(native_read, pure_read)
    monkeypatch.setattr(_layout, "NATIVE", True)


def test_megatron_lines_after_a_non_ascii_prefix_keep_their_steps(tmp_path, monkeypatch):
    """Malformed input made from the real log: every train line behind a launcher's prefix
    in Chinese. The parser cut the step out at str.find's offset, which counts bytes where
    str.slice counts characters: the prefix's 12 bytes in 4 characters cost the step its
    digits (110 read as 0). Both paths give the clean log's points."""
    log = DATA / "text" / "megatron_ramp" / "train.log"
    lines = log.read_text().splitlines(keepends=True)
    edited = ["[rank0]: 训练日志" + line if " iteration " in line else line for line in lines]
    (tmp_path / "train.log").write_text("".join(edited))
    native, pure, _ = _both(megatron.read, tmp_path, monkeypatch)
    _same(native, pure)
    clean = megatron.read(log.parent)
    assert pure.scalars.sort(pl.all()).equals(clean.scalars.sort(pl.all()), null_equal=True)


def test_a_damaged_first_line_costs_only_itself(tmp_path, monkeypatch):
    """Malformed input made from the real log: the first train line's "number of skipped
    iterations:" lost its colon to a stray byte. The parser took the layout of the chunk
    from that line, and every good line then held text where the layout had none: each was
    called unparsed. It takes the layout from a line whose every field is a key and value:
    that line is the one unparsed, and only its damaged field is lost."""
    log = DATA / "text" / "megatron_ramp" / "train.log"
    text = log.read_bytes()
    first = next(line for line in text.split(b"\n") if b" iteration " in line)
    damaged = first.replace(b"skipped iterations:", b"skipped iterations\xfe")
    (tmp_path / "train.log").write_bytes(text.replace(first, damaged))
    native, pure, _ = _both(megatron.read, tmp_path, monkeypatch)
    _same(native, pure)
    clean = megatron.read(log.parent)
    unparsed = [f for f in pure.findings if f.code == "unparsed-lines"]
    assert len(unparsed) == 1 and unparsed[0].message.split(": ")[1].startswith("1 line ")
    assert pure.scalars.height == clean.scalars.height - 1


def test_a_key_twice_on_a_line_is_neither_value_and_the_line_is_bad(tmp_path, monkeypatch):
    """Malformed input made from the real log: step 10's line holds "elapsed time per
    iteration (ms)" twice (815.3, then 9). Which value is the key's cannot be told: the
    parser took the last, the first or none, by the line's neighbours. Now neither, and the
    line is in the unparsed-lines warning, on both paths."""
    text = (DATA / "text" / "megatron_ramp" / "train.log").read_bytes()
    old = b"       320 | elapsed time per iteration (ms): 815.3 |"
    assert text.count(old) == 1
    new = old + b" elapsed time per iteration (ms): 9 |"
    (tmp_path / "train.log").write_bytes(text.replace(old, new))
    native, pure, _ = _both(megatron.read, tmp_path, monkeypatch)
    _same(native, pure)
    timed = pure.scalars.filter(metric="train/iteration_time_ms")
    assert 10 not in timed.get_column("step").to_list() and timed.height == 19
    unparsed = [f for f in pure.findings if f.code == "unparsed-lines"]
    assert len(unparsed) == 1 and "iteration       10/" in unparsed[0].message


def test_a_dict_with_a_key_more_than_the_first_keeps_it(tmp_path, monkeypatch):
    """Malformed-input test made from the real log: one Trainer dict ends with a key the
    first dict had not (a metric logged from then on). The fast path split the dicts at the
    first one's keys and dropped what followed its last: the new key was lost, on both
    paths, and a key repeated there read its first value. Now such a dict takes the regex
    path, which reads every entry; one with a key twice is damaged and said so."""
    text = (DATA / "text" / "hf4x_attn" / "train.log").read_bytes()
    old = b"'learning_rate': 0.00018947368421052632, 'epoch': 1.48}"
    assert text.count(old) == 1
    (tmp_path / "train.log").write_bytes(text.replace(old, old[:-1] + b", 'tokens_x': 5.0}"))
    native, pure, _ = _both(hf_stdout.read, tmp_path, monkeypatch)
    _same(native, pure)
    extra = pure.scalars.filter(metric="train/tokens_x")
    assert extra.get_column("value").to_list() == [5.0]
    (tmp_path / "train.log").write_bytes(text.replace(old, old[:-1] + b", 'epoch': 16}"))
    native, pure, _ = _both(hf_stdout.read, tmp_path, monkeypatch)
    _same(native, pure)
    assert 16.0 not in pure.scalars.filter(metric="train/epoch").get_column("value").to_list()
    unparsed = [f for f in pure.findings if f.code == "unparsed-lines"]
    assert len(unparsed) == 1 and "(line 77: {'loss': 2.145, " in unparsed[0].message


def test_a_bad_sample_line_makes_no_layout_for_the_next_log(tmp_path, monkeypatch):
    """The real restart log's line 31 is cut short (a killed run), so the parser finds it
    bad; as a chunk's sample it made a layout whose columns that are no slot (bad, and the
    line's text) every line it matched took, kept for the next log read. A copy with that
    line's count edited, read first, made the real log's warning quote the copy's line."""
    log = DATA / "text" / "megatron_restart" / "train.log"
    text = log.read_bytes()
    old = b"131/     200 | consumed samples:         8384 |"
    assert text.count(old) == 1
    (tmp_path / "train.log").write_bytes(text.replace(old, old.replace(b" 8384", b"-8384")))
    monkeypatch.setattr(_layout, "_CHECKED", {})
    copy, _, _ = _both(megatron.read, tmp_path, monkeypatch)
    native, pure, _ = _both(megatron.read, log.parent, monkeypatch)
    _same(native, pure)
    quoted = [f.message for f in native.findings if f.code == "unparsed-lines"]
    assert len(quoted) == 1 and "consumed samples:         8384 |" in quoted[0]
    assert "-8384" in next(f.message for f in copy.findings if f.code == "unparsed-lines")
