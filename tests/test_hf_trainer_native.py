"""The native trainer_state.json reader (sources/codecs/_jsoncols.c, sources/formats/_hf_trainer_json.py):
what hf_trainer reads through it equals what it reads with json.loads alone, on every real
trainer_state.json and on damaged and edited copies of them (the edits are made here, by
hand, on purpose: malformed and unusual input)."""

from __future__ import annotations

import json
import math
import os
import pickle
import random
import re
import shutil
import struct
import subprocess
import sys
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from polars.testing import assert_frame_equal

from runcompare.errors import RuncompareError
from runcompare.model import RawLog
from runcompare.sources.formats import _hf_trainer_json, hf_trainer

from .conftest import DATA, ROOT, SAMPLES, decimal_tokens

CORPUS = Path("/work/shared/corpus")
STATES = sorted(p for root in (DATA, SAMPLES, CORPUS) if root.is_dir()
                for p in root.rglob(hf_trainer.STATE))
RUNS = sorted({p.parent.parent if hf_trainer._CHECKPOINT.fullmatch(p.parent.name) else p.parent
               for p in STATES})
#: The real states the native reader reads (not an LFS pointer).
READABLE = [p for p in STATES if not p.read_bytes().startswith(b"version https://git-lfs")]


def _ids(path: Path) -> str:
    return str(path).replace(str(ROOT), "").replace(str(CORPUS), "corpus")


def _read(path: Path, native: bool, monkeypatch: pytest.MonkeyPatch) -> RawLog | str:
    monkeypatch.setattr(_hf_trainer_json, "NATIVE", native)
    try:
        return hf_trainer.read(path)
    except RuncompareError as exc:
        return f"{type(exc).__name__}: {exc}"
    finally:
        monkeypatch.setattr(_hf_trainer_json, "NATIVE", True)


def _same(path: Path, monkeypatch: pytest.MonkeyPatch) -> RawLog | str:
    """What ``path`` reads as, after checking that both paths read it alike."""
    native, pure = _read(path, True, monkeypatch), _read(path, False, monkeypatch)
    if isinstance(native, str) or isinstance(pure, str):
        assert native == pure
        return native
    assert_frame_equal(native.scalars, pure.scalars)
    assert native.facts == pure.facts
    assert [type(f.value) for f in native.facts.values()] == \
        [type(f.value) for f in pure.facts.values()]
    assert native.findings == pure.findings
    assert native.aliases == pure.aliases and list(native.aliases) == list(pure.aliases)
    assert native.files == pure.files
    assert native.step_unit == pure.step_unit
    told, worked_out = native.metric_codes(), pure.metric_codes()  # told by the native reader
    assert told[0].to_list() == worked_out[0].to_list()
    assert told[1].tolist() == worked_out[1].tolist()
    return native


def test_the_reader_is_built():
    assert _hf_trainer_json._jsoncols is not None, (
        "runcompare.sources.codecs._jsoncols was not built: install a C compiler and the "
        "Python headers, then reinstall runcompare")
    assert _hf_trainer_json.NATIVE


def test_the_real_states_are_found():
    assert len(STATES) >= 20 and len(RUNS) >= 10


@pytest.mark.parametrize("state", READABLE, ids=_ids)
def test_every_real_state_is_read_natively_as_json_loads_reads_it(state: Path):
    data = state.read_bytes()
    parsed = _hf_trainer_json.parse(data, "log_history", "step", hf_trainer._RATES)
    assert parsed is not None, f"{state}: the native reader refused a real trainer_state.json"
    fields, columns = parsed
    expected = json.loads(data)
    history = expected.pop("log_history")
    assert fields == expected
    assert len(columns) == len(history)
    assert _hf_trainer_json.entries(columns) == history
    rows = [(key, float(value), entry["step"]) for entry in history
            for key, value in entry.items()
            if type(value) in (int, float) and key != "step"]
    got = [(columns.keys[k], v, s) for k, v, s in
           zip(columns.key.tolist(), columns.value.tolist(), columns.step.tolist(), strict=True)]
    assert got == rows


@pytest.mark.parametrize("run", RUNS, ids=_ids)
def test_every_real_run_reads_the_same_natively(run: Path, monkeypatch):
    read = _same(run, monkeypatch)
    if not isinstance(read, str):
        assert read.scalars.height > 0
        assert "_codes" in _read(run, True, monkeypatch).__dict__  # told by the reader


