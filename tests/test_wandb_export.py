"""W&B exports (API history as CSV/JSONL/parquet, the web app's panel CSV) against the real
offline runs they were made from (scripts/make_wandb_exports.py). Malformed inputs are copies of
those files edited here in tmp_path, or hand-written where said."""

from __future__ import annotations

import math
from pathlib import Path

import polars as pl
import pytest

import runcompare as rc
from runcompare.errors import InputError
from runcompare.sources import REGISTRY
from runcompare.sources.formats.wandb import export as wandb_export
from runcompare.sources.formats.wandb import run_folder as wandb

from .conftest import DATA, SAMPLES

EXPORTS = DATA / "wandb_export"
API, PANEL = EXPORTS / "api", EXPORTS / "ui"
PANEL_STEP = PANEL / "by_step" / "train_loss.csv"
PANEL_GLOBAL = PANEL / "by_global_step" / "train_loss.csv"
COLS = ["metric", "step", "value"]


def folder_points(run: str) -> pl.DataFrame:
    """The points of a sample run read from its W&B run folder."""
    return REGISTRY["wandb"].read_at(SAMPLES / run / "wandb").scalars


@pytest.mark.parametrize("suffix", ["csv", "parquet"])
def test_api_history_matches_the_run_folder(suffix: str) -> None:
    raw = REGISTRY["wandb-export"].read_at(API / f"mamba.{suffix}")
    assert raw.source == "wandb-export" and raw.step_unit == "optimizer"
    assert raw.name == "mamba" and raw.facts == {}
    assert [f.code for f in raw.findings] == ["step-metric"]
    assert "'train/global_step'" in raw.findings[0].message
    expected = folder_points("mamba")
    assert raw.scalars.height == expected.height == 101
    cols = [*COLS, "wall_time"]
    assert raw.scalars.select(cols).sort(COLS).equals(expected.select(cols).sort(COLS))
    loss = raw.scalars.filter(pl.col("metric") == "train/loss").sort("step")
    assert loss["step"].to_list() == list(range(5, 101, 5))


def test_api_history_as_json_lines_keeps_pandas_ten_decimals() -> None:
    raw = REGISTRY["wandb-export"].read_at(API / "mamba.jsonl")
    expected = folder_points("mamba").select(COLS).sort(COLS)
    got = raw.scalars.select(COLS).sort(COLS)
    assert got.select("metric", "step").equals(expected.select("metric", "step"))
    for a, b in zip(got["value"].to_list(), expected["value"].to_list()):
        assert a == pytest.approx(b, abs=1e-10)
    assert got["value"].to_list() != expected["value"].to_list()  # to_json rounds


def test_api_history_without_step_metric_is_on_log_calls() -> None:
    raw = REGISTRY["wandb-export"].read_at(API / "plain.csv")
    assert raw.step_unit == "log_call"
    assert "step-is-log-call" in [f.code for f in raw.findings]
    loss = raw.scalars.filter(pl.col("metric") == "train/loss").sort("step")
    evals = raw.scalars.filter(pl.col("metric") == "eval/loss").sort("step")
    # pandas writes the run's NaN at step 17 as an empty cell: the same as "not logged"
    assert loss.height == 29 and 17 not in loss["step"].to_list()
    assert loss["value"][0] == pytest.approx(4 * 0.95)
    assert evals["step"].to_list() == [10, 21, 32]
    # the run folder has the NaN point too; everything else is the same
    folder = REGISTRY["wandb"].read_at(DATA / "wandb" / "project" / "wandb" / _plain_folder()).scalars
    finite = folder.filter(~pl.col("value").is_nan()).select(COLS).sort(COLS)
    assert raw.scalars.select(COLS).sort(COLS).equals(finite)


def _plain_folder() -> str:
    for run in wandb.expand(DATA / "wandb" / "project"):
        if REGISTRY["wandb"].read_at(run).name == "plain":
            return run.name
    raise LookupError("plain")


def test_api_history_step_metric_can_be_set() -> None:
    raw = REGISTRY["wandb-export"].read_at(API / "plain.csv", hints={"step_metric": "_step"})
    assert raw.step_unit == "log_call"
    with pytest.raises(InputError, match="step_metric 'nope' is not in the history"):
        REGISTRY["wandb-export"].read_at(API / "plain.csv", hints={"step_metric": "nope"})


