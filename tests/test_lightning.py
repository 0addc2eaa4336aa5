"""The Lightning CSVLogger source on real logs (made by scripts/make_lightning_mlflow_logs.py).

Damaged inputs are made in tmp_path from copies of the real files, as each test says.
"""

from __future__ import annotations

import csv
import math
import shutil
from pathlib import Path

import polars as pl
import pytest

import runcompare as rc
from runcompare.errors import InputError
from runcompare.model import RAW_SCHEMA
from runcompare.sources import REGISTRY
from runcompare.sources.formats import lightning
from runcompare.sources.naming import LIGHTNING, canonical, canonical_names

from .conftest import DATA

LOGS = DATA / "lightning" / "lightning_logs"
V0, V1 = LOGS / "version_0", LOGS / "version_1"


def _rows(folder: Path) -> list[dict[str, str]]:
    with (folder / "metrics.csv").open(newline="") as handle:
        return list(csv.DictReader(handle))


def _points(raw, metric: str) -> list[tuple[int, float]]:
    frame = raw.scalars.filter(metric=metric)
    return list(zip(frame.get_column("step").to_list(), frame.get_column("value").to_list()))


def test_registered_and_each_version_is_a_run():
    assert REGISTRY["lightning"] is lightning.FORMAT
    for path in (DATA / "lightning", LOGS):
        assert lightning.sniff(path)
        assert lightning.expand(path) == [V0, V1]
    assert lightning.expand(V0) == [V0]
    assert lightning.files(V0) == [V0 / "metrics.csv", V0 / "hparams.yaml"]


def test_steps_are_optimizer_updates_done():
    raw = REGISTRY["lightning"].read_at(V0)
    expected = [(int(r["step"]) + 1, float(r["train_loss_step"])) for r in _rows(V0)
                if r["train_loss_step"]]
    assert _points(raw, "train/loss") == expected
    assert [s for s, _ in expected] == list(range(1, 25))  # 24 updates, 48 micro-batches
    assert expected[0] == (1, 4.226187229156494)
    # validation every 16 batches = 8 updates; metrics.csv says 7, 15, 23
    assert raw.scalars.filter(metric="eval/loss").get_column("step").to_list() == [8, 16, 24]
    assert _points(raw, "train/loss_epoch") == [(16, 4.060061454772949),
                                                (24, 3.895979166030884)]
    assert raw.step_unit == "optimizer" and raw.scalars.schema == pl.Schema(RAW_SCHEMA)
    assert any(f.code == "step-offset" for f in raw.findings)


def test_trainer_test_rows_keep_their_step_the_updates_done():
    raw = REGISTRY["lightning"].read_at(V1)
    row = next(r for r in _rows(V1) if r["test_loss"])
    assert (row["step"], row["epoch"]) == ("16", "1")  # after fit: 16 updates, 1 epoch done
    assert _points(raw, "test/loss") == [(16, float(row["test_loss"]))]
    assert raw.scalars.filter(metric="train/loss").get_column("step").max() == 16
    assert raw.scalars.filter(metric="train/epoch").get_column("value").max() == 0.0


def test_every_filled_cell_is_a_point_and_nothing_is_deduplicated():
    raw = REGISTRY["lightning"].read_at(V0)
    cells = sum(1 for row in _rows(V0) for key, value in row.items() if key != "step" and value)
    assert raw.points == cells == 106
    # LearningRateMonitor logs at the start of each of the 2 micro-batches of an update
    assert raw.scalars.filter(metric="train/learning_rate").height == 48
    assert _points(raw, "train/learning_rate")[:2] == [(1, 0.003), (1, 0.003)]
    epochs = raw.scalars.filter(metric="train/epoch")
    assert epochs.get_column("value").unique().sort().to_list() == [0.0, 1.0]