# -- mutations ----------------------------------------------------------------------------

#: Raw JSON values put in place of an entry's value (numbers, then the values that are not).
_NUMBERS = ["NaN", "Infinity", "-Infinity", "-0", "-0.0", "0e0", "-0E-0", "1E5", "2.5e+3",
            "1e-7", "-1", "-123456789012345678", "123456789012345678", "1234567890123456789",
            "-9223372036854775808", "18446744073709551616", "1" + "0" * 30, "1" + "0" * 400,
            "1e308", "1e309", "-1e400", "5e-324", "1e-310", "2.2250738585072014e-308",
            "0.30000000000000004", "9007199254740993", "9007199254740993.0",
            "0.1000000000000000055511151231257827", "123456789012345678901234.5e-3",
            "3.141592653589793238462643383279", "1.7976931348623157e308", "4.9e-324",
            "0.000000000000000000000000000001234", "12345678901234567e-27",
            "98765432109876543e27"]
_OTHERS = ["true", "false", "null", '"2.5"', '""', '"a\\"b\\\\c\\u00e9\\ud83d\\ude00\\n"',
           '"\\ud800"', '"ünï ©ödé ✓ 🙂"', "[]", "[1, 2.5, NaN]", "{}", '{"a": {"b": [1, {}]}}',
           "[" * 30 + "]" * 30, "[" * 70 + "]" * 70]
_STEPS = ["10.5", "10.0", "1e1", '"10"', "true", "false", "null", "-5", "0", "-0",
          "9223372036854775807", "9223372036854775808", "-9223372036854775809", "[10]", "NaN"]
_KEYS = ['"l\\u006fss"', '"a\\"b"', '"tab\\there"', '"ñ_loss"', '"损失"', '"eval_ü"',
         '"🙂"', '""', '"step "', '"Step"', '"eval_loss"', '"train_samples_per_second"',
         '"train_steps_per_second"', '"test_acc"']
_NOT_ENTRIES = ["1", '"x"', "null", "[]", "[{}]", "true", "{}", '{"loss": 1}']


def _entry(pairs: list[tuple[str, str]]) -> str:
    return "{" + ", ".join(f"{key}: {value}" for key, value in pairs) + "}"


def _pairs(entry: dict[str, Any]) -> list[tuple[str, str]]:
    return [(json.dumps(k), json.dumps(v)) for k, v in entry.items()]


def _edited(state: dict[str, Any], rng: random.Random) -> str:
    """``state`` written back with one to three entries edited by hand: a value, the step, a
    key, a duplicate key, an entry that is not a dict, the end-of-training rates."""
    history = list(state.get("log_history") or [{"step": 1, "loss": 1.0}])
    raw = {}
    for _ in range(rng.randint(1, 3)):
        at = rng.randrange(len(history) + 1)
        entry = history[min(at, len(history) - 1)]
        pairs = _pairs(entry) if isinstance(entry, dict) else [('"step"', "1")]
        kind = rng.choice(["number", "other", "step", "key", "duplicate", "not", "rates",
                           "order", "missing"])
        i = rng.randrange(len(pairs))
        if kind == "number":
            pairs[i] = (pairs[i][0], rng.choice(_NUMBERS))
        elif kind == "other":
            pairs[i] = (pairs[i][0], rng.choice(_OTHERS))
        elif kind == "step":
            pairs = [(k, rng.choice(_STEPS) if k == '"step"' else v) for k, v in pairs]
        elif kind == "key":
            pairs.insert(i, (rng.choice(_KEYS), rng.choice(_NUMBERS + ["1.5", "2"])))
        elif kind == "duplicate":
            pairs.insert(i, (pairs[rng.randrange(len(pairs))][0], "3.5"))
        elif kind == "rates":
            pairs += [('"train_samples_per_second"', rng.choice(["12.5", "8", "NaN", "true",
                                                                  "null", "Infinity"])),
                      ('"train_steps_per_second"', rng.choice(["1.25", "2", '"1"', "-0"]))]
        elif kind == "order":
            rng.shuffle(pairs)
        elif kind == "missing":
            pairs = [(k, v) for k, v in pairs if k != '"step"'] or [('"loss"', "1")]
        text = rng.choice(_NOT_ENTRIES) if kind == "not" else _entry(pairs)
        marker = f"@@entry{len(raw)}@@"
        raw[marker] = text
        if at < len(history):
            history[at] = marker
        else:
            history.append(marker)
    body = json.dumps({**state, "log_history": history}, indent=rng.choice([None, 1, 2, "\t"]))
    for marker, text in raw.items():
        body = body.replace(json.dumps(marker), text)
    return body


