"""What runcompare writes over: only its own earlier outputs, never a run being read, whatever
--force says (issue 15). Every case runs the real CLI on real copies of the checked-in runs."""

from __future__ import annotations

import hashlib
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

import runcompare as rc
from runcompare.export import export
from runcompare.report import write_report
from runcompare.report.static import is_figure

from .conftest import DATA, SAMPLES


def digest(root: Path) -> dict[str, str]:
    """Every file under ``root`` (or ``root`` itself) with the SHA-256 of its bytes."""
    files = [root] if root.is_file() else sorted(p for p in root.rglob("*") if p.is_file())
    return {str(p): hashlib.sha256(p.read_bytes()).hexdigest() for p in files}


@pytest.fixture
def attn(tmp_path: Path) -> Path:
    """A real copy of sample_logs/attn: HF output dir with trainer_state.json and train.log."""
    run = tmp_path / "attn"
    shutil.copytree(SAMPLES / "attn", run)
    return run


@pytest.fixture
def mamba(tmp_path: Path) -> Path:
    run = tmp_path / "mamba"
    shutil.copytree(SAMPLES / "mamba", run)
    return run


def refused(result, path: Path, *phrases: str) -> None:
    assert result.exit_code == 1, (result.stdout, result.stderr)
    assert result.stderr.startswith(f"error: {path}") and result.stderr.count("\n") == 1
    for phrase in phrases:
        assert phrase in result.stderr, result.stderr


# onto or inside a run being read ----------------------------------------------------------------

@pytest.mark.parametrize("inside", ["train.log", "trainer_state.json", "reports/r.html", "."])
def test_the_report_is_never_written_onto_or_inside_a_run_being_read(cli, attn, mamba, inside):
    before = digest(attn)
    out = attn / inside
    refused(cli(attn, mamba, "-o", out, "--set", "seq_len=64"), out,
            "inside run 'attn'", "which is being read", "choose another --output")
    assert digest(attn) == before and not (attn / "reports").exists()


@pytest.mark.parametrize("fmt", ["csv", "jsonl", "parquet", "tensorboard"])
def test_no_export_is_written_onto_or_inside_a_run_being_read_with_force_too(cli, attn, fmt):
    before = digest(attn)
    for out in (attn / "train.log", attn / "runs", attn / "new-folder"):
        result = cli("export", attn, "-o", out, "--format", fmt, "--force",
                     *(("--x", "step") if fmt == "tensorboard" else ()))
        refused(result, out, "inside run 'attn'")
    assert digest(attn) == before and not (attn / "new-folder").exists()


def test_a_link_that_points_into_a_run_is_refused_and_its_target_kept(cli, attn, tmp_path):
    link = tmp_path / "report.html"
    link.symlink_to(attn / "train.log")
    before = digest(attn)
    refused(cli(attn, "-o", link), link, "inside run 'attn'")
    assert digest(attn) == before and link.is_symlink()


def test_the_database_a_run_is_read_from_counts_as_the_run(cli, tmp_path):
    db = tmp_path / "mlflow.db"
    shutil.copyfile(DATA / "mlflow" / "sqlite" / "mlflow.db", db)
    before = digest(db)
    refused(cli("export", db, "-o", db, "--format", "csv", "--force",
                "--set", "world_size=1"), db, "which is being read")
    assert digest(db) == before


def test_an_earlier_export_being_read_is_not_replaced_by_its_own_export(cli, attn, tmp_path):
    # an earlier TensorBoard export, read back as runs and exported onto itself with --force
    tb = tmp_path / "tb"
    assert cli("export", attn, "-o", tb, "--format", "tensorboard", "--x", "step").exit_code == 0
    before = digest(tb)
    refused(cli("export", tb, "-o", tb, "--format", "tensorboard", "--x", "step", "--force",
                "--source", "tensorboard"), tb, "which is being read")
    refused(cli("export", tb / "attn", "-o", tb, "--format", "tensorboard", "--x", "step",
                "--force"), tb, "holds run 'attn'", "so it is not replaced")
    assert digest(tb) == before


def test_the_library_refuses_too(attn, tmp_path):
    run = rc.load(attn)
    with pytest.raises(rc.InputError, match="inside run 'attn'"):
        export([run], attn / "points.csv")
    with pytest.raises(rc.InputError, match="inside run 'attn'"):
        write_report(rc.compare([run]), attn / "r.html")


# files runcompare did not write -----------------------------------------------------------------

def test_a_report_never_replaces_a_file_it_did_not_write(cli, attn, tmp_path):
    notes = tmp_path / "notes.html"
    notes.write_text("<!DOCTYPE html><p>my notes</p>")
    refused(cli(attn, "-o", notes), notes, "is not an HTML report runcompare wrote",
            "remove it yourself or choose another --output")
    assert notes.read_text() == "<!DOCTYPE html><p>my notes</p>"


