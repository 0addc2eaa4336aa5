"""Keras CSVLogger files (issue #29), on a real file from a public repository
(tests/data/keras_csv/README.md), held to the csv module's reading of it."""

from __future__ import annotations

import csv

import runcompare as rc
from runcompare.sources import REGISTRY

from .conftest import DATA

HERE = DATA / "keras_csv" / "voice_identification"


def _rows():
    with (HERE / "training.log").open(newline="") as handle:
        return list(csv.DictReader(handle))


def test_one_row_an_epoch_every_value_kept_and_the_step_unit_is_epoch(cli):
    raw = REGISTRY["keras-csv"].read_at(HERE)
    assert raw.step_unit == "epoch"
    for key, metric in (("loss", "train/loss"), ("val_loss", "eval/loss"), ("acc", "train/acc"),
                        ("val_acc", "eval/acc")):
        got = raw.scalars.filter(metric=metric).sort("step").select("step", "value").rows()
        assert got == [(int(r["epoch"]), float(r[key])) for r in _rows()]
    got = cli.json("inspect", HERE, "--no-cache")
    assert got["format"] == "keras-csv" and got["step_unit"] == "epoch"
    assert got["points"] == 40 and "step-is-epoch" in [f["code"] for f in got["findings"]]


def test_a_resumed_fit_appending_rows_is_a_second_leg(tmp_path):
    # CSVLogger(append=True) after a restart from epoch 5 adds rows 5..9 again without a
    # header (a copy of the real rows: the resume is the case under test)
    data = (HERE / "training.log").read_bytes()
    rows = data.split(b"\r\n")
    (tmp_path / "log.csv").write_bytes(data + b"\r\n".join(rows[6:11]) + b"\r\n")
    raw = REGISTRY["keras-csv"].read_at(tmp_path / "log.csv")
    assert sorted(set(raw.scalars.get_column("leg").to_list())) == [0, 1]
    run = rc.load(tmp_path / "log.csv", cache=False)
    assert run.scalars.filter(metric="train/loss").height == 10


def test_a_lightning_metrics_csv_is_not_taken():
    version = DATA / "lightning" / "lightning_logs" / "version_0"
    assert not REGISTRY["keras-csv"].finds(version)
    assert not REGISTRY["keras-csv"].finds(version / "metrics.csv")