def test_names_follow_the_canonical_scheme_and_keep_the_logged_name():
    raw = REGISTRY["lightning"].read_at(V0)
    assert raw.aliases == {"train/loss": "train_loss_step", "train/loss_epoch": "train_loss_epoch",
                           "eval/loss": "val_loss", "train/learning_rate": "lr-AdamW",
                           "train/epoch": "epoch"}


def test_hparams_give_facts_with_their_source():
    facts = REGISTRY["lightning"].read_at(V0).facts
    assert facts["per_device_batch"].value == 4
    assert facts["per_device_batch"].source == "hparams.yaml: batch_size"
    assert facts["grad_accum"].value == 2
    assert facts["grad_accum"].source == "hparams.yaml: accumulate_grad_batches"
    assert facts["seq_len"].value == 32 and facts["max_steps"].value == 24
    assert facts["learning_rate"].value == 0.003
    assert {f.kind for f in facts.values()} == {"config"}


def test_trainer_arguments_that_hparams_lack_are_pointed_out():
    raw = REGISTRY["lightning"].read_at(V1)
    assert "grad_accum" not in raw.facts and raw.facts["per_device_batch"].value == 8
    finding = next(f for f in raw.findings if f.code == "trainer-args-not-logged")
    assert finding.level == "info" and "--set" in finding.message
    hinted = REGISTRY["lightning"].read_at(V1, hints={"grad_accum": 1})
    assert not any(f.code == "trainer-args-not-logged" for f in hinted.findings)


def test_load_many_gives_one_run_per_version_on_every_axis():
    runs = rc.load_many([DATA / "lightning"], settings=["world_size=1"], cache=False)
    assert [r.name for r in runs] == ["lightning_logs/version_0", "lightning_logs/version_1"]
    v0 = runs[0]
    assert v0.format == "lightning" and v0.sources == ["lightning"]
    assert v0.optimizer_steps == 24 and v0.micro_steps == 48
    assert v0.batch.global_batch.value == 8 and v0.batch.tokens_per_step.value == 256
    last = v0.frame("tokens").filter(metric="train/loss").sort("step").row(-1, named=True)
    assert (last["step"], last["samples"], last["tokens"]) == (24, 192, 6144)
    assert last["epoch"] == 1.0
    assert runs[1].batch.grad_accum.value is None  # not in its hparams.yaml


def test_a_multi_version_folder_read_alone_names_its_versions():
    with pytest.raises(InputError, match="holds 2 Lightning runs .*version_0.*version_1"):
        REGISTRY["lightning"].read_at(LOGS)


def _copy(tmp_path: Path, folder: Path = V0) -> Path:
    target = tmp_path / "version_0"
    shutil.copytree(folder, target)
    return target


def test_a_cut_off_last_line_is_dropped_with_its_line_number(tmp_path):
    # hand-damaged copy of the real metrics.csv: the last line loses its end, as if killed
    run = _copy(tmp_path)
    data = (run / "metrics.csv").read_bytes()
    (run / "metrics.csv").write_bytes(data[:-12])
    raw = REGISTRY["lightning"].read_at(run)
    lines = data.count(b"\n")
    finding = next(f for f in raw.findings if f.code == "damaged-input")
    assert f"line {lines} is cut off" in finding.message and finding.level == "warning"
    assert raw.scalars.filter(metric="train/loss_epoch").height == 1  # the last row's value
    assert raw.points == 106 - 2  # that row held train_loss_epoch and epoch


def test_bad_lines_and_values_are_counted_and_skipped(tmp_path):
    # hand-damaged copy: one line with an extra field, one with a word for a step, one value
    # that is not a number
    run = _copy(tmp_path)
    lines = (run / "metrics.csv").read_text().splitlines()
    lines[3] += ",9"
    lines[4] = lines[4].replace(",1,", ",one,", 1)
    lines[6] = lines[6].replace("4.214542", "x4.21454", 1)
    (run / "metrics.csv").write_text("\r\n".join(lines) + "\r\n")
    raw = REGISTRY["lightning"].read_at(run)
    messages = [f.message for f in raw.findings if f.code == "damaged-input"]
    assert any("2 lines without 6 fields or a whole-number step (line 4, 5)" in m
               for m in messages)
    assert any("1 values are not numbers (first at line 7)" in m for m in messages)
    assert raw.points == 106 - 2 - 1 - 1  # line 4: epoch + loss, line 5: lr, line 7: loss