def _damaged(data: bytes, rng: random.Random) -> bytes:
    """``data`` cut short, with bits flipped, bytes dropped, non-UTF-8 or a BOM put in."""
    kind = rng.choice(["cut", "flip", "flip", "drop", "utf8", "bom", "crlf", "nul", "tail"])
    at = rng.randrange(len(data)) if data else 0
    if kind == "cut":
        return data[:at]
    if kind == "flip":
        out = bytearray(data)
        for _ in range(rng.randint(1, 3)):
            out[rng.randrange(len(out))] ^= 1 << rng.randrange(8)
        return bytes(out)
    if kind == "drop":
        return data[:at] + data[at + rng.randint(1, 40):]
    if kind == "utf8":
        return data[:at] + rng.choice([b"\xff", b"\xc3", b"\xed\xa0\x80", b"\xe9t\xe9"]) + data[at:]
    if kind == "bom":
        return b"\xef\xbb\xbf" + data
    if kind == "crlf":
        return data.replace(b"\n", rng.choice([b"\r\n", b"\r"]))
    if kind == "nul":
        return data[:at] + b"\0" * rng.randint(1, 64) + data[at:]
    return data + rng.choice([b" x", b"{}", b"\n\n", b" ,", b"\t"])


_SAMPLE = READABLE[::3]


@pytest.mark.parametrize("state", _SAMPLE, ids=_ids)
def test_damaged_states_read_the_same_with_and_without_the_reader(state: Path, tmp_path,
                                                                  monkeypatch):
    rng = random.Random(_ids(state))  # the same edits in every checkout
    data = state.read_bytes()
    out = tmp_path / hf_trainer.STATE
    for _ in range(24):
        out.write_bytes(_damaged(data, rng))
        _same(tmp_path, monkeypatch)


@pytest.mark.parametrize("state", _SAMPLE, ids=_ids)
def test_edited_states_read_the_same_with_and_without_the_reader(state: Path, tmp_path,
                                                                 monkeypatch):
    rng = random.Random(_ids(state))  # the same edits in every checkout
    loaded = json.loads(state.read_bytes())
    out = tmp_path / hf_trainer.STATE
    natively = 0
    for _ in range(40):
        text = _edited(loaded, rng)
        out.write_text(text, encoding="utf-8")
        natively += _hf_trainer_json.parse(text.encode(), "log_history", "step",
                                   hf_trainer._RATES) is not None
        _same(tmp_path, monkeypatch)
    assert natively > 0  # some edits (NaN, -0, unicode keys, ...) stay on the native path


def test_top_level_oddities_read_the_same(tmp_path, monkeypatch):
    entry = '{"loss": 1.5, "step": 1}'
    documents = [
        f'{{"log_history": [{entry}], "log_history": []}}',
        f'{{"log\\u005fhistory": [{entry}]}}',
        f'{{"global_step": 1, "global_step": 7, "log_history": [{entry}]}}',
        f'{{"log_history": {entry}}}', f"[{entry}]", '{"log_history": []}', "{}",
        '{"log_history": [], "x": ' + "[" * 3000 + "]" * 3000 + "}",
        '{"log_history": [], "x": ' + "[" * 80 + "]" * 80 + "}",
        f'{{"x": {{"y": [1, "z", NaN]}}, "max_steps": 1e2, "log_history": [{entry}]}}',
        f'{{"train_batch_size": 8, "total_flos": 1e400, "log_history": [{entry}]}}',
        f'  \n{{"log_history":[{entry}]}}\n\n', f'{{"log_history":[{entry},]}}',
        f'{{"log_history":[{entry}] ,}}', f'{{"log_history":[{entry}]}} {{}}',
        '{"log_history": [{"step": 1}, {"step": 2, "loss": 1}, {"step": 2}]}',
        '{"log_history": [{"step": 5, "loss": 01}]}', '{"log_history": [{"step": 5, "a": 1.}]}',
        '{"log_history": [{"step": 5, "a": .5}]}', '{"log_history": [{"step": 5, "a": +1}]}',
        '{"log_history": [{"step": 5, "a": nan}]}', '{"log_history": [{"step": 5, "a": 1e}]}',
        '{"log_history": [{"step": 5, "a": "\\x"}]}', '{"log_history": [{"step": 5, "a": "\t"}]}',
        '{"log_history": [{"step": 5, "a": "\\u12"}]}',
    ]
    for document in documents:
        (tmp_path / hf_trainer.STATE).write_text(document, encoding="utf-8")
        _same(tmp_path, monkeypatch)