def test_panel_csv_is_one_run_per_run_name() -> None:
    roots = wandb_export.expand(PANEL_GLOBAL)
    assert [r.name for r in roots] == ["mamba", "attn"]
    runs = rc.load_many([PANEL_GLOBAL], cache=False)
    assert [r.name for r in runs] == ["mamba", "attn"]
    for run in runs:
        assert run.step_unit == "optimizer" and run.format == "wandb-export"
        expected = folder_points(run.name).filter(pl.col("metric") == "train/loss")
        assert run.scalars.filter(pl.col("metric") == "train/loss").select(COLS).sort(
            COLS).equals(expected.select(COLS).sort(COLS))
        assert run.optimizer_steps == 100


def test_panel_csv_on_step_is_on_log_calls() -> None:
    raw = REGISTRY["wandb-export"].read_at(PANEL_STEP / "attn")
    assert raw.step_unit == "log_call" and raw.name == "attn"
    warning = next(f for f in raw.findings if f.code == "step-is-log-call")
    assert "x-axis is Step" in warning.message and "train/global_step" in warning.message
    loss = raw.scalars.sort("step")
    # the Trainer logs train and eval in separate calls: _step runs ahead of the log count
    assert loss.height == 20 and loss["step"][0] == 0 and loss["step"][-1] > 19
    expected = folder_points("attn").filter(pl.col("metric") == "train/loss").sort("step")
    assert loss["value"].to_list() == expected["value"].to_list()


def test_panels_of_a_folder_on_one_x_axis_are_merged_by_run() -> None:
    folder = PANEL / "by_global_step"
    assert [r.name for r in wandb_export.expand(folder)] == ["mamba", "attn"]
    assert wandb_export.virtual(folder / "mamba") and not (folder / "mamba").exists()
    runs = rc.load_many([folder], cache=False)
    assert [r.name for r in runs] == ["mamba", "attn"]
    for run in runs:
        metrics = ["train/learning_rate", "train/loss"]
        assert sorted(run.scalars["metric"].unique()) == metrics
        expected = folder_points(run.name).filter(pl.col("metric").is_in(metrics))
        assert run.scalars.select(COLS).sort(COLS).equals(expected.select(COLS).sort(COLS))
        assert sorted(p.name for p in wandb_export.files(folder / run.name)) == [
            "learning_rate.csv", "train_loss.csv"]


def test_a_run_exported_on_two_x_axes_stays_one_run_per_file(tmp_path: Path) -> None:
    for name, source in (("a.csv", PANEL_STEP), ("b.csv", PANEL_GLOBAL)):
        (tmp_path / name).write_bytes(source.read_bytes())
    roots = wandb_export.expand(tmp_path)
    assert sorted(f"{r.parent.name}/{r.name}" for r in roots) == [
        "a.csv/attn", "a.csv/mamba", "b.csv/attn", "b.csv/mamba"]
    assert not wandb_export.virtual(tmp_path / "mamba")
    units = {r.parent.name: REGISTRY["wandb-export"].read_at(r).step_unit for r in roots if r.name == "mamba"}
    assert units == {"a.csv": "log_call", "b.csv": "optimizer"}


def test_panel_csv_with_several_runs_needs_one_named(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="holds 2 exported W&B runs"):
        REGISTRY["wandb-export"].read_at(PANEL_GLOBAL)
    assert not REGISTRY["wandb-export"].finds(PANEL_GLOBAL / "nobody")
    with pytest.raises(InputError, match="no such file or directory"):
        rc.load(PANEL / "by_global_step" / "nobody", cache=False)


def test_panel_spread_and_groups_are_said(tmp_path: Path) -> None:
    # a copy of the real export where one bucket spreads, and the runs renamed as groups
    text = PANEL_GLOBAL.read_text()
    lines = text.splitlines()
    cells = lines[1].split(",")
    cells[2] = '"1.5"'  # mamba's train/loss__MIN at step 5
    lines[1] = ",".join(cells)
    lines[0] = lines[0].replace('"mamba - ', '"Group: mamba - ')
    path = tmp_path / "grouped.csv"
    path.write_text("\n".join(lines) + "\n")
    raw = REGISTRY["wandb-export"].read_at(path / "Group: mamba")
    assert raw.name == "mamba"
    codes = {f.code: f for f in raw.findings}
    assert "1 values" in codes["panel-sampled"].message
    assert "aggregate line of a W&B group" in codes["panel-group"].message