def test_nan_and_inf_are_kept(tmp_path):
    # hand-edited copy: two train_loss_step values replaced by nan and inf as csv writes them
    run = _copy(tmp_path)
    text = (run / "metrics.csv").read_text()
    text = text.replace("4.226187229156494", "nan").replace("4.214542388916016", "inf")
    (run / "metrics.csv").write_text(text)
    values = REGISTRY["lightning"].read_at(run).scalars.filter(metric="train/loss").get_column("value")
    assert math.isnan(values[0]) and values[1] == math.inf


def test_a_header_only_file_has_no_points_and_says_so(tmp_path):
    # hand-made: the header of the real file and nothing else (a run killed before its first log)
    run = _copy(tmp_path)
    header = (run / "metrics.csv").read_bytes().split(b"\n")[0] + b"\n"
    (run / "metrics.csv").write_bytes(header)
    raw = REGISTRY["lightning"].read_at(run)
    assert raw.points == 0 and any(f.code == "no-points" for f in raw.findings)


def test_hparams_with_python_tags_still_give_facts(tmp_path):
    # hand-made hparams.yaml as yaml.dump writes an argparse.Namespace and a tuple
    run = _copy(tmp_path)
    (run / "hparams.yaml").write_text(
        "args: !!python/object:argparse.Namespace\n  batch_size: 16\n  seq_len: 128\n"
        "betas: !!python/tuple\n- 0.9\n- 0.95\n")
    facts = REGISTRY["lightning"].read_at(run).facts
    assert facts["per_device_batch"].value == 16
    assert facts["per_device_batch"].source == "hparams.yaml: args.batch_size"
    assert facts["seq_len"].value == 128


def test_a_damaged_hparams_yaml_costs_only_the_facts(tmp_path):
    # hand-damaged copy: hparams.yaml cut inside a flow mapping
    run = _copy(tmp_path)
    (run / "hparams.yaml").write_text("batch_size: 4\nbetas: {a: 1\n")
    raw = REGISTRY["lightning"].read_at(run)
    assert raw.points == 106 and raw.facts == {}
    assert any(f.code == "damaged-input" and "hparams.yaml: not valid YAML at line" in f.message
               for f in raw.findings)


def test_a_csv_without_a_step_column_is_not_lightning(tmp_path):
    # hand-made: a Keras-style CSVLogger file (epoch, loss) is not claimed
    (tmp_path / "metrics.csv").write_text("epoch,loss\n0,1.5\n")
    assert not lightning.sniff(tmp_path)
    with pytest.raises(InputError, match="no Lightning CSVLogger run"):
        REGISTRY["lightning"].read_at(tmp_path)


@pytest.mark.parametrize(("key", "name"), [
    ("train_loss", "train/loss"), ("train/loss_step", "train/loss"), ("val/acc", "eval/acc"),
    ("validation_loss_epoch", "eval/loss"), ("test_loss", "test/loss"), ("grad_norm",
     "train/grad_norm"), ("lr", "train/learning_rate"), ("charts/loss", "charts/loss"),
    ("lr-AdamW/pg1", "lr-AdamW/pg1"), ("val_loss_step", "eval/loss_step")])
def test_canonical_names(key, name):
    assert canonical(key, LIGHTNING) == name


def test_colliding_names_keep_their_logged_names():
    assert canonical_names(["loss", "train_loss", "val_loss"], LIGHTNING) == {
        "loss": "loss", "train_loss": "train_loss", "val_loss": "eval/loss"}