def _run(tmp_path: Path, final: str, checkpoint: str) -> Path:
    run = tmp_path / "run"
    shutil.rmtree(run, ignore_errors=True)
    (run / "checkpoint-1").mkdir(parents=True)
    (run / hf_trainer.STATE).write_text(final, encoding="utf-8")
    (run / "checkpoint-1" / hf_trainer.STATE).write_text(checkpoint, encoding="utf-8")
    return run


_FIRST = '"loss": 2.5, "ok": 1.0, "nan": NaN, "step": 1'


@pytest.mark.parametrize(("checkpoint", "mixed"), [
    (f"[{{{_FIRST}}}]", False),                                          # the same bytes
    ('[ {"step": 1,\n "nan": NaN, "ok": 1.0, "loss": 2.5} ]', False),  # spacing, key order
    ('[{"loss": 2.50, "ok": 1.0, "nan": NaN, "step": 1}]', False),      # 2.50 == 2.5
    ('[{"loss": 2.5, "ok": 1.0, "nan": NaN, "step": 1.0}]', False),     # 1.0 == 1 in Python
    ('[{"loss": 2.5, "ok": 1, "nan": NaN, "step": 1}]', False),
    ('[{"loss": 2.5, "ok": true, "nan": NaN, "step": 1}]', False),      # True == 1.0 too
    ('[{"loss": 2.5, "ok": 1.0, "nan": Infinity, "step": 1}]', True),
    ('[{"loss": 2.6, "ok": 1.0, "nan": NaN, "step": 1}]', True),
    ('[{"loss": 2.5, "ok": 1.0, "nan": NaN, "step": 2}]', True),
    ('[{"loss": 2.5, "ok": 1.0, "nan": NaN, "step": 1, "x": "a"}]', True),
    ('[{"loss": 2.5, "ok": 1.0, "step": 1}]', True),
    (f'[{{{_FIRST}}}, {{"loss": 2.25, "step": 2}}, {{"step": 3}}]', True),  # longer
    (f'[{{{_FIRST}}}, {{"loss": 2.25, "step": 2}}]', False),
    ("[]", False),
])
def test_checkpoints_of_another_run_are_told_as_json_loads_tells_them(checkpoint, mixed,
                                                                      tmp_path, monkeypatch):
    """The final state holds the checkpoint's entries (as json.loads compares dicts: NaN is
    json's one NaN object, equal to itself there) or not."""
    final = f'{{"global_step": 2, "log_history": [{{{_FIRST}}}, {{"loss": 2.25, "step": 2}}]}}'
    read = _same(_run(tmp_path, final, f'{{"global_step": 1, "log_history": {checkpoint}}}'),
                 monkeypatch)
    assert isinstance(read, RawLog)
    assert any(f.code == "mixed-runs" for f in read.findings) is mixed
    assert read.scalars.filter(metric="train/loss").get_column("value").to_list() == [2.5, 2.25]