def test_a_report_replaces_the_report_it_wrote(cli, attn, mamba, tmp_path):
    report = tmp_path / "r.html"
    assert cli(attn, "-o", report).exit_code == 0
    assert cli(attn, mamba, "-o", report).exit_code == 0
    assert "attn vs mamba" in report.read_text()[:300]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["attn", "mamba", "r.html"]


def test_a_report_has_the_mode_a_plain_write_gives(cli, attn, tmp_path):
    """A new report gets 0o666 less the umask (not its temporary file's 0o600); a replaced
    one keeps the mode it had."""
    report = tmp_path / "r.html"
    mask = os.umask(0o027)
    try:
        assert cli(attn, "-o", report).exit_code == 0
    finally:
        os.umask(mask)
    assert stat.S_IMODE(report.stat().st_mode) == 0o640
    report.chmod(0o604)
    assert cli(attn, "-o", report).exit_code == 0
    assert stat.S_IMODE(report.stat().st_mode) == 0o604


def test_a_fifo_at_the_report_path_is_refused_without_blocking(attn, tmp_path):
    fifo = tmp_path / "r.html"
    os.mkfifo(fifo)
    # a process of its own, so that a write that blocks on the FIFO fails the test, not hangs it
    result = subprocess.run([sys.executable, "-m", "runcompare", attn, "-o", fifo],
                            check=False, capture_output=True, text=True, timeout=120)
    assert result.returncode == 1 and result.stderr == (
        f"error: {fifo} exists and is not an HTML report runcompare wrote, so it is left alone "
        "(--force or not); remove it yourself or choose another --output, or pass --no-report\n")


@pytest.mark.parametrize(("fmt", "name"), [("csv", "notes.csv"), ("jsonl", "log.jsonl")])
def test_export_force_never_replaces_a_file_it_did_not_write(cli, attn, tmp_path, fmt, name):
    other = tmp_path / name
    shutil.copyfile(attn / "train.log", other)  # someone's log, under an export's name
    before = digest(other)
    refused(cli("export", attn, "-o", other, "--force"), other,
            f"is not a {fmt} export file runcompare wrote", "--force or not")
    assert digest(other) == before


@pytest.mark.parametrize("fmt", ["csv", "jsonl", "parquet", "tensorboard"])
def test_export_force_replaces_the_export_it_wrote(cli, attn, mamba, tmp_path, fmt):
    out = tmp_path / f"out.{fmt}"
    step = ("--x", "step") if fmt == "tensorboard" else ()
    assert cli("export", attn, mamba, "-o", out, "--format", fmt, *step).exit_code == 0
    again = cli("export", attn, "-o", out, "--format", fmt, *step)
    refused(again, out, "already exists; pass --force")
    assert cli("export", attn, "-o", out, "--format", fmt, "--force", *step).exit_code == 0
    assert "mamba" not in str(sorted(digest(out)))  # replaced whole


def test_export_force_leaves_a_tensorboard_logdir_it_did_not_write(cli, attn, tmp_path):
    logdir = tmp_path / "logdir"
    shutil.copytree(DATA / "tensorboard" / "torch_simple", logdir)  # real events of PyTorch
    before = digest(logdir)
    refused(cli("export", attn, "-o", logdir, "--format", "tensorboard", "--x", "step",
                "--force"), logdir, "is not a tensorboard export runcompare wrote")
    assert digest(logdir) == before


def test_export_force_leaves_a_parquet_dataset_it_did_not_write(cli, attn, tmp_path):
    # the same layout, written by polars itself rather than by runcompare
    dataset = tmp_path / "points.parquet"
    (dataset / "run=x").mkdir(parents=True)
    rc.load(attn).scalars.write_parquet(dataset / "run=x" / "part-0.parquet")
    before = digest(dataset)
    refused(cli("export", attn, "-o", dataset, "--force"), dataset,
            "is not a parquet export runcompare wrote")
    assert digest(dataset) == before


def test_figures_never_replace_a_file_they_did_not_draw(cli, attn, tmp_path):
    report = tmp_path / "r.html"
    mine = tmp_path / "r" / "eval_loss.png"
    mine.parent.mkdir()
    mine.write_bytes(b"\x89PNG\r\n\x1a\n my own picture")
    refused(cli(attn, "-o", report, "--png"), mine, "is not a PNG figure runcompare wrote")
    assert mine.read_bytes() == b"\x89PNG\r\n\x1a\n my own picture"
    assert sorted(p.name for p in mine.parent.iterdir()) == ["eval_loss.png"]  # none drawn


def test_figures_replace_the_figures_they_drew(cli, attn, tmp_path):
    report = tmp_path / "r.html"
    for _ in range(2):
        result = cli(attn, "-o", report, "--png", "--svg", "--metric", "eval/loss")
        assert result.exit_code == 0, result.stderr
    figures = sorted((tmp_path / "r").iterdir())
    assert [p.name for p in figures] == ["eval_loss.png", "eval_loss.svg"]
    assert all(is_figure(p) for p in figures)
