"""JSON-lines metric logs (tests/data/jsonl/, written by the real numpy loop in
scripts/make_jsonl_logs.py), held to ``json.loads`` of every line."""

from __future__ import annotations

import json
import math
import shutil

import polars as pl
import pytest

import runcompare as rc
from runcompare.errors import InputError
from runcompare.sources import REGISTRY

from .conftest import DATA

JSONL = DATA / "jsonl"


def _expected(path):
    """(metric, step) -> value, by json.loads, the way the issue states the names."""
    names = {"loss": "train/loss", "lr": "train/learning_rate", "grad_norm": "train/grad_norm",
             "eval/loss": "eval/loss", "eval/accuracy": "eval/accuracy"}
    points = {}
    for line in path.read_text().splitlines():
        entry = json.loads(line)
        flat = {**{k: v for k, v in entry.items() if k != "eval"},
                **{f"eval/{k}": v for k, v in entry.get("eval", {}).items()}}
        for key, value in flat.items():
            if key in names:
                points[(names[key], entry["step"])] = value
    return points


def _points(run):
    return {(m, s): v for m, s, v in run.scalars.select("metric", "step", "value").iter_rows()}


def test_inspect_reads_steps_metrics_and_wall_times(cli):
    path = JSONL / "plain" / "metrics.jsonl"
    got = cli.json("inspect", path, "--no-cache")
    assert got["format"] == "jsonl" and got["step_unit"] == "optimizer"
    assert got["steps"]["optimizer"] == 60 and got["points"] == 60 * 3 + 6 * 2
    assert got["metrics"] == ["eval/accuracy", "eval/loss", "train/grad_norm",
                              "train/learning_rate", "train/loss"]
    run = rc.load(path, cache=False)
    assert _points(run) == _expected(path)
    first = json.loads(path.read_text().splitlines()[0])
    stamps = run.scalars.filter(pl.col("step") == 1, pl.col("metric") == "train/loss")
    assert stamps.get_column("wall_time").to_list() == [first["wall_time"]]


def test_a_folder_of_one_log_reads_like_the_file():
    assert _points(rc.load(JSONL / "plain", cache=False)) == _points(
        rc.load(JSONL / "plain" / "metrics.jsonl", cache=False))


def test_a_resumed_log_keeps_the_restarted_legs_steps():
    path = JSONL / "resumed" / "metrics.jsonl"
    run = rc.load(path, cache=False)
    assert _points(run) == _expected(path)  # the later leg's values win (keep-last)
    dropped = [f for f in run.findings if f.code == "duplicates-dropped"]
    assert len(dropped) == 3 and all("5 points" in f.message for f in dropped)
    both = rc.load(path, cache=False, duplicates="all").scalars
    assert both.filter(pl.col("metric") == "train/loss").height == 65


def test_nan_and_infinity_written_by_json_dumps_are_kept():
    path = JSONL / "diverged" / "metrics.jsonl"
    losses = rc.load(path, cache=False).scalars.filter(pl.col("metric") == "train/loss")
    expected = [json.loads(line)["loss"] for line in path.read_text().splitlines()
                if "loss" in json.loads(line)]
    assert len(expected) == losses.height == 20
    assert any(math.isnan(v) for v in expected)
    got = losses.sort("step").get_column("value").to_list()
    assert all(math.isnan(a) and math.isnan(b) or a == b for a, b in zip(got, expected))


@pytest.mark.parametrize("cut", [7, 40, 95])
def test_a_log_cut_mid_line_keeps_the_lines_before_and_says_so(tmp_path, cut):
    """Hand-made damage: the real log truncated inside its 31st line."""
    data = (JSONL / "plain" / "metrics.jsonl").read_bytes()
    lines = data.splitlines(keepends=True)
    whole = b"".join(lines[:30])
    damaged = tmp_path / "metrics.jsonl"
    damaged.write_bytes(whole + lines[30][:cut])
    oracle = tmp_path / "oracle" / "metrics.jsonl"
    oracle.parent.mkdir()
    oracle.write_bytes(whole)
    run = rc.load(damaged, cache=False)
    assert _points(run) == _points(rc.load(oracle, cache=False))
    assert [f.code for f in run.findings] == ["damaged-input"]
    assert "line 31 is cut off" in run.findings[0].message


def test_a_torn_line_in_the_middle_is_reported_and_the_rest_read(tmp_path):
    """Hand-made damage: line 10 of the real log replaced by half of itself."""
    lines = (JSONL / "plain" / "metrics.jsonl").read_text().splitlines(keepends=True)
    lines[9] = lines[9][:25] + "\n"
    torn = tmp_path / "metrics.jsonl"
    torn.write_text("".join(lines))
    run = rc.load(torn, cache=False)
    finding = next(f for f in run.findings if f.code == "unparsed-lines")
    assert "line 10" in finding.message
    assert run.scalars.filter(pl.col("metric") == "train/loss").height == 59


def test_a_log_without_a_step_is_numbered_by_line(tmp_path):
    """Hand-made: the real log with its step keys removed."""
    lines = (JSONL / "plain" / "metrics.jsonl").read_text().splitlines()
    rows = [{k: v for k, v in json.loads(line).items() if k != "step"} for line in lines[:12]]
    path = tmp_path / "metrics.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    raw = REGISTRY["jsonl"].read_at(path)
    assert raw.step_unit == "log_call" and raw.scalars.get_column("step").max() == 12
    assert [f.code for f in raw.findings] == ["step-is-log-call"]


def test_other_json_files_are_not_claimed(tmp_path):
    shutil.copy(DATA / "hf_v4_accum4" / "trainer_state.json", tmp_path / "state.jsonl")
    (tmp_path / "one.jsonl").write_text('{"note": "text only"}\n{"note": "more"}\n')
    assert not REGISTRY["jsonl"].finds(tmp_path)
    with pytest.raises(InputError, match="no JSON line held a number"):
        REGISTRY["jsonl"].read_at(tmp_path / "one.jsonl")


def test_a_folder_of_json_lines_runs_gives_one_run_each(cli):
    # issue #33: tests/data/jsonl holds three runs, a metrics.jsonl one level down each
    got = cli.json("inspect", DATA / "jsonl", "--no-cache")
    assert sorted((r["name"], r["format"], r["steps"]["optimizer"]) for r in got) == [
        ("diverged", "jsonl", 20), ("plain", "jsonl", 60), ("resumed", "jsonl", 60)]


def test_a_folder_holding_one_run_folder_is_that_run(cli, tmp_path):
    shutil.copytree(DATA / "jsonl" / "plain", tmp_path / "job" / "logs")
    got = cli.json("inspect", tmp_path / "job", "--no-cache")
    assert got["name"] == "job" and got["format"] == "jsonl" and got["steps"]["optimizer"] == 60
