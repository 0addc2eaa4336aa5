"""The format contract (``sources/contract.py``): every RawLog a reader returns is checked at
``Format.read_at``, and a broken one is a ReaderError naming the format and the file.

A contract test: the bad RawLogs come from a small fake format defined here (hand-written on
purpose, since no real reader returns them); the real readers are checked on every run of the
checked-in real logs.
"""

from __future__ import annotations

import inspect
from dataclasses import replace
from pathlib import Path

import polars as pl
import pytest

from runcompare.errors import ReaderError
from runcompare.model import RAW_SCHEMA, Fact, RawLog
from runcompare.sources import REGISTRY, detect
from runcompare.sources.format import Format

from .conftest import DATA, SAMPLES

LOG = DATA / "jsonl" / "plain" / "metrics.jsonl"


def _points(**columns: object) -> pl.DataFrame:
    """Two good points in RAW_SCHEMA, with ``columns`` put in their place."""
    good: dict[str, object] = {"metric": ["train/loss", "train/loss"], "value": [2.5, 2.25],
                               "step": [10, 20], "wall_time": [None, None], "leg": [0, 0]}
    return pl.DataFrame({**good, **columns},
                        schema={**RAW_SCHEMA, **dict.fromkeys(columns)})


def _fake(raw: object) -> Format:
    """A structured format whose reader returns ``raw`` for any path."""
    def read(path: Path, *, hints: object = None) -> RawLog:
        return raw  # type: ignore[return-value]

    return Format("fake", "a format that breaks the contract", read=read,
                  files=lambda path: [path])


def _raw(**fields: object) -> RawLog:
    return RawLog(**{"path": LOG, "scalars": _points(), "files": [LOG], **fields})  # type: ignore[arg-type]


BROKEN = {
    "not a RawLog": ({"points": []}, "returned a dict, not a RawLog"),
    "unknown step unit": (_raw(step_unit="iteration"),
                          ("step unit 'iteration', not one of optimizer, micro, log_call, "
                          "samples, tokens, epoch")),
    "steps not whole": (_raw(scalars=_points(step=pl.Series([10.0, 12.5]))),
                        "1 steps that are not whole numbers (the first: 12.5)"),
    "whole steps as floats": (_raw(scalars=_points(step=pl.Series([10.0, 20.0]))),
                              ("steps as Float64 (whole numbers, but the points frame holds "
                              "steps as Int64)")),
    "a column missing": (_raw(scalars=_points().drop("leg")),
                         ("points with columns metric, value, step, wall_time, not metric, "
                         "value, step, wall_time, leg")),
    "columns out of order": (_raw(scalars=_points().select("step", "metric", "value",
                                                           "wall_time", "leg")),
                             "points with columns step, metric, value, wall_time, leg"),
    "another type": (_raw(scalars=_points(leg=pl.Series([0, 0], dtype=pl.Int64))),
                     "a leg column of Int64, not Int32"),
    "a null step": (_raw(scalars=_points(step=pl.Series([10, None], dtype=pl.Int64))),
                    "1 points without a step"),
    "a null metric": (_raw(scalars=_points(metric=pl.Series(["train/loss", None]))),
                      "1 points without a metric"),
    "a null value": (_raw(scalars=_points(value=pl.Series([2.5, None]))),
                     "1 points without a value"),
    "a null leg": (_raw(scalars=_points(leg=pl.Series([0, None], dtype=pl.Int32))),
                   "1 points without a leg"),
    "a negative leg": (_raw(scalars=_points(leg=pl.Series([0, -1], dtype=pl.Int32))),
                       "1 points of a negative leg"),
    "pandas points": (_raw(scalars={"step": [1]}), "points as a dict, not a polars DataFrame"),
    "a fact not a Fact": (_raw(facts={"seq_len": 1024}), "fact 'seq_len' that is not a Fact"),
    "a file not a Path": (_raw(files=[str(LOG)]), "a file that is not a Path"),
    "a leg start not a step": (_raw(leg_starts={1: 20.5}), "a leg start that is not a whole"),
}


