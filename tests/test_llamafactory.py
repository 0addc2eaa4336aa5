"""LLaMA-Factory output folders: trainer_log.jsonl read as its own format (issue #29), on real
files from public repositories (tests/data/llamafactory/README.md), held to ``json.loads`` of
every line."""

from __future__ import annotations

import json
import shutil

import pytest

import runcompare as rc
from runcompare.errors import InputError
from runcompare.sources import REGISTRY

from .conftest import DATA

HERE = DATA / "llamafactory"


def _lines(folder):
    return [json.loads(line) for line in (folder / "trainer_log.jsonl").read_text().splitlines()]


def test_current_steps_is_the_step_and_every_loss_and_lr_is_kept():
    folder = HERE / "graduate_agent"
    raw = REGISTRY["llamafactory"].read_at(folder)
    assert raw.source == "llamafactory" and raw.step_unit == "optimizer"
    lines = _lines(folder)
    for key, metric in (("loss", "train/loss"), ("lr", "train/learning_rate")):
        got = raw.scalars.filter(metric=metric).sort("step").select("step", "value").rows()
        assert got == [(r["current_steps"], r[key]) for r in lines if key in r]
    # 37 train logs every 10 steps, then the end-of-training line (epoch only) at step 375
    assert raw.scalars.filter(metric="train/loss").height == 37
    assert raw.facts["max_steps"].value == 375 and raw.facts["global_step"].value == 375
    assert not {"train/current_steps", "train/total_steps", "train/percentage"} \
        & set(raw.scalars.get_column("metric"))


def test_a_folder_with_only_trainer_log_is_that_format_not_json_lines(cli):
    got = cli.json("inspect", HERE / "graduate_agent", "--no-cache")
    assert got["format"] == "llamafactory" and got["sources"] == ["llamafactory"]
    assert got["steps"]["optimizer"] == 375 and got["points"] == 74
    assert "step-is-log-call" not in [f["code"] for f in got["findings"]]


def test_beside_trainer_state_the_trainers_state_wins_and_it_is_said(cli):
    got = cli.json("inspect", HERE / "healthai", "--no-cache")
    assert got["format"] == "hf-trainer" and set(got["sources"]) == {"hf-trainer", "llamafactory"}
    (said,) = [f for f in got["findings"] if f["code"] == "source-deferred"]
    assert "trainer_log.jsonl" in said["message"] and "--source llamafactory" in said["message"]
    alone = cli.json("inspect", HERE / "healthai", "--source", "llamafactory", "--no-cache")
    assert alone["format"] == "llamafactory" and alone["steps"]["optimizer"] == 9
    # the same losses: trainer_log.jsonl copies the Trainer's log history
    state = json.loads((HERE / "healthai" / "trainer_state.json").read_text())["log_history"]
    run = rc.load(HERE / "healthai", source="llamafactory", cache=False)
    loss = run.scalars.filter(metric="train/loss").sort("step").select("step", "value").rows()
    assert loss == [(e["step"], e["loss"]) for e in state if "loss" in e]


def test_the_trainer_state_wins_even_when_the_log_has_more_points(tmp_path):
    # the real pair, with the log's lines twice as a resumed run appends them (a copy)
    shutil.copytree(HERE / "healthai", tmp_path / "run")
    log = tmp_path / "run" / "trainer_log.jsonl"
    log.write_text(log.read_text() * 2)
    run = rc.load(tmp_path / "run", cache=False)
    assert run.format == "hf-trainer"


def test_a_prediction_runs_progress_lines_are_refused_saying_what_they_are(cli):
    with pytest.raises(InputError, match="progress lines only"):
        REGISTRY["llamafactory"].read_at(HERE / "predict_only")
    result = cli("inspect", HERE / "predict_only", "--no-cache")
    assert result.exit_code == 1 and "prediction or evaluation run" in result.stderr
    assert "Traceback" not in result.stderr


def test_a_log_cut_mid_line_reads_the_whole_lines_and_says_so(tmp_path):
    text = (HERE / "graduate_agent" / "trainer_log.jsonl").read_text()
    cut = text[:text.index('{"current_steps": 40,') + 30]  # inside the 4th line
    (tmp_path / "trainer_log.jsonl").write_text(cut)
    raw = REGISTRY["llamafactory"].read_at(tmp_path)
    assert raw.scalars.filter(metric="train/loss").get_column("step").to_list() == [10, 20, 30]
    assert [f.code for f in raw.findings] == ["damaged-input"]


def test_a_folder_of_output_folders_gives_one_run_each(cli, tmp_path):
    for name in ("graduate_agent", "healthai"):
        shutil.copytree(HERE / name, tmp_path / "saves" / "qwen" / "lora" / name)
    got = cli.json("inspect", tmp_path / "saves", "--no-cache")
    assert sorted(r["name"] for r in got) == ["qwen/lora/graduate_agent", "qwen/lora/healthai"]