def test_run_names_with_a_slash_get_encoded_roots(tmp_path: Path) -> None:
    path = tmp_path / "slash.csv"
    path.write_text(PANEL_GLOBAL.read_text().replace('"mamba - ', '"exp/mamba - '))
    roots = wandb_export.expand(path)
    assert roots[0].name == "exp%2Fmamba"
    assert REGISTRY["wandb-export"].read_at(roots[0]).name == "exp/mamba"


def test_time_x_axis_is_an_input_error(tmp_path: Path) -> None:
    # hand-written: a panel exported on wall time (malformed for runcompare's purpose)
    path = tmp_path / "time.csv"
    path.write_text('"Wall Time","a - train/loss","a - train/loss__MIN","a - train/loss__MAX"\n'
                    '"1700000000","2.5","2.5","2.5"\n')
    with pytest.raises(InputError, match="x-axis is 'Wall Time', a time"):
        REGISTRY["wandb-export"].read_at(path / "a")


def test_exports_are_not_claimed_by_other_sources_nor_claim_theirs() -> None:
    assert REGISTRY["wandb-export"].finds(API) and REGISTRY["wandb-export"].finds(PANEL / "by_step")
    assert not REGISTRY["wandb-export"].finds(DATA / "lightning")
    assert not any(REGISTRY["wandb-export"].finds(p) for p in (DATA / "lightning").rglob("metrics.csv"))
    assert not REGISTRY["wandb-export"].finds(SAMPLES / "mamba")


def test_cli_compares_the_runs_of_a_panel_export(cli, tmp_path: Path) -> None:
    out = cli.json(PANEL_GLOBAL, "--x", "step", "-o", tmp_path / "r.html")
    assert [run["name"] for run in out["runs"]] == ["mamba", "attn"]
    assert all(run["format"] == "wandb-export" for run in out["runs"])
    assert (tmp_path / "r.html").is_file()


def test_unreadable_export_names_the_file(tmp_path: Path) -> None:
    # a copy of the real CSV cut inside a quoted cell
    path = tmp_path / "cut.csv"
    data = (API / "mamba.csv").read_bytes()
    path.write_bytes(data[: len(data) // 2])
    raw = REGISTRY["wandb-export"].read_at(path)
    full = REGISTRY["wandb-export"].read_at(API / "mamba.csv")
    assert 0 < raw.scalars.height < full.scalars.height
    assert not math.isnan(raw.scalars["value"].sum())


def test_a_panel_on_epochs_falls_back_to_its_step_column_or_says_how_to_export(
        tmp_path: Path) -> None:
    # copies of the real export with the x-axis turned into epochs (Trainer: 64 steps/epoch)
    lines = PANEL_GLOBAL.read_text().splitlines()
    rows = [line.split(",") for line in lines[1:]]
    epochs = [f'"{int(row[0].strip(chr(34))) / 64}"' for row in rows]
    on_epochs = ['"epoch",' + lines[0].split(",", 1)[1]] + [
        ",".join([e, *row[1:]]) for e, row in zip(epochs, rows)]
    path = tmp_path / "epochs.csv"
    path.write_text("\n".join(on_epochs) + "\n")
    with pytest.raises(InputError, match="x-axis 'epoch' is not a step counter"):
        REGISTRY["wandb-export"].read_at(path / "mamba")
    # with each run's _step exported as a column (and an empty column, as some exports have)
    header = lines[0] + ',"mamba - _step","mamba - _step__MIN","mamba - _step__MAX",""'
    with_step = ['"epoch",' + header.split(",", 1)[1]] + [
        ",".join([e, *row[1:], *[f'"{i}"'] * 3, '""']) for i, (e, row) in enumerate(
            zip(epochs, rows))]
    path = tmp_path / "with_step.csv"
    path.write_text("\n".join(with_step) + "\n")
    raw = REGISTRY["wandb-export"].read_at(path / "mamba")
    assert raw.step_unit == "log_call"
    assert "step-metric-unusable" in [f.code for f in raw.findings]
    loss = raw.scalars.filter(pl.col("metric") == "train/loss").sort("step")
    assert loss["step"].to_list() == list(range(20))
    # the x-axis is kept as a metric of its own: nothing logged is lost
    assert raw.scalars.filter(pl.col("metric") == "epoch").sort("step")["value"][-1] == 100 / 64