def test_end_of_training_rates_keep_their_type_and_entry(tmp_path, monkeypatch):
    entries = ['{"train_samples_per_second": 8, "train_steps_per_second": 0.5, "step": 3}',
               '{"loss": 1.0, "step": 4}',
               '{"train_samples_per_second": 12.5, "train_steps_per_second": 2, "step": 5}',
               '{"train_samples_per_second": true, "train_steps_per_second": 2, "step": 6}']
    (tmp_path / hf_trainer.STATE).write_text(
        '{"log_history": [' + ", ".join(entries) + "]}", encoding="utf-8")
    read = _same(tmp_path, monkeypatch)
    assert isinstance(read, RawLog)
    samples, steps = read.facts["train_samples_per_second"], read.facts["train_steps_per_second"]
    assert (samples.value, steps.value) == (12.5, 2) and type(steps.value) is int
    assert samples.source == f"{hf_trainer.STATE}: log_history[step 5].train_samples_per_second"


@pytest.mark.parametrize("state", _SAMPLE[:4], ids=_ids)
def test_checkpoints_with_an_edited_entry_read_the_same(state: Path, tmp_path, monkeypatch):
    """A run folder of a final state and a checkpoint of it, one of them edited: the
    checkpoint is or is not the start of the final history alike on both paths."""
    rng = random.Random(_ids(state))  # the same edits in every checkout
    loaded = json.loads(state.read_bytes())
    history = loaded.get("log_history") or []
    if len(history) < 2:
        pytest.fail(f"{state}: too short for this test; pick another")
    short = {**loaded, "log_history": history[:len(history) // 2], "global_step": 0}
    for _ in range(12):
        final, checkpoint = json.dumps(loaded, indent=2), json.dumps(short, indent=2)
        if rng.random() < 0.5:
            checkpoint = _edited(short, rng)
        else:
            final = _edited(loaded, rng)
        _same(_run(tmp_path, final, checkpoint), monkeypatch)


# -- numbers ------------------------------------------------------------------------------

def _values(tokens: list[str]) -> list[float]:
    document = '{"log_history": [' + ", ".join(
        f'{{"v": {token}, "step": {i}}}' for i, token in enumerate(tokens)) + "]}"
    found = _hf_trainer_json._jsoncols.columns(document.encode(), b"log_history", b"step", ())
    assert found is not None, tokens
    return np.frombuffer(found[4], np.float64).tolist()


def _bits(value: float) -> bytes:
    return struct.pack("<d", value)


_DECIMAL = st.from_regex(r"-?(0|[1-9][0-9]{0,24})(\.[0-9]{1,24})?([eE][-+]?[0-9]{1,3})?",
                         fullmatch=True)


@settings(max_examples=400, deadline=None)
@given(st.lists(st.one_of(st.floats(allow_nan=False).map(repr), _DECIMAL,
                          st.integers(-10**18 + 1, 10**18 - 1).map(str)), min_size=1))
def test_numbers_are_read_as_python_reads_them(tokens):
    tokens = [t.replace("inf", "Infinity") for t in tokens]
    tokens = [t for t in tokens if not re.fullmatch(r"-?\d{19,}", t)]  # left to json.loads
    if not tokens:
        return
    expected = [float(json.loads(t)) for t in tokens]
    assert [_bits(v) for v in _values(tokens)] == [_bits(v) for v in expected], tokens


def test_numbers_near_the_rounding_edges_are_read_as_python_reads_them():
    rng = random.Random(7)
    tokens = []
    for _ in range(3000):
        value = struct.unpack("<d", struct.pack("<Q", rng.getrandbits(63)))[0]
        if math.isfinite(value):
            tokens += [repr(value), f"{value:.16e}", f"{value:.18e}", f"{value:.20g}"]
    for _ in range(200):  # halfway between two doubles: ties to even
        odd = 2**53 + 2 * rng.randrange(2**52) + 1
        tokens += [f"{odd}.0", f"{odd * 2**rng.randrange(7)}e0", f"{odd * 5**4}e-4",
                   f"{odd * 5**3}e-3", f"-{odd}.0e1"]
    for digits in range(15, 20):
        for exponent in range(-30, 31):
            mantissa = rng.randrange(10 ** (digits - 1), 10 ** digits)
            tokens += [f"{mantissa}e{exponent}", f"{mantissa // 2 * 2 + 1}5e{exponent - 1}"]
    tokens = [t for t in tokens if not re.fullmatch(r"-?\d{19,}", t)]  # left to json.loads
    expected = [float(json.loads(t)) for t in tokens]
    assert [_bits(v) for v in _values(tokens)] == [_bits(v) for v in expected]


def test_numbers_of_every_exponent_are_read_as_python_reads_them():
    """Up to 19 significant digits at every power of ten the reader's table holds and past
    it (the Eisel-Lemire path, and what it leaves to the exact paths and strtod: near-halfway
    products, more digits, subnormal and infinite results), and fractions whose digits the
    reader takes eight at a time (after leading zeros, 8 and 16 digits exactly, cut by an
    exponent)."""
    tokens = decimal_tokens(11, ("0", "1", "42", "12345678"))
    expected = [float(json.loads(t)) for t in tokens]
    assert [_bits(v) for v in _values(tokens)] == [_bits(v) for v in expected]


def test_the_table_of_powers_of_ten_is_each_power_rounded_down_to_128_bits():
    """POW10_128 in _decimal.h (scripts/make_pow10_table.py writes it), worked out again:
    10^e times the power of two that gives 128 bits, rounded down."""
    source = (ROOT / "src/runcompare/sources/codecs/_decimal.h").read_text()
    low, high = (int(v) for v in re.search(r"#define POW10_MIN \((-\d+)\)\n"
                                           r"#define POW10_MAX (\d+)", source).groups())
    rows = re.findall(r"\{0x([0-9A-F]{16})u, 0x([0-9A-F]{16})u\}, /\* 1e(-?\d+) \*/", source)
    assert [int(e) for _, _, e in rows] == list(range(low, high + 1))
    for hi, lo, e in rows:
        power = Fraction(10) ** int(e)
        shift = 127 - power.numerator.bit_length() + power.denominator.bit_length()
        while math.floor(power * Fraction(2) ** shift) >= 2**128:
            shift -= 1
        while math.floor(power * Fraction(2) ** shift) < 2**127:
            shift += 1
        assert int(hi + lo, 16) == math.floor(power * Fraction(2) ** shift), e


def test_pure_mode_in_a_subprocess_reads_the_same(tmp_path):
    """``RUNCOMPARE_PURE=1`` turns the reader off; a real run reads the same either way."""
    run = SAMPLES / "attn"
    script = ("import sys\n"
              "from pathlib import Path\n"
              "from runcompare.sources.formats import _hf_trainer_json, hf_trainer\n"
              "read = hf_trainer.read(Path(sys.argv[1]))\n"
              "print(_hf_trainer_json.NATIVE, read.scalars.height)\n"
              "print(read.scalars.write_csv(float_precision=17), read.scalars.schema)\n"
              "print(read.facts, read.findings, read.aliases, read.files)\n")
    outs = []
    for pure in ("1", "0"):
        env = {**os.environ, "RUNCOMPARE_PURE": pure}
        done = subprocess.run([sys.executable, "-c", script, str(run)], env=env,
                              capture_output=True, text=True, check=True, timeout=120)
        outs.append(done.stdout.split("\n", 1))
    (pure_head, pure), (native_head, native) = outs
    assert pure_head.split()[0] == "False" and native_head.split()[0] == "True"
    assert pure_head.split()[1] == native_head.split()[1] != "0"
    assert pure == native


def test_told_metric_codes_are_the_codes_of_the_column():
    """Names given in any order and more than once (two keys of one canonical name) give the
    sorted distinct names and each point's index into them, as a pass over the column does;
    a frame replaced afterwards is worked out again."""
    names, codes = ["train/loss", "eval/loss", "train/loss"], np.array([0, 1, 2, 0, 1], np.int32)
    column = pl.Series("metric", names).gather(codes)
    frame = pl.DataFrame({"metric": column, "value": np.arange(5.0)})
    told = RawLog(path=Path("x"), scalars=frame)
    told.tell_codes(names, codes)
    assert told.metric_codes()[0].to_list() == ["eval/loss", "train/loss"]
    assert told.metric_codes()[1].tolist() == [1, 0, 1, 1, 0]
    worked_out = RawLog(path=Path("x"), scalars=frame).metric_codes()
    assert worked_out[0].to_list() == ["eval/loss", "train/loss"]
    assert worked_out[1].tolist() == [1, 0, 1, 1, 0]
    told.scalars = frame.slice(1)
    assert told.metric_codes()[1].tolist() == [0, 1, 1, 0]
    assert "_codes" not in pickle.loads(pickle.dumps(told)).__dict__

