"""detectron2's metrics.json (issue #29), on a real file from a public repository
(tests/data/detectron2/README.md), held to json.loads of every line."""

from __future__ import annotations

import json
import shutil

import runcompare as rc
from runcompare.sources import REGISTRY

from .conftest import DATA

HERE = DATA / "detectron2" / "output"


def _lines():
    return [json.loads(line) for line in (HERE / "metrics.json").read_text().splitlines()]


def test_the_step_is_the_iteration_plus_one_and_every_scalar_is_kept(cli):
    raw = REGISTRY["detectron2"].read_at(HERE)
    lines = _lines()
    for key, metric in (("total_loss", "train/total_loss"), ("lr", "train/learning_rate"),
                        ("loss_mask", "train/loss_mask")):
        got = raw.scalars.filter(metric=metric).sort("step").select("step", "value").rows()
        assert got == [(r["iteration"] + 1, r[key]) for r in lines]
    assert raw.scalars.height == sum(len(r) - 1 for r in lines) == 300
    got = cli.json("inspect", HERE, "--no-cache")
    assert got["format"] == "detectron2" and got["steps"]["optimizer"] == 300


def test_the_file_given_alone_is_detectron2s_not_generic_json_lines(cli):
    got = cli.json("inspect", HERE / "metrics.json", "--no-cache")
    assert got["format"] == "detectron2" and got["sources"] == ["detectron2"]


def test_another_metrics_json_is_not_taken(tmp_path):
    (tmp_path / "metrics.json").write_text('{"accuracy": 0.9, "f1": 0.8}\n')
    assert not REGISTRY["detectron2"].finds(tmp_path)


def test_a_resumed_run_is_a_second_leg_whose_points_win(tmp_path):
    # the real file with its last 5 lines written again, as a run resumed from iteration 199
    # appends them (a copy of real lines: the resume is the case under test)
    lines = (HERE / "metrics.json").read_text().splitlines(keepends=True)
    (tmp_path / "metrics.json").write_text("".join(lines + lines[-5:]))
    raw = REGISTRY["detectron2"].read_at(tmp_path)
    assert sorted(set(raw.scalars.get_column("leg").to_list())) == [0, 1]
    run = rc.load(tmp_path, cache=False)
    assert run.scalars.filter(metric="train/total_loss").height == 15


def test_a_folder_of_detectron2_runs(cli, tmp_path):
    for name in ("a", "b"):
        shutil.copytree(HERE, tmp_path / "runs" / name / "output")
    got = cli.json("inspect", tmp_path / "runs", "--no-cache")
    assert sorted(r["name"] for r in got) == ["a/output", "b/output"]