@pytest.mark.parametrize("case", list(BROKEN))
def test_a_reader_that_breaks_the_contract_gets_a_clear_error(case):
    raw, problem = BROKEN[case]
    with pytest.raises(ReaderError) as caught:
        _fake(raw).read_at(LOG)
    message = str(caught.value)
    assert problem in message
    assert message.startswith(f"{LOG}: the fake reader returned ")
    assert message.endswith("(a bug in runcompare's fake reader; please report it with this log)")


def test_a_reader_that_keeps_it_gets_its_raw_log_back_stamped():
    raw = _raw(facts={"seq_len": Fact(1024, "x")}, leg_starts={1: 20})
    got = _fake(raw).read_at(LOG)
    assert got is raw and got.source == "fake" and got.points == 2


def test_the_cli_says_a_broken_reader_in_one_line_with_exit_1(cli, monkeypatch):
    """A real reader made to return a float step: the CLI's error, not a traceback or a
    truncated step."""
    real = REGISTRY["jsonl"]

    def read(path, *, hints=None, claims=real.claims):
        raw = real.read(path, hints=hints, claims=claims)
        raw.scalars = raw.scalars.with_columns(pl.col("step") + 0.5)
        return raw

    monkeypatch.setitem(REGISTRY, "jsonl", replace(real, read=read))
    result = cli("inspect", LOG, "--no-cache")
    assert result.exit_code == 1
    assert result.stderr.startswith(f"error: {LOG}: the jsonl reader returned 192 steps that "
                                    "are not whole numbers (the first: ")


def _runs() -> list[tuple[str, Path]]:
    """Every (format, run root) of the checked-in logs that a format reads: each folder and
    file under tests/data and sample_logs, each format found there, each root it gives."""
    paths = sorted({p for top in (DATA, SAMPLES) for p in [top, *top.rglob("*")]
                    if p.is_dir() or p.suffix in (".jsonl", ".csv", ".parquet", ".log", ".db")})
    found: dict[tuple[str, Path], None] = {}
    for path in paths:
        try:
            formats = detect(path)
        except Exception:  # noqa: BLE001 - a folder of no logs: nothing to check there
            continue
        for name, fmt in formats.items():
            for root in fmt.roots(path):
                found[(name, root)] = None
    return list(found)


RUNS = _runs()
#: Runs (folders, and the files in them) a reader refuses with an InputError on purpose, each
#: in its own test.
REFUSED = {("tensorboard", DATA / "tensorboard" / "damaged" / "not_events"),
           ("llamafactory", DATA / "llamafactory" / "predict_only")}


def test_the_real_runs_are_many():
    assert len(RUNS) > 100 and {name for name, _ in RUNS} == set(REGISTRY)


@pytest.mark.parametrize(("name", "root"), RUNS,
                         ids=[f"{n}:{r.relative_to(DATA.parent.parent).as_posix()}"
                              for n, r in RUNS])
def test_every_real_run_keeps_the_contract(name, root):
    from runcompare.errors import InputError

    fmt = REGISTRY[name]
    if any(name == refused and folder in (root, *root.parents) for refused, folder in REFUSED):
        with pytest.raises(InputError):
            fmt.read_at(root)
        return
    raw = fmt.read_at(root)  # a ReaderError fails here
    assert raw.source == name and dict(raw.scalars.schema) == RAW_SCHEMA


@pytest.mark.parametrize("name", list(REGISTRY))
def test_each_reader_has_the_call_its_kind_of_format_makes(name):
    """read_at calls ``read(path, hints=...)``, and a text format's with ``claims=`` too."""
    fmt = REGISTRY[name]
    params = inspect.signature(fmt.read).parameters
    assert params["hints"].kind is inspect.Parameter.KEYWORD_ONLY
    assert params["hints"].default is None
    assert ("claims" in params) == (fmt.claims is not None)
    if fmt.claims is not None:
        assert params["claims"].kind is inspect.Parameter.KEYWORD_ONLY
    assert list(params)[0] == "path"
