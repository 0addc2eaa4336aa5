"""One bad source in a folder never sinks the run (issue #33): a reader that fails, by bad input
or by a bug, is a warning naming the source, its file and the ``--source`` that reads another;
the run is read from the others. And the HF stdout of a run that counts input tokens (whose
5.x train logs carry ``train_runtime``) is read as train logs, not as summaries."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

import runcompare as rc
from runcompare.errors import MissingInfoError
from runcompare.sources import REGISTRY

from .conftest import DATA

TOKENS = DATA / "hf_tokens"


def _pasted_dicts(folder: Path) -> Path:
    """``folder`` holding hf_tokens' trainer_state.json and its train.log's dicts alone, one a
    line, as a notebook's output pasted without the progress bars (made from the real log here:
    the edit is the point of the test)."""
    folder.mkdir()
    shutil.copy(TOKENS / "trainer_state.json", folder)
    text = (TOKENS / "train.log").read_text()
    dicts = [m.group(0) for m in re.finditer(r"\{'[^{}]*\}", text)]
    (folder / "train.log").write_text("\n".join(dicts) + "\n")
    return folder


def test_a_train_log_with_train_runtime_is_a_train_log_not_a_summary(tmp_path):
    folder = _pasted_dicts(tmp_path / "run")
    raw = REGISTRY["hf-stdout"].read_at(folder, hints={"logging_steps": 5})
    loss = raw.scalars.filter(metric="train/loss").sort("step")
    # hf_tokens logs every 5 of 30 steps; 5.x prints 4 significant digits
    assert loss.get_column("step").to_list() == [5, 10, 15, 20, 25, 30]
    assert loss.get_column("value").to_list() == [5.531, 5.315, 5.02, 4.719, 4.485, 4.331]
    summary = raw.scalars.filter(metric="train/train_loss")
    assert summary.rows(named=True)[0]["step"] == 30 and summary.height == 1


def test_stdout_without_steps_beside_trainer_state_is_a_warning_not_a_traceback(cli, tmp_path):
    folder = _pasted_dicts(tmp_path / "run")
    with pytest.raises(MissingInfoError, match="--set logging_steps=N"):
        REGISTRY["hf-stdout"].read_at(folder)
    got = cli.json("inspect", folder, "--no-cache")
    assert got["format"] == "hf-trainer" and got["steps"]["optimizer"] == 30
    assert got["tokens"] == 30_720
    (warning,) = [f for f in got["findings"] if f["code"] == "source-unreadable"]
    assert "train.log" in warning["message"] and "--set logging_steps=N" in warning["message"]


def test_a_summary_dict_alone_names_max_steps(tmp_path):
    text = (TOKENS / "train.log").read_text()
    (tmp_path / "train.log").write_text(re.findall(r"\{'train_runtime'[^{}]*\}", text)[0] + "\n")
    with pytest.raises(MissingInfoError, match="--set max_steps=N"):
        REGISTRY["hf-stdout"].read_at(tmp_path / "train.log")
    raw = REGISTRY["hf-stdout"].read_at(tmp_path / "train.log", hints={"max_steps": 30})
    assert raw.scalars.filter(metric="train/train_loss").get_column("step").to_list() == [30]


def test_a_reader_that_fails_by_a_bug_leaves_the_others_to_read_the_run(cli, monkeypatch):
    # a bug is simulated by a reader that raises what the HF stdout reader raised (issue #33)
    def broken(path, **_):
        raise TypeError("int() argument must be a string, a bytes-like object or a real "
                        "number, not 'NoneType'")

    fmt = REGISTRY["hf-stdout"]
    monkeypatch.setattr(type(fmt), "read_at", lambda self, path, *, hints=None:
                        broken(path) if self.name == "hf-stdout" else _read_at(self, path, hints))
    got = cli.json("inspect", TOKENS, "--no-cache")
    assert got["format"] == "hf-trainer" and got["tokens"] == 30_720
    (warning,) = [f for f in got["findings"] if f["code"] == "source-unreadable"]
    message = warning["message"]
    assert message.startswith("hf-stdout could not read ") and "train.log" in message
    assert "TypeError" in message and "--source hf-trainer" in message
    run = rc.load(TOKENS, cache=False)
    assert run.format == "hf-trainer" and "hf-stdout" not in run.sources


def test_a_reader_that_fails_alone_still_raises(monkeypatch, tmp_path):
    shutil.copy(TOKENS / "train.log", tmp_path)
    monkeypatch.setattr(type(REGISTRY["hf-stdout"]), "read_at",
                        lambda self, path, *, hints=None: 1 / 0)
    with pytest.raises(ZeroDivisionError):
        rc.load(tmp_path / "train.log", cache=False)


_ORIGINAL = type(REGISTRY["hf-stdout"]).read_at


def _read_at(fmt, path, hints):
    return _ORIGINAL(fmt, path, hints=hints)
